"""Snapshots after a few hundred bytes of committed batches (Kafka's
metadata.log.max.record.bytes.between.snapshots) with log cleaning, FetchSnapshot for a follower that fell behind the
leader's log start, and each node's HTTP side (rule 7; issue "Foundation")."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path

from cluster.launch.local_cluster import LocalCluster
from raft.core.control_records import snapshot_voters
from raft.runtime.raft_manager import METADATA_PARTITION_DIR
from storage.runtime.snapshot_file import list_snapshots, snapshot_path
from tests.integration.conftest import start_cluster, wait_for

FAST_SNAPSHOTS = {
    # About eight NoOpRecord batches: Kafka's trigger, with minikraft's record count left off.
    "metadata.log.max.record.bytes.between.snapshots": "600",
    "metadata.log.segment.bytes": "600",
    "metadata.max.idle.interval.ms": "100",
}


def _partition_dir(cluster: LocalCluster, node_id: int) -> Path:
    return Path(cluster.node(f"controller-{node_id}").dir) / "metadata" / METADATA_PARTITION_DIR


def test_snapshots_clean_the_log_and_a_lagging_follower_fetches_one(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", **FAST_SNAPSHOTS)
    try:
        status = wait_for(lambda s: s.high_watermark > 5, cluster, 10)
        follower = next(c for c in cluster.controllers if c.node_id != status.leader_id)
        cluster.kill(follower, signal.SIGKILL)
        leader_dir = _partition_dir(cluster, status.leader_id)  # type: ignore[arg-type]
        follower_end = max(
            int(p.stem) for p in _partition_dir(cluster, follower.node_id).glob("*.log")
        )

        def leader_cleaned() -> bool:
            snapshots = [s for s in list_snapshots(leader_dir) if s.end_offset > 0]
            segments = sorted(int(p.stem) for p in leader_dir.glob("*.log"))
            return bool(snapshots) and bool(segments) and segments[0] > follower_end + 20

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not leader_cleaned():
            time.sleep(0.2)
        assert leader_cleaned(), "leader never snapshotted and cleaned past the follower's log"
        latest = max(s for s in list_snapshots(leader_dir))
        voters = snapshot_voters(snapshot_path(leader_dir, latest).read_bytes())
        assert voters is not None
        assert sorted(v.voter_id for v in voters.voters) == [1, 2, 3]  # rule 7
        leader_log = Path(cluster.dir) / "logs" / f"controller-{status.leader_id}.log"
        assert "because we have replayed at least 600 bytes" in leader_log.read_text()

        restarted_ms = int(time.time() * 1000)
        cluster.start_node(follower)
        cluster.write_cluster_file()
        caught_up = wait_for(
            lambda s: any(
                r["node_id"] == follower.node_id
                and r["last_fetch_timestamp_ms"] > restarted_ms
                and r["log_end_offset"] >= latest.end_offset
                for r in s.replication_json()
            ),
            cluster,
            20,
        )
        assert caught_up.leader_id is not None
        # The follower now holds a snapshot at or past the leader's log start (FetchSnapshot).
        follower_snapshots = list_snapshots(_partition_dir(cluster, follower.node_id))
        assert any(s.end_offset >= latest.end_offset for s in follower_snapshots)
    finally:
        cluster.stop()


def test_metrics_health_and_status_over_http(cluster3: LocalCluster) -> None:
    # A leader's high watermark is unknown until an entry of its own epoch commits (Raft's
    # leader-completeness rule): wait for that, not only for an elected leader.
    status = wait_for(
        lambda s: s.leader_id is not None and s.high_watermark > 0, cluster3, 10
    )
    leader = cluster3.node(f"controller-{status.leader_id}")
    base = f"http://{leader.host}:{leader.http_port}"
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
        metrics = response.read().decode()
    assert "raft_high_watermark" in metrics
    assert f"raft_current_leader {float(leader.node_id)}" in metrics
    assert "kafka_controller_active_controller_count 1.0" in metrics
    assert "kafka_controller_offline_partitions_count 0.0" in metrics
    with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
        assert response.status == 200
        assert json.loads(response.read())["leader_id"] == leader.node_id
    with urllib.request.urlopen(f"{base}/v1/status", timeout=5) as response:
        body = json.loads(response.read())
    assert body["role"] == "Leader"
    assert body["high_watermark"] > 0
    # Issue 35: every node's event-loop lag, max and p99 over the last minute.
    lag = body["event_loop_lag"]
    assert 0 <= lag["p99_ms"] <= lag["max_ms"] < 60_000
    assert "event_loop_lag_p99_ms" in metrics and "event_loop_lag_max_ms" in metrics
    # ... and the garbage collector's pauses, and how often the heap was frozen (gc_tuning).
    assert 0 <= body["gc_pause"]["gen2_max_ms"] <= body["gc_pause"]["max_ms"] < 60_000
    assert body["gc_pause"]["freezes"] >= 1  # at the node's start at least
    assert "gc_gen2_pause_max_ms" in metrics and "gc_freezes_total" in metrics
