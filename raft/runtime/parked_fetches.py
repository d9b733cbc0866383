"""Long-poll fetches parked until there is news (Kafka's fetch max wait): on the Raft leader
(the metadata log) and on a broker (a partition log). A parked fetch waits on one future of its
own, registered in every group it watches before it awaits, and `wake_all` resolves every future
registered so far. A wake therefore reaches every fetch parked before it and is never lost to a
fetch that parks after it, which a shared asyncio.Event that each parked fetch cleared allowed
(the Raft leader's history: an observer waited out its max wait though the high watermark had
moved)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class ParkedFetches:
    """The fetches parked on one log. The set exists only while a fetch is parked: a broker
    holds two groups for each of 100,000 partitions, nearly all empty (an empty set is 216
    bytes: 40 MiB; issue 35)."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[bool]] | None = None

    def wake_all(self) -> None:
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            _resolve(waiter, True)

    def __len__(self) -> int:
        return len(self._waiters or ())

    def _add(self, waiter: asyncio.Future[bool]) -> None:
        if self._waiters is None:
            self._waiters = set()
        self._waiters.add(waiter)

    def _discard(self, waiter: asyncio.Future[bool]) -> None:
        if self._waiters is not None:
            self._waiters.discard(waiter)
            if not self._waiters:
                self._waiters = None


async def park(groups: Iterable[ParkedFetches], timeout_s: float) -> bool:
    """Wait until one of the groups wakes (True) or timeout_s passes (False). One future and one
    timer however many groups: a broker runs this once per follower fetch on the acks=all path,
    so no task per partition (issue 17)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[bool] = loop.create_future()
    watched = list(groups)
    for group in watched:
        group._add(waiter)
    timer = loop.call_later(max(0.0, timeout_s), _resolve, waiter, False)
    try:
        return await waiter
    finally:
        timer.cancel()
        for group in watched:
            group._discard(waiter)


def _resolve(waiter: asyncio.Future[bool], woken: bool) -> None:
    if not waiter.done():
        waiter.set_result(woken)
