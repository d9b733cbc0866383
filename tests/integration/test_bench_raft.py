"""`minikraft bench raft` runs end to end on real processes and reports CLI.md's JSON shape
(figures are not asserted: speed goals live in the benchmark, not in tests)."""

from __future__ import annotations

from cluster.bench.raft_bench import run_raft_bench
from cluster.bench.raft_workload import percentile


def test_percentile_picks_from_the_sorted_values() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 51.0 or percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([], 0.5) == 0.0


def test_bench_raft_reports_every_metric() -> None:
    report = run_raft_bench(sequential_records=30, concurrent_records=200)
    assert report["bench"] == "raft"
    metrics = {r["metric"]: r for r in report["results"]}
    assert set(metrics) == {
        "sequential commit p50",
        "sequential commit p99",
        "throughput, 1 appender",
        "throughput, 16 appenders",
        "throughput, 64 appenders",
        "commit p99, 64 appenders",
    }
    assert all(r["minikraft"] > 0 for r in report["results"])
    assert (
        metrics["sequential commit p99"]["minikraft"]
        >= metrics["sequential commit p50"]["minikraft"]
    )
    assert all(
        set(r) == {"metric", "unit", "better", "minikraft", "peer", "ratio"}
        for r in report["results"]
    )
