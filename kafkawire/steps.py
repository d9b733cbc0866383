"""Steps: work over a big image written as a generator that yields between slices and returns
its result (issue 35). A runtime drives it on its event loop and serves others at every yield
(kafkawire.loop.run_sliced, the active controller's writer); tests and small callers `drain` it
in one go, or call its `drained` form. Pure: both node kinds' cores use it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator
from typing import ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

Steps = Generator[None, None, T]


def drain(steps: Steps[T]) -> T:
    """Run every slice at once; the generator's return value."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


def drained(steps: Callable[P, Steps[T]]) -> Callable[P, T]:
    """The one-go form of work written as Steps: same arguments, `drain`ed result."""

    @functools.wraps(steps)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return drain(steps(*args, **kwargs))

    return run
