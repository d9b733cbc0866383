"""Fewer garbage collections while the audit's Python passes run (issue 15).

Staging decodes a million records into tuples and lists, and the replay (analytics.rules.
partitions.shards) builds registrations and records per partition record while it holds every
partition's state alive. With CPython's default threshold a collection ran every 700 container
allocations and a full one 18 times per 450k replayed rows: measured with gc.callbacks (session
10), 14% of a staging process's CPU and 11-12% of a replay's. Reference counting frees those objects
as they go; the passes make almost no cycles. So inside `fewer_collections` what exists is
frozen (the imported modules: never traversed again) and a collection runs every
GEN0_ALLOCATIONS allocations: about 1% of the same work. Nested and concurrent uses (the
driver's threads, for a small input) share one setting, restored when the last one ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

GEN0_ALLOCATIONS = 50_000
THRESHOLD = (GEN0_ALLOCATIONS, 20, 100)


class _Setting:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.saved: tuple[int, int, int] = gc.get_threshold()


_SETTING = _Setting()


@contextmanager
def fewer_collections() -> Iterator[None]:
    with _SETTING.lock:
        if _SETTING.users == 0:
            _SETTING.saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(*THRESHOLD)
        _SETTING.users += 1
    try:
        yield
    finally:
        with _SETTING.lock:
            _SETTING.users -= 1
            if _SETTING.users == 0:
                gc.set_threshold(*_SETTING.saved)
                gc.unfreeze()
