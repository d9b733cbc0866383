"""The event loop every node process runs on: uvloop when importable, else asyncio's own."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def install_event_loop_policy() -> str:
    """Make new event loops uvloop loops when uvloop is importable; returns the loop's name."""
    try:
        import uvloop
    except ImportError:
        asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """Run `main` to completion on a fresh uvloop (or asyncio) loop, as asyncio.run does.

    The loop comes from a factory rather than the global policy, so calling this leaves the
    process's policy as it was.
    """
    with asyncio.Runner(debug=debug, loop_factory=new_event_loop) as runner:
        return runner.run(main)


# How long one of a broker's walks over its partitions runs before it gives the loop back (the
# metadata applier's steps, a replica fetcher's round, a Fetch read and its answer, retention
# and the cleaner's search). During a create a broker runs five of them at once (the applier,
# one fetcher per other broker, the answer to each follower's Fetch), each giving the loop
# back to the end of its queue: a timer due meanwhile waits for a whole turn of them, often
# two. With 10 ms each the brokers' loop lag p99 was 87-92 ms at 100,000 partitions; the
# issue asks for under 50 (issue 35). A yield costs one more turn of the loop, tens of us.
WALK_BUDGET_S = 0.003


class LoopBudget:
    """Gives the loop back once `budget_s` of a walk's work ran since the last time: a walk
    over thousands of partitions in one stretch held a node's loop (issue 35)."""

    __slots__ = ("_budget_s", "_until")

    def __init__(self, budget_s: float) -> None:
        self._budget_s = budget_s
        self._until = time.monotonic() + budget_s

    def spent(self) -> bool:
        """Whether the next spend() gives the loop back."""
        return time.monotonic() >= self._until

    async def spend(self) -> None:
        if time.monotonic() >= self._until:
            await asyncio.sleep(0)
            self._until = time.monotonic() + self._budget_s


async def run_sliced(steps: Generator[None, None, T], budget_s: float = WALK_BUDGET_S) -> T:
    """What a generator doing its work in slices returns, the loop given back once `budget_s`
    of its slices ran."""
    budget = LoopBudget(budget_s)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        await budget.spend()


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel the tasks (a None is no task) and wait until each has finished. What they end
    with, CancelledError or a failure, is dropped: this is a stopping component's own work."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    if running:
        await asyncio.gather(*running, return_exceptions=True)


async def serve_until_signalled(
    start: Callable[[], Awaitable[None]],
    stop: Callable[[], Awaitable[None]],
    stopped: asyncio.Event,
) -> None:
    """A node process's life: start, serve until SIGTERM/SIGINT (or `stopped` is set another
    way), then stop, which runs even when start or the wait fails (the clean-shutdown path)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    await start()
    try:
        await stopped.wait()
    finally:
        await stop()
