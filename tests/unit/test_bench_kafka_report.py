"""`minikraft bench kafka`'s report without running a cluster (issue 36): every line has both
figures, ratio = minikraft / Kafka, its goal judged the right way round (lower or higher
better), the durability of both sides and the load average of each; Kafka's tools' summaries
parsed; both clusters planned alike, Kafka with its scripts' JVM and minikraft flush relaxed
but for the fsync run. Milliseconds; the live run is tests/integration/test_bench_kafka.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cluster.apache_kafka.cluster import wait_first_commit
from cluster.bench.kafka_bench import (
    GOALS,
    UNITS,
    Figures,
    build_results,
    decomposition,
    goal_met,
    kafka_row,
    ready_figures,
)
from cluster.bench.kafka_decompose import (
    BrokerKill,
    fill_fenced,
    kafka_fenced_broker,
    minikraft_fenced_broker,
)
from cluster.bench.kafka_engines import FLUSH_RELAXED, KAFKA, MINIKRAFT, SHARED, plan
from cluster.bench.kafka_interleave import Interleaved, Taken, interleave, mean_load, order
from cluster.bench.kafka_tool_lines import parse_e2e, parse_perf_test
from cluster.bench.report import durability, markdown_table
from cluster.launch.local_cluster import free_ports
from metadata.records import BrokerRegistrationChangeRecord, FenceBrokerRecord, encode_record

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


def _line(samples: dict[str, list[float]]) -> Interleaved[float]:
    return Interleaved({e: [Taken(v, [float(i), 1.0, 1.0]) for i, v in enumerate(values)]
                        for e, values in samples.items()})


def test_every_line_has_both_figures_and_a_ratio() -> None:
    kafka, ours, fsync = Figures(KAFKA), Figures(MINIKRAFT), Figures("minikraft fsync")
    for i, metric in enumerate(m for m in UNITS if not m.startswith("ready")):
        kafka.add({metric: 10.0 + i}, [[1.0, 1.0, 1.0], [3.0, 1.0, 1.0]])
        ours.add({metric: 5.0 + i}, [[3.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
        fsync.add({metric: 6.0 + i})
    ready = _line({KAFKA: [20.0, 22.0, 21.0], MINIKRAFT: [4.0, 3.0, 5.0]})
    forked = _line({MINIKRAFT: [2.0, 2.5, 3.0]})
    ready_figures(ready, forked, ready, kafka, ours)
    results = build_results(kafka, ours, fsync)
    by_metric = {r["metric"]: r for r in results}
    assert set(GOALS) <= set(by_metric)
    assert by_metric["ready"]["minikraft"] == 4.0 and by_metric["ready"]["peer"] == 21.0
    # 'nodes forked' is minikraft's alone, beside Kafka's cold starts.
    assert by_metric["ready, nodes forked"]["minikraft"] == 2.5
    assert by_metric["ready, nodes forked"]["peer"] == 21.0
    # Each side's load: the mean of the line's measurements, and each one in order.
    assert by_metric["ready"]["load_average"][KAFKA] == [1.0, 1.0, 1.0]
    assert by_metric["ready"]["load_samples"][KAFKA] == [[0.0, 1, 1], [1.0, 1, 1], [2.0, 1, 1]]
    assert by_metric["idle CPU of the six nodes"]["load_average"][MINIKRAFT] == [2.0, 1.0, 1.0]
    for line in results:
        assert line["minikraft"] is not None and line["peer"] is not None
        assert line["ratio"] == pytest.approx(line["minikraft"] / line["peer"], rel=1e-3)
        assert line["load_average"]["minikraft"] and line["load_average"]["kafka"]
        assert (line["goal_met"] is None) == (line["goal"] is None)
    assert any(m.endswith(", minikraft fsync") for m in by_metric)


def test_measurements_alternate_abba_and_stop_at_the_budget() -> None:
    assert order([KAFKA, MINIKRAFT], 0) == [KAFKA, MINIKRAFT]
    assert order([KAFKA, MINIKRAFT], 1) == [MINIKRAFT, KAFKA]
    now = [0.0]

    def measure(engine: str, rep: int) -> str:
        now[0] += 10.0  # each measurement takes 10 s of the fake clock
        return f"{engine}{rep}"

    whole = interleave([KAFKA, MINIKRAFT], 3, measure, "t", clock=lambda: now[0])
    assert whole.sequence == [KAFKA, MINIKRAFT, MINIKRAFT, KAFKA, KAFKA, MINIKRAFT]
    assert whole.values(KAFKA) == ["kafka0", "kafka1", "kafka2"]
    assert all(len(load) == 3 for load in whole.loads(MINIKRAFT))
    # A repetition (20 s) that would end past the phase's end is not begun; the first always is.
    now[0] = 0.0
    bounded = interleave([KAFKA, MINIKRAFT], 3, measure, "t", phase_end=35.0,
                         clock=lambda: now[0])
    assert bounded.count(KAFKA) == bounded.count(MINIKRAFT) == 1
    now[0] = 100.0
    late = interleave([KAFKA, MINIKRAFT], 3, measure, "t", phase_end=35.0, clock=lambda: now[0])
    assert late.count(KAFKA) == 1
    assert mean_load([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]) == [2.0, 2.0, 2.0]


def _kafka_record(api_key: int, body: bytes) -> bytes:
    return bytes([1, api_key, 0]) + body  # frame version 1, api key, version 0 (varints < 128)


def test_fencing_read_from_either_metadata_log_format() -> None:
    fenced = (102).to_bytes(4, "big") + (7).to_bytes(8, "big") + bytes([1, 0, 1, 1])
    unfenced = (102).to_bytes(4, "big") + (7).to_bytes(8, "big") + bytes([1, 0, 1, 0xFF])
    assert kafka_fenced_broker(_kafka_record(17, fenced)) == 102
    assert kafka_fenced_broker(_kafka_record(17, unfenced)) is None
    no_tags = (102).to_bytes(4, "big") + (7).to_bytes(8, "big") + bytes([0])
    assert kafka_fenced_broker(_kafka_record(17, no_tags)) is None
    assert kafka_fenced_broker(_kafka_record(7, (103).to_bytes(4, "big") + bytes(8))) == 103
    assert kafka_fenced_broker(_kafka_record(5, fenced)) is None  # a PartitionChangeRecord
    assert kafka_fenced_broker(_kafka_record(17, fenced)[:6]) is None  # torn: not a fencing
    ours = encode_record(BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=9, fenced=1))
    assert minikraft_fenced_broker(ours) == 2
    assert minikraft_fenced_broker(encode_record(FenceBrokerRecord(id=3, epoch=1))) == 3
    unchanged = encode_record(BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=9))
    assert minikraft_fenced_broker(unchanged) is None


def test_broker_failover_decomposed_per_kill() -> None:
    kills = [BrokerKill(101, 1000.0, 9400.0, metadata_ms=9100.0),
             BrokerKill(102, 2000.0, 8000.0, metadata_ms=None)]
    # The victim's fencings: one before the kill (an earlier kill), one after; another broker's.
    fill_fenced(kills, [(990_000, 101), (1_008_900, 101), (2_007_500, 103), (2_007_600, 102)])
    assert kills[0].fenced_ms == pytest.approx(8900.0)
    assert kills[0].parts() == {"kill->fenced": pytest.approx(8900.0),
                                "fenced->metadata": pytest.approx(200.0),
                                "metadata->acked": pytest.approx(300.0), "total": 9400.0}
    assert kills[1].fenced_ms == pytest.approx(7600.0)
    assert kills[1].parts()["fenced->metadata"] is None
    summary = decomposition({KAFKA: kills})
    assert summary[KAFKA]["median"]["kill->fenced"] == 8250.0
    assert summary[KAFKA]["median"]["fenced->metadata"] == 200.0
    assert len(summary[KAFKA]["kills"]) == 2


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


def test_kafka_brokers_wait_for_a_quorum_that_never_answers_only_so_long() -> None:
    # Nothing listens on a port just freed: no leader, no high watermark, False in time.
    port = free_ports(1)[0]
    started = time.monotonic()
    assert wait_first_commit(f"127.0.0.1:{port}", 0.5) is False
    assert time.monotonic() - started < 5.0
