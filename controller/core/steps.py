"""Steps: a controller decision that gives its caller the turn between slices (issue 35).

A decision over a big image (fencing a broker of 100,000 partitions, creating 5,000) is a
generator that yields between slices and returns its ControllerResult; the active controller's
runtime drives it on its event loop and serves Raft's fetches, votes and heartbeats at every
yield (a worker thread would not help: pure Python holds the GIL). Tests and small callers
`drain` it in one go.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")

Steps = Generator[None, None, T]

# Partitions a decision builds a change for between two yields: about 5 ms of
# PartitionChangeBuilder work on an idle core.
SLICE_PARTITIONS = 200
# Partitions it only looks at (and skips) between two yields.
SLICE_SCANNED = 5_000


def drain(steps: Steps[T]) -> T:
    """Run every slice at once; the generator's return value."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
