"""Unclean recovery with replicas whose logs differ, as real processes (3 controllers + 3 brokers,
ephemeral ports; issue 7's must-shows beyond seed 004's system test).

- The tool: RF=3, min ISR=1, unclean.leader.election.enable=false; followers die one at a time
  while producing, so their logs differ; the leader dies with a suffix only it has. The plan names
  the longest surviving log (never a shorter one), `leader-election --election-type DESIGNATED
  --path-to-json-file` elects exactly it, `topics describe` shows RECOVERING then RECOVERED, and
  the metadata log holds the RECOVERING PartitionChangeRecord the lost suffix is attributed to
  (rule 23). The controller runs the recovery manager with strategy None: it never elects alone.
- The recovery manager (rule 14), strategy from unclean.leader.election.enable: Aggressive elects
  within its timeout while ELR members are fenced; Balanced waits while a LastKnownELR member is
  fenced and recovers once it returns.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cluster.cli.main import cli
from cluster.client.topics import describe_all, partition_rows
from cluster.launch.local_cluster import LocalCluster, NodeSpec
from metadata.partition_registration import LeaderRecoveryState
from metadata.records import PartitionChangeRecord, decode_record
from raft.core.replica_key import uuid_from_str
from raft.runtime.raft_manager import METADATA_PARTITION_DIR
from storage.runtime.log_reader import read_batches
from tests.integration.conftest import describe, minikraft, quorum, start_cluster, wait_describe

BASE = {
    "broker.heartbeat.interval.ms": "400",
    "replica.lag.time.max.ms": "3000",
    "unclean.recovery.manager.enabled": "true",
    "unclean.recovery.timeout.ms": "3000",
}


def start(directory: Path, overrides: dict[str, str]) -> LocalCluster:
    return start_cluster(directory, brokers=3, ready_s=40, **overrides)


@pytest.fixture
def none_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    # A longer session lets a SIGSTOPped leader stay unfenced while describe sees RECOVERING.
    c = start(
        tmp_path / "c",
        {**BASE, "broker.session.timeout.ms": "10000", "unclean.recovery.strategy": "None"},
    )
    try:
        yield c
    finally:
        c.stop()
        assert not c.running(), "processes left behind"


@pytest.fixture
def manager_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = start(tmp_path / "c", {**BASE, "broker.session.timeout.ms": "3000"})
    try:
        yield c
    finally:
        c.stop()
        assert not c.running(), "processes left behind"


def create(c: LocalCluster, topic: str, *configs: str) -> None:
    args = [f"--config={kv}" for kv in configs]
    created = minikraft(
        "topics", "--bootstrap-controller", c.bootstrap_controller, "create", "--topic", topic,
        "--partitions", "1", "--replication-factor", "3", *args,
    )
    assert created.returncode == 0, created.stderr


def produce(c: LocalCluster, topic: str, acks: str, n: int) -> None:
    produced = minikraft(
        "produce", "--bootstrap-server", c.bootstrap_server, "--topic", topic, "--acks", acks,
        "--num-records", str(n), "--output", "json",
    )
    assert produced.returncode == 0, produced.stdout + produced.stderr
    assert json.loads(produced.stdout)["acked"] == n


def hold(c: LocalCluster, topic: str, predicate: Callable[[dict[str, Any]], bool], s: float) -> None:
    """The predicate stays true for `s` seconds (a strategy that must not elect)."""
    deadline = time.monotonic() + s
    while time.monotonic() < deadline:
        row = describe(c, topic)
        assert predicate(row), row
        time.sleep(0.5)


def node(c: LocalCluster, broker_id: int) -> NodeSpec:
    return c.node(str(broker_id))


def kill(c: LocalCluster, broker_id: int) -> None:
    c.kill(node(c, broker_id), signal.SIGKILL)


def active_metrics(c: LocalCluster) -> str:
    active = c.node(f"controller-{quorum(c).leader_id}")
    url = f"http://{active.host}:{active.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text: str = response.read().decode()
    return text


def partition_changes(c: LocalCluster, topic_id: uuid.UUID) -> list[PartitionChangeRecord]:
    """The topic's PartitionChangeRecords in the longest controller metadata log (read-only)."""
    best: list[PartitionChangeRecord] = []
    for spec in c.controllers:
        changes = []
        for _path, batch in read_batches(Path(spec.dir) / "metadata" / METADATA_PARTITION_DIR):
            if batch.is_control:
                continue
            for record in batch.records:
                decoded = decode_record(record.value)
                if isinstance(decoded, PartitionChangeRecord) and decoded.topic_id == topic_id:
                    changes.append(decoded)
        if len(changes) > len(best):
            best = changes
    return best


