"""`with log:` for the files a runtime opens (the segmented log, a partition's log, the broker's
event journal): leaving the block closes them, whether it ends or raises."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class ClosedOnExit(ABC):
    """A mixin: `__enter__` gives the object itself, `__exit__` calls its `close()`."""

    @abstractmethod
    def close(self) -> None:
        """Release what the object holds (files, descriptors)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
