"""Snapshot files `<end-offset, 20 digits>-<epoch, 10 digits>.checkpoint`: raw record batches.

A snapshot is written whole and atomically (temp file, fsync, rename, fsync dir), so a crash
leaves the previous snapshot or the new one. It is checked batch by batch (CRC32C) when listed:
a corrupt snapshot is skipped with a warning and the one before it is used (INVARIANTS rule 2:
committed state is never replaced by garbage). Kafka's bootstrap checkpoint is snapshot 0-0.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from storage.core.offset_and_epoch import SnapshotId
from storage.core.record_batch import CorruptBatchError, RecordBatch, iter_batches, verify_batch
from storage.runtime.fsutil import storage_errors, write_atomic

SNAPSHOT_SUFFIX = ".checkpoint"
BOOTSTRAP_SNAPSHOT_ID = SnapshotId(0, 0)
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")

_log = logging.getLogger(__name__)


def snapshot_file_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_file_name(name: str) -> SnapshotId | None:
    """The snapshot id a file name encodes, or None if it is not a snapshot file."""
    match = _SNAPSHOT_NAME.match(name)
    return SnapshotId(int(match.group(1)), int(match.group(2))) if match else None


def snapshot_path(directory: Path, snapshot_id: SnapshotId) -> Path:
    return directory / snapshot_file_name(snapshot_id)


def verify_snapshot_bytes(raw_batches: bytes) -> list[RecordBatch]:
    """Decode every batch (CRC32C checked); raises CorruptBatchError, or on empty content."""
    if not raw_batches:
        raise CorruptBatchError(0, "snapshot holds no record batch")
    return [batch for batch, _size in iter_batches(raw_batches)]


def check_snapshot_bytes(raw_batches: bytes) -> None:
    """Every batch whole, of a known magic and matching its CRC32C (Kafka's
    RecordBatch.ensureValid), its records left undecoded: how a snapshot is checked when it
    is listed. Decoding every record of every snapshot at start cost a restarted broker
    seconds at 100,000 partitions (issue 35), and the snapshot it loads is decoded once
    more then anyway. Raises CorruptBatchError, or on empty content."""
    if not raw_batches:
        raise CorruptBatchError(0, "snapshot holds no record batch")
    position = 0
    while position < len(raw_batches):
        position += verify_batch(raw_batches, position).size


def write_snapshot(directory: Path, snapshot_id: SnapshotId, raw_batches: bytes) -> Path:
    """Verify then atomically and durably write a snapshot; returns its path."""
    if snapshot_id.end_offset < 0 or snapshot_id.epoch < 0:
        raise ValueError(f"invalid snapshot id {snapshot_id}")
    verify_snapshot_bytes(raw_batches)
    path = snapshot_path(directory, snapshot_id)
    write_atomic(path, raw_batches)
    return path


def load_snapshot(directory: Path, snapshot_id: SnapshotId) -> list[RecordBatch]:
    """The decoded batches of a snapshot. Raises KeyError if missing, CorruptBatchError."""
    path = snapshot_path(directory, snapshot_id)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise KeyError(snapshot_id) from None
    return verify_snapshot_bytes(data)


def iter_snapshot_batches(directory: Path, snapshot_id: SnapshotId) -> Iterator[RecordBatch]:
    yield from load_snapshot(directory, snapshot_id)


def list_snapshots(directory: Path, logger: logging.Logger | None = None) -> list[SnapshotId]:
    """The valid snapshots in directory, oldest first; corrupt ones are skipped with a warning,
    one deleted while listing is skipped."""
    logger = logger or _log
    found: list[SnapshotId] = []
    for entry in directory.iterdir():
        snapshot_id = parse_snapshot_file_name(entry.name)
        if snapshot_id is None:
            continue
        try:
            check_snapshot_bytes(entry.read_bytes())
        except FileNotFoundError:
            # Deleted since iterdir (another process's snapshot cleanup, an audit or a test
            # reading a live node's directory): it is no longer there to list.
            continue
        except CorruptBatchError as exc:
            logger.warning(
                "Ignoring snapshot %s: corrupt at byte %d (%s); the previous snapshot is used",
                entry, exc.position, exc.reason,
            )
            continue
        found.append(snapshot_id)
    return sorted(found)


def read_snapshot_chunk(
    directory: Path, snapshot_id: SnapshotId, position: int, max_bytes: int
) -> tuple[bytes, int]:
    """Up to max_bytes of the snapshot from position, and its total size (FetchSnapshot).
    Raises KeyError if there is no such file, ValueError if position is past its end."""
    path = snapshot_path(directory, snapshot_id)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise KeyError(snapshot_id) from None
    try:
        with storage_errors(f"read snapshot {path}"):
            size = os.fstat(fd).st_size
            if position < 0 or position > size:
                raise ValueError(f"position {position} outside snapshot {path} of {size} bytes")
            wanted = max(0, min(max_bytes, size - position))
            data = os.pread(fd, wanted, position) if wanted else b""
    finally:
        os.close(fd)
    return data, size


def delete_snapshot(directory: Path, snapshot_id: SnapshotId) -> None:
    path = snapshot_path(directory, snapshot_id)
    with storage_errors(f"delete snapshot {path}"):
        path.unlink(missing_ok=True)
