"""Brokers as real processes (3 controllers + 3 brokers, ephemeral ports), the must-shows that
need the fault layer (each node's POST /v1/faults) or a damaged disk:
- KIP-704 (rule 21): an unclean election leaves the leader RECOVERING, it refuses followers with
  NOT_LEADER_OR_FOLLOWER until RECOVERED commits, then the ISR grows back (rule 22 truncation).
- KIP-903's race (rules 17-18): a leader with a stale metadata image proposes a follower that the
  controller has fenced; the controller answers INELIGIBLE_REPLICA and the leader reverts.
- A corrupt batch on a stopped broker's disk: truncated at load, re-fetched, nothing acked lost.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest

from broker.core import messages as bm
from broker.runtime.event_journal import read_journal_dicts
from cluster.client.topics import describe_all, partition_rows
from cluster.launch.local_cluster import LocalCluster, NodeSpec, wait_exit
from kafkawire.client import KafkaClient
from kafkawire.errors import Errors
from raft.core.replica_key import uuid_from_str
from storage.core.record_batch import encode_batch, iter_segment_batches
from tests.integration import conftest
from tests.integration.conftest import minikraft, set_faults, start_cluster
from tests.integration.fake_broker import follower_fetch
from tests.integration.test_broker_processes import (
    _raw,
    acked_values,
    broker,
    consume,
    produce,
    restart,
)

BASE = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
}
RECOVERING, RECOVERED = 1, 0


def start(directory: Path, overrides: dict[str, str]) -> LocalCluster:
    return start_cluster(directory, brokers=3, ready_s=60, **overrides)


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], LocalCluster]]:
    started: list[LocalCluster] = []

    def make(overrides: dict[str, str]) -> LocalCluster:
        started.append(start(tmp_path / "c", {**BASE, **overrides}))
        return started[-1]

    yield make
    for c in started:
        for spec in c.brokers:
            c.kill(spec, signal.SIGCONT)  # a SIGSTOPped broker must be able to exit
        c.stop()
        assert not c.running(), "processes left behind"


def create_topic(c: LocalCluster, topic: str, *configs: str) -> None:
    args = ["--config", "min.insync.replicas=2"]
    for config in configs:
        args += ["--config", config]
    result = minikraft(
        "topics", "--bootstrap-controller", c.bootstrap_controller, "create", "--topic", topic,
        "--partitions", "1", "--replication-factor", "3", *args,
    )
    assert result.returncode == 0, result.stderr


def describe(c: LocalCluster, topic: str) -> dict[str, Any]:
    """`topics describe --output json`'s row, asked in-process so polls see short states."""
    rows = partition_rows(asyncio.run(describe_all(c.bootstrap_controller, [topic])))
    return rows[0] if rows else {}


def wait_describe(
    c: LocalCluster, topic: str, predicate: Callable[[dict[str, Any]], bool], timeout_s: float
) -> dict[str, Any]:
    """conftest's wait_describe, asked in-process every 0.1 s."""
    return conftest.wait_describe(c, topic, predicate, timeout_s, ask=describe, poll_s=0.1)


def status(spec: NodeSpec) -> dict[str, Any]:
    url = f"http://{spec.host}:{spec.http_port}/v1/status"
    with urllib.request.urlopen(url, timeout=10) as response:
        body: dict[str, Any] = json.loads(response.read())
    return body


def journal(c: LocalCluster, broker_id: int, event: str, topic: str) -> list[dict[str, Any]]:
    path = c.dir / "journal" / f"broker-{broker_id}.journal"
    if not path.exists():
        return []
    return [e for e in read_journal_dicts(path) if e.get("event") == event and e.get("topic") == topic]


