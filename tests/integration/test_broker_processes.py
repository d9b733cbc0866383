"""Brokers as real processes (3 controllers + 3 brokers, ephemeral ports): acks=all durability at
min ISR (rule 20), clean vs unclean restart seen by the controller (rule 12), bad input.
One cluster per test; short session/lag timeouts keep the file under two minutes."""

from __future__ import annotations

import asyncio
import datetime
import json
import signal
import socket
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.produce.v11 import request as produce_request
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from broker.core import messages as bm
from broker.runtime.event_journal import read_journal_dicts
from cluster.launch.local_cluster import LocalCluster, NodeSpec, wait_exit
from kafkawire.client import KafkaClient
from kafkawire.errors import Errors
from raft.core.replica_key import uuid_from_str
from storage.core.record_batch import encode_batch
from tests.integration.conftest import (
    describe,
    minikraft,
    running_cluster,
    set_faults,
    wait_describe,
)
from tests.integration.fake_broker import follower_fetch

OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "c", brokers=3, ready_s=40, **OVERRIDES) as c:
        yield c


def create_topic(c: LocalCluster, topic: str, min_isr: int, partitions: int = 1) -> None:
    result = minikraft(
        "topics", "--bootstrap-controller", c.bootstrap_controller, "create", "--topic", topic,
        "--partitions", str(partitions), "--replication-factor", "3",
        "--config", f"min.insync.replicas={min_isr}",
    )
    assert result.returncode == 0, result.stderr


def produce(c: LocalCluster, topic: str, acks: str, n: int, journal: Path) -> dict[str, Any]:
    result = minikraft(
        "produce", "--bootstrap-server", c.bootstrap_server, "--topic", topic, "--acks", acks,
        "--num-records", str(n), "--timeout-ms", "3000", "--journal", str(journal),
        "--output", "json",
    )
    summary: dict[str, Any] = json.loads(result.stdout)
    return summary


def consume(c: LocalCluster, topic: str) -> list[str]:
    result = minikraft(
        "consume", "--bootstrap-server", c.bootstrap_server, "--topic", topic, "--from-beginning",
        "--timeout-ms", "800", "--output", "json",
    )
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["count"] == len(body["records"])
    offsets = [r["offset"] for r in body["records"]]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    return [r["value"].split(":")[0] for r in body["records"]]


def acked_values(journal: Path) -> list[str]:
    import msgpack

    acked = []
    with open(journal, "rb") as handle:
        for entry in msgpack.Unpacker(handle, raw=False):
            if entry["event"] == "ack" and entry["error"] == "NONE":
                acked.append(f"{entry['producer_id']}-{entry['seq']}")
    return acked


def max_hwm(c: LocalCluster, broker_id: int, topic: str) -> int:
    path = c.dir / "journal" / f"broker-{broker_id}.journal"
    values = [
        e["new"]
        for e in read_journal_dicts(path)
        if e.get("event") == "HwmAdvanced" and e.get("topic") == topic
    ]
    return max(values, default=0)


def broker(c: LocalCluster, broker_id: int) -> NodeSpec:
    return next(b for b in c.brokers if b.node_id == broker_id)


def restart(c: LocalCluster, spec: NodeSpec) -> None:
    c.start_node(spec)
    c.write_cluster_file()


def gauge_or_none(spec: NodeSpec, name: str) -> float | None:
    """The gauge, or None while the node's HTTP side does not answer."""
    try:
        return gauge(spec, name)
    except OSError:
        return None


