"""`minikraft bench produce --quick --output json` runs end to end (3 controllers + 3 brokers,
acks=all) and reports CLI.md's JSON shape, with the librdkafka producer's line beside
minikraft's own (the dev extra installs confluent-kafka); figures are not asserted, only that
they exist."""

from __future__ import annotations

import json

from cluster.bench.produce_bench import bench_loads
from tests.integration.conftest import minikraft


def test_bench_produce_quick_reports_cli_json_shape() -> None:
    result = minikraft("bench", "produce", "--quick", "--output", "json", timeout=180)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["bench"] == "produce" and report["peer"] is None
    load = bench_loads(quick=True)["batched"]
    # Every batched record got an acks=all ack (the bench raises on any error).
    assert report["workload"]["records"] == load.producers * load.records_per_producer
    assert report["workload"]["replication_factor"] == 3
    assert report["workload"]["min_insync_replicas"] == 2
    metrics = {r["metric"]: r for r in report["results"]}
    assert set(metrics) == {
        "throughput, batched",
        "ack latency p50, batched",
        "ack latency p99, batched",
        "throughput, 1 record per request",
        "ack latency p50, 1 record per request",
        "ack latency p99, 1 record per request",
        "throughput, batched, librdkafka producer",
        "ack latency p50, batched, librdkafka producer",
        "ack latency p99, batched, librdkafka producer",
        "server CPU per record, batched",
        "server CPU per record, 1 record per request",
    }
    assert any(n.startswith("librdkafka producer: confluent-kafka") for n in report["notes"])
    for row in report["results"]:
        assert set(row) == {"metric", "unit", "better", "minikraft", "peer", "ratio"}
        assert row["minikraft"] > 0 and row["peer"] is None and row["ratio"] is None
        assert row["better"] == ("higher" if row["unit"] == "records/s" else "lower")
    # The servers' CPU per record: one-record requests cost more of it than batched ones.
    assert (
        metrics["server CPU per record, 1 record per request"]["minikraft"]
        > metrics["server CPU per record, batched"]["minikraft"]
    )
    for suffix in ("batched", "batched, librdkafka producer"):
        p50 = metrics[f"ack latency p50, {suffix}"]["minikraft"]
        assert metrics[f"ack latency p99, {suffix}"]["minikraft"] >= p50
    # Issue 17: the floor measured beside the figures (2 fsyncs + 2 loopback round trips).
    floor = report["floor"]
    assert floor["fsync_p50_ms"] > 0 and floor["loopback_rtt_p50_ms"] > 0
    assert floor["fsync_p99_ms"] >= floor["fsync_p50_ms"]
    expected = 2 * floor["fsync_p50_ms"] + 2 * floor["loopback_rtt_p50_ms"]
    assert abs(floor["one_record_ack_floor_ms"] - expected) < 0.01
    assert any(note.startswith("floor on this machine") for note in report["notes"])
