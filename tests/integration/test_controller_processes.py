"""Issue 5 with real processes: 3 controllers, brokers registered over the real protocol
(fake_broker), `topics create` / `topics describe --output json` as CLI.md says, kill -9 of the
active controller with a standby taking over the identical image, and bad input answered with
named errors while nothing is written."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kio.static.primitive import i64

from cluster.client.topics import create_topics_request
from cluster.launch.local_cluster import LocalCluster
from controller.runtime.kafka_broker_lifecycle import LIFECYCLE_API_KEYS
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.client import KafkaClient, client_id_for_node
from kafkawire.errors import Errors
from metadata.records import decode_record
from raft.core.replica_key import uuid_from_str
from storage.core.record_batch import iter_batches
from tests.integration.conftest import minikraft, quorum, start_cluster, wait_for
from tests.integration.fake_broker import FakeBrokers

ROW_KEYS = {
    "topic",
    "topic_id",
    "partition",
    "leader",
    "leader_epoch",
    "partition_epoch",
    "replicas",
    "isr",
    "elr",
    "last_known_elr",
    "last_known_leader",
    "offline_replicas",
    "leader_recovery_state",
}


@pytest.fixture
def cluster_with_brokers(tmp_path: Path) -> Iterator[tuple[LocalCluster, FakeBrokers]]:
    cluster = start_cluster(tmp_path / "c")
    brokers = FakeBrokers(cluster.bootstrap_controller, cluster.cluster_id, [1, 2, 3])
    try:
        brokers.start()
        brokers.wait_unfenced()
        yield cluster, brokers
    finally:
        brokers.stop()
        cluster.stop()
        assert not cluster.running(), "processes left behind"


def topics(cluster: LocalCluster, *args: str) -> Any:
    return minikraft("topics", "--bootstrap-controller", cluster.bootstrap_controller, *args)


def describe(cluster: LocalCluster, *args: str) -> list[dict[str, Any]]:
    result = topics(cluster, "describe", *args, "--output", "json")
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def describe_until(
    cluster: LocalCluster, predicate: Any, timeout_s: float = 10
) -> list[dict[str, Any]]:
    """A standby's image may trail the leader's by a heartbeat: poll, bounded."""
    deadline = time.monotonic() + timeout_s
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        rows = describe(cluster)
        if predicate(rows):
            return rows
        time.sleep(0.1)
    raise AssertionError(f"describe never matched; last: {rows}")


def create(cluster: LocalCluster, topic: str, partitions: str, rf: str, *configs: str) -> Any:
    args = ["create", "--topic", topic, "--partitions", partitions, "--replication-factor", rf]
    for config in configs:
        args += ["--config", config]
    return topics(cluster, *args)


def alter_topic_config(cluster: LocalCluster, topic: str, config: str) -> Any:
    return minikraft("configs", "--bootstrap-controller", cluster.bootstrap_controller, "alter",
                     "--entity-type", "topics", "--entity-name", topic, "--add-config", config)


def test_create_describe_and_failover_to_identical_image(
    cluster_with_brokers: tuple[LocalCluster, FakeBrokers],
) -> None:
    cluster, _brokers = cluster_with_brokers
    created = create(cluster, "foo", "3", "3", "min.insync.replicas=2")
    assert created.returncode == 0, created.stderr
    rows = describe_until(cluster, lambda r: len(r) == 3)
    assert all(set(row) == ROW_KEYS for row in rows)
    assert [row["partition"] for row in rows] == [0, 1, 2]
    assert {row["topic"] for row in rows} == {"foo"}
    assert len({row["topic_id"] for row in rows}) == 1 and len(rows[0]["topic_id"]) == 22
    # Round-robin placement: every broker leads one partition, all replicas in sync.
    assert sorted(row["leader"] for row in rows) == [1, 2, 3]
    for row in rows:
        assert sorted(row["replicas"]) == [1, 2, 3]
        assert row["isr"] == row["replicas"] and row["leader"] == row["replicas"][0]
        assert row["elr"] == [] and row["last_known_elr"] == [] and row["last_known_leader"] == -1
        assert row["leader_epoch"] == 0 and row["partition_epoch"] == 0
        assert row["offline_replicas"] == [] and row["leader_recovery_state"] == "RECOVERED"

    before = quorum(cluster)
    active = cluster.node(f"controller-{before.leader_id}")
    cluster.kill(active, signal.SIGKILL)
    after = wait_for(
        lambda s: s.leader_id is not None and s.leader_id != active.node_id, cluster, 10
    )
    assert after.leader_epoch > before.leader_epoch
    # The standby that took over has the same partitions, epochs and topic id.
    assert describe_until(cluster, lambda r: r == rows) == rows
    # And it is the active controller now: it accepts writes. A topic of 1,500 partitions is
    # more records than one batch holds: a KIP-868 transaction (issue 35), applied whole.
    second = create(cluster, "bar", "1500", "2")
    assert second.returncode == 0, second.stderr
    bar = describe_until(cluster, lambda r: any(row["topic"] == "bar" for row in r))
    assert [row for row in bar if row["topic"] == "foo"] == rows
    assert len([row for row in bar if row["topic"] == "bar"]) == 1500
    markers = _metadata_record_types(cluster, after.leader_id)
    assert markers.count("BeginTransactionRecord") == markers.count("EndTransactionRecord") == 1


def _metadata_record_types(cluster: LocalCluster, node_id: int | None) -> list[str]:
    """The type of every record in a controller's metadata log segments, in order."""
    props = cluster.node_properties(cluster.node(f"controller-{node_id}"))
    directory = Path(props["metadata.log.dir"]) / "__cluster_metadata-0"
    types = []
    for segment in sorted(directory.glob("*.log")):
        for batch, _size in iter_batches(segment.read_bytes()):
            if not batch.is_control:
                types += [type(decode_record(r.value or b"")).__name__ for r in batch.records]
    return types


