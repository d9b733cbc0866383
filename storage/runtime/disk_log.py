"""The Raft log on disk: segments of CRC'd record batches, snapshots, an epoch cache.

DiskLog implements raft.core.replicated_log.ReplicatedLog with the same semantics as the
simulator's MemoryLog. Appends reach the OS (write) but are durable only after `flush()` (fsync);
`flushed_offset()` says how far that goes (INVARIANTS rule 2). Opening recovers: every batch is
CRC-checked, and at the first torn or corrupt batch (or an offset gap, or a leader epoch going
backwards) the segment is cut there and later segments are deleted, with a WARNING naming the
file, byte position and reason. Everything that survives recovery is fsync'd and counts as
flushed.

Disk mode (`disk_mode`, default the process-wide `minikraft.disk.mode`): "power-loss-sim" keeps
unflushed appends in the process (storage/runtime/power_loss.py), so kill -9 loses exactly what no
fsync covered; the chaos scenario `power-loss` relies on it (rules 2 and 23).

Log start offset: `start_offset()` is the first segment's base offset, raised to the latest
snapshot's end offset once the log has been cleaned (`delete_before_snapshot`) or reopened with
that snapshot. Batches below it may still sit in the first segment, but they are not served:
`read`/`read_committed` below it raise ValueError and the epoch cache is clamped to it, as Kafka
does with its logStartOffset.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from storage.core.offset_and_epoch import OffsetAndEpoch, SnapshotId
from storage.core.record_batch import (
    LENGTH_PREFIX_SIZE,
    BatchHeader,
    CorruptBatchError,
    Record,
    RecordBatch,
    batch_size_at,
    decode_batch,
    encode_batch,
    read_header,
    verify_batch,
)
from storage.runtime.closing import ClosedOnExit
from storage.runtime.fsutil import (
    StorageError,
    fsync_dir,
    remove_stale_temp_files,
    storage_error_from,
    storage_errors,
    temp_path_for,
    write_all,
)
from storage.runtime.power_loss import (
    POWER_LOSS_SIM,
    HeldSegment,
    check_disk_mode,
    default_disk_mode,
)
from storage.runtime.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SEGMENT_SUFFIX,
    SWAP_SUFFIX,
    BatchEntry,
    Segment,
    parse_segment_file_name,
    segment_file_name,
)
from storage.runtime.snapshot_file import (
    SNAPSHOT_SUFFIX,
    delete_snapshot,
    list_snapshots,
    read_snapshot_chunk,
    snapshot_path,
    write_snapshot,
)

DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
# How far a preallocating log extends its active segment at a time. Kafka extends to the whole
# log.segment.bytes at once; a step keeps the free space a killed process leaves (which recovery
# and the audit read before trimming) to 1 MiB, and still makes one size change in ~1,000 appends.
PREALLOCATE_STEP_BYTES = 1024 * 1024
RETAINED_SNAPSHOTS = 2

_log = logging.getLogger(__name__)


def _base_offset(segment: Segment) -> int:
    return segment.base_offset


class _PendingBatch:
    __slots__ = ("base_offset", "epoch", "last_offset", "raw")

    def __init__(self, raw: bytes, base_offset: int, last_offset: int, epoch: int) -> None:
        self.raw = raw
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.epoch = epoch


class DiskLog(ClosedOnExit):
    """A segmented Raft log in `directory` (e.g. `<metadata.log.dir>/__cluster_metadata-0`).

    Single-threaded use, except that `flush()` may run in a worker thread while the event loop
    appends: it captures the end offset before its fsyncs and only claims that much. Truncation,
    snapshot installation and cleaning must not run concurrently with a flush.
    """

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        logger: logging.Logger | None = None,
        disk_mode: str | None = None,
        preallocate: bool = False,
        allow_offset_gaps: bool = False,
        lazy: bool = False,
        new: bool = False,
    ) -> None:
        """`new` (with `lazy`): the caller knows the directory does not exist (a broker's
        partition it just became a replica of, whose name it freed): not looked for."""
        if segment_bytes < 1:
            raise ValueError(f"segment_bytes must be positive, got {segment_bytes}")
        # The caller's Path as it is: one more per partition log is 100,000 at scale (issue 35).
        self.directory = directory if isinstance(directory, Path) else Path(directory)
        self.segment_bytes = segment_bytes
        # log.preallocate: extend the active segment ahead of its appends (storage.runtime.segment)
        # in steps no larger than a segment.
        self._preallocate_bytes = min(PREALLOCATE_STEP_BYTES, segment_bytes) if preallocate else 0
        self._logger = logger or _log
        # A broker partition log: compaction leaves offset gaps (raft's log never has one).
        self.allow_offset_gaps = allow_offset_gaps
        self.disk_mode = check_disk_mode(disk_mode or default_disk_mode())
        self._segment_class = HeldSegment if self.disk_mode == POWER_LOSS_SIM else Segment
        self._segments: list[Segment] = []
        self._unflushed: set[Segment] = set()
        self._directory_dirty = False
        self._snapshots: list[SnapshotId] = []
        # (leader epoch, first offset of that epoch), derived from the batches on disk.
        self._epochs: list[tuple[int, int]] = []
        self._log_start_offset = 0
        self._flushed_offset = 0
        self._failure: StorageError | None = None
        self._closed = False
        # lazy: a new, empty log creates its first segment file at its first append, and its
        # directory is fsync'd with that append's flush (issue 35: a broker creating 10,000
        # partition logs paid two fsyncs and a descriptor for each).
        self._lazy = lazy and self._segment_class is Segment
        # A lazy log whose directory did not exist: created by the first write (issue 35: a
        # broker becoming a replica of 100,000 partitions made 100,000 directories).
        self.directory_pending = False
        self._open(new)

    # ---- opening and recovery ----

    def reconfigure(self, segment_bytes: int, preallocate: bool) -> None:
        """New roll size and preallocation for the segments created from now on."""
        if segment_bytes < 1:
            raise ValueError(f"segment_bytes must be positive, got {segment_bytes}")
        self.segment_bytes = segment_bytes
        self._preallocate_bytes = min(PREALLOCATE_STEP_BYTES, segment_bytes) if preallocate else 0

    def _open(self, new: bool = False) -> None:
        if self._lazy and (new or not self.directory.exists()):
            # A new log: nothing on disk to recover, nothing created until the first write.
            self._segments.append(self._create_segment(0, lazy=True))
            self._directory_dirty = True
            self.directory_pending = True
            return
        with storage_errors(f"open log directory {self.directory}"):
            self.directory.mkdir(parents=True, exist_ok=True)
        remove_stale_temp_files(self.directory, SNAPSHOT_SUFFIX)
        self._snapshots = list_snapshots(self.directory, self._logger)
        self._complete_swaps()
        self._recover_segments()
        latest = self.latest_snapshot_id()
        if not self._segments:
            base_offset = latest.end_offset if latest is not None else 0
            self._segments.append(self._create_segment(base_offset, lazy=self._lazy))
            self._directory_dirty = True
        self._rebuild_epoch_cache()
        if latest is not None and self._snapshot_ahead_of_log(latest):
            # A follower crashed after writing a fetched snapshot but before emptying its log.
            self._logger.warning(
                "Log %s ends at offset %d (epoch %d) behind snapshot %s: restarting the log at "
                "offset %d", self.directory, self.end_offset(), self._last_log_epoch(), latest,
                latest.end_offset,
            )
            self._restart_at(latest.end_offset)
        self._log_start_offset = self._segments[0].base_offset
        if latest is not None and self._log_start_offset < latest.end_offset <= self.end_offset():
            self._log_start_offset = latest.end_offset
        uncovered = latest is None or latest.end_offset < self._log_start_offset
        if self._log_start_offset > 0 and uncovered:
            self._logger.warning(
                "Log %s starts at offset %d but no valid snapshot covers the offsets below it",
                self.directory, self._log_start_offset,
            )
        for segment in self._segments:
            segment.flush()
        if self._directory_dirty and not self._segments[-1].pending_create:
            fsync_dir(self.directory)
            self._directory_dirty = False
        self._flushed_offset = self.end_offset()

    def _complete_swaps(self) -> None:
        """Kafka's LogLoader for a crash during deletion or cleaning: `.deleted` files go (their
        deletion was decided), `.cleaned` files go (a swap never started), and a `.swap` file
        replaces every segment whose offsets it covers, then becomes a segment: it was fsynced
        before it was renamed to `.swap`, so it is complete."""
        with storage_errors(f"list log directory {self.directory}"):
            names = sorted(entry.name for entry in self.directory.iterdir())
        swaps = []
        for name in names:
            path = self.directory / name
            if name.endswith(SEGMENT_SUFFIX + DELETED_SUFFIX) or name.endswith(
                SEGMENT_SUFFIX + CLEANED_SUFFIX
            ):
                self._delete_files([path])
            elif name.endswith(SEGMENT_SUFFIX + SWAP_SUFFIX):
                base = parse_segment_file_name(name[: -len(SWAP_SUFFIX)])
                if base is not None:
                    swaps.append((base, path))
        for base, path in swaps:
            last = _last_offset_in_file(path)
            for name in names:
                other = parse_segment_file_name(name)
                if other is not None and base <= other <= last:
                    self._delete_files([self.directory / name])
            final = self.directory / segment_file_name(base)
            with storage_errors(f"complete swap {path}"):
                path.replace(final)
            self._directory_dirty = True
            self._logger.warning("Log recovery: completed the swap of cleaned segment %s", final.name)

    def _recover_segments(self) -> None:
        found = sorted(
            (base_offset, entry)
            for entry in self.directory.iterdir()
            if (base_offset := parse_segment_file_name(entry.name)) is not None
        )
        expected_offset: int | None = None
        previous_epoch = -1
        for index, (base_offset, path) in enumerate(found):
            if expected_offset is not None and base_offset != expected_offset and not (
                self.allow_offset_gaps and base_offset > expected_offset
            ):
                self._logger.warning(
                    "Log recovery: segment %s starts at offset %d, expected %d: deleting it and "
                    "%d later segment(s)", path, base_offset, expected_offset,
                    len(found) - index - 1,
                )
                self._delete_files([p for _, p in found[index:]])
                return
            segment, problem = self._segment_class.open(
                path, base_offset, previous_epoch, self._preallocate_bytes,
                allow_offset_gaps=self.allow_offset_gaps,
            )
            self._segments.append(segment)
            if problem is not None:
                later = [p for _, p in found[index + 1 :]]
                self._logger.warning(
                    "Log recovery: truncating %s at byte %d (%s); keeping offsets below %d, "
                    "deleting %d later segment(s)", path, problem.position, problem.reason,
                    segment.next_offset, len(later),
                )
                segment.truncate_to_position(problem.position)
                self._delete_files(later)
                return
            expected_offset = segment.next_offset
            if segment.last_epoch is not None:
                previous_epoch = segment.last_epoch

    def _delete_files(self, paths: list[Path]) -> None:
        for path in paths:
            with storage_errors(f"delete segment {path}"):
                path.unlink(missing_ok=True)
        if paths:
            self._directory_dirty = True

    def _snapshot_ahead_of_log(self, snapshot_id: SnapshotId) -> bool:
        """Kafka's truncateToLatestSnapshot test, made exact: the snapshot ends past the log, or
        the log's last epoch is older than the snapshot's, or the log's entry just below the
        snapshot end has another epoch. The log then disagrees with committed state (rule 2)."""
        if snapshot_id.end_offset > self.end_offset():
            return True
        if self._epochs and self._epochs[-1][0] < snapshot_id.epoch:
            return True
        epoch_at_end = self._epoch_of(snapshot_id.end_offset - 1)
        return epoch_at_end is not None and epoch_at_end != snapshot_id.epoch

    def _last_log_epoch(self) -> int:
        return self._epochs[-1][0] if self._epochs else 0

    def _restart_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at offset (durably)."""
        for segment in self._segments:
            segment.delete()
        self._segments = [self._create_segment(offset)]
        self._unflushed.clear()
        fsync_dir(self.directory)
        self._directory_dirty = False
        self._log_start_offset = offset
        self._flushed_offset = offset
        self._epochs = []

    def _delete_segments(self, doomed: list[Segment]) -> None:
        """Delete segments already out of the list, durably (their directory entries too)."""
        for dead in doomed:
            dead.delete()
            self._unflushed.discard(dead)
        if doomed:
            fsync_dir(self.directory)

    def _rebuild_epoch_cache(self) -> None:
        epochs: list[tuple[int, int]] = []
        for segment in self._segments:
            for entry in segment.entries:
                if not epochs or entry.epoch > epochs[-1][0]:
                    epochs.append((entry.epoch, entry.base_offset))
        self._epochs = epochs

    # ---- guards ----

    def _check_usable(self) -> None:
        if self._closed:
            raise ValueError(f"log {self.directory} is closed")
        if self._failure is not None:
            raise self._failure

    @contextlib.contextmanager
    def _fail_on_storage_error(self, action: str) -> Iterator[None]:
        """A failed write or fsync leaves the files in an unknown state: the log goes offline
        (every later call raises the same StorageError), as Kafka takes a log dir offline."""
        try:
            yield
        except (StorageError, OSError) as exc:
            self._go_offline(exc, action)

    def _go_offline(self, exc: StorageError | OSError, action: str) -> NoReturn:
        """_fail_on_storage_error's body, for the append and flush paths that run per produce
        and catch inline (a generator context manager per call costs more than the write)."""
        if isinstance(exc, StorageError):
            self._failure = exc
            raise exc
        self._failure = storage_error_from(exc, action)
        raise self._failure from exc

    # ---- ReplicatedLog ----

    def start_offset(self) -> int:
        return self._log_start_offset

    def end_offset(self) -> int:
        return self._segments[-1].next_offset

    def flushed_offset(self) -> int:
        return self._flushed_offset

    def last_fetched_epoch(self) -> int:
        if self._epochs:
            return self._epochs[-1][0]
        latest = self.latest_snapshot_id()
        return latest.epoch if latest is not None else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        epochs = self._visible_epochs()
        index = bisect.bisect_right([known for known, _start in epochs], epoch) - 1
        if index < 0:
            return OffsetAndEpoch(self._log_start_offset, self._epoch_before_start())
        found_epoch, _start = epochs[index]
        end = epochs[index + 1][1] if index + 1 < len(epochs) else self.end_offset()
        return OffsetAndEpoch(end, found_epoch)

    def _visible_epochs(self) -> list[tuple[int, int]]:
        """The epoch cache clamped to the log start offset (Kafka's truncateFromStart)."""
        start = self._log_start_offset
        if start >= self.end_offset():
            return []
        visible: list[tuple[int, int]] = []
        for epoch, epoch_start in self._epochs:
            if epoch_start <= start:
                visible = [(epoch, start)]
            else:
                visible.append((epoch, epoch_start))
        return visible

    def _epoch_before_start(self) -> int:
        """Epoch of the entry just below the log start: the snapshot's ending there, else 0."""
        for snapshot_id in reversed(self._snapshots):
            if snapshot_id.end_offset == self._log_start_offset:
                return snapshot_id.epoch
        return 0

    def read(self, start_offset: int, max_bytes: int, *, min_one_batch: bool = True) -> bytes:
        """Whole batches from the one holding start_offset, at most max_bytes in all; with
        min_one_batch the first batch comes whatever its size (Kafka's minOneMessage), without
        it a first batch larger than max_bytes gives nothing."""
        self._check_readable(start_offset)
        if start_offset >= self.end_offset():
            return b""
        ranges: list[tuple[Segment, int, int]] = []
        total = 0
        first_segment = self._segment_index(start_offset)
        for segment_index in range(first_segment, len(self._segments)):
            segment = self._segments[segment_index]
            index = segment.find(start_offset) if segment_index == first_segment else 0
            begin: int | None = None
            end = 0
            full = False
            for entry in segment.entries[index:]:
                if (total or not min_one_batch) and total + entry.size > max_bytes:
                    full = True
                    break
                if begin is None:
                    begin = entry.position
                end = entry.position + entry.size
                total += entry.size
            if begin is not None:
                ranges.append((segment, begin, end - begin))
            if full:
                break
        return b"".join(segment.read(position, size) for segment, position, size in ranges)

    def read_committed(self, from_offset: int, to_offset: int) -> Iterator[RecordBatch]:
        """Decoded whole batches holding offsets in [from_offset, to_offset): the first one
        contains from_offset, and a batch is yielded only if its last offset is below to_offset
        (a batch straddling to_offset is not committed yet). Raft's high watermark always sits
        on a batch boundary, so passing it as to_offset loses nothing. The bytes are all read
        by the call and each batch is decoded as it is taken: a caller decoding them in slices
        (the Raft applier) reads what the log held then, whatever replaces it meanwhile."""
        self._check_readable(from_offset)
        raw: list[bytes] = []
        if from_offset < min(to_offset, self.end_offset()):
            first_segment = self._segment_index(from_offset)
            for segment_index in range(first_segment, len(self._segments)):
                segment = self._segments[segment_index]
                index = segment.find(from_offset) if segment_index == first_segment else 0
                for entry in segment.entries[index:]:
                    if entry.last_offset >= to_offset:
                        break
                    raw.append(segment.read(entry.position, entry.size))
                else:
                    continue
                break
        return (decode_batch(data)[0] for data in raw)

    def _check_readable(self, offset: int) -> None:
        if self._closed:
            raise ValueError(f"log {self.directory} is closed")
        if offset < self._log_start_offset:
            raise ValueError(
                f"offset {offset} is below the log start offset {self._log_start_offset}"
            )

    def _segment_index(self, offset: int) -> int:
        bases = [segment.base_offset for segment in self._segments]
        return max(0, bisect.bisect_right(bases, offset) - 1)

    def append_as_leader(
        self,
        records: Sequence[Record] | Sequence[bytes],
        epoch: int,
        timestamp_ms: int,
        is_control: bool = False,
    ) -> OffsetAndEpoch:
        self._check_usable()
        last_epoch = self._epochs[-1][0] if self._epochs else -1
        if epoch < last_epoch:
            raise ValueError(
                f"append in epoch {epoch} after epoch {last_epoch} in {self.directory}"
            )
        base_offset = self.end_offset()
        raw = encode_batch(base_offset, epoch, timestamp_ms, records, is_control)
        last_offset = base_offset + len(records) - 1
        self._append_batches([_PendingBatch(raw, base_offset, last_offset, epoch)])
        return OffsetAndEpoch(last_offset, epoch)

    def append_as_follower(self, raw_batches: bytes) -> int:
        self.append_batches(raw_batches)
        return self.end_offset()

    def append_batches(self, raw_batches: bytes, *, crc_checked: bool = False) -> list[BatchHeader]:
        """Append batches that already carry their offsets (a follower's fetch, or a leader's
        stamped produce); their headers, so the caller need not parse them again.
        `crc_checked`: the caller has just verified every batch's CRC (a leader's LogValidator
        pass), so only lengths, offsets and epochs are checked here."""
        self._check_usable()
        headers: list[BatchHeader] = []
        header_of = read_header if crc_checked else verify_batch
        pending: list[_PendingBatch] = []
        position = 0
        expected_offset = self.end_offset()
        epoch = self._epochs[-1][0] if self._epochs else -1
        view = memoryview(raw_batches)
        # Validate everything first, so a bad batch leaves the log untouched.
        while position < len(view):
            batch = header_of(view, position)  # the header only: records not needed
            size = batch.size
            if batch.base_offset != expected_offset and not (
                self.allow_offset_gaps and batch.base_offset > expected_offset
            ):
                raise ValueError(
                    f"fetched batch at byte {position} starts at offset {batch.base_offset}, "
                    f"expected {expected_offset} in {self.directory}"
                )
            if batch.leader_epoch < epoch:
                raise ValueError(
                    f"fetched batch at offset {batch.base_offset} has epoch {batch.leader_epoch} "
                    f"after epoch {epoch} in {self.directory}"
                )
            raw = (
                raw_batches
                if size == len(view) and isinstance(raw_batches, bytes)
                else bytes(view[position : position + size])
            )
            pending.append(_PendingBatch(raw, batch.base_offset, batch.last_offset, batch.leader_epoch))
            headers.append(batch)
            epoch = batch.leader_epoch
            expected_offset = batch.next_offset
            position += size
        if pending:
            self._append_batches(pending)
        return headers

    def _append_batches(self, batches: list[_PendingBatch]) -> None:
        """Write batches to the active segment, rolling to a new one past segment_bytes."""
        try:
            self._write_batches(batches)
        except (StorageError, OSError) as exc:
            self._go_offline(exc, f"append to log {self.directory}")

    def ensure_directory(self) -> None:
        """Create the directory of a lazy log that has none yet (its first write does too)."""
        if self.directory_pending:
            with storage_errors(f"create log directory {self.directory}"):
                self.directory.mkdir(parents=True, exist_ok=True)
            self.directory_pending = False

    def _write_batches(self, batches: list[_PendingBatch]) -> None:
        self.ensure_directory()
        segment = self._segments[-1]
        position = segment.size_bytes
        chunk: list[bytes] = []
        entries: list[BatchEntry] = []
        for batch in batches:
            size = len(batch.raw)
            if position and position + size > self.segment_bytes:
                if chunk:
                    self._write(segment, chunk, entries)
                    chunk, entries = [], []
                segment = self._roll()
                position = 0
            chunk.append(batch.raw)
            entries.append(
                BatchEntry(batch.base_offset, batch.last_offset, position, size, batch.epoch)
            )
            position += size
        if chunk:
            self._write(segment, chunk, entries)

    def _write(self, segment: Segment, chunk: list[bytes], entries: list[BatchEntry]) -> None:
        segment.append(b"".join(chunk), entries)
        self._unflushed.add(segment)
        for entry in entries:
            if not self._epochs or entry.epoch > self._epochs[-1][0]:
                self._epochs.append((entry.epoch, entry.base_offset))

    def _create_segment(self, base_offset: int, *, lazy: bool = False) -> Segment:
        if lazy:
            return Segment.create(self.directory, base_offset, self._preallocate_bytes, lazy=True)
        return self._segment_class.create(self.directory, base_offset, self._preallocate_bytes)

    def _roll(self) -> Segment:
        self._segments[-1].trim()  # a sealed segment keeps no free space
        segment = self._create_segment(self.end_offset())
        self._segments.append(segment)
        self._directory_dirty = True
        self._logger.debug("Rolled log %s to segment %s", self.directory, segment.path.name)
        return segment

    def truncate_to(self, offset: int) -> None:
        self._check_usable()
        if offset < self._log_start_offset:
            raise ValueError(
                f"cannot truncate {self.directory} to {offset}, below the log start offset "
                f"{self._log_start_offset}"
            )
        latest = self.latest_snapshot_id()
        if latest is not None and offset < latest.end_offset:
            raise ValueError(
                f"cannot truncate {self.directory} to {offset}, below snapshot {latest} "
                "(committed state, INVARIANTS rule 2)"
            )
        if offset >= self.end_offset():
            return
        segment_index = self._segment_index(offset)
        segment = self._segments[segment_index]
        index = segment.find(offset)
        while index == len(segment.entries) and segment_index + 1 < len(self._segments):
            # A compacted log's gap at a segment's end: the cut falls before the next segment.
            segment_index += 1
            segment = self._segments[segment_index]
            index = 0
        if index == len(segment.entries):
            return
        entry = segment.entries[index]
        with self._fail_on_storage_error(f"truncate log {self.directory}"):
            if entry.base_offset > offset and self.allow_offset_gaps:
                pass  # the cut falls in a compaction gap: everything below offset stays
            elif entry.base_offset != offset:
                if offset == self._log_start_offset:
                    # The start is a snapshot's end inside a batch: the snapshot covers the rest.
                    self._restart_at(offset)
                    return
                raise ValueError(
                    f"cannot truncate {self.directory} to {offset}: inside batch "
                    f"{entry.base_offset}..{entry.last_offset}, not on a batch boundary"
                )
            if index == 0 and segment_index > 0:
                doomed = self._segments[segment_index:]
                self._segments = self._segments[:segment_index]
            else:
                doomed = self._segments[segment_index + 1 :]
                self._segments = self._segments[: segment_index + 1]
                segment.truncate_to_entry(index)
            self._delete_segments(doomed)
        self._flushed_offset = min(self._flushed_offset, offset)
        self._rebuild_epoch_cache()
        self._logger.info("Truncated log %s to offset %d", self.directory, offset)

    def flush(self, *, sync: bool = True) -> None:
        self._check_usable()
        target = self.end_offset()
        if not sync:
            # minikraft.raft.fsync=false (benchmarks only): count the appends as flushed with no
            # fsync, which gives up rule 2 on power loss; the next sync flush still fsyncs them.
            self._flushed_offset = max(self._flushed_offset, target)
            return
        if not self._unflushed and not self._directory_dirty and self._flushed_offset >= target:
            return  # nothing appended since the last fsync
        if self._segments[-1].pending_create and len(self._segments) == 1:
            return  # a lazy log not written yet: no file, the directory waits for the first
        pending, self._unflushed = self._unflushed, set()
        pending.add(self._segments[-1])
        directory_dirty, self._directory_dirty = self._directory_dirty, False
        try:
            for segment in sorted(pending, key=_base_offset) if len(pending) > 1 else pending:
                segment.flush()
            if directory_dirty:
                fsync_dir(self.directory)
        except (StorageError, OSError) as exc:
            self._go_offline(exc, f"flush log {self.directory}")
        self._flushed_offset = max(self._flushed_offset, min(target, self.end_offset()))

    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._snapshots[-1] if self._snapshots else None

    def snapshot_ids(self) -> list[SnapshotId]:
        """The valid snapshots on disk, oldest first."""
        return list(self._snapshots)

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int]:
        if snapshot_id not in self._snapshots:
            raise KeyError(snapshot_id)
        return read_snapshot_chunk(self.directory, snapshot_id, position, max_bytes)

    def create_snapshot(self, snapshot_id: SnapshotId, raw_batches: bytes) -> None:
        self._check_snapshot(snapshot_id)
        with self._fail_on_storage_error(f"write snapshot {snapshot_id} in {self.directory}"):
            write_snapshot(self.directory, snapshot_id, raw_batches)
        self._add_snapshot(snapshot_id)
        self._retain_snapshots()

    def create_snapshot_steps(
        self, snapshot_id: SnapshotId, chunks: Iterable[bytes]
    ) -> Iterator[None]:
        """create_snapshot of raw batches given one chunk at a time, yielding after each: every
        chunk is verified (CRC32C) and written to a temp file, then fsync'd, checked against the
        log again (it may have moved while the caller served other work between the slices)
        and renamed into place; a snapshot the log no longer takes is dropped (issue 35: a
        100,000-partition snapshot held a node's loop for a second)."""
        self._check_snapshot(snapshot_id)
        path = snapshot_path(self.directory, snapshot_id)
        temp = temp_path_for(path)
        action = f"write snapshot {snapshot_id} in {self.directory}"
        written = False
        try:
            with self._fail_on_storage_error(action):
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                for chunk in chunks:
                    # Each batch's length, magic and CRC (Kafka's ensureValid), records left
                    # undecoded: decoding them all was a tenth of a 100,000-partition
                    # snapshot's cost (issue 35). Raises CorruptBatchError.
                    position = 0
                    while position < len(chunk):
                        position += verify_batch(chunk, position).size
                        written = True
                    with self._fail_on_storage_error(action):
                        write_all(fd, chunk)
                    yield
                if not written:
                    raise CorruptBatchError(0, "snapshot holds no record batch")
                with self._fail_on_storage_error(action):
                    os.fsync(fd)
            finally:
                os.close(fd)
            latest = self.latest_snapshot_id()
            if latest is not None and latest >= snapshot_id:
                return  # a snapshot as new arrived meanwhile (fetched from the leader)
            self._check_snapshot(snapshot_id)
            with self._fail_on_storage_error(action):
                os.replace(temp, path)
                fsync_dir(self.directory)
        finally:
            with contextlib.suppress(OSError):
                temp.unlink()
        self._add_snapshot(snapshot_id)
        self._retain_snapshots()

    def _check_snapshot(self, snapshot_id: SnapshotId) -> None:
        self._check_usable()
        if snapshot_id.end_offset > self.end_offset():
            raise ValueError(
                f"snapshot {snapshot_id} ends past the log end offset {self.end_offset()}"
            )
        if snapshot_id.end_offset < self._log_start_offset:
            raise ValueError(
                f"snapshot {snapshot_id} ends below the log start offset {self._log_start_offset}"
            )
        actual_epoch = self._epoch_of(snapshot_id.end_offset - 1)
        if actual_epoch is not None and actual_epoch != snapshot_id.epoch:
            raise ValueError(
                f"snapshot {snapshot_id}: entry {snapshot_id.end_offset - 1} has epoch "
                f"{actual_epoch} in {self.directory}"
            )

    def _epoch_of(self, offset: int) -> int | None:
        """Epoch of the batch holding offset, if it is in the log (even below the start)."""
        if offset < 0 or offset >= self.end_offset():
            return None
        index = bisect.bisect_right([start for _epoch, start in self._epochs], offset)
        return self._epochs[index - 1][0] if index > 0 else None

    def install_snapshot(self, snapshot_id: SnapshotId, raw_batches: bytes) -> None:
        self._check_usable()
        with self._fail_on_storage_error(f"install snapshot {snapshot_id} in {self.directory}"):
            # The snapshot is durable before the log is emptied; a crash in between is repaired
            # on open (_snapshot_ahead_of_log).
            write_snapshot(self.directory, snapshot_id, raw_batches)
            for newer in [s for s in self._snapshots if s > snapshot_id]:
                delete_snapshot(self.directory, newer)
                self._snapshots.remove(newer)
            self._add_snapshot(snapshot_id)
            self._restart_at(snapshot_id.end_offset)
        self._retain_snapshots()
        self._logger.info(
            "Installed snapshot %s in %s; the log restarts at offset %d",
            snapshot_id, self.directory, snapshot_id.end_offset,
        )

    def delete_before_snapshot(self) -> None:
        self._check_usable()
        latest = self.latest_snapshot_id()
        if latest is None:
            return
        target = min(latest.end_offset, self.end_offset())
        doomed: list[Segment] = []
        # A segment is wholly below target when the next one starts at or before it; the
        # active segment is never deleted.
        while len(self._segments) > 1 and self._segments[1].base_offset <= target:
            doomed.append(self._segments.pop(0))
        with self._fail_on_storage_error(f"clean log {self.directory}"):
            self._delete_segments(doomed)
        self._log_start_offset = max(self._log_start_offset, target)
        self._retain_snapshots()

    def _add_snapshot(self, snapshot_id: SnapshotId) -> None:
        if snapshot_id not in self._snapshots:
            bisect.insort(self._snapshots, snapshot_id)

    def _retain_snapshots(self) -> None:
        """Keep the latest two snapshots, and any that the log start still depends on."""
        for old in self._snapshots[:-RETAINED_SNAPSHOTS]:
            if old.end_offset < self._log_start_offset:
                with self._fail_on_storage_error(f"delete snapshot {old} in {self.directory}"):
                    delete_snapshot(self.directory, old)
                self._snapshots.remove(old)

    # ---- retention and cleaning (broker partition logs) ----

    def segments(self) -> list[Segment]:
        """The segments, oldest first; the last is the active one. Callers must not change
        them: retention and the cleaner go through the methods below."""
        return list(self._segments)

    def roll(self) -> Segment:
        """Close the active segment and start a new one at the log end (Kafka's roll, for
        segment.ms and for a retention that deletes every segment); an empty active segment is
        kept as it is."""
        self._check_usable()
        if not self._segments[-1].entries:
            return self._segments[-1]
        with self._fail_on_storage_error(f"roll log {self.directory}"):
            return self._roll()

    def active_first_timestamp_ms(self) -> int | None:
        """The active segment's first batch maxTimestamp (None while it is empty): segment.ms."""
        return self._segments[-1].first_batch_timestamp_ms()

    def active_modified_ms(self) -> int:
        return self._segments[-1].last_modified_ms()

    def remove_oldest_segments(self, count: int) -> list[Segment]:
        """Take the oldest `count` segments out of the log (never the last one) and rename
        their files to `.deleted` (Kafka's asyncDelete); the log start moves to the next
        segment's base offset. The caller deletes them after file.delete.delay.ms."""
        self._check_usable()
        count = min(count, len(self._segments) - 1)
        if count <= 0:
            return []
        doomed = self._segments[:count]
        with self._fail_on_storage_error(f"delete segments of {self.directory}"):
            for segment in doomed:
                segment.rename_suffix(DELETED_SUFFIX)
                self._unflushed.discard(segment)
            fsync_dir(self.directory)
        self._segments = self._segments[count:]
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        return doomed

    def replace_segments(self, cleaned: Segment, old: Sequence[Segment]) -> list[Segment]:
        """Swap a cleaned segment file in for `old` (consecutive segments, not the active one),
        crash-safely as Kafka's replaceSegments: the fsynced `.cleaned` file is renamed to
        `.swap`, the old segments to `.deleted`, then the swap file takes the first one's name
        (log recovery completes a swap cut short at any step). Returns the old segments for
        the caller to delete after file.delete.delay.ms."""
        self._check_usable()
        first = next((i for i, s in enumerate(self._segments) if s is old[0]), -1)
        in_place = self._segments[first : first + len(old)]
        if (
            first < 0
            or len(in_place) != len(old)
            or any(a is not b for a, b in zip(in_place, old, strict=True))
            or first + len(old) >= len(self._segments)
            or cleaned.base_offset != old[0].base_offset
        ):
            raise ValueError(f"segments to replace in {self.directory} changed meanwhile")
        with self._fail_on_storage_error(f"swap cleaned segment into {self.directory}"):
            cleaned.rename_suffix(SWAP_SUFFIX)
            fsync_dir(self.directory)
            for segment in old:
                segment.rename_suffix(DELETED_SUFFIX)
                self._unflushed.discard(segment)
            cleaned.rename_suffix("")
            fsync_dir(self.directory)
        self._segments[first : first + len(old)] = [cleaned]
        return list(old)

    # ---- lifecycle ----

    @property
    def unwritten(self) -> bool:
        """A lazy log whose first segment file is not created yet (nothing appended)."""
        return len(self._segments) == 1 and self._segments[0].pending_create

    def segment_count(self) -> int:
        return len(self._segments)

    def segment_paths(self) -> list[Path]:
        return [segment.path for segment in self._segments]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for segment in self._segments:
            segment.close()



def _last_offset_in_file(path: Path) -> int:
    """The last offset of the last whole batch in a segment file (its base offset if none)."""
    with storage_errors(f"read {path}"):
        data = path.read_bytes()
    last = parse_segment_file_name(path.name[: path.name.index(SEGMENT_SUFFIX)] + SEGMENT_SUFFIX)
    last = last or 0
    position = 0
    while position + LENGTH_PREFIX_SIZE <= len(data):
        size = batch_size_at(data, position)
        if size is None or position + size > len(data):
            break
        try:
            last = read_header(data, position).last_offset
        except CorruptBatchError:
            break
        position += size
    return last
