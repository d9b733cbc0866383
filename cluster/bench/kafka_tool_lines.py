"""Apache Kafka's own load tools, run against either cluster for `minikraft bench kafka`:
kafka-producer-perf-test (batched, acks=all, linger.ms 5) and kafka-e2e-latency (one record
at a time, produced acks=all and consumed back), their summaries parsed."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cluster.apache_kafka import tools

_PERF = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)
_E2E_AVG = re.compile(r"Avg latency: ([\d.]+) ms")
_E2E_PCT = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")


@dataclass(frozen=True)
class PerfTest:
    records: int
    records_per_s: float
    mb_per_s: float
    avg_ms: float
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class EndToEnd:
    avg_ms: float
    p50_ms: float
    p99_ms: float


def parse_perf_test(stdout: str) -> PerfTest:
    """The final summary line of kafka-producer-perf-test."""
    matches = _PERF.findall(stdout)
    if not matches:
        raise RuntimeError(f"kafka-producer-perf-test printed no summary: {stdout[-500:]!r}")
    sent, rate, mb, avg, _max, p50, _p95, p99 = matches[-1]
    return PerfTest(int(sent), float(rate), float(mb), float(avg), float(p50), float(p99))


def parse_e2e(stdout: str) -> EndToEnd:
    avg, pct = _E2E_AVG.search(stdout), _E2E_PCT.search(stdout)
    if avg is None or pct is None:
        raise RuntimeError(f"kafka-e2e-latency printed no summary: {stdout[-500:]!r}")
    return EndToEnd(float(avg.group(1)), float(pct.group(1)), float(pct.group(2)))


def _ok(result: tools.ToolResult, name: str) -> str:
    if result.rc != 0:
        raise RuntimeError(f"{name} exited {result.rc}: {(result.stderr or result.stdout)[-500:]}")
    return result.stdout


def perf_test(bootstrap: str, topic: str, records: int, record_size: int = 1024,
              timeout_s: float = 600.0) -> PerfTest:
    out = tools.run_tool(tools.PRODUCER_PERF, [
        "--topic", topic, "--num-records", str(records), "--record-size", str(record_size),
        "--throughput", "-1", "--command-property", f"bootstrap.servers={bootstrap}",
        "acks=all", "linger.ms=5",
    ], timeout=timeout_s)
    return parse_perf_test(_ok(out, "kafka-producer-perf-test"))


def e2e_latency(bootstrap: str, topic: str, records: int, record_size: int = 1024,
                timeout_s: float = 600.0) -> EndToEnd:
    out = tools.run_tool(tools.E2E_LATENCY, [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
        "--producer-acks", "all", "--record-size", str(record_size),
    ], timeout=timeout_s)
    return parse_e2e(_ok(out, "kafka-e2e-latency"))
