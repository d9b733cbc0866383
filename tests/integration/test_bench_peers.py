"""`minikraft bench --compare`: each peer (etcd, PySyncObj, NATS JetStream) starts on loopback,
commits a tiny workload, reports CLI.md's JSON shape with ratios, and is stopped by pid. Skipped
with the reason when the peer is not installed (`make bench-deps`); figures are not asserted."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from cluster.bench.report import make_report, markdown_table, row, speedup, write_svg_chart
from storage.runtime.disk_log import DiskLog
from tests.integration.conftest import minikraft

ROW_KEYS = {"metric", "unit", "better", "minikraft", "peer", "ratio"}


def _require(binary: str, package: str) -> None:
    if shutil.which(binary) is None and not os.access(f"/usr/sbin/{binary}", os.X_OK):
        pytest.skip(f"{package} not installed: make bench-deps")


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text().lower()


def _check_report(report: dict[str, Any], bench: str, peer: str) -> None:
    assert report["bench"] == bench and report["peer"] == peer
    assert report["notes"], "a compared report says what is like-with-like"
    for result in report["results"]:
        assert set(result) >= ROW_KEYS
        assert result["minikraft"] > 0 and result["peer"] > 0
        assert result["ratio"] == pytest.approx(result["minikraft"] / result["peer"], rel=0.01)


def _compared(bench: str, peer: str, timeout: float) -> dict[str, Any]:
    """`minikraft bench BENCH --compare PEER --quick --output json`'s report, checked."""
    result = minikraft("bench", bench, "--compare", peer, "--quick", "--output", "json",
                       timeout=timeout)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    _check_report(report, bench, peer)
    return report


