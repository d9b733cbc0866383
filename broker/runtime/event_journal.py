"""The broker's event journal on disk: an append-only stream of msgpack maps, one per event.

Lives outside every data directory (the caller gives the path), so a fault that wipes a log dir
leaves the evidence the audit needs. Each entry is a complete msgpack map (see
broker.core.journal_events); a reader is any msgpack stream unpacker. A crash can leave a torn
last entry: readers skip it, and the writer cuts it off before appending again.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgpack

from broker.core.journal_events import JournalEvent, event_from_dict, pack_event
from storage.runtime.closing import ClosedOnExit
from storage.runtime.fsutil import fsync_dir, storage_errors, write_all

_log = logging.getLogger("minikraft.broker")


def _complete_prefix(data: bytes) -> tuple[list[Any], int]:
    """The entries that decode whole, and the byte length they cover."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    entries: list[Any] = []
    good = 0
    while True:
        try:
            entry = unpacker.unpack()
        except msgpack.OutOfData:
            break
        except Exception:  # garbage in the stream: keep what came before it
            break
        entries.append(entry)
        good = unpacker.tell()
    return entries, good


def _complete_length(data: bytes) -> int:
    """The byte length the entries that parse whole cover, none of them built (msgpack's
    skip): where the writer cuts a torn tail. A restarted broker's journal holds an event per
    partition and more (hundreds of thousands at 100,000 partitions): building each to find
    the end cost it about a second of CPU at start (issue 35)."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(data) or 1)
    unpacker.feed(data)
    good = 0
    while True:
        try:
            unpacker.skip()
        except msgpack.OutOfData:
            break
        except Exception:  # garbage in the stream: keep what came before it
            break
        good = unpacker.tell()
    return good


class EventJournal(ClosedOnExit):
    """Appends events; `sync=True` fsyncs after each write (default: the OS decides)."""

    def __init__(
        self, path: Path, *, sync: bool = False, logger: logging.Logger | None = None
    ) -> None:
        self.path = Path(path)
        self.sync = sync
        self._logger = logger or _log
        with storage_errors(f"open event journal {self.path}"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            created = not self.path.exists()
            self._repair_tail()
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if created:
            fsync_dir(self.path.parent)
        # encode_event's bytes from a Packer of the journal's own (the loop's alone): packb
        # builds a Packer, and its buffer, for each event; a restarted broker journals one for
        # each of its 100,000 partitions (issue 35).
        self._pack = msgpack.Packer(use_bin_type=True).pack
        # The events of a `buffered()` stretch, written together when it ends.
        self._buffer: list[bytes] | None = None

    def _repair_tail(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        good = _complete_length(data)
        if good < len(data):
            self._logger.warning(
                "Event journal %s: cutting a torn or corrupt tail at byte %d (%d bytes)",
                self.path, good, len(data) - good,
            )
            with open(self.path, "r+b") as handle:
                handle.truncate(good)
                handle.flush()
                os.fsync(handle.fileno())

    def append(self, events: Iterable[JournalEvent]) -> int:
        """Write events in one write (or keep them for the end of a `buffered()` stretch);
        returns how many."""
        pack = self._pack
        chunks = [pack_event(pack, event) for event in events]
        if not chunks:
            return 0
        if self._buffer is not None:
            self._buffer.extend(chunks)
            return len(chunks)
        self._write(chunks)
        return len(chunks)

    @contextlib.contextmanager
    def buffered(self) -> Iterator[None]:
        """Every event appended inside goes out in one write as it ends. For a stretch of
        synchronous work that lets no other code run before it ends (a slice of the
        metadata applier): nothing can read or answer on what the events record before they
        are written. A create of 5,000 partitions made 5,000 writes, one RoleChanged each
        (issue 35)."""
        if self._buffer is not None:  # inside another: that one writes
            yield
            return
        self._buffer = []
        try:
            yield
        finally:
            chunks, self._buffer = self._buffer, None
            if chunks:
                self._write(chunks)

    def _write(self, chunks: list[bytes]) -> None:
        with storage_errors(f"append to event journal {self.path}"):
            write_all(self._fd, b"".join(chunks))
            if self.sync:
                os.fsync(self._fd)

    def flush(self) -> None:
        with storage_errors(f"fsync event journal {self.path}"):
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1



def read_journal_dicts(path: Path) -> list[dict[str, Any]]:
    """Every complete entry as a plain dict (what the audit reads); a torn tail is skipped."""
    entries, _good = _complete_prefix(Path(path).read_bytes())
    return [e for e in entries if isinstance(e, dict)]


def read_journal(path: Path) -> Iterator[JournalEvent]:
    """Every complete entry decoded to its event class."""
    for body in read_journal_dicts(path):
        yield event_from_dict(body)
