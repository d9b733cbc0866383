"""Event-loop lag of a node process: how late a short sleep wakes up, kept for the last minute.

Every node does all its work on one asyncio loop (ARCHITECTURE.md), so a step that holds the loop
(replaying a big metadata batch, opening thousands of partition logs) delays every Raft fetch,
vote and heartbeat behind it; this is the number that shows it (issue 35: a stalled controller
loop lost the quorum its leader). Served on /metrics and /v1/status by kafkawire.http_status.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import TypeVar

from kafkawire.loop import cancel_and_wait

SAMPLE_INTERVAL_S = 0.025
WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class LoopLag:
    max_ms: float
    p99_ms: float
    samples: int


T = TypeVar("T")


def stable_copy(items: deque[T]) -> tuple[T, ...]:
    """A copy of a deque another thread may append to meanwhile (the loop appends the samples
    while /metrics renders on its worker thread; a collection's callback appends its pause
    wherever it runs): "deque mutated during iteration" means copy again."""
    while True:
        try:
            return tuple(items)
        except RuntimeError:
            continue


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of `values` (0.0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(fraction * len(ordered) + 0.999999) - 1))
    return ordered[rank]


class LoopLagMonitor:
    def __init__(
        self, interval_s: float = SAMPLE_INTERVAL_S, window_s: float = WINDOW_S
    ) -> None:
        self.interval_s = interval_s
        self.window_s = window_s
        self._samples: deque[tuple[float, float]] = deque()  # (monotonic time, lag ms)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def record(self, now: float, lag_ms: float) -> None:
        self._samples.append((now, lag_ms))
        horizon = now - self.window_s
        while self._samples and self._samples[0][0] < horizon:
            self._samples.popleft()

    def lag(self, now: float | None = None) -> LoopLag:
        """Max and p99 over the samples of the last `window_s`."""
        horizon = (time.monotonic() if now is None else now) - self.window_s
        values = [lag for at, lag in stable_copy(self._samples) if at >= horizon]
        return LoopLag(
            max_ms=max(values, default=0.0),
            p99_ms=percentile(values, 0.99),
            samples=len(values),
        )

    async def _run(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(self.interval_s)
            after = time.monotonic()
            self.record(after, max(0.0, (after - before - self.interval_s) * 1000))
