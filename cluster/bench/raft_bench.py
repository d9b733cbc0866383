"""`minikraft bench raft`: 3 local voters (real processes, fsync on), sequential single-record
commits (p50/p99) and throughput at 1, 16 and 64 concurrent appenders.

The workload runs inside the leader (Kafka's TestRaftServer does the same), so the figures are
Raft's commit path: leader append + fsync, follower fetch + append + fsync, high watermark.
`--compare etcd` runs 3 etcd members (fsync every commit) in the same run; `--compare pysyncobj`
runs 3 PySyncObj nodes (no fsync) and minikraft with `minikraft.raft.fsync=false` to match.
Without a peer, `peer` and `ratio` are null.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from cluster.bench.report import make_report, row
from cluster.client.admin_client import describe_quorum
from cluster.launch.local_cluster import LocalCluster
from cluster.launch.readiness import wait_until_ready

BENCH_PROPS = {
    "minikraft.bench.enabled": "true",
    "metadata.log.max.record.bytes.between.snapshots": str(1 << 30),  # none in a run
    "metadata.max.idle.interval.ms": "60000",
    "log.level": "WARNING",
}


def _post(url: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        result: dict[str, Any] = json.loads(response.read())
    return result


PYSYNCOBJ_MAX_SEQUENTIAL = 300
PYSYNCOBJ_MAX_CONCURRENT = 4000

DURABILITY_NOTES = {
    None: "minikraft fsyncs per batch (group commit)",
    "etcd": "etcd fsyncs every commit; minikraft fsyncs per batch (group commit); etcd is driven "
    "over HTTP/JSON (gRPC gateway), minikraft's workload runs inside the leader",
    "pysyncobj": "neither fsyncs: PySyncObj keeps its journal in memory by default, minikraft "
    "runs with minikraft.raft.fsync=false; both workloads run inside the leader",
}


def run_minikraft_workloads(
    *, sequential_records: int, concurrent_records: int, fsync: bool = True
) -> dict[str, dict[str, Any]]:
    """Sequential commits, then 16 and 64 concurrent appenders, inside the leader of 3 voters."""
    workdir = Path(tempfile.mkdtemp(prefix="minikraft-bench-"))
    props = {**BENCH_PROPS, "minikraft.raft.fsync": "true" if fsync else "false"}
    cluster = LocalCluster.plan(workdir, controllers=3, base_port=0, overrides=props)
    try:
        cluster.format()
        cluster.start()
        asyncio.run(wait_until_ready(cluster, 60))
        status = asyncio.run(describe_quorum(cluster.bootstrap_controller))
        leader = cluster.node(f"controller-{status.leader_id}")
        url = f"http://{leader.host}:{leader.http_port}/v1/bench/raft"
        _post(url, {"records": 200, "concurrency": 8}, 120)  # warm up connections and caches
        runs = {"c1": _post(url, {"records": sequential_records, "concurrency": 1}, 600)}
        for concurrency in (16, 64):
            runs[f"c{concurrency}"] = _post(
                url, {"records": concurrent_records, "concurrency": concurrency}, 600
            )
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return runs


def run_raft_bench(
    *,
    sequential_records: int = 2000,
    concurrent_records: int = 20000,
    quick: bool = False,
    compare: str | None = None,
) -> dict[str, Any]:
    if quick:
        sequential_records, concurrent_records = 200, 2000
    fsync = compare != "pysyncobj"
    ours = run_minikraft_workloads(
        sequential_records=sequential_records, concurrent_records=concurrent_records, fsync=fsync
    )
    theirs: dict[str, dict[str, Any]] | None = None
    if compare == "etcd":
        from cluster.bench.peers.etcd import run_etcd_raft_workloads

        theirs = asyncio.run(run_etcd_raft_workloads(
            sequential_records=sequential_records, concurrent_records=concurrent_records
        ))
    elif compare == "pysyncobj":
        from cluster.bench.peers.pysyncobj_peer import run_pysyncobj_workloads

        # PySyncObj commits about 10 records/s sequentially (its 100 ms append period): fewer
        # records keep the run bounded; the percentiles and rates are per record either way.
        theirs = asyncio.run(run_pysyncobj_workloads(
            sequential_records=min(sequential_records, PYSYNCOBJ_MAX_SEQUENTIAL),
            concurrent_records=min(concurrent_records, PYSYNCOBJ_MAX_CONCURRENT),
        ))
    elif compare is not None:
        raise ValueError(f"bench raft compares with etcd or pysyncobj, not {compare}")
    note = DURABILITY_NOTES[compare]

    def pick(runs: dict[str, dict[str, Any]] | None, run: str, *path: str) -> float | None:
        if runs is None:
            return None
        value: Any = runs[run]
        for key in path:
            value = value[key]
        return float(value)

    lines = [
        ("sequential commit p50", "ms", "lower", "c1", ("latency_ms", "p50")),
        ("sequential commit p99", "ms", "lower", "c1", ("latency_ms", "p99")),
        ("throughput, 1 appender", "records/s", "higher", "c1", ("records_per_s",)),
        ("throughput, 16 appenders", "records/s", "higher", "c16", ("records_per_s",)),
        ("throughput, 64 appenders", "records/s", "higher", "c64", ("records_per_s",)),
        ("commit p99, 64 appenders", "ms", "lower", "c64", ("latency_ms", "p99")),
    ]
    results = [
        row(metric, unit, better, pick(ours, run, *path), pick(theirs, run, *path))
        for metric, unit, better, run, path in lines
    ]
    return make_report(
        "raft",
        compare,
        results,
        [note],
        durability="fsync per batch" if fsync else "no fsync (minikraft.raft.fsync=false)",
        records={"sequential": sequential_records, "concurrent": concurrent_records},
    )
