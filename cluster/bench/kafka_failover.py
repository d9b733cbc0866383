"""The failover lines of `minikraft bench kafka`, asked the same way of either cluster.

Controller failover: kill -9 of the active controller (DescribeQuorum's leader) to the next
committed metadata write, a CreateTopics sent every 10 ms to each surviving controller on
Kafka's protocol (a controller answers it once the new topic is committed, NOT_CONTROLLER while
it is not the active one; KIP-919 controllers serve it to admin clients). The quorum is caught
up before each kill (every voter's last caught-up time within a second of the leader's answer)
and the victim is restarted on its own data after it.

Broker failover: kill -9 of the leader of a 1-partition topic (RF 3, min ISR 2) while a
librdkafka producer sends an acks=all record every 2 ms, to the acknowledgement of the first
record produced after the kill. Nothing tells a controller that a killed broker is gone but its
session timeout (broker.session.timeout.ms, the same on both), so this line is mostly that:
each kill is decomposed (kafka_decompose) into kill -> fenced, fenced -> a surviving broker's
Metadata names the new leader, and that -> the producer's acknowledgement. The victim is
restarted and back in the ISR before the other cluster is measured.

Both lines alternate between the clusters kill by kill (kafka_interleave's ABBA order).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kio.schema.create_topics.v7.response import CreateTopicsResponse

from cluster.bench.kafka_clients import SteadyProducer, create_topic
from cluster.bench.kafka_decompose import BrokerKill, LeaderProbe, fence_times_ms, fill_fenced
from cluster.bench.kafka_engines import progress
from cluster.client.admin_client import describe_quorum
from cluster.client.bootstrap import new_client
from cluster.client.broker_client import metadata
from cluster.launch.local_cluster import LocalCluster
from kafkawire.create_topics import NewTopic, create_topics_request
from kafkawire.errors import Errors, KafkaError

DEADLINE_S = 60.0
PROBE_INTERVAL_S = 0.01
RECOVERY_S = 240.0  # a restarted JVM on two busy cores


async def _caught_up(cluster: LocalCluster, timeout_s: float = RECOVERY_S) -> int:
    """The active controller's id once every voter fetched up to the end within a second."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            status = await describe_quorum(cluster.bootstrap_controller, timeout_ms=2000)
            now_ms = time.time() * 1000
            voters = status.voters
            if (status.leader_id is not None and len(voters) == len(cluster.controllers)
                    and all(now_ms - int(v.last_caught_up_timestamp) < 1000 for v in voters
                            if v.replica_id != status.leader_id)):
                return status.leader_id
            last = f"leader {status.leader_id}, voters {voters}"
        except KafkaError as exc:
            last = str(exc)
        await asyncio.sleep(0.2)
    raise TimeoutError(f"quorum not caught up in {timeout_s:.0f}s: {last}")


async def _first_commit(addresses: list[str], topic: str, started: float) -> float:
    """Seconds from `started` to the first CreateTopics of `topic` a survivor answers without
    an error (or TOPIC_ALREADY_EXISTS: an earlier try committed it)."""
    client = new_client("bench-kafka-failover", request_timeout_ms=2000)
    done = asyncio.Event()
    when: list[float] = []

    async def probe(address: str) -> None:
        request = create_topics_request([NewTopic(topic, 1, 1)], timeout_ms=2000)
        while not done.is_set() and time.perf_counter() - started < DEADLINE_S:
            try:
                answer: CreateTopicsResponse = await client.request(
                    address, request, timeout_ms=2000)
                code = Errors.of(answer.topics[0].error_code)
                if code in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
                    when.append(time.perf_counter() - started)
                    done.set()
                    return
            except KafkaError:
                pass
            await asyncio.sleep(PROBE_INTERVAL_S)

    try:
        await asyncio.gather(*(probe(a) for a in addresses))
    finally:
        await client.close()
    if not when:
        raise TimeoutError(f"no metadata write committed {DEADLINE_S:.0f}s after the kill")
    return min(when)