def _active_address(cluster: LocalCluster) -> str:
    status = quorum(cluster)
    assert status.leader_id is not None
    return next(iter(status.endpoints()[status.leader_id].values()))


async def _request(address: str, request: Any) -> Any:
    """Broker lifecycle on Kafka's protocol, as a broker sends it."""
    assert int(request.__api_key__) in LIFECYCLE_API_KEYS
    kafka = KafkaClient(client_id_for_node(1))
    try:
        return await kafka.request(address, request)
    finally:
        await kafka.close()


async def _create_topics_on(address: str, name: str) -> Any:
    kafka = KafkaClient("t")
    try:
        return await kafka.request(address, create_topics_request(name, 1, 1, {}))
    finally:
        await kafka.close()


def _send_to_active(cluster: LocalCluster, request: Any) -> Any:
    """One request to the active controller, as a broker would send it."""
    return asyncio.run(_request(_active_address(cluster), request))


def test_bad_input_gets_named_errors_and_writes_nothing(
    cluster_with_brokers: tuple[LocalCluster, FakeBrokers],
) -> None:
    cluster, brokers = cluster_with_brokers
    assert create(cluster, "foo", "1", "3", "min.insync.replicas=2").returncode == 0
    rows = describe_until(cluster, lambda r: len(r) == 1)

    cases = [
        (create(cluster, "foo", "1", "1"), "TOPIC_ALREADY_EXISTS"),
        (create(cluster, "bar", "1", "4"), "INVALID_REPLICATION_FACTOR"),
        (create(cluster, "bar", "-1", "1"), "INVALID_PARTITIONS"),
        (create(cluster, "bar", "1", "1", "min.insync.replicas=0"), "INVALID_CONFIG"),
        (create(cluster, "bar", "1", "1", "unclean.leader.election.enable=yes"), "INVALID_CONFIG"),
        (topics(cluster, "describe", "--topic", "nope"), "UNKNOWN_TOPIC_OR_PARTITION"),
        (
            alter_topic_config(cluster, "nope", "min.insync.replicas=1"),
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (
            alter_topic_config(cluster, "foo", "min.insync.replicas=zero"),
            "INVALID_CONFIG",
        ),
        (
            minikraft(
                "leader-election",
                "--bootstrap-controller",
                cluster.bootstrap_controller,
                "--election-type",
                "PREFERRED",
                "--topic",
                "nope",
                "--partition",
                "0",
            ),
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
    ]
    for result, error in cases:
        assert result.returncode == 1, (error, result.stdout, result.stderr)
        assert error in result.stderr, (error, result.stderr)
        assert "Traceback" not in result.stderr

    # A standby refuses writes with NOT_CONTROLLER (the CLI follows it to the active one).
    standby = next(c for c in cluster.controllers if c.node_id != quorum(cluster).leader_id)
    refused = asyncio.run(_create_topics_on(standby.address, "bar"))
    assert [Errors.of(t.error_code) for t in refused.topics] == [Errors.NOT_CONTROLLER]

    # AlterPartition from a stale leader epoch: fence broker 1 (leader of foo-0), so broker 2
    # leads in leader epoch 1; broker 1 then proposes with epoch 0 and gets FENCED_LEADER_EPOCH.
    leader = rows[0]["leader"]
    fake = brokers.brokers[leader]
    fenced = _send_to_active(
        cluster, lifecycle.heartbeat_request(leader, fake.broker_epoch, 0, want_fence=True)
    )
    assert fenced.error_code == 0 and fenced.is_fenced
    moved = describe_until(
        cluster, lambda r: r[0]["leader"] != leader and r[0]["leader_epoch"] == 1
    )
    request = lifecycle.alter_partition_request(
        leader,
        fake.broker_epoch,
        [
            (
                uuid_from_str(moved[0]["topic_id"]),
                [
                    lifecycle.alter_partition_partition(
                        0,
                        0,
                        [
                            lifecycle.broker_state(b, brokers.brokers[b].broker_epoch)
                            for b in (1, 2, 3)
                        ],
                        0,
                        moved[0]["partition_epoch"],
                    )
                ],
            )
        ],
    )
    response = _send_to_active(cluster, request)
    assert response.error_code == 0
    assert response.topics[0].partitions[0].error_code == Errors.FENCED_LEADER_EPOCH
    # A stale broker epoch fails the whole request.
    stale = replace(request, broker_epoch=i64(fake.broker_epoch + 1000))
    assert _send_to_active(cluster, stale).error_code == Errors.STALE_BROKER_EPOCH
    after = describe(cluster)
    assert [{k: v for k, v in r.items() if k != "offline_replicas"} for r in after] == [
        {k: v for k, v in r.items() if k != "offline_replicas"} for r in moved
    ]
    assert {r["topic"] for r in after} == {"foo"}  # none of the bad topics was created


def test_session_expiry_fences_brokers_and_unclean_restart_recovers(tmp_path: Path) -> None:
    """`broker.session.timeout.ms` fencing with real processes: all brokers stop heartbeating,
    the partitions lose their leader but keep ELR and LastKnownLeader (rules 10-12); the brokers
    come back as new incarnations without a clean-shutdown epoch (unclean restart), and the
    LastKnownLeader is elected uncleanly, RECOVERING (rule 13)."""
    cluster = start_cluster(tmp_path / "c", 3, **{"broker.session.timeout.ms": "1500"})
    try:
        with FakeBrokers(cluster.bootstrap_controller, cluster.cluster_id, [1, 2, 3]) as brokers:
            brokers.wait_unfenced()
            assert create(cluster, "foo", "2", "3", "min.insync.replicas=2").returncode == 0
            describe_until(cluster, lambda r: len(r) == 2)
        offline = describe_until(
            cluster, lambda r: all(sorted(row["offline_replicas"]) == [1, 2, 3] for row in r)
        )
        for row in offline:
            assert row["leader"] == -1 and row["isr"] == []
            assert row["elr"] and set(row["elr"]) <= {1, 2, 3}
            assert row["last_known_leader"] in row["replicas"]
        # KIP-966's OfflinePartitionsCount on the active controller's /metrics.
        active = cluster.node(f"controller-{quorum(cluster).leader_id}")
        url = f"http://{active.host}:{active.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            metrics = response.read().decode()
        assert "kafka_controller_offline_partitions_count 2.0" in metrics
        assert "kafka_controller_fenced_broker_count 3.0" in metrics
        with FakeBrokers(cluster.bootstrap_controller, cluster.cluster_id, [1, 2, 3]) as again:
            again.wait_unfenced()
            recovered = describe_until(cluster, lambda r: all(row["leader"] >= 0 for row in r))
        for before, after in zip(offline, recovered, strict=True):
            assert after["leader"] == before["last_known_leader"]
            assert after["isr"] == [after["leader"]]
            assert after["leader_recovery_state"] == "RECOVERING"
            assert after["elr"] == [] and after["last_known_leader"] == -1
    finally:
        cluster.stop()
        assert not cluster.running(), "processes left behind"


def test_configs_alter_and_leader_election_through_the_cli(
    cluster_with_brokers: tuple[LocalCluster, FakeBrokers],
) -> None:
    """`configs alter` writes a ConfigRecord that a later min-ISR check uses; PREFERRED and
    DESIGNATED elections on healthy partitions are refused as not needed (seed 004: a
    designated election only touches a partition with no leader)."""
    cluster, _brokers = cluster_with_brokers
    assert create(cluster, "cfg", "1", "3", "min.insync.replicas=2").returncode == 0
    describe_until(cluster, lambda r: any(row["topic"] == "cfg" for row in r))
    altered = alter_topic_config(cluster, "cfg", "min.insync.replicas=3")
    assert altered.returncode == 0, altered.stderr
    # The committed log holds the ConfigRecord (read with the same decoder dump-log uses)...
    segments = sorted(
        str(p) for p in (Path(cluster.controllers[0].dir) / "metadata").glob("__cluster_metadata-0/*.log")
    )
    deadline = time.monotonic() + 10
    configs: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not configs:
        dumped = minikraft("dump-log", "--cluster-metadata-decoder", "--files", *segments)
        lines = [json.loads(line) for line in dumped.stdout.splitlines()]
        configs = [x["data"] for x in lines if x["type"] == "ConfigRecord"]
        time.sleep(0.2)
    assert any("min.insync.replicas" in json.dumps(c) and '"3"' in json.dumps(c) for c in configs), configs
    # ...and an impossible value is refused with Kafka's name, nothing written.
    bad = alter_topic_config(cluster, "cfg", "min.insync.replicas=-4")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    for election in (["--election-type", "PREFERRED"],
                     ["--election-type", "DESIGNATED", "--designated-leader", "2"]):
        result = minikraft(
            "leader-election", "--bootstrap-controller", cluster.bootstrap_controller, *election,
            "--topic", "cfg", "--partition", "0", "--output", "json",
        )
        rows = json.loads(result.stdout)
        assert rows[0]["topic"] == "cfg" and rows[0]["partition"] == 0
        assert rows[0]["error"] == "ELECTION_NOT_NEEDED", rows
