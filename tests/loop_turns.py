"""Counting the event loop's turns, for tests that show a component gives the loop back (an
fsync in a worker thread, an applier that yields once its budget is spent)."""

from __future__ import annotations

import asyncio
from types import TracebackType


class LoopTurns:
    """`async with LoopTurns() as turns:` runs a task that counts one turn each time the loop
    gets to it, until the block ends; `turns.count` is how many it saw."""

    def __init__(self) -> None:
        self.count = 0
        self._stopped = False
        self._task: asyncio.Future[None] | None = None

    async def _run(self) -> None:
        while not self._stopped:
            self.count += 1
            await asyncio.sleep(0)

    async def __aenter__(self) -> LoopTurns:
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stopped = True
        assert self._task is not None
        await self._task
