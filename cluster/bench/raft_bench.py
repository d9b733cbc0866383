"""`minikraft bench raft`: 3 local voters (real processes, fsync on), sequential single-record
commits (p50/p99) and throughput at 1, 16 and 64 concurrent appenders.

The workload runs inside the leader (Kafka's TestRaftServer does the same), so the figures are
Raft's commit path: leader append + fsync, follower fetch + append + fsync, high watermark.
Peers (`--compare`) are the benchmark issue's; without one, `peer` and `ratio` are null.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from cluster.cli.admin_client import describe_quorum
from cluster.launch.local_cluster import LocalCluster
from cluster.launch.readiness import wait_until_ready

BENCH_PROPS = {
    "minikraft.bench.enabled": "true",
    "metadata.log.snapshot.interval.records": "1000000",
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


def run_raft_bench(
    *, sequential_records: int = 2000, concurrent_records: int = 20000, quick: bool = False
) -> dict[str, Any]:
    if quick:
        sequential_records, concurrent_records = 200, 2000
    workdir = Path(tempfile.mkdtemp(prefix="minikraft-bench-"))
    cluster = LocalCluster.plan(workdir, controllers=3, base_port=0, overrides=BENCH_PROPS)
    cluster.format()
    cluster.start()
    try:
        asyncio.run(wait_until_ready(cluster, 60))
        status = asyncio.run(describe_quorum(cluster.bootstrap_controller))
        leader = cluster.node(f"controller-{status.leader_id}")
        url = f"http://{leader.host}:{leader.http_port}/v1/bench/raft"
        _post(url, {"records": 200, "concurrency": 8}, 120)  # warm up connections and caches
        runs = {"sequential": _post(url, {"records": sequential_records, "concurrency": 1}, 600)}
        for concurrency in (16, 64):
            runs[f"c{concurrency}"] = _post(
                url, {"records": concurrent_records, "concurrency": concurrency}, 600
            )
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    seq = runs["sequential"]
    results = [
        _row("sequential commit p50", "ms", "lower", seq["latency_ms"]["p50"]),
        _row("sequential commit p99", "ms", "lower", seq["latency_ms"]["p99"]),
        _row("throughput, 1 appender", "records/s", "higher", seq["records_per_s"]),
        _row("throughput, 16 appenders", "records/s", "higher", runs["c16"]["records_per_s"]),
        _row("throughput, 64 appenders", "records/s", "higher", runs["c64"]["records_per_s"]),
        _row("commit p99, 64 appenders", "ms", "lower", runs["c64"]["latency_ms"]["p99"]),
    ]
    return {"bench": "raft", "peer": None, "durability": "fsync per batch", "results": results}


def _row(metric: str, unit: str, better: str, value: float) -> dict[str, Any]:
    return {
        "metric": metric,
        "unit": unit,
        "better": better,
        "minikraft": round(value, 3),
        "peer": None,
        "ratio": None,
    }
