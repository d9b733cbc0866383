"""What raft/core needs of a log, after Kafka's ReplicatedLog.

The core calls these synchronously. Appends and truncations reach the OS (or memory) but are not
durable: only the runtime calls `flush()` (fsync), after which it tells the core the new flushed
offset. The leader counts only its flushed offset toward the high watermark, a follower flushes
before its next Fetch, so an acknowledged entry is on disk (INVARIANTS rule 2).

Implementations: storage/runtime/disk_log.DiskLog (segments, CRC32C, fsync) and
raft/core/memory_log.MemoryLog (the simulator's disk: unflushed entries are lost on crash).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from storage.core.offset_and_epoch import OffsetAndEpoch, SnapshotId
from storage.core.record_batch import Record


class ReplicatedLog(Protocol):
    def start_offset(self) -> int:
        """First offset still in the log (the latest snapshot's end offset after cleaning)."""

    def end_offset(self) -> int:
        """The log end offset: the offset the next appended record gets."""

    def flushed_offset(self) -> int:
        """Everything below this offset is durable."""

    def last_fetched_epoch(self) -> int:
        """Epoch of the last batch; the latest snapshot's epoch if the log is empty; else 0."""

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's endOffsetForEpoch: the largest epoch <= `epoch` in the log and the end offset
        of that epoch (start offset of the next epoch, or the log end offset). If no epoch <=
        `epoch` is known, (start_offset or snapshot end, snapshot epoch or 0)."""

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        """Raw whole batches, the first one containing start_offset; at least one batch when
        start_offset < end_offset even if it exceeds max_bytes; b"" at the end."""

    def append_as_leader(
        self,
        records: Sequence[Record] | Sequence[bytes],
        epoch: int,
        timestamp_ms: int,
        is_control: bool = False,
    ) -> OffsetAndEpoch:
        """Append one batch at the log end offset; returns (last offset, epoch)."""

    def append_as_follower(self, raw_batches: bytes) -> int:
        """Append raw batches fetched from the leader, verifying CRC and that they start at the
        log end offset. Returns the new end offset. Raises CorruptBatchError, ValueError."""

    def truncate_to(self, offset: int) -> None:
        """Remove everything at and above offset (never below the start offset)."""

    def flush(self) -> None:
        """Make everything appended durable (fsync). Called by the runtime, never by the core."""

    def latest_snapshot_id(self) -> SnapshotId | None: ...

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int]:
        """A chunk of the snapshot file starting at position, and the snapshot's total size.
        Raises KeyError if there is no such snapshot."""

    def create_snapshot(self, snapshot_id: SnapshotId, raw_batches: bytes) -> None:
        """Durably write a snapshot (atomic rename) of committed state below end_offset."""

    def install_snapshot(self, snapshot_id: SnapshotId, raw_batches: bytes) -> None:
        """A follower's fetched snapshot: write it durably, empty the log, and restart the log at
        snapshot_id.end_offset."""

    def delete_before_snapshot(self) -> None:
        """Log cleaning: drop whole segments wholly below the latest snapshot's end offset."""
