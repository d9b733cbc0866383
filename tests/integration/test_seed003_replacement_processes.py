"""Seed 003's disk replacement in its own order, with real processes through the CLI: controller
2's disk dies, the new disk joins as an observer, `add-voter` adds the new key, then
`remove-voter` removes the old one (INVARIANTS 4-5). Along the way the running controllers'
/metrics carry the seeds' metrics (KIP-966 controller gauges, seed 003's raft-metrics) and
`describe --status` lists the new disk under CouldBeVoters, never a broker."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import urllib.request
from pathlib import Path

from cluster.launch.committed_prefix import compare_committed_prefixes
from cluster.launch.local_cluster import LocalCluster, NodeSpec
from cluster.launch.readiness import wait_until_ready
from raft.core.replica_key import ReplicaKey, uuid_to_str
from tests.integration.conftest import minikraft, quorum, wait_for
from tests.integration.membership_helpers import (
    directory_id,
    format_observer,
    keys,
    quorum_cli,
    wipe_metadata,
)

WAIT_S = 30  # generous: two cores shared with other test runs
SEED_METRICS = (
    "kafka_controller_manual_leader_election_required_partition_count",
    "kafka_controller_unclean_recovery_finished_count",
    "kafka_controller_unclean_recovery_partitions_count",
    "kafka_controller_global_under_min_isr_partition_count",
    "raft_number_of_voters",
    "raft_number_of_possible_voters",
    "raft_pending_add_voter",
    "raft_pending_remove_voter",
)


def metrics(spec: NodeSpec) -> dict[str, float]:
    """GET /metrics of a running node: sample line -> value (labels kept in the name)."""
    url = f"http://{spec.host}:{spec.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        match = re.fullmatch(r"([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)", line)
        if match:
            samples[match.group(1)] = float(match.group(2))
    return samples


def leader_metrics(cluster: LocalCluster) -> dict[str, float]:
    status = quorum(cluster)
    assert status.leader_id is not None
    return metrics(cluster.node(f"controller-{status.leader_id}"))


def test_add_new_key_then_remove_old_key_through_the_cli(tmp_path: Path) -> None:
    cluster = LocalCluster.plan(tmp_path / "c", controllers=3, brokers=1, base_port=0)
    cluster.format()
    cluster.start()
    try:
        asyncio.run(wait_until_ready(cluster, 60))
        created = minikraft(
            "topics", "--bootstrap-controller", cluster.bootstrap_controller, "create",
            "--topic", "t", "--partitions", "2", "--replication-factor", "1",
        )
        assert created.returncode == 0, created.stderr
        broker = cluster.brokers[0]
        spec2 = cluster.node("controller-2")
        old_dir = directory_id(spec2)
        before = wait_for(lambda s: s.high_watermark > 5, cluster, WAIT_S)
        cluster.kill(spec2, signal.SIGKILL)
        wait_for(
            lambda s: s.leader_id not in (None, 2)
            and s.high_watermark > before.high_watermark + 2,
            cluster, WAIT_S)

        wipe_metadata(spec2)
        new_dir = format_observer(cluster, spec2)
        assert new_dir != old_dir
        cluster.start_node(spec2)
        new_key, old_key = ReplicaKey(2, new_dir), ReplicaKey(2, old_dir)
        caught_up = wait_for(
            lambda s: new_key in keys(s)[1]
            and next(o.log_end_offset for o in s.observers
                     if o.replica_directory_id == new_dir) >= s.high_watermark - 1,
            cluster, WAIT_S)
        assert broker.node_id in {o.replica_id for o in caught_up.observers}

        # describe --status in text names the new disk under CouldBeVoters; the broker, an
        # observer without an endpoint, cannot be added and is not listed there.
        described = quorum_cli(cluster, "describe", "--status")
        assert described.returncode == 0, described.stderr
        could_be = [line for line in described.stdout.splitlines() if "CouldBeVoters" in line]
        assert len(could_be) == 1 and f"2@{uuid_to_str(new_dir)}" in could_be[0]
        assert f"{broker.node_id}@" not in could_be[0]

        # The seeds' metrics on the active controller's /metrics.
        seen = leader_metrics(cluster)
        for name in SEED_METRICS:
            assert name in seen, name
        assert seen["raft_number_of_possible_voters"] == 1.0  # the new disk, not the broker
        assert seen["raft_pending_add_voter"] == 0.0 and seen["raft_pending_remove_voter"] == 0.0
        assert seen["kafka_controller_manual_leader_election_required_partition_count"] == 0.0
        assert seen["kafka_controller_unclean_recovery_finished_count"] == 0.0
        for partition in (0, 1):
            assert seen[f'kafka_controller_electable_leaders{{partition="{partition}",topic="t"}}'] == 1.0

        # Seed 003's order: AddVoter(new key), then RemoveVoter(old key).
        added = quorum_cli(cluster, "add-voter", "--replica-id", "2",
                           "--replica-uuid", uuid_to_str(new_dir))
        assert added.returncode == 0, added.stderr
        voters, _ = keys(quorum(cluster))
        assert {new_key, old_key} <= voters and len(voters) == 4
        removed = quorum_cli(cluster, "remove-voter", "--replica-id", "2",
                             "--replica-uuid", uuid_to_str(old_dir))
        assert removed.returncode == 0, removed.stderr
        final = quorum(cluster)
        voters, _ = keys(final)
        assert voters == {ReplicaKey(1, directory_id(cluster.node("controller-1"))), new_key,
                          ReplicaKey(3, directory_id(cluster.node("controller-3")))}
        gone = quorum_cli(cluster, "remove-voter", "--replica-id", "2",
                          "--replica-uuid", uuid_to_str(old_dir))
        assert gone.returncode == 1 and "VOTER_NOT_FOUND" in gone.stderr
        after = leader_metrics(cluster)
        assert after["raft_number_of_voters"] == 3.0
        # The removed old key stays in the leader's observer table (with its endpoint) until
        # its observer session lapses, so it may still count as a possible voter: the metric
        # must agree with describe --status's CouldBeVoters, and the new key is a voter now.
        status = quorum_cli(cluster, "describe", "--status", "--output", "json")
        assert status.returncode == 0, status.stderr
        could_be = json.loads(status.stdout)["could_be_voters"]
        assert uuid_to_str(new_dir) not in {c["directory_id"] for c in could_be}
        assert after["raft_number_of_possible_voters"] == float(len(could_be))

        # The quorum keeps committing with the new set, and every replica agrees (rule 2).
        grown = wait_for(
            lambda s: s.high_watermark > final.high_watermark + 2
            and next(v.log_end_offset for v in s.voters if v.replica_id == 2)
            >= final.high_watermark,
            cluster, WAIT_S)
        report = compare_committed_prefixes(cluster, grown.high_watermark)
        assert report.agree, report.mismatches
    finally:
        cluster.stop()
        assert not cluster.running(), "processes left behind"
