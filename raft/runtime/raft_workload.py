"""An append workload run inside the leader, after Kafka's TestRaftServer: it measures Raft's
own commit path (append, fsync, replicate, follower fsync, high watermark) without a client
round trip in front. `minikraft bench raft` drives it over the leader's HTTP port."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from raft.runtime.raft_driver import RaftDriver


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


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
    latencies_ms.sort()
    return {
        "records": len(latencies_ms),
        "concurrency": concurrency,
        "elapsed_s": elapsed_s,
        "records_per_s": len(latencies_ms) / elapsed_s if elapsed_s > 0 else 0.0,
        "latency_ms": {
            "p50": percentile(latencies_ms, 0.50),
            "p99": percentile(latencies_ms, 0.99),
            "max": latencies_ms[-1] if latencies_ms else 0.0,
        },
    }