def test_row_ratio_is_ours_over_peer_and_chart_renders(tmp_path: Path) -> None:
    faster = row("throughput", "records/s", "higher", 300.0, 100.0)
    quicker = row("commit p50", "ms", "lower", 1.0, 4.0)
    alone = row("commit p99", "ms", "lower", 2.0)
    assert faster["ratio"] == 3.0 and quicker["ratio"] == 0.25 and alone["ratio"] is None
    assert speedup(faster) == 3.0 and speedup(quicker) == 4.0 and speedup(alone) is None
    report = make_report("raft", "etcd", [faster, quicker, alone], ["etcd fsyncs every commit"])
    assert (
        "| raft | etcd | throughput | records/s | higher | 300.0 | 100.0 | 3.0 "
        "| fsync per batch / fsync every commit |"
    ) in markdown_table([report])
    chart = tmp_path / "chart.svg"
    write_svg_chart([report], chart)
    svg = chart.read_text()
    assert svg.startswith("<svg") and svg.count("<rect") == 3  # background + two bars
    assert "3.00x" in svg and "4.00x" in svg
    # A wide span (PySyncObj's 250x): axis labels stay apart, fractions on the worse side.
    wide = make_report("raft", "pysyncobj", [row("p50", "ms", "lower", 0.4, 100.0),
                                             row("rate", "records/s", "higher", 1.0, 250.0)], [])
    write_svg_chart([wide], chart)
    ticks = re.findall(r'<text x="([0-9.]+)" y="[0-9.]+" text-anchor="middle">([^<]+)</text>',
                       chart.read_text())
    xs = [float(x) for x, _label in ticks]
    assert ("1x" in {label for _x, label in ticks} and len(ticks) >= 5
            and all(b - a >= 36 for a, b in itertools.pairwise(xs)))
    assert all(label.startswith("1/") for x, label in ticks if float(x) < xs[len(xs) // 2])


def test_relaxed_flush_counts_appends_as_flushed_without_fsync(tmp_path: Path) -> None:
    log = DiskLog(tmp_path / "log")
    log.append_as_leader([b"a", b"b"], epoch=1, timestamp_ms=0)
    assert log.flushed_offset() == 0
    log.flush(sync=False)
    assert log.flushed_offset() == log.end_offset() == 2
    log.append_as_leader([b"c"], epoch=1, timestamp_ms=0)
    log.flush()  # a later sync flush still covers everything
    assert log.flushed_offset() == 3
    log.close()


def test_compare_is_refused_for_a_bench_without_that_peer() -> None:
    result = minikraft("bench", "audit", "--compare", "etcd", timeout=30)
    assert result.returncode == 2
    assert "bench audit compares with no peer" in result.stderr


def test_audit_options_are_refused_for_other_benches() -> None:
    result = minikraft("bench", "raft", "--records", "10", timeout=30)
    assert result.returncode == 2
    assert "--records and --dir apply to bench audit only" in result.stderr


def test_etcd_members_commit_puts_and_stop_by_pid() -> None:
    _require("etcd", "etcd-server")
    from cluster.bench.peers.etcd import EtcdCluster, put_workload

    async def run(cluster: EtcdCluster) -> dict[str, Any]:
        leader = await cluster.wait_ready()
        return await put_workload(leader, records=40, concurrency=4)

    with EtcdCluster() as cluster:
        pids = [m.pid for m in cluster.members]
        result = asyncio.run(run(cluster))
    assert result["records"] == 40 and result["latency_ms"]["p99"] > 0
    assert all(pid is not None and not _alive(pid) for pid in pids)


def test_bench_raft_compare_etcd_quick_json() -> None:
    _require("etcd", "etcd-server")
    report = _compared("raft", "etcd", timeout=240)
    assert report["durability"] == "fsync per batch"
    assert "etcd fsyncs every commit" in report["notes"][0]


def test_pysyncobj_nodes_commit_increments_and_stop_by_pid() -> None:
    pytest.importorskip("pysyncobj", reason="pysyncobj not installed: make bench-deps")
    from cluster.bench.peers.pysyncobj_peer import PySyncObjCluster

    with PySyncObjCluster(append_entries_period_s=0.005) as cluster:
        pids = list(cluster.pids)
        leader = cluster.wait_leader()
        result = cluster.workload(leader, 20, 4)
    assert result["records"] == 20 and result["errors"] == 0
    assert all(not _alive(pid) for pid in pids)


def test_nats_jetstream_r3_acks_publishes_and_stops_by_pid() -> None:
    _require("nats-server", "nats-server")
    pytest.importorskip("nats", reason="nats-py not installed: make bench-deps")
    from cluster.bench.peers.nats import NatsCluster, _create_streams, _run_load

    async def run(cluster: NatsCluster) -> Any:
        await _create_streams(cluster.servers)
        load = {"producers": 2, "records_per_producer": 20, "records_per_batch": 5,
                "record_size": 64}
        return await _run_load(cluster, load)

    with NatsCluster() as cluster:
        pids = list(cluster.pids)
        result = asyncio.run(run(cluster))
    assert result.acked == 40 and len(result.latencies_ms) == 40
    assert result.server_cpu_s is not None and result.server_cpu_s >= 0  # its servers' CPU
    assert all(not _alive(pid) for pid in pids)


@pytest.mark.slow
def test_bench_failover_compare_etcd_quick_json() -> None:
    _require("etcd", "etcd-server")
    report = _compared("failover", "etcd", timeout=300)
    assert report["kills"] == 3 and len(report["samples_ms"]["peer"]) == 3
    # No failover can beat the election timeout both sides were given (1000 ms).
    assert min(report["samples_ms"]["minikraft"] + report["samples_ms"]["peer"]) > 900


@pytest.mark.slow
def test_bench_raft_compare_pysyncobj_quick_json() -> None:
    pytest.importorskip("pysyncobj", reason="pysyncobj not installed: make bench-deps")
    report = _compared("raft", "pysyncobj", timeout=300)
    assert report["durability"] == "no fsync (minikraft.raft.fsync=false)"


@pytest.mark.slow
def test_bench_produce_compare_nats_quick_json() -> None:
    _require("nats-server", "nats-server")
    pytest.importorskip("nats", reason="nats-py not installed: make bench-deps")
    report = _compared("produce", "nats", timeout=400)
    metrics = {r["metric"] for r in report["results"]}
    assert "throughput, batched, flush relaxed" in metrics and "throughput, batched" in metrics
