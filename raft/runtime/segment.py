"""One log segment: a file `<base-offset, 20 digits>.log` of encoded record batches.

The segment keeps an in-memory index of its batches (base offset, last offset, byte position,
size, leader epoch), built when it is opened, so a read seeks straight to the batch holding an
offset. All I/O is raw os-level (O_APPEND writes, pread, ftruncate, fsync): no Python buffering
sits between an append and the fsync that makes it durable (INVARIANTS rule 2).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
from pathlib import Path
from typing import NamedTuple

from raft.core.record_batch import CorruptBatchError, verify_batch
from raft.runtime.fsutil import raise_storage_error, storage_errors, write_all

SEGMENT_SUFFIX = ".log"
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


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

    def __init__(self, path: Path, base_offset: int, fd: int, entries: list[BatchEntry]) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fd = fd
        self.entries = entries
        self._last_offsets = [entry.last_offset for entry in entries]

    @classmethod
    def create(cls, directory: Path, base_offset: int) -> Segment:
        """A new, empty segment file (an existing empty file of that name is reused)."""
        path = directory / segment_file_name(base_offset)
        with storage_errors(f"create segment {path}"):
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            if os.fstat(fd).st_size:
                os.close(fd)
                raise FileExistsError(f"segment {path} already exists and is not empty")
        return cls(path, base_offset, fd, [])

    @classmethod
    def open(
        cls, path: Path, base_offset: int, previous_epoch: int
    ) -> tuple[Segment, CorruptBatchError | None]:
        """Open an existing segment and index it, verifying every batch's CRC. Returns the
        segment indexed up to the first bad batch and that batch's problem (the caller truncates
        there): torn, CRC mismatch, an offset gap, or a leader epoch going backwards."""
        with storage_errors(f"open segment {path}"):
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
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
                problem = exc
                break
            if batch.base_offset != next_offset:
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
        return cls(path, base_offset, fd, entries), problem

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

    def find(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= offset (len(entries) if none)."""
        return bisect.bisect_left(self._last_offsets, offset)

    def append(self, raw: bytes, entries: list[BatchEntry]) -> None:
        """Write already-validated batches; on a failed write the file is cut back so no torn
        bytes sit where the next batch goes."""
        size_before = self.size_bytes
        try:
            write_all(self._fd, raw)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size_before)
            raise_storage_error(exc, f"append to segment {self.path}")
        self.entries.extend(entries)
        self._last_offsets.extend(entry.last_offset for entry in entries)

    def read(self, position: int, size: int) -> bytes:
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

    def truncate_to_position(self, position: int) -> None:
        """Cut the file at a byte position (recovery of a torn or corrupt tail) and fsync it."""
        with storage_errors(f"truncate segment {self.path}"):
            os.ftruncate(self._fd, position)
            os.fsync(self._fd)

    def flush(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise_storage_error(exc, f"fsync of segment {self.path}")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        with storage_errors(f"delete segment {self.path}"), contextlib.suppress(
            FileNotFoundError
        ):
            self.path.unlink()
