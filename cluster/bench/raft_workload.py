"""An append workload run inside the leader, after Kafka's TestRaftServer: it measures Raft's
own commit path (append, fsync, replicate, follower fsync, high watermark) without a client
round trip in front. `minikraft bench raft` drives it over the leader's HTTP port: the route is
installed by `minikraft controller` (cluster/cli/node_cmds.py) when `minikraft.bench.enabled`
is true, so bench code stays out of the node runtimes (issue 18)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web

from metadata.records import NoOpRecord, encode_record
from raft.runtime.raft_driver import RaftDriver

if TYPE_CHECKING:
    from controller.runtime.controller_node import ControllerNode


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def workload_summary(
    latencies_ms: list[float], concurrency: int, elapsed_s: float, **extra: int
) -> dict[str, Any]:
    """One appender workload's JSON, the same shape for minikraft and every peer (CLI.md)."""
    latencies_ms.sort()
    return {
        "records": len(latencies_ms),
        **extra,
        "concurrency": concurrency,
        "elapsed_s": elapsed_s,
        "records_per_s": len(latencies_ms) / elapsed_s if elapsed_s > 0 else 0.0,
        "latency_ms": {
            "p50": percentile(latencies_ms, 0.50),
            "p99": percentile(latencies_ms, 0.99),
            "max": latencies_ms[-1] if latencies_ms else 0.0,
        },
    }


async def run_append_workload(
    driver: RaftDriver,
    record: bytes,
    *,
    records: int,
    concurrency: int,
    timeout_ms: int = 10_000,
) -> dict[str, Any]:
    """`concurrency` appenders each commit one record at a time until `records` are committed."""
    latencies_ms: list[float] = []
    remaining = records

    async def appender() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            await driver.append_and_commit([record], timeout_ms)
            latencies_ms.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(appender() for _ in range(concurrency)))
    elapsed_s = time.perf_counter() - started
    return workload_summary(latencies_ms, concurrency, elapsed_s)


def raft_bench_routes(node: ControllerNode) -> list[tuple[str, str, Any]]:
    """`minikraft bench raft` drives an in-leader append workload (off unless configured)."""
    if node.config.get("minikraft.bench.enabled", "false") != "true":
        return []

    async def bench(request: web.Request) -> web.Response:
        params = await request.json()
        if node.raft.replica.role != "Leader":
            return web.json_response({"error": "NOT_LEADER_OR_FOLLOWER"}, status=409)
        result = await run_append_workload(
            node.raft.driver,
            encode_record(NoOpRecord()),
            records=int(params.get("records", 1000)),
            concurrency=int(params.get("concurrency", 1)),
        )
        return web.json_response(result)

    return [("POST", "/v1/bench/raft", bench)]
