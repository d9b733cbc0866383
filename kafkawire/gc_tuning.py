"""Python's cyclic garbage collector in a node that holds a big metadata image (issue 35).

A full (generation 2) collection walks every object the collector tracks: with 100,000
partitions an image is over 100,000 of them on a controller and several times that on a
broker, so one collection held the loop 180-250 ms on an idle core (seconds at this machine's
load), and CPython runs one each time the long-lived objects grew by a quarter: during the
creates, again and again, whatever the loop was doing. The image's objects live until a later
image replaces them and are freed by reference counting then (an image has no cycles), so
walking them finds nothing. What a long-lived Python server does with such a heap (Instagram's
gc.freeze, gunicorn's preload): move it out of the collector's generations once it is built.

`GcFreezer` is a MetadataPublisher, installed last on both node kinds' loader: after a published
change of FREEZE_MIN_RECORDS records or more, or a loaded snapshot, it collects the young
generations (their cyclic garbage is freed, not frozen) and freezes everything else
(`gc.freeze()`, O(1)); and right after every full collection (nothing collectable is left then)
it freezes what survived, so objects a node builds outside a publish are walked by one full
collection, not by every later one. A removed topic may leave cyclic garbage among frozen objects (a broker's
partition state), so a change that removes topics unfreezes, collects everything once and
freezes again. `GcPauses` times every collection (`gc.callbacks`) for /metrics and logs one
that held the process SLOW_COLLECTION_MS or more. The collector's thresholds stay CPython's:
raising them changed a 50,000-partition replay's CPU by nothing measurable (BENCHMARKS.md,
issue 35 session 19).
"""

from __future__ import annotations

import gc
import logging
import time
from collections import deque
from enum import Enum
from typing import Any, Protocol

from kafkawire.loop_lag import stable_copy

log = logging.getLogger("minikraft.gc")

FREEZE_MIN_RECORDS = 1000
SLOW_COLLECTION_MS = 100.0
WINDOW_S = 60.0


class _Manifest(Protocol):
    """metadata.loader.LoaderManifest as this module reads it (kafkawire imports no metadata)."""

    @property
    def records(self) -> int: ...

    @property
    def provenance(self) -> Enum: ...  # Provenance.SNAPSHOT's value is "snapshot"


class _Delta(Protocol):
    @property
    def removed_topics(self) -> Any: ...


# Freezes made in this process (gc.get_freeze_count() walks the whole frozen list: 9.7% of an
# active controller's samples when /v1/status asked it once a second at 20,000 partitions).
_FREEZES = [0]


def freezes() -> int:
    return _FREEZES[0]


def freeze_image() -> None:
    """Collect the young generations, then freeze every object left."""
    gc.collect(1)
    gc.freeze()
    _FREEZES[0] += 1


def refreeze_all() -> None:
    """Unfreeze, collect everything once (cyclic garbage among the frozen objects), freeze."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _FREEZES[0] += 1


def _freeze_after_full_collection(phase: str, info: dict[str, int]) -> None:
    """gc.callbacks: right after a full collection nothing collectable is left, so what
    survived is frozen at once (no garbage frozen with it)."""
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()
        _FREEZES[0] += 1


class GcFreezer:
    """Freezes a node's heap after a big published change, and after every full collection
    once `install()`ed (module docstring)."""

    def __init__(self, min_records: int = FREEZE_MIN_RECORDS) -> None:
        self.min_records = min_records
        self.freezes = 0

    def install(self) -> GcFreezer:
        """Freeze what survives each full collection too: a broker builds most of its
        per-partition state after the publish (fetch sessions, replica state), and full
        collections over it still took 370-430 ms at 20,000 partitions with only the
        freeze after a publish; now each walks what arrived since the last freeze."""
        if _freeze_after_full_collection not in gc.callbacks:
            gc.callbacks.append(_freeze_after_full_collection)
        # And what the node's start built (imported modules, kio's schemas, the node's
        # objects: 116,000 on a broker): its first full collection walked them all, 440 ms in
        # a 20,000-partition run's first create.
        freeze_image()
        return self

    @staticmethod
    def uninstall() -> None:
        if _freeze_after_full_collection in gc.callbacks:
            gc.callbacks.remove(_freeze_after_full_collection)

    @property
    def name(self) -> str:
        return "GcFreezer"

    def freeze(self) -> None:
        """Freeze now, in the middle of a big change (a broker's applier calls it every few
        hundred new partitions): a full collection during the change then walks what was built
        since, not the whole change (issue 35)."""
        freeze_image()
        self.freezes += 1

    def on_metadata_update(self, delta: _Delta, image: Any, manifest: _Manifest) -> None:
        if delta.removed_topics:
            refreeze_all()
        elif manifest.records >= self.min_records or manifest.provenance.value == "snapshot":
            freeze_image()
        else:
            return
        self.freezes += 1
        log.debug("Froze the heap after %s records", manifest.records)


class GcPauses:
    """Each collection's duration by generation (gc.callbacks), kept for the last minute."""

    def __init__(self, window_s: float = WINDOW_S, slow_ms: float = SLOW_COLLECTION_MS) -> None:
        self.window_s = window_s
        self.slow_ms = slow_ms
        self.collections = [0, 0, 0]
        self._started = 0.0
        self._pauses: deque[tuple[float, int, float]] = deque()  # (monotonic end, gen, ms)

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._started = now
            return
        generation = info["generation"]
        pause_ms = (now - self._started) * 1000
        self.collections[generation] += 1
        self._pauses.append((time.monotonic(), generation, pause_ms))
        horizon = time.monotonic() - self.window_s
        while self._pauses and self._pauses[0][0] < horizon:
            self._pauses.popleft()
        if pause_ms >= self.slow_ms:
            log.info(
                "GC generation %s took %.0f ms (%s objects collected)",
                generation, pause_ms, info.get("collected", 0),
            )

    def max_ms(self, generation: int | None = None) -> float:
        """The longest collection of the last minute (of one generation, or any)."""
        horizon = time.monotonic() - self.window_s
        return max(
            (
                ms
                for at, gen, ms in stable_copy(self._pauses)
                if at >= horizon and (generation is None or gen == generation)
            ),
            default=0.0,
        )


# One per process: the collector and its callbacks are the process's.
PAUSES = GcPauses()
