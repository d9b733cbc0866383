"""Parked long-poll fetches on the Raft leader (Kafka's fetch max wait): each parked fetch
waits on a future of its own, registered before it awaits, and `wake_all` resolves every future
registered so far. A wake can therefore never be lost to a fetch that parks after it, which a
shared asyncio.Event that each parked fetch cleared allowed (raft_driver's history: an observer
waited out its max wait though the high watermark had moved)."""

from __future__ import annotations

import asyncio


class ParkedFetches:
    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()

    async def wait(self, timeout_s: float) -> bool:
        """Park until the next `wake_all` (True) or until timeout_s passes (False)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            return False
        finally:
            self._waiters.discard(waiter)
        return True

    def wake_all(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def __len__(self) -> int:
        return len(self._waiters)
