"""One log segment: a file `<base-offset, 20 digits>.log` of encoded record batches.

The segment keeps an in-memory index of its batches (base offset, last offset, byte position,
size, leader epoch), built when it is opened, so a read seeks straight to the batch holding an
offset. All I/O is raw os-level (pwrite at the segment's end, pread, ftruncate, fsync): no Python
buffering sits between an append and the fsync that makes it durable (INVARIANTS rule 2).

Preallocation (Kafka's `log.preallocate`): the file is extended ahead of the appends, sparsely
by ftruncate, in steps of `preallocate_bytes`. An fsync then has no file size to write back on
most appends, which is what makes it cheaper (BENCHMARKS.md, session 13: 87-99 us against
127-138 us p50 for 1 KiB appends on this VM). The zeros past the last batch are free space to
every reader (storage.core.record_batch.is_free_tail); the segment trims them when it is rolled or
closed, and opening it trims what a killed process left.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
import struct
from pathlib import Path
from typing import NamedTuple

from kafkawire.clock import now_ms
from storage.core.record_batch import CorruptBatchError, is_free_tail, verify_batch
from storage.runtime.fsutil import pwrite_all, raise_storage_error, storage_errors

SEGMENT_SUFFIX = ".log"
# Kafka's suffixes for a segment on its way out or in (LogFileUtils): `.deleted` waits
# file.delete.delay.ms before it is unlinked, `.cleaned` is the log cleaner's output being
# written, `.swap` a cleaned segment about to replace the ones it was cleaned from.
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
# maxTimestamp sits at byte 35 of a batch v2 header (baseOffset 8, length 4, epoch 4, magic 1,
# crc 4, attributes 2, lastOffsetDelta 4, baseTimestamp 8).
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_POSITION = 35


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def parse_segment_file_name(name: str) -> int | None:
    """The base offset a segment file name encodes, or None if it is not a segment file."""
    match = _SEGMENT_NAME.match(name)
    return int(match.group(1)) if match else None


class BatchEntry(NamedTuple):
    base_offset: int
    last_offset: int
    position: int
    size: int
    epoch: int


class Segment:
    """A segment file and the index of its batches. Not thread-safe beyond fsync (see flush)."""

    def __init__(
        self,
        path: Path,
        base_offset: int,
        fd: int,
        entries: list[BatchEntry],
        preallocate_bytes: int = 0,
    ) -> None:
        if preallocate_bytes < 0:
            raise ValueError(f"preallocate_bytes must not be negative, got {preallocate_bytes}")
        self.path = path
        self.base_offset = base_offset
        self._fd = fd
        self.entries = entries
        self._last_offsets = [entry.last_offset for entry in entries]
        self.preallocate_bytes = preallocate_bytes
        # The file's size: size_bytes plus the free space preallocation added past it.
        self.allocated_bytes = self.size_bytes
        # Retention's and the cleaner's view (Kafka's LogSegment.largestTimestamp): the largest
        # batch maxTimestamp, read lazily from the headers of batches not yet looked at.
        self._largest_timestamp_ms = -1
        self._timestamps_read = 0
        self._first_timestamp_ms: int | None = None
        # A lazily created segment: no file (and no file descriptor) until its first write.
        self.pending_create = False
        self._created_ms = 0

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, preallocate_bytes: int = 0, *, lazy: bool = False
    ) -> Segment:
        """A new, empty segment file (an existing empty file of that name is reused). `lazy`:
        the file is created by the first append, so a broker hosting 100,000 empty partitions
        holds no descriptor for them (issue 35; the process's open-file limit is far lower)."""
        path = directory / segment_file_name(base_offset)
        if lazy:
            segment = cls(path, base_offset, -1, [], preallocate_bytes)
            segment.pending_create = True
            segment._created_ms = now_ms()
            return segment
        return cls(path, base_offset, cls._create_file(path), [], preallocate_bytes)

    @staticmethod
    def _create_file(path: Path) -> int:
        with storage_errors(f"create segment {path}"):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(fd).st_size:
                os.close(fd)
                raise FileExistsError(f"segment {path} already exists and is not empty")
        return fd

    @classmethod
    def open(
        cls,
        path: Path,
        base_offset: int,
        previous_epoch: int,
        preallocate_bytes: int = 0,
        *,
        allow_offset_gaps: bool = False,
    ) -> tuple[Segment, CorruptBatchError | None]:
        """Open an existing segment and index it, verifying every batch's CRC. Returns the
        segment indexed up to the first bad batch and that batch's problem (the caller truncates
        there): torn, CRC mismatch, an offset gap (offsets going backwards, with
        `allow_offset_gaps`: a compacted partition log, whose cleaned batches leave gaps as in
        Kafka), or a leader epoch going backwards. Zeros after the last batch are free space a
        preallocating process left, not a problem: they are trimmed here."""
        with storage_errors(f"open segment {path}"):
            fd = os.open(path, os.O_RDWR)
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0) if size else b""
        entries: list[BatchEntry] = []
        problem: CorruptBatchError | None = None
        position = 0
        next_offset = base_offset
        epoch = previous_epoch
        while position < len(data):
            try:
                batch = verify_batch(data, position)  # CRC'd header: records not needed
            except CorruptBatchError as exc:
                if not is_free_tail(data, position):
                    problem = exc
                break
            if batch.base_offset != next_offset and not (
                allow_offset_gaps and batch.base_offset > next_offset
            ):
                problem = CorruptBatchError(
                    position, f"base offset {batch.base_offset}, expected {next_offset}"
                )
                break
            if batch.leader_epoch < epoch:
                problem = CorruptBatchError(
                    position, f"leader epoch {batch.leader_epoch} after epoch {epoch}"
                )
                break
            entries.append(
                BatchEntry(batch.base_offset, batch.last_offset, position, batch.size,
                           batch.leader_epoch)
            )
            epoch = batch.leader_epoch
            next_offset = batch.next_offset
            position += batch.size
        if problem is None and position < size:
            with storage_errors(f"trim free space of segment {path}"):
                os.ftruncate(fd, position)
        return cls(path, base_offset, fd, entries, preallocate_bytes), problem

    @property
    def size_bytes(self) -> int:
        if not self.entries:
            return 0
        last = self.entries[-1]
        return last.position + last.size

    @property
    def next_offset(self) -> int:
        return self.entries[-1].last_offset + 1 if self.entries else self.base_offset

    @property
    def last_epoch(self) -> int | None:
        return self.entries[-1].epoch if self.entries else None

    def largest_timestamp_ms(self) -> int:
        """The largest maxTimestamp of the segment's batches (-1 if none has one); batches
        appended since the last call are read here, 8 bytes each."""
        entries = self.entries
        for entry in entries[self._timestamps_read :]:
            raw = self.read(entry.position + _MAX_TIMESTAMP_POSITION, _MAX_TIMESTAMP.size)
            (timestamp,) = _MAX_TIMESTAMP.unpack(raw)
            if self._first_timestamp_ms is None:
                self._first_timestamp_ms = timestamp
            self._largest_timestamp_ms = max(self._largest_timestamp_ms, timestamp)
        self._timestamps_read = len(entries)
        return self._largest_timestamp_ms

    def first_batch_timestamp_ms(self) -> int | None:
        """The first batch's maxTimestamp (Kafka's rollingBasedTimestamp for segment.ms), None
        while the segment is empty."""
        if self._first_timestamp_ms is None and self.entries:
            self.largest_timestamp_ms()
        return self._first_timestamp_ms

    def last_modified_ms(self) -> int:
        if self.pending_create:
            return self._created_ms  # a lazy segment: when it was made, as a new file's mtime
        with storage_errors(f"stat segment {self.path}"):
            return int(os.stat(self.path).st_mtime * 1000)

    def rename_suffix(self, suffix: str) -> None:
        """Rename the file to `<base>.log<suffix>` and keep it open: readers that captured this
        segment (a fetch in flight, the cleaner) still read it until delete()."""
        target = self.path.with_name(segment_file_name(self.base_offset) + suffix)
        with storage_errors(f"rename segment {self.path} to {target.name}"):
            os.replace(self.path, target)
        self.path = target

    def find(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= offset (len(entries) if none)."""
        return bisect.bisect_left(self._last_offsets, offset)

    def append(self, raw: bytes, entries: list[BatchEntry]) -> None:
        """Write already-validated batches; on a failed write the file is cut back so no torn
        bytes sit where the next batch goes."""
        if self.pending_create:
            self._fd = self._create_file(self.path)
            self.pending_create = False
        size_before = self.size_bytes
        try:
            self._write_at(raw, size_before)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size_before)
            self.allocated_bytes = size_before
            raise_storage_error(exc, f"append to segment {self.path}")
        self.entries.extend(entries)
        self._last_offsets.extend(entry.last_offset for entry in entries)

    def _write_at(self, raw: bytes, position: int) -> None:
        """Write raw at position, first extending the file by a preallocation step if it would
        not fit (an extension covering the whole write, so the fsync after it pays for one size
        change, not one per append)."""
        end = position + len(raw)
        if end > self.allocated_bytes:
            if self.preallocate_bytes:
                allocated = max(end, self.allocated_bytes + self.preallocate_bytes)
                os.ftruncate(self._fd, allocated)
                self.allocated_bytes = allocated
            else:
                self.allocated_bytes = end
        pwrite_all(self._fd, raw, position)

    def trim(self) -> None:
        """Give back the free space preallocation added (on roll and close). Best effort: a
        failed ftruncate leaves zeros every reader takes for free space."""
        if self._fd >= 0 and self.allocated_bytes > self.size_bytes:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self.size_bytes)
                self.allocated_bytes = self.size_bytes

    def read(self, position: int, size: int) -> bytes:
        if self.pending_create and size == 0:
            return b""
        try:
            data = os.pread(self._fd, size, position)
        except OSError as exc:
            raise_storage_error(exc, f"read from segment {self.path}")
        if len(data) != size:
            raise OSError(f"short read from segment {self.path} at byte {position}")
        return data

    def truncate_to_entry(self, index: int) -> None:
        """Cut the file before batch number `index` and fsync it."""
        position = self.entries[index].position if index < len(self.entries) else self.size_bytes
        self.truncate_to_position(position)
        del self.entries[index:]
        del self._last_offsets[index:]
        self._largest_timestamp_ms, self._timestamps_read = -1, 0
        self._first_timestamp_ms = None

    def truncate_to_position(self, position: int) -> None:
        """Cut the file at a byte position (recovery of a torn or corrupt tail) and fsync it."""
        if self.pending_create and position == 0:
            return  # no file yet: nothing to cut
        with storage_errors(f"truncate segment {self.path}"):
            os.ftruncate(self._fd, position)
            self.allocated_bytes = position
            os.fsync(self._fd)

    def flush(self) -> None:
        if self._fd < 0:
            # Deleted (retention, the cleaner's swap) while a flush round held it, or a lazy
            # segment with nothing written: no file to make durable.
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise_storage_error(exc, f"fsync of segment {self.path}")

    def close(self) -> None:
        if self._fd >= 0:
            self.trim()
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        with storage_errors(f"delete segment {self.path}"), contextlib.suppress(
            FileNotFoundError
        ):
            self.path.unlink()
