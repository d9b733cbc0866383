"""`minikraft.disk.mode=power-loss-sim`: a disk that loses what was not fsync'd when the process
dies (chaos scenario `power-loss`).

A real power cut loses the page cache; kill -9 does not (the OS still writes what the process
wrote). In this mode a segment therefore keeps appended bytes in the process and writes them to
the file only when it is flushed (just before its fsync), so SIGKILL loses exactly what no fsync
covered, as a power cut would. Reads see the held bytes, so the node itself behaves as usual.
A clean close writes what is held (the OS would have). Rule 2: everything a node acknowledged
as flushed is in the file before the fsync that made it durable.

The mode is process-wide (one node per process): the node entry point calls
`set_default_disk_mode` with the config value, and every DiskLog opened later follows it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from storage.runtime.fsutil import storage_errors
from storage.runtime.segment import BatchEntry, Segment

DISK_MODE_KEY = "minikraft.disk.mode"
NORMAL = "normal"
POWER_LOSS_SIM = "power-loss-sim"
DISK_MODES = (NORMAL, POWER_LOSS_SIM)

_default_mode = NORMAL


def check_disk_mode(mode: str | None) -> str:
    """The mode named by a config value (None or empty: normal); ValueError names the key."""
    value = (mode or NORMAL).strip()
    if value not in DISK_MODES:
        raise ValueError(f"{DISK_MODE_KEY} must be one of {', '.join(DISK_MODES)}, got {mode!r}")
    return value


def set_default_disk_mode(mode: str | None) -> str:
    global _default_mode
    _default_mode = check_disk_mode(mode)
    return _default_mode


def default_disk_mode() -> str:
    return _default_mode


class HeldSegment(Segment):
    """A segment whose unflushed tail lives in the process until flush() writes and fsyncs it.

    flush() may run in a worker thread while the event loop appends and reads (DiskLog's rule),
    so the held bytes and the file size change only under a lock."""

    def __init__(
        self,
        path: Path,
        base_offset: int,
        fd: int,
        entries: list[BatchEntry],
        preallocate_bytes: int = 0,
    ) -> None:
        super().__init__(path, base_offset, fd, entries, preallocate_bytes)
        self._lock = threading.Lock()
        self._held = bytearray()
        # Bytes of batches in the file (not counting preallocated free space past them).
        self._file_size = self.size_bytes

    @property
    def held_bytes(self) -> int:
        return len(self._held)

    def append(self, raw: bytes, entries: list[BatchEntry]) -> None:
        with self._lock:
            self._held += raw
        self.entries.extend(entries)
        self._last_offsets.extend(entry.last_offset for entry in entries)

    def read(self, position: int, size: int) -> bytes:
        with self._lock:
            end = position + size
            parts = []
            if position < self._file_size:
                file_end = min(end, self._file_size)
                with storage_errors(f"read from segment {self.path}"):
                    parts.append(os.pread(self._fd, file_end - position, position))
            if end > self._file_size:
                start = max(position, self._file_size) - self._file_size
                parts.append(bytes(self._held[start : end - self._file_size]))
            data = b"".join(parts)
        if len(data) != size:
            raise OSError(f"short read from segment {self.path} at byte {position}")
        return data

    def _write_held(self) -> None:
        """Move the held bytes into the file (no fsync); the caller holds the lock."""
        if self._held and self._fd >= 0:
            with storage_errors(f"append to segment {self.path}"):
                self._write_at(bytes(self._held), self._file_size)
            self._file_size += len(self._held)
            self._held.clear()

    def truncate_to_position(self, position: int) -> None:
        with self._lock:
            if position >= self._file_size:
                del self._held[position - self._file_size :]
                return
            self._held.clear()
            self._file_size = position
        super().truncate_to_position(position)

    def trim(self) -> None:
        with self._lock:
            super().trim()

    def flush(self) -> None:
        with self._lock:
            self._write_held()
        super().flush()

    def close(self) -> None:
        with self._lock:
            self._write_held()
        super().close()

    def delete(self) -> None:
        with self._lock:
            self._held.clear()
        super().delete()
