"""The demo's injected faults reach the audit report: cluster.chaos.demo.record_fault writes
chaos events that analytics.read.chaos_events reads (the report marks them on every timeline)."""

from __future__ import annotations

from pathlib import Path

from analytics.read.chaos_events import read_chaos_faults
from cluster.chaos.demo import record_fault
from cluster.launch.local_cluster import NodeSpec


def _spec(role: str, node_id: int, pid: int) -> NodeSpec:
    return NodeSpec(role, node_id, "127.0.0.1", 0, 0, "d", "c", "l", pid=pid)


def test_demo_faults_are_chaos_events_in_time_order(tmp_path: Path) -> None:
    journal = tmp_path / "chaos" / "demo-faults.jsonl"
    broker, controller = _spec("broker", 102, 4242), _spec("controller", 1, 4343)
    record_fault(journal, "kill", broker)
    record_fault(journal, "kill", controller)
    record_fault(journal, "restart", broker)
    faults = read_chaos_faults(tmp_path)
    assert [(f["action"], f["node"], f["pid"]) for f in faults] == [
        ("kill", broker.name, 4242), ("kill", controller.name, 4343),
        ("restart", broker.name, 4242)]
    assert all(f["source"] == "demo-faults.jsonl" for f in faults)
    assert [f["ts_ms"] for f in faults] == sorted(f["ts_ms"] for f in faults)