async def _one_controller_failover(cluster: LocalCluster, k: int) -> float:
    """ms from one kill -9 of the active controller to the next committed metadata write; the
    victim is restarted and the quorum caught up again before returning, so the other
    cluster's next measurement does not share the machine with a restarting node."""
    leader_id = await _caught_up(cluster)
    victim = cluster.node(str(leader_id))
    survivors = [c.address for c in cluster.controllers if c is not victim]
    started = time.perf_counter()
    cluster.kill(victim)
    ms = 1000 * await _first_commit(survivors, f"failover-{k}-{time.time_ns()}", started)
    cluster.start_node(victim)
    await _caught_up(cluster)
    return ms


def controller_failover(cluster: LocalCluster, k: int) -> float:
    """ms from kill -9 of the active controller to the next committed metadata write."""
    return asyncio.run(_one_controller_failover(cluster, k))


async def _partition(bootstrap: str, topic: str) -> tuple[int, list[int]]:
    client = new_client("bench-kafka-failover", request_timeout_ms=2000)
    try:
        response = await metadata(client, bootstrap, [topic], 2000)
    finally:
        await client.close()
    partition = response.topics[0].partitions[0]
    return int(partition.leader_id), [int(i) for i in partition.isr_nodes]


def _wait_full_isr(cluster: LocalCluster, topic: str) -> int:
    """The partition's leader once all three replicas are in its ISR."""
    deadline = time.monotonic() + RECOVERY_S
    last: object = "no answer"
    while time.monotonic() < deadline:
        live = ",".join(b.address for b in cluster.running() if b.role == "broker")
        try:
            leader, isr = asyncio.run(_partition(live, topic))
            if leader >= 0 and len(isr) == 3:
                return leader
            last = (leader, isr)
        except (KafkaError, IndexError) as exc:
            last = exc
        time.sleep(0.2)
    raise TimeoutError(f"{topic}: ISR not full again in {RECOVERY_S:.0f}s: {last}")


class BrokerFailovers:
    """One cluster's broker failover line: a 1-partition topic (RF 3, min ISR 2) and a librdkafka
    producer sending an acks=all record every 2 ms while this cluster is measured (paused while
    the other one is). `kill(k)` is one kill -9 of the leader, decomposed (kafka_decompose)."""

    def __init__(self, cluster: LocalCluster, kafka: bool, topic: str = "bench-failover") -> None:
        self.cluster, self.kafka, self.topic = cluster, kafka, topic
        bootstrap = cluster.bootstrap_server
        create_topic(bootstrap, topic, 1, time.monotonic() + RECOVERY_S)
        self.producer = SteadyProducer(bootstrap, topic)
        self.kills: list[BrokerKill] = []

    def __enter__(self) -> BrokerFailovers:
        self.producer.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.producer.__exit__(*exc)

    def kill(self, _k: int) -> BrokerKill:
        cluster, producer = self.cluster, self.producer
        leader = _wait_full_isr(cluster, self.topic)
        producer.resume()
        flowing = time.monotonic()
        while producer.acked_since(flowing) < 10 and time.monotonic() - flowing < RECOVERY_S:
            time.sleep(0.05)
        victim = cluster.node(str(leader))
        survivor = next(b.address for b in cluster.brokers if b is not victim)
        mark = producer.mark()
        killed_wall = time.time()
        killed_at = time.monotonic()
        with LeaderProbe(survivor, self.topic, leader, DEADLINE_S) as probe:
            cluster.kill(victim)
            acked = producer.first_ack_after(killed_at, mark, killed_at + DEADLINE_S)
            probe_deadline = time.time() + 2.0  # the probe may lag the ack by a poll or two
            while probe.seen_at is None and time.time() < probe_deadline:
                time.sleep(0.01)
        producer.pause()
        kill = BrokerKill(leader, killed_wall, 1000 * (acked - killed_at),
                          None if probe.seen_at is None else 1000 * (probe.seen_at - killed_wall))
        self.kills.append(kill)
        progress(f"broker failover: {kill.acked_ms:.0f} ms (Metadata names the new leader at "
                 f"{kill.metadata_ms if kill.metadata_ms is None else round(kill.metadata_ms)} ms)")
        cluster.start_node(victim)
        _wait_full_isr(cluster, self.topic)  # quiet again before the other cluster's turn
        return kill

    def decompose(self) -> list[BrokerKill]:
        """The kills with their fencing times read from the controllers' metadata logs."""
        fences = fence_times_ms([Path(c.dir) for c in self.cluster.controllers], self.kafka)
        fill_fenced(self.kills, fences)
        return self.kills
