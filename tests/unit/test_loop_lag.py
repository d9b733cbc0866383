"""The event-loop lag every node serves (kafkawire/loop_lag.py, issue 35): max and p99 over the
last minute, older samples aged out, and a real stall of the loop seen."""

from __future__ import annotations

import asyncio
import time

from kafkawire.loop_lag import LoopLagMonitor, percentile


def test_max_and_p99_over_the_window_only() -> None:
    monitor = LoopLagMonitor(window_s=60)
    monitor.record(0.0, 900.0)  # ages out: more than a minute before the others
    for i in range(98):
        monitor.record(61.0 + i * 0.1, 1.0)
    monitor.record(81.0, 300.0)
    monitor.record(81.1, 40.0)
    lag = monitor.lag(now=81.2)
    assert lag.samples == 100 and lag.max_ms == 300.0
    assert lag.p99_ms == 40.0  # nearest rank 99 of 100: the second highest
    assert percentile([], 0.99) == 0.0 and percentile([5.0], 0.99) == 5.0


def test_a_blocked_loop_shows_as_lag() -> None:
    async def scenario() -> float:
        monitor = LoopLagMonitor(interval_s=0.01)
        monitor.start()
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # the loop held, as a 10,000-record replay in one piece held it
        await asyncio.sleep(0.05)
        await monitor.stop()
        return monitor.lag().max_ms

    assert asyncio.run(scenario()) >= 250


def test_a_slow_metrics_scrape_does_not_hold_the_loop() -> None:
    """/metrics renders on a worker thread: a collector of 1 s of pure Python (the active
    controller's electable leaders at 100,000 partitions took 1.5 s) leaves the loop turning,
    and the scrape still answers every sample."""
    from typing import Any

    import aiohttp
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector

    from kafkawire.http_status import HttpStatusServer

    class Slow(Collector):
        def collect(self) -> Any:
            family = GaugeMetricFamily("slow_lines", "one per partition", labels=["partition"])
            deadline = time.perf_counter() + 1.0
            partition = 0
            while time.perf_counter() < deadline or partition < 1000:
                if partition < 1000:
                    family.add_metric([str(partition)], partition)
                partition += 1
            yield family

    class Node:
        registry = CollectorRegistry()
        faults = None

        def status(self) -> dict[str, Any]:
            return {}

        def health(self) -> tuple[bool, dict[str, Any]]:
            return True, {}

    Node.registry.register(Slow())

    async def scenario() -> tuple[float, str]:
        server = HttpStatusServer("127.0.0.1", 0, Node())
        port = await server.start()
        gaps: list[float] = []

        async def tick() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticker = asyncio.ensure_future(tick())
        try:
            async with aiohttp.ClientSession() as session, session.get(
                f"http://127.0.0.1:{port}/metrics"
            ) as response:
                body = await response.text()
        finally:
            ticker.cancel()
            await server.stop()
        return max(gaps), body

    longest_gap_s, body = asyncio.run(scenario())
    assert body.count("slow_lines{") == 1000
    assert longest_gap_s < 0.5  # the collector alone runs 1 s
