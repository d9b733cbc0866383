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