def test_plan_names_the_longest_log_and_the_designated_election_is_on_record(
    none_cluster: LocalCluster, tmp_path: Path
) -> None:
    c, topic = none_cluster, "div"
    create(c, topic, "min.insync.replicas=1", "unclean.leader.election.enable=false")
    produce(c, topic, "all", 20)  # ISR of 3: every replica has offsets 0..19
    start_row = wait_describe(c, topic, lambda p: len(p["isr"]) == 3, 20)
    leader = start_row["leader"]
    first, second = [r for r in start_row["replicas"] if r != leader]

    # Followers die one at a time while producing: logs of 20, 50 and 75 records.
    kill(c, first)
    wait_describe(c, topic, lambda p: sorted(p["isr"]) == sorted([leader, second]), 30)
    produce(c, topic, "all", 30)  # acks=all with ISR [leader, second]: both have 0..49
    kill(c, second)
    wait_describe(c, topic, lambda p: p["isr"] == [leader], 30)
    produce(c, topic, "1", 25)  # only the leader has 50..74: the suffix the recovery loses
    kill(c, leader)
    wait_describe(c, topic, lambda p: p["leader"] == -1 and leader in p["offline_replicas"], 30)
    c.start_node(node(c, first))
    c.start_node(node(c, second))
    offline = wait_describe(
        c, topic, lambda p: p["leader"] == -1 and p["offline_replicas"] == [leader], 40
    )
    assert offline["isr"] == [] and offline["elr"] == [leader]

    # Strategy None: the manager never elects on its own, past several of its timeouts.
    hold(c, topic, lambda p: p["leader"] == -1, 8)

    # The plan: both survivors answer; it names the longer log, changes nothing.
    plan = tmp_path / "plan.json"
    planned = minikraft(
        "unclean-recovery", "--bootstrap-server", c.bootstrap_server, "--show-replica-info",
        "--manual-recovery-output-file", str(plan), "--all-offline-partitions",
        "--recovery-duration-ms", "4000", "--output", "json",
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    rows = json.loads(planned.stdout)
    assert [(r["topic"], r["result"], r["designated_leader"]) for r in rows] == [
        (topic, "planned", second)
    ]
    ends = {a["broker_id"]: a["log_end_offset"] for a in rows[0]["replicas"]}
    assert ends == {first: 20, second: 50}, rows[0]["replicas"]
    epochs = {a["partition_leader_epoch"] for a in rows[0]["replicas"]}
    assert len(epochs) == 1  # equal current epochs: the written epoch, then length decide
    assert json.loads(plan.read_text()) == {
        "partitions": [{"topic": topic, "partition": 0, "designatedLeader": second}]
    }
    assert describe(c, topic)["partition_epoch"] == offline["partition_epoch"]

    # Run the plan. The designated leader is paused, so its recovery (rule 21) waits and
    # describe shows RECOVERING; resumed, it reports RECOVERED.
    # The command runs in this process (the same click command, no interpreter start-up): on a
    # loaded CI machine a fresh interpreter took longer than the paused leader's session, the
    # broker was fenced and the read below saw no leader.
    c.kill(node(c, second), signal.SIGSTOP)
    try:
        elected = CliRunner().invoke(
            cli,
            [
                "leader-election", "--bootstrap-controller", c.bootstrap_controller,
                "--election-type", "DESIGNATED", "--path-to-json-file", str(plan),
                "--output", "json",
            ],
        )
        # A standby controller may answer before it replayed the election's commit (it learns
        # the high watermark on its next fetch): read until the election shows, within 5 s.
        recovering = poll_partition(c, topic, lambda p: p["leader"] != -1, 5)
    finally:
        c.kill(node(c, second), signal.SIGCONT)
    assert elected.exit_code == 0, elected.output
    assert [(r["leader"], r["error"]) for r in json.loads(elected.output)] == [(second, None)]
    assert recovering["leader"] == second and recovering["isr"] == [second]
    assert recovering["leader_recovery_state"] == "RECOVERING"
    recovered = wait_describe(c, topic, lambda p: p["leader_recovery_state"] == "RECOVERED", 30)
    assert recovered["leader"] == second

    # The loss is on record: the designated election's RECOVERING change, then RECOVERED.
    changes = partition_changes(c, uuid_from_str(recovered["topic_id"]))
    states = [
        (ch.leader, ch.leader_recovery_state) for ch in changes if ch.leader_recovery_state != -1
    ]
    assert (second, int(LeaderRecoveryState.RECOVERING)) in states
    at = states.index((second, int(LeaderRecoveryState.RECOVERING)))
    assert any(s == int(LeaderRecoveryState.RECOVERED) for _, s in states[at + 1 :]), states

    # What survives is the designated leader's log: 50 records, the old leader's suffix is gone.
    consumed = minikraft(
        "consume", "--bootstrap-server", c.bootstrap_server, "--topic", topic, "--from-beginning",
        "--max-messages", "100", "--timeout-ms", "4000", "--output", "json",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert json.loads(consumed.stdout)["count"] == 50


def poll_partition(
    c: LocalCluster, topic: str, done: Callable[[dict[str, Any]], bool], timeout_s: float
) -> dict[str, Any]:
    """The partition's row as the controllers describe it, in this process (no CLI start-up),
    once `done` holds or at the timeout (the last row read)."""
    deadline = time.monotonic() + timeout_s
    while True:
        row = partition_rows(asyncio.run(describe_all(c.bootstrap_controller, [topic])))[0]
        if done(row) or time.monotonic() >= deadline:
            return row
        time.sleep(0.05)


def metric(c: LocalCluster, name: str) -> float:
    for line in active_metrics(c).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def test_manager_aggressive_elects_after_timeout_balanced_waits_for_last_known_elr(
    manager_cluster: LocalCluster,
) -> None:
    c = manager_cluster
    # No unclean.recovery.strategy: unclean.leader.election.enable picks it (rule 14).
    create(c, "bal", "min.insync.replicas=2", "unclean.leader.election.enable=false")
    create(c, "agg", "min.insync.replicas=2", "unclean.leader.election.enable=true")
    for topic in ("bal", "agg"):
        produce(c, topic, "all", 10)
    row = wait_describe(c, "bal", lambda p: len(p["isr"]) == 3, 20)
    wait_describe(c, "agg", lambda p: len(p["isr"]) == 3, 20)
    a = row["leader"]
    b, spare = [r for r in row["replicas"] if r != a]

    kill(c, spare)
    for topic in ("bal", "agg"):
        wait_describe(c, topic, lambda p: sorted(p["isr"]) == sorted([a, b]), 30)
    kill(c, b)
    for topic in ("bal", "agg"):
        wait_describe(c, topic, lambda p: p["isr"] == [a] and p["elr"] == [b], 30)
    produce(c, "bal", "1", 10)  # a's log is the longest of bal's replicas
    kill(c, a)
    for topic in ("bal", "agg"):
        wait_describe(c, topic, lambda p: p["leader"] == -1 and sorted(p["elr"]) == sorted([a, b]), 30)

    # The spare returns; ELR members stay fenced. Aggressive elects it after its timeout (3 s);
    # Balanced waits for the fenced ELR.
    c.start_node(node(c, spare))
    wait_describe(c, "agg", lambda p: spare not in p["offline_replicas"], 30)
    unfenced_at = time.monotonic()
    agg = wait_describe(c, "agg", lambda p: p["leader"] == spare, 30)
    took_s = time.monotonic() - unfenced_at
    assert took_s < 3 + 10, took_s
    agg_changes = partition_changes(c, uuid_from_str(agg["topic_id"]))
    by_manager = [ch for ch in agg_changes if ch.leader == spare and ch.leader_recovery_state == 1]
    assert [ch.isr for ch in by_manager] == [(spare,)], agg_changes
    assert describe(c, "bal")["leader"] == -1

    # b returns uncleanly (ELR -> LastKnownELR) and dies again; a returns uncleanly: ELR empty,
    # LastKnownELR has the fenced b. Balanced waits (and counts it), past its timeout.
    c.start_node(node(c, b))
    wait_describe(c, "bal", lambda p: b not in p["offline_replicas"] and b in p["last_known_elr"], 30)
    kill(c, b)
    wait_describe(c, "bal", lambda p: b in p["offline_replicas"], 30)
    c.start_node(node(c, a))
    waiting = wait_describe(
        c, "bal", lambda p: a not in p["offline_replicas"] and p["elr"] == [], 30
    )
    assert waiting["leader"] == -1 and sorted(waiting["last_known_elr"]) == sorted([a, b])
    hold(c, "bal", lambda p: p["leader"] == -1, 6)
    assert metric(c, "kafka_controller_unclean_recovery_partitions_count") == 1.0

    # b returns: every LastKnownELR member is unfenced and answers; the longest log (a) wins.
    c.start_node(node(c, b))
    bal = wait_describe(c, "bal", lambda p: p["leader"] >= 0, 40)
    assert bal["leader"] == a
    wait_describe(c, "bal", lambda p: p["leader_recovery_state"] == "RECOVERED", 30)
    # The manager's election, from the metadata log: RECOVERING with ISR = [a] (rule 14).
    changes = partition_changes(c, uuid_from_str(bal["topic_id"]))
    elected = [ch for ch in changes if ch.leader == a and ch.leader_recovery_state == 1]
    assert [ch.isr for ch in elected] == [(a,)], changes
    # The gauge is the manager's count as of its last tick (TICK_INTERVAL_MS): it drops to 0
    # at the first tick that sees the partition RECOVERED.
    deadline = time.monotonic() + 10
    while metric(c, "kafka_controller_unclean_recovery_partitions_count") != 0.0:
        assert time.monotonic() < deadline, "the recovery gauge stayed above 0 after RECOVERED"
        time.sleep(0.1)
