"""Follow the committed metadata log on disk, read-only, a few new bytes per tick.

The audit and chaos read a controller's `__cluster_metadata-0` segments with
storage/runtime/log_reader.py (never writing, safe on a running node); the console does the same
but keeps its place (segment, byte position) so a tick reads only what was appended since the
last one: the nodes pay nothing for it. Only batches wholly below the quorum's high watermark
are applied (committed, so identical on every controller, INVARIANTS rule 2): a follower's
uncommitted tail that it may truncate is never shown. When the log no longer holds the next
offset (deleted behind a snapshot, or that controller's disk was wiped) the latest snapshot is
loaded, or another controller's directory is followed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cluster.console.core.metadata_view import LogEntry, MetadataView
from storage.core.record_batch import CorruptBatchError, RecordBatch, batch_size_at, decode_batch
from storage.runtime.log_reader import segment_files
from storage.runtime.snapshot_file import iter_snapshot_batches, list_snapshots

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 1 << 20
MAX_BYTES_PER_TICK = 16 << 20  # bounded work per tick; a long log is caught up over ticks


class MetadataTail:
    def __init__(self) -> None:
        self.source: Path | None = None
        self.segment: Path | None = None
        self.position = 0

    def _covers(self, directory: Path, offset: int) -> bool:
        segments = segment_files(directory) if directory.is_dir() else []
        return bool(segments) and int(segments[0].stem) <= offset

    def _choose(self, dirs: list[Path], view: MetadataView) -> Path | None:
        if self.source is not None and self._covers(self.source, view.next_offset):
            return self.source
        for directory in dirs:
            if self._covers(directory, view.next_offset):
                return directory
        # No log holds the next offset: start over from the newest snapshot there is.
        best: tuple[int, Path] | None = None
        for directory in dirs:
            if not directory.is_dir():
                continue
            for snapshot in list_snapshots(directory, log):
                if best is None or snapshot.end_offset > best[0]:
                    best = (snapshot.end_offset, directory)
        if best is None:
            return None
        directory = best[1]
        snapshot = max(list_snapshots(directory, log), key=lambda s: s.end_offset)
        view.load_snapshot(snapshot.end_offset, iter_snapshot_batches(directory, snapshot))
        self.segment, self.position = None, 0
        return directory if self._covers(directory, view.next_offset) else None

    def read(self, dirs: list[Path], high_watermark: int, view: MetadataView) -> list[LogEntry]:
        """Apply what was committed since the last call; the new log entries."""
        if view.next_offset == 0 and self.source is None:
            self._bootstrap(dirs, view)
        if high_watermark <= view.next_offset:
            return []
        directory = self._choose(dirs, view)
        if directory is None:
            return []
        if directory != self.source:
            self.source, self.segment, self.position = directory, None, 0
        batches: list[RecordBatch] = []
        budget = MAX_BYTES_PER_TICK
        try:
            self._collect(directory, high_watermark, view.next_offset, batches, budget)
        except OSError as exc:  # a segment deleted under us (a snapshot, a wiped disk)
            log.info("console: metadata log %s: %s", directory, exc)
            self.source = None
        return view.apply(batches)

    def _bootstrap(self, dirs: list[Path], view: MetadataView) -> None:
        """The voter set of a cluster formatted with --initial-controllers lives only in the
        bootstrap snapshot (0-0) until a change is logged: read the lowest snapshot first."""
        for directory in dirs:
            snapshots = list_snapshots(directory, log) if directory.is_dir() else []
            segments = segment_files(directory) if directory.is_dir() else []
            if snapshots and segments:
                first = int(segments[0].stem)
                usable = [s for s in snapshots if s.end_offset >= first]
                if usable:
                    snapshot = min(usable, key=lambda s: s.end_offset)
                    view.load_snapshot(snapshot.end_offset,
                                       iter_snapshot_batches(directory, snapshot))
                    return

    def _collect(
        self, directory: Path, high_watermark: int, next_offset: int,
        batches: list[RecordBatch], budget: int,
    ) -> None:
        segments = segment_files(directory)
        starts = [int(p.stem) for p in segments]
        index = max(i for i, s in enumerate(starts) if s <= next_offset)
        if self.segment is not None and self.segment in segments:
            index = max(index, segments.index(self.segment))
        if self.segment != segments[index]:
            self.segment, self.position = segments[index], 0
        while budget > 0:
            with self.segment.open("rb") as handle:
                handle.seek(self.position)
                data = handle.read(READ_CHUNK_BYTES)
                position = 0
                uncommitted = False
                while True:
                    size = batch_size_at(data, position)
                    if size is not None and size > len(data) - position and position == 0 \
                            and size <= MAX_BYTES_PER_TICK:
                        data += handle.read(size - len(data))
                    try:
                        batch, size = decode_batch(data, position)
                    except CorruptBatchError:
                        break  # the end of what is written (or free space): next tick
                    if batch.next_offset > high_watermark:
                        uncommitted = True  # not committed yet: next tick
                        break
                    position += size
                    if batch.next_offset > next_offset:
                        batches.append(batch)
                        next_offset = batch.next_offset
                self.position += position
                budget -= max(position, 1)
            if uncommitted:
                return
            if position == 0:
                # Nothing more here: move on when a later segment has started.
                if index + 1 < len(segments) and starts[index + 1] <= next_offset:
                    index += 1
                    self.segment, self.position = segments[index], 0
                    continue
                return
