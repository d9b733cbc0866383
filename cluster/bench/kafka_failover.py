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
session timeout (broker.session.timeout.ms, the same on both), so this line is mostly that.
The victim is restarted and back in the ISR before the next kill.
"""

from __future__ import annotations

import asyncio
import time

from kio.schema.create_topics.v7.response import CreateTopicsResponse

from cluster.bench.kafka_clients import SteadyProducer, create_topic
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


async def _controller_failovers(cluster: LocalCluster, kills: int) -> list[float]:
    samples = []
    for k in range(kills):
        leader_id = await _caught_up(cluster)
        victim = cluster.node(str(leader_id))
        survivors = [c.address for c in cluster.controllers if c is not victim]
        started = time.perf_counter()
        cluster.kill(victim)
        samples.append(1000 * await _first_commit(survivors, f"failover-{k}-{time.time_ns()}",
                                                  started))
        progress(f"controller failover {k + 1}/{kills}: {samples[-1]:.0f} ms")
        cluster.start_node(victim)
    await _caught_up(cluster)
    return samples


def controller_failovers(cluster: LocalCluster, kills: int) -> list[float]:
    """ms from each kill -9 of the active controller to the next committed metadata write."""
    return asyncio.run(_controller_failovers(cluster, kills))


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


def broker_failovers(cluster: LocalCluster, kills: int, topic: str = "bench-failover") -> list[float]:
    """ms from each kill -9 of the partition leader to the acknowledgement of the first record
    a librdkafka producer sent after it."""
    bootstrap = ",".join(b.address for b in cluster.brokers)
    create_topic(bootstrap, topic, 1, time.monotonic() + RECOVERY_S)
    samples = []
    with SteadyProducer(bootstrap, topic) as producer:
        for _ in range(kills):
            leader = _wait_full_isr(cluster, topic)
            flowing = time.monotonic()
            while producer.acked_since(flowing) < 10 and time.monotonic() - flowing < RECOVERY_S:
                time.sleep(0.05)
            victim = cluster.node(str(leader))
            mark = producer.mark()
            killed_at = time.monotonic()
            cluster.kill(victim)
            acked = producer.first_ack_after(killed_at, mark, killed_at + DEADLINE_S)
            samples.append(1000 * (acked - killed_at))
            progress(f"broker failover {len(samples)}/{kills}: {samples[-1]:.0f} ms")
            cluster.start_node(victim)
        _wait_full_isr(cluster, topic)
    return samples