def gauge(spec: NodeSpec, name: str) -> float | None:
    with urllib.request.urlopen(f"http://{spec.host}:{spec.http_port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
    return None


def registrations(c: LocalCluster, broker_id: int) -> dict[str, list[str]]:
    """Each controller's log lines for the registrations of `broker_id`, by its address."""
    needle = f"Registered broker {broker_id} with epoch"
    return {
        spec.address: [ln for ln in Path(spec.log_file).read_text().splitlines() if needle in ln]
        for spec in c.controllers
    }


def wait_new_registration(
    c: LocalCluster, broker_id: int, before: dict[str, list[str]]
) -> tuple[str, str]:
    """The log line of the first registration after `before`, and the address of the active
    controller that logged it (after its commit)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for address, lines in registrations(c, broker_id).items():
            if len(lines) > len(before[address]):
                return lines[len(before[address])], address
        time.sleep(0.1)
    raise AssertionError(f"broker {broker_id} did not register again")


def test_acks_all_durable_at_min_isr_across_broker_crashes(cluster: LocalCluster, tmp_path: Path) -> None:
    c = cluster
    create_topic(c, "dur", min_isr=2)
    create_topic(c, "spread", min_isr=1, partitions=6)
    journal = tmp_path / "acks.journal"
    first = produce(c, "dur", "all", 30, journal)
    assert first["acked"] == 30, first
    leader = describe(c, "dur")["leader"]
    others = [b for b in (101, 102, 103) if b != leader]
    for broker_id in others:
        c.kill(broker(c, broker_id), signal.SIGKILL)
    wait_describe(c, "dur", lambda p: p["isr"] == [leader], 20)
    hwm_before = max_hwm(c, leader, "dur")
    assert hwm_before == 30

    refused = produce(c, "dur", "all", 3, journal)
    assert refused["acked"] == 0 and refused["errors"] == {"NOT_ENOUGH_REPLICAS": 3}, refused
    accepted = produce(c, "dur", "1", 5, journal)
    assert accepted["acked"] == 5, accepted
    # Rule 20: acks=1 writes below min ISR are appended but stay invisible; the HWM holds.
    assert len(consume(c, "dur")) == 30
    assert max_hwm(c, leader, "dur") == hwm_before

    for broker_id in others:
        restart(c, broker(c, broker_id))
    wait_describe(c, "dur", lambda p: sorted(p["isr"]) == [101, 102, 103], 30)
    deadline = time.monotonic() + 10
    while max_hwm(c, leader, "dur") < 35 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert max_hwm(c, leader, "dur") == 35
    values = consume(c, "dur")
    assert len(values) == 35 and len(set(values)) == 35
    acked_all = [v for v in acked_values(journal) if v in set(values)]
    assert acked_all == [v for v in values if v in set(acked_values(journal))]
    # Every acks=all ack, exactly once and in order.
    assert [v for v in values[:30]] == acked_values(journal)[:30]
    wait_one_fetcher_per_leader(c)


def wait_one_fetcher_per_leader(c: LocalCluster) -> None:
    """Kafka's ReplicaFetcherManager with num.replica.fetchers=1: a broker fetches every
    partition it follows from one leader in one fetcher, within one incremental fetch session
    (KIP-227: an epoch past 1 means the leader accepted incremental fetches)."""
    deadline = time.monotonic() + 20
    while True:
        seen = {}
        for spec in c.brokers:
            with urllib.request.urlopen(
                f"http://{spec.host}:{spec.http_port}/v1/status", timeout=10
            ) as response:
                body = json.loads(response.read())
            following = sum(1 for p in body["partitions"].values() if p["role"] == "follower")
            fetchers = body["replica_fetchers"]
            seen[spec.node_id] = (following, fetchers)
        ok = all(
            following == sum(f["partitions"] for f in fetchers.values())
            and str(node) not in fetchers
            and all(f["session_id"] != 0 and f["session_epoch"] > 1 for f in fetchers.values())
            for node, (following, fetchers) in seen.items()
        )
        many = any(f["partitions"] > 1 for _, fetchers in seen.values() for f in fetchers.values())
        if ok and many:
            return
        assert time.monotonic() < deadline, seen
        time.sleep(0.5)


def test_clean_restart_keeps_elr_unclean_drops_it(cluster: LocalCluster) -> None:
    c = cluster
    create_topic(c, "elr", min_isr=3)
    state = describe(c, "elr")
    clean_id = state["leader"]
    # SIGTERM: controlled shutdown moves the leadership, final flush, clean-shutdown file.
    spec = broker(c, clean_id)
    c.kill(spec, signal.SIGTERM)
    assert spec.pid is not None and wait_exit(spec.pid, 15)
    assert (Path(spec.dir) / "data" / ".kafka_cleanshutdown").exists()
    state = wait_describe(c, "elr", lambda p: clean_id in p["elr"], 15)
    assert state["leader"] != clean_id and clean_id not in state["isr"]
    before = registrations(c, clean_id)
    restart(c, spec)
    registered, _active = wait_new_registration(c, clean_id, before)
    assert "(clean restart" in registered, registered
    wait_describe(c, "elr", lambda p: sorted(p["isr"]) == [101, 102, 103] and not p["elr"], 30)

    unclean_id = next(b for b in (101, 102, 103) if b != describe(c, "elr")["leader"])
    spec = broker(c, unclean_id)
    logged_before = len(Path(spec.log_file).read_text())
    c.kill(spec, signal.SIGKILL)
    wait_describe(c, "elr", lambda p: unclean_id in p["elr"], 20)
    assert not (Path(spec.dir) / "data" / ".kafka_cleanshutdown").exists()
    before = registrations(c, unclean_id)
    # Kafka's BrokerServer opens its listeners once unfenced: restarted while the controllers
    # drop everything it sends (it can neither catch up nor register), the broker is STARTING
    # and its Kafka port refuses connections (issue 35: a restarted broker answered the other
    # brokers' follower Fetches while it caught up).
    for controller in c.controllers:
        set_faults(controller, {"drop_inbound": [unclean_id]})
    restart(c, spec)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and gauge_or_none(spec, "BrokerState") is None:
        time.sleep(0.2)
    time.sleep(1)
    assert gauge(spec, "BrokerState") == 1  # STARTING
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((spec.host, spec.port), timeout=5).close()
    for controller in c.controllers:
        set_faults(controller, {})
    registered, active = wait_new_registration(c, unclean_id, before)
    assert "(unclean restart" in registered, registered
    # Rule 12: an unclean restart removes the broker from the ELR at registration. Asked of the
    # active controller that logged the registration after its commit: a standby may not have
    # replayed that commit yet.
    assert unclean_id not in describe(c, "elr", bootstrap=active)["elr"]
    wait_describe(c, "elr", lambda p: sorted(p["isr"]) == [101, 102, 103], 30)
    # Issue 35, Kafka's MetadataLoader: the restarted broker published its metadata once, when
    # it had caught up with the leader's high watermark (not its local snapshot and then the
    # log), and Kafka's BrokerState gauge says RUNNING.
    since = Path(spec.log_file).read_text()[logged_before:]
    assert "The metadata loader caught up to the high watermark" in since, since
    assert since.count("Applied metadata snapshot") == 1, since
    assert gauge(spec, "BrokerState") == 3


async def _raw(address: str, request: Any, topic_id: uuid.UUID | None = None) -> Any:
    """One Produce (v11) or Fetch (v17, a consumer unless the request names a replica) to a
    broker's Kafka listener, answered as the broker's own dataclass (its error code)."""
    if isinstance(request, bm.FetchRequest):
        assert topic_id is not None, "Fetch v17 names the topic by id"
        return await follower_fetch(address, request, topic_id)
    client = KafkaClient("bad-input-test", request_timeout_ms=5000)
    try:
        body = produce_request.ProduceRequest(
            transactional_id=None,
            acks=i16(request.acks),
            timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=request.timeout_ms)),
            topic_data=(
                produce_request.TopicProduceData(
                    name=TopicName(request.topic),
                    partition_data=(
                        produce_request.PartitionProduceData(
                            index=i32(request.partition), records=Records(request.records)
                        ),
                    ),
                ),
            ),
        )
        response = await client.request(address, body)
        [topic] = response.responses
        [answer] = topic.partition_responses
        return bm.ProduceResponse(int(answer.error_code), answer.error_message or "")
    finally:
        await client.close()


def test_bad_input_gets_named_errors_and_broker_keeps_serving(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    c = cluster
    create_topic(c, "bad", min_isr=2)
    journal = tmp_path / "bad.journal"
    assert produce(c, "bad", "all", 5, journal)["acked"] == 5
    unknown = produce(c, "nosuchtopic", "all", 1, journal)
    assert unknown["errors"] == {"UNKNOWN_TOPIC_OR_PARTITION": 1}

    state = describe(c, "bad")
    address = broker(c, state["leader"]).address
    batch = encode_batch(0, 0, 0, [b"v"])
    response = asyncio.run(_raw(address, bm.ProduceRequest("bad", 7, batch)))
    assert Errors.of(response.error_code) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    big = encode_batch(0, 0, 0, [b"x" * 1_100_000])
    response = asyncio.run(_raw(address, bm.ProduceRequest("bad", 0, big)))
    assert Errors.of(response.error_code) is Errors.MESSAGE_TOO_LARGE
    corrupt = bytearray(batch)
    corrupt[-1] ^= 0xFF  # the payload is under the CRC32C
    response = asyncio.run(_raw(address, bm.ProduceRequest("bad", 0, bytes(corrupt))))
    assert Errors.of(response.error_code) is Errors.CORRUPT_MESSAGE
    response = asyncio.run(
        _raw(
            address,
            bm.FetchRequest("bad", 0, 0, current_leader_epoch=state["leader_epoch"] + 1),
            uuid_from_str(state["topic_id"]),
        )
    )
    assert Errors.of(response.error_code) is Errors.UNKNOWN_LEADER_EPOCH
    # A new leader epoch, then a fetch naming the old one is fenced.
    old_epoch = state["leader_epoch"]
    leader_spec = broker(c, state["leader"])
    c.kill(leader_spec, signal.SIGTERM)
    assert leader_spec.pid is not None and wait_exit(leader_spec.pid, 15)
    state = wait_describe(c, "bad", lambda p: p["leader_epoch"] > old_epoch and p["leader"] >= 0, 15)
    address = broker(c, state["leader"]).address
    response = asyncio.run(
        _raw(
            address,
            bm.FetchRequest("bad", 0, 0, current_leader_epoch=old_epoch),
            uuid_from_str(state["topic_id"]),
        )
    )
    assert Errors.of(response.error_code) is Errors.FENCED_LEADER_EPOCH
    # A follower Fetch naming another cluster (Fetch v17's ClusterId) is refused as Kafka does.
    foreign = asyncio.run(
        follower_fetch(
            address,
            bm.FetchRequest("bad", 0, 0, replica_id=99, replica_epoch=1),
            uuid_from_str(state["topic_id"]),
            cluster_id="AAAAAAAAAAAAAAAAAAAAAA",
        )
    )
    assert Errors.of(foreign.error_code) is Errors.INCONSISTENT_CLUSTER_ID
    # The brokers kept serving: acks=all still works with two of three and data is intact.
    assert produce(c, "bad", "all", 2, journal)["acked"] == 2
    assert len(consume(c, "bad")) == 7
    health = minikraft("health", "--bootstrap-server", c.bootstrap_server, "--output", "json")
    assert health.returncode == 1, health.stdout  # a broker is down: degraded
    assert json.loads(health.stdout)["status"] == "degraded"
