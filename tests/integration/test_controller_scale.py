"""Scale benchmark of the controller (issue 5, "Scale"): 10,000 partitions created through the
CLI, then kill -9 of the active controller; a standby reloads them from snapshot + log. Prints
the figures (time and memory); asserts only that the image survived intact. Slow: run with
`make test-slow` or `pytest -m slow tests/integration/test_controller_scale.py -s`."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.integration.conftest import minikraft, quorum, start_cluster, wait_for
from tests.integration.fake_broker import FakeBrokers

PARTITIONS = int(os.environ.get("SCALE_PARTITIONS", "10000"))


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return -1.0


@pytest.mark.slow
def test_ten_thousand_partitions_survive_a_controller_failover(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", **{"metadata.log.snapshot.interval.records": "5000"})
    brokers = FakeBrokers(cluster.bootstrap_controller, cluster.cluster_id, [1, 2, 3]).start()
    try:
        brokers.wait_unfenced()
        started = time.monotonic()
        # Kafka refuses an operation of more than 10,000 records (MAX_RECORDS_PER_USER_OP; a
        # topic is one TopicRecord plus one PartitionRecord each): half, then grow.
        created = minikraft(
            "topics", "--bootstrap-controller", cluster.bootstrap_controller, "create", "--topic", "big",
            "--partitions", str(PARTITIONS // 2), "--replication-factor", "3", timeout=600,
        )
        assert created.returncode == 0, created.stderr
        grown = minikraft(
            "topics", "--bootstrap-controller", cluster.bootstrap_controller, "alter", "--topic", "big",
            "--partitions", str(PARTITIONS), timeout=600,
        )
        create_s = time.monotonic() - started
        assert grown.returncode == 0, grown.stderr
        before = quorum(cluster)
        leader = cluster.node(f"controller-{before.leader_id}")
        standby_rss = {c.node_id: _rss_mib(c.pid) for c in cluster.controllers if c.pid}  # type: ignore[arg-type]
        killed = time.monotonic()
        cluster.kill(leader, signal.SIGKILL)
        after = wait_for(lambda s: s.leader_id not in (None, leader.node_id), cluster, 30)
        described = minikraft(
            "topics", "--bootstrap-controller", cluster.bootstrap_controller, "describe", "--topic", "big",
            "--output", "json", timeout=600,
        )
        failover_s = time.monotonic() - killed
        rows = json.loads(described.stdout)
        assert len(rows) == PARTITIONS
        assert all(len(r["replicas"]) == 3 and r["leader"] in r["replicas"] for r in rows)
        new_active = cluster.node(f"controller-{after.leader_id}")
        print(
            f"\nSCALE partitions={PARTITIONS} create_s={create_s:.2f} "
            f"failover_to_full_describe_s={failover_s:.2f} "
            f"new_active_rss_mib={_rss_mib(new_active.pid):.1f} "  # type: ignore[arg-type]
            f"rss_before_mib={standby_rss}"
        )
    finally:
        brokers.stop()
        cluster.stop()