def wait_journal(
    c: LocalCluster,
    broker_id: int,
    event: str,
    topic: str,
    predicate: Callable[[dict[str, Any]], bool],
    timeout_s: float,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [e for e in journal(c, broker_id, event, topic) if predicate(e)]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(
        f"no {event} on broker {broker_id} within {timeout_s}s: "
        f"{journal(c, broker_id, event, topic)[-5:]}"
    )


def broker_fenced(address: str, broker_id: int) -> bool:
    """Whether `broker_id` is fenced in one broker's metadata image (DescribeCluster v2 with
    fenced brokers included, answered by that broker)."""

    async def ask() -> Any:
        client = KafkaClient("recovery-test", request_timeout_ms=5000)
        try:
            return await client.request(
                address,
                DescribeClusterRequest(
                    include_cluster_authorized_operations=False, include_fenced_brokers=True
                ),
            )
        finally:
            await client.close()

    brokers = asyncio.run(ask()).brokers
    return any(int(b.broker_id) == broker_id and b.is_fenced for b in brokers)


def test_unclean_election_recovers_before_serving_followers(
    clusters: Callable[[dict[str, str]], LocalCluster], tmp_path: Path
) -> None:
    # The new leader's requests to the controllers are held 1.5 s (fault layer) so RECOVERING
    # lasts long enough to probe; timeouts are widened to tolerate that delay.
    c = clusters(
        {
            "broker.session.timeout.ms": "8000",
            "controller.quorum.request.timeout.ms": "6000",
            "controller.quorum.fetch.timeout.ms": "8000",
        }
    )
    topic = "rec"
    create_topic(c, topic, "unclean.leader.election.enable=true")
    acks = tmp_path / "acks.journal"
    assert produce(c, topic, "all", 10, acks)["acked"] == 10
    state = wait_describe(c, topic, lambda p: len(p["isr"]) == 3, 30)
    leader = state["leader"]
    stale, other = [b for b in (101, 102, 103) if b != leader]

    # The leader stops hearing the stale follower's fetches; new writes leave it behind, so it
    # leaves the ISR (a follower at the log end is never out of sync, as in Kafka).
    set_faults(broker(c, leader), {"drop_inbound": [stale]})
    assert produce(c, topic, "1", 3, acks)["acked"] == 3
    wait_describe(c, topic, lambda p: sorted(p["isr"]) == sorted([leader, other]), 30)
    assert produce(c, topic, "all", 5, acks)["acked"] == 5  # only on leader and other

    for controller in c.controllers:
        set_faults(controller, {"delay_ms": {str(stale): 1500}})
    for broker_id in (leader, other):
        c.kill(broker(c, broker_id), signal.SIGKILL)

    # Both ISR members fenced: the out-of-sync replica is elected uncleanly, RECOVERING.
    recovering = wait_describe(
        c, topic, lambda p: p["leader"] == stale and p["leader_recovery_state"] == "RECOVERING", 40
    )
    assert recovering["isr"] == [stale]  # rule 19
    wait_journal(
        c, stale, "RecoveryStateChanged", topic,
        lambda e: e["old_state"] == RECOVERED and e["new_state"] == RECOVERING, 20,
    )
    # It knows it leads while RECOVERING: followers and producers are refused (rule 21).
    refused_at_ms = int(time.time() * 1000)
    address = broker(c, stale).address
    fetched = asyncio.run(
        follower_fetch(
            address,
            bm.FetchRequest(topic, 0, 0, replica_id=leader, replica_epoch=1),
            uuid_from_str(recovering["topic_id"]),
        )
    )
    produced = asyncio.run(
        _raw(address, bm.ProduceRequest(topic, 0, encode_batch(0, 0, 0, [b"x"]), acks=1))
    )
    assert Errors.of(fetched.error_code) is Errors.NOT_LEADER_OR_FOLLOWER
    assert Errors.of(produced.error_code) is Errors.NOT_LEADER_OR_FOLLOWER
    # A consumer started now is refused too, refreshes metadata and retries until RECOVERED
    # (issue 14: it used to fail on NOT_LEADER_OR_FOLLOWER).
    consumer = subprocess.Popen(
        [sys.executable, "-m", "cluster.cli.main", "consume", "--bootstrap-server", address,
         "--topic", topic, "--from-beginning", "--max-messages", "10", "--timeout-ms", "30000",
         "--output", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        consumed_out, consumed_err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert consumer.returncode == 0, consumed_err

    recovered = wait_journal(
        c, stale, "RecoveryStateChanged", topic,
        lambda e: e["old_state"] == RECOVERING and e["new_state"] == RECOVERED, 30,
    )
    assert recovered["ts"] >= refused_at_ms  # the refusals above came before RECOVERED
    consumed = json.loads(consumed_out)
    assert [r["value"].split(":")[0] for r in consumed["records"]] == acked_values(acks)[:10]
    proposals = journal(c, stale, "IsrProposed", topic)
    assert any(p["kind"] == "recovered" and p["proposed_isr"] == [stale] for p in proposals)
    wait_describe(
        c, topic, lambda p: p["leader"] == stale and p["leader_recovery_state"] == "RECOVERED", 20
    )
    for controller in c.controllers:
        set_faults(controller, {})

    # The old ISR members come back as followers, truncate to the new leader (rule 22), and
    # the ISR grows back to all three.
    for broker_id in (leader, other):
        restart(c, broker(c, broker_id))
    final = wait_describe(c, topic, lambda p: sorted(p["isr"]) == [101, 102, 103], 60)
    assert final["leader"] == stale and final["leader_recovery_state"] == "RECOVERED"
    # The stale replica holds the 10 acks=all records, and some of the 3 acks=1 records too
    # when a fetch it had parked at the leader before the drop was answered with them: the
    # first append wakes that fetch, which reads whatever is in the log when it runs (one
    # record, or the next ones appended meanwhile: a clean-clone CI run saw two). 10 to 13.
    kept = {
        wait_journal(c, broker_id, "Truncated", topic, lambda e: e["from_offset"] == 18, 20)[
            "to_offset"
        ]
        for broker_id in (leader, other)
    }
    assert len(kept) == 1 and kept <= {10, 11, 12, 13}, kept
    # Rule 23: the records only the old ISR had are lost to the unclean election; the rest stay.
    values = consume(c, topic)
    assert values == acked_values(acks)[: kept.pop()]


def test_stale_follower_is_not_readded_ineligible_replica(
    clusters: Callable[[dict[str, str]], LocalCluster], tmp_path: Path
) -> None:
    # A long Raft fetch timeout: the leader's observer keeps the active controller it knows
    # (so AlterPartition reaches it) while its metadata fetches are dropped.
    c = clusters({"controller.quorum.fetch.timeout.ms": "30000"})
    topic = "stale"
    create_topic(c, topic)
    assert produce(c, topic, "all", 5, tmp_path / "acks.journal")["acked"] == 5
    state = wait_describe(c, topic, lambda p: len(p["isr"]) == 3, 30)
    leader = state["leader"]
    stale, other = [b for b in (101, 102, 103) if b != leader]
    leader_spec, stale_spec = broker(c, leader), broker(c, stale)
    epoch_before = status(broker(c, stale))["broker_epoch"]  # its registration's epoch

    # 1. The stale follower drops out of the ISR (the leader ignores its fetches), and the
    #    leader sees that committed.
    set_faults(leader_spec, {"drop_inbound": [stale]})
    assert produce(c, topic, "1", 2, tmp_path / "acks.journal")["acked"] == 2
    wait_describe(c, topic, lambda p: sorted(p["isr"]) == sorted([leader, other]), 30)
    deadline = time.monotonic() + 20
    while sorted(status(leader_spec)["partitions"][f"{topic}-0"]["isr"]) != sorted([leader, other]):
        assert time.monotonic() < deadline, "the leader never saw the shrink"
        time.sleep(0.1)
    # 2. The leader's metadata image freezes (its Raft fetches to the controllers are dropped;
    #    heartbeats and AlterPartition still go through), so it keeps seeing the follower
    #    unfenced with its old epoch.
    set_faults(leader_spec, {"drop_inbound": [stale], "drop_outbound": [-1, 1, 2, 3]})
    # 3. The follower pauses past the session timeout, and cannot re-register when it resumes.
    for controller in c.controllers:
        set_faults(controller, {"drop_inbound": [stale]})
    c.kill(stale_spec, signal.SIGSTOP)
    deadline = time.monotonic() + 30
    while not broker_fenced(broker(c, other).address, stale):
        assert time.monotonic() < deadline, "the controller never fenced the paused follower"
        time.sleep(0.2)
    c.kill(stale_spec, signal.SIGCONT)
    # 4. It fetches again with its old broker epoch and catches up: the leader proposes it.
    set_faults(leader_spec, {"drop_outbound": [-1, 1, 2, 3]})
    result = wait_journal(
        c, leader, "IsrResult", topic, lambda e: e["error"] == "INELIGIBLE_REPLICA", 30
    )
    assert result["outcome"] == "reverted" and sorted(result["isr"]) == sorted([leader, other])
    proposal = next(
        p for p in journal(c, leader, "IsrProposed", topic) if p["proposal_id"] == result["proposal_id"]
    )
    assert proposal["kind"] == "expand" and stale in proposal["proposed_isr"]
    assert proposal["broker_epochs"][proposal["proposed_isr"].index(stale)] == epoch_before
    # Rule 18: reverted to the committed ISR, no blind retry while nothing changed.
    time.sleep(2)
    ineligible = [
        e for e in journal(c, leader, "IsrResult", topic) if e["error"] == "INELIGIBLE_REPLICA"
    ]
    assert len(ineligible) == 1, ineligible
    assert sorted(describe(c, topic)["isr"]) == sorted([leader, other])
    assert sorted(status(leader_spec)["partitions"][f"{topic}-0"]["isr"]) == sorted([leader, other])

    # Healed, the follower rejoins through the normal path.
    set_faults(leader_spec, {})
    for controller in c.controllers:
        set_faults(controller, {})
    wait_describe(c, topic, lambda p: sorted(p["isr"]) == [101, 102, 103], 60)


def test_corrupt_batch_on_disk_truncates_refetches_and_keeps_every_ack(
    clusters: Callable[[dict[str, str]], LocalCluster], tmp_path: Path
) -> None:
    c = clusters({})
    topic = "crc"
    create_topic(c, topic)
    acks = tmp_path / "acks.journal"
    assert produce(c, topic, "all", 20, acks)["acked"] == 20
    state = wait_describe(c, topic, lambda p: len(p["isr"]) == 3, 30)
    leader = state["leader"]
    damaged, other = [b for b in (101, 102, 103) if b != leader]
    spec = broker(c, damaged)
    c.kill(spec, signal.SIGKILL)
    assert spec.pid is not None and wait_exit(spec.pid, 15)
    segment = sorted((Path(spec.dir) / "data" / f"{topic}-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    # A killed broker's active segment ends in the zeros log.preallocate added: free space.
    batches = [(position, size) for position, _, size in iter_segment_batches(bytes(data))]
    assert len(batches) >= 20
    # The last byte of the middle batch is record payload, under the batch's CRC32C.
    middle, size = batches[len(batches) // 2]
    data[middle + size - 1] ^= 0xFF
    segment.write_bytes(bytes(data))

    restart(c, spec)
    deadline = time.monotonic() + 20
    text = ""
    while "CRC32C mismatch" not in text and time.monotonic() < deadline:
        time.sleep(0.1)
        text = Path(spec.log_file).read_text()
    assert "truncating" in text and "CRC32C mismatch" in text and f"{topic}-0" in text
    # The old incarnation's session expires (fenced, out of the ISR), the new one registers,
    # re-fetches what it cut and rejoins: two ISR changes later the ISR is whole again.
    wait_describe(
        c, topic,
        lambda p: sorted(p["isr"]) == [101, 102, 103]
        and p["partition_epoch"] >= state["partition_epoch"] + 2,
        40,
    )
    assert produce(c, topic, "all", 5, acks)["acked"] == 5
    deadline = time.monotonic() + 20
    while status(spec)["partitions"][f"{topic}-0"]["high_watermark"] < 25:
        assert time.monotonic() < deadline, status(spec)["partitions"]
        time.sleep(0.1)
    assert status(spec)["partitions"][f"{topic}-0"]["log_end_offset"] == 25
    # The repaired replica alone serves every acked record: the others go away.
    c.kill(broker(c, other), signal.SIGKILL)
    c.kill(broker(c, leader), signal.SIGTERM)
    wait_describe(c, topic, lambda p: p["leader"] == damaged, 30)
    values = consume(c, topic)
    assert values == acked_values(acks)
    assert len(values) == 25
    health = minikraft("health", "--bootstrap-server", c.bootstrap_server, "--output", "json")
    assert health.returncode == 1  # brokers are down: degraded, but this one answers
