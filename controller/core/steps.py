"""Steps: a controller decision that gives its caller the turn between slices (issue 35).

A decision over a big image (fencing a broker of 100,000 partitions, creating 5,000) is a
generator that yields between slices and returns its ControllerResult; the active controller's
runtime drives it on its event loop and serves Raft's fetches, votes and heartbeats at every
yield (a worker thread would not help: pure Python holds the GIL). Tests and small callers
`drain` it in one go, or call its `drained` form.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator
from typing import ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

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


def drained(steps: Callable[P, Steps[T]]) -> Callable[P, T]:
    """The one-go form of a decision written as Steps: same arguments, `drain`ed result."""

    @functools.wraps(steps)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return drain(steps(*args, **kwargs))

    return run
