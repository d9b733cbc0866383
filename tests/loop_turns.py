"""Counting the event loop's turns, for tests that show a component gives the loop back (an
fsync in a worker thread, an applier that yields once its budget is spent)."""

from __future__ import annotations

import asyncio
import itertools
from types import TracebackType

TURN = "turn"


class LoopTurns:
    """`async with LoopTurns() as turns:` runs a task that counts one turn each time the loop
    gets to it, until the block ends; `turns.count` is how many it saw. With `marks`, each
    turn also appends TURN to it, among what the code under test appends (turns_between)."""

    def __init__(self, marks: list[str] | None = None) -> None:
        self.count = 0
        self._marks = marks
        self._stopped = False
        self._task: asyncio.Future[None] | None = None

    async def _run(self) -> None:
        while not self._stopped:
            self.count += 1
            if self._marks is not None:
                self._marks.append(TURN)
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


def turns_between(marks: list[str], kind: str, count: int) -> bool:
    """The first `count` marks of `kind` are there, with a loop turn between each two."""
    at = [i for i, mark in enumerate(marks) if mark == kind][:count]
    return len(at) == count and all(TURN in marks[a:b] for a, b in itertools.pairwise(at))
