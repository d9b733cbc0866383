"""`minikraft bench kafka`'s report without running a cluster (issue 36): every line has both
figures, ratio = minikraft / Kafka, its goal judged the right way round (lower or higher
better), the durability of both sides and the load average of each; Kafka's tools' summaries
parsed; both clusters planned alike, Kafka with its scripts' JVM and minikraft flush relaxed
but for the fsync run. Milliseconds; the live run is tests/integration/test_bench_kafka.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.bench.kafka_bench import GOALS, UNITS, Figures, build_results, goal_met, kafka_row
from cluster.bench.kafka_engines import FLUSH_RELAXED, KAFKA, MINIKRAFT, SHARED, plan
from cluster.bench.kafka_tool_lines import parse_e2e, parse_perf_test
from cluster.bench.report import durability, markdown_table

PERF_OUT = (
    "99837 records sent, 19963.4 records/sec (19.50 MB/sec), 1.1 ms avg latency, 153.0 ms max "
    "latency.\n200000 records sent, 49975.012494 records/sec (48.80 MB/sec), 381.65 ms avg "
    "latency, 760.00 ms max latency, 391 ms 50th, 660 ms 95th, 720 ms 99th, 755 ms 99.9th.\n"
)
E2E_OUT = "0\t2.5\nAvg latency: 2.1234 ms\nPercentiles: 50th = 2, 99th = 5, 99.9th = 9\n"


def test_tool_summaries_parsed() -> None:
    perf = parse_perf_test(PERF_OUT)  # the final summary, not a progress line
    assert (perf.records, perf.records_per_s, perf.mb_per_s) == (200000, 49975.012494, 48.8)
    assert (perf.avg_ms, perf.p50_ms, perf.p99_ms) == (381.65, 391, 720)
    e2e = parse_e2e(E2E_OUT)
    assert (e2e.avg_ms, e2e.p50_ms, e2e.p99_ms) == (2.1234, 2, 5)
    with pytest.raises(RuntimeError, match="no summary"):
        parse_perf_test("Exception in thread main")


def test_ratio_goal_and_durability_per_line() -> None:
    slow = kafka_row("ready", 3.0, 20.0, load={"minikraft": [1.0, 1, 1], "kafka": [2.0, 2, 2]})
    assert slow["ratio"] == 0.15 and slow["goal"] == "<= 0.25" and slow["goal_met"] is True
    assert slow["load_average"] == {"minikraft": [1.0, 1, 1], "kafka": [2.0, 2, 2]}
    assert slow["durability"].startswith("no fsync per append")
    # Throughput: higher is better, so 0.4x misses ">= 0.5".
    tput = kafka_row("produce throughput, batched", 40_000, 100_000)
    assert tput["ratio"] == 0.4 and tput["goal_met"] is False
    assert goal_met("produce throughput, batched", 0.5) is True
    # The fsync lines are shown beside, with no goal of their own.
    fsync = kafka_row("produce p50, 1 record per request", 3.0, 1.5, fsync=True)
    assert fsync["metric"].endswith(", minikraft fsync") and fsync["ratio"] == 2.0
    assert fsync["goal"] is None and fsync["goal_met"] is None
    assert fsync["durability"].startswith("fsync every acks=all append")
    report = {"bench": "kafka", "peer": "kafka", "results": [fsync]}
    assert durability(report, fsync) == fsync["durability"]
    assert fsync["durability"] in markdown_table([report])


def test_every_line_has_both_figures_and_a_ratio() -> None:
    kafka, ours, fsync = Figures(KAFKA), Figures(MINIKRAFT), Figures("minikraft fsync")
    for i, metric in enumerate(m for m in UNITS if not m.startswith("ready")):
        kafka.add({metric: 10.0 + i})
        ours.add({metric: 5.0 + i})
        fsync.add({metric: 6.0 + i})
    ready = {KAFKA: [20.0, 22.0, 21.0], MINIKRAFT: [4.0, 3.0, 5.0]}
    loads = {KAFKA: [[1.0, 1.0, 1.0]], MINIKRAFT: [[2.0, 2.0, 2.0]]}
    results = build_results(ready, ready, loads, loads, kafka, ours, fsync)
    by_metric = {r["metric"]: r for r in results}
    assert set(GOALS) <= set(by_metric)
    assert by_metric["ready"]["minikraft"] == 4.0 and by_metric["ready"]["peer"] == 21.0
    for line in results:
        assert line["minikraft"] is not None and line["peer"] is not None
        assert line["ratio"] == pytest.approx(line["minikraft"] / line["peer"], rel=1e-3)
        assert line["load_average"]["minikraft"] and line["load_average"]["kafka"]
        assert (line["goal_met"] is None) == (line["goal"] is None)
    assert any(m.endswith(", minikraft fsync") for m in by_metric)


def test_both_clusters_planned_alike(tmp_path: Path) -> None:
    kafka = plan(KAFKA, tmp_path / "k")
    mk = plan(MINIKRAFT, tmp_path / "m")
    mk_fsync = plan(MINIKRAFT, tmp_path / "f", fsync=True)
    k_props = kafka.node_properties(kafka.brokers[0])
    m_props = mk.node_properties(mk.brokers[0])
    for key, value in SHARED.items():
        assert k_props[key] == m_props[key] == value
    # Kafka as its scripts ship it: its default thread pools and JVM, not the test trims.
    assert "num.io.threads" not in k_props and "flush.messages" not in k_props
    command = kafka.command(kafka.brokers[0])
    assert "-Xmx1G" in command and "-XX:+UseG1GC" in command
    assert m_props["flush.messages"] == FLUSH_RELAXED["flush.messages"]
    assert "flush.messages" not in mk_fsync.node_properties(mk_fsync.brokers[0])
