"""MemoryLog: the ReplicatedLog Protocol in memory, the simulator's disk.

Durability model: the durable image is exactly what the log held at the last flush() (plus
snapshots, durable at once, and log cleaning). crash() goes back to that image, so unflushed
appends are lost and an unflushed truncation is undone (INVARIANTS rule 2 is tested against it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage.core.offset_and_epoch import OffsetAndEpoch, SnapshotId
from storage.core.record_batch import Record, decode_batch, encode_batch, read_header, verify_batch


@dataclass(frozen=True, slots=True)
class _Batch:
    base_offset: int
    last_offset: int
    epoch: int
    raw: bytes
    values: tuple[bytes, ...]


class MemoryLog:
    def __init__(self) -> None:
        self._batches: list[_Batch] = []
        self._start_offset = 0
        self._flushed_offset = 0
        self._durable_batches: list[_Batch] = []
        self._durable_start_offset = 0
        self._snapshots: dict[SnapshotId, bytes] = {}
        self._latest_snapshot: SnapshotId | None = None
        self.generation = 0  # bumped by every change other than an append (for checkers)

    # -- ReplicatedLog -------------------------------------------------------------------------
    def start_offset(self) -> int:
        return self._start_offset

    def end_offset(self) -> int:
        return self._batches[-1].last_offset + 1 if self._batches else self._start_offset

    def flushed_offset(self) -> int:
        return self._flushed_offset

    def last_fetched_epoch(self) -> int:
        if self._batches:
            return self._batches[-1].epoch
        return self._latest_snapshot.epoch if self._latest_snapshot else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found: int | None = None
        end = self.end_offset()
        for batch in self._batches:  # epochs never decrease along the log
            if batch.epoch <= epoch:
                found = batch.epoch
            else:
                end = batch.base_offset
                break
        if found is not None:
            return OffsetAndEpoch(end, found)
        snapshot_epoch = self._latest_snapshot.epoch if self._latest_snapshot else 0
        return OffsetAndEpoch(self._start_offset, snapshot_epoch)

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        out: list[bytes] = []
        size = 0
        for batch in self._batches:
            if batch.last_offset < start_offset:
                continue
            if out and size + len(batch.raw) > max_bytes:
                break
            out.append(batch.raw)
            size += len(batch.raw)
        return b"".join(out)

    def append_as_leader(
        self, records: Sequence[Record] | Sequence[bytes], epoch: int, timestamp_ms: int,
        is_control: bool = False,
    ) -> OffsetAndEpoch:
        if self._batches and epoch < self._batches[-1].epoch:
            raise ValueError(f"append in epoch {epoch} after epoch {self._batches[-1].epoch}")
        raw = encode_batch(self.end_offset(), epoch, timestamp_ms, records, is_control)
        self._append_raw(raw)
        return OffsetAndEpoch(self.end_offset() - 1, epoch)

    def append_as_follower(self, raw_batches: bytes) -> int:
        position = 0
        while position < len(raw_batches):
            position += verify_batch(raw_batches, position).size  # CRC check before any change
        position = 0
        while position < len(raw_batches):
            size = read_header(raw_batches, position).size
            self._append_raw(raw_batches[position:position + size])
            position += size
        return self.end_offset()

    def truncate_to(self, offset: int) -> None:
        self.generation += 1
        if offset < self._start_offset:
            raise ValueError(f"truncate to {offset} below the log start {self._start_offset}")
        keep: list[_Batch] = []
        for batch in self._batches:
            if batch.last_offset < offset:
                keep.append(batch)
            elif batch.base_offset < offset:
                raise ValueError(f"truncate to {offset} inside batch {batch.base_offset}")
        self._batches = keep
        self._flushed_offset = min(self._flushed_offset, self.end_offset())

    def flush(self) -> None:
        self._durable_batches = list(self._batches)
        self._durable_start_offset = self._start_offset
        self._flushed_offset = self.end_offset()

    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._latest_snapshot

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int
                      ) -> tuple[bytes, int]:
        data = self._snapshots[snapshot_id]
        return data[position:position + max_bytes], len(data)

    def create_snapshot(self, snapshot_id: SnapshotId, raw_batches: bytes) -> None:
        self._snapshots[snapshot_id] = raw_batches
        if self._latest_snapshot is None or snapshot_id > self._latest_snapshot:
            self._latest_snapshot = snapshot_id

    def install_snapshot(self, snapshot_id: SnapshotId, raw_batches: bytes) -> None:
        self.generation += 1
        self.create_snapshot(snapshot_id, raw_batches)
        self._latest_snapshot = snapshot_id
        self._batches = []
        self._start_offset = snapshot_id.end_offset
        self.flush()

    def delete_before_snapshot(self) -> None:
        if self._latest_snapshot is None:
            return
        end = self._latest_snapshot.end_offset
        if end <= self._start_offset:
            return
        if end > self.end_offset():
            raise ValueError(f"snapshot end {end} is past the log end {self.end_offset()}")
        self.generation += 1
        self._batches = [b for b in self._batches if b.last_offset >= end]
        self._durable_batches = [b for b in self._durable_batches if b.last_offset >= end]
        self._start_offset = max(self._start_offset, end)
        self._durable_start_offset = max(self._durable_start_offset, end)

    # -- the simulator's disk ------------------------------------------------------------------
    def crash(self) -> None:
        """Lose everything not flushed: back to the durable image."""
        self.generation += 1
        self._batches = list(self._durable_batches)
        self._start_offset = self._durable_start_offset
        if self._latest_snapshot and self._latest_snapshot.end_offset > self.end_offset():
            self._batches = []
            self._start_offset = self._latest_snapshot.end_offset
        self._flushed_offset = self.end_offset()

    def entry(self, offset: int) -> tuple[int, bytes] | None:
        """(epoch, value) at offset, or None if the log does not hold it."""
        for batch in self._batches:
            if batch.base_offset <= offset <= batch.last_offset:
                return batch.epoch, batch.values[offset - batch.base_offset]
        return None

    def entries(self) -> list[tuple[int, int, bytes]]:
        """(offset, epoch, value) of every entry in the log."""
        return [(b.base_offset + i, b.epoch, v) for b in self._batches
                for i, v in enumerate(b.values)]

    def batch_count(self) -> int:
        return len(self._batches)

    def batch_at(self, index: int) -> tuple[int, int, int, tuple[bytes, ...]]:
        """(base offset, last offset, epoch, values) of the index-th batch in the log."""
        b = self._batches[index]
        return b.base_offset, b.last_offset, b.epoch, b.values

    def _append_raw(self, raw: bytes) -> None:
        batch, _size = decode_batch(raw)
        if batch.base_offset != self.end_offset():
            raise ValueError(f"batch at {batch.base_offset} does not start at the log end "
                             f"{self.end_offset()}")
        if self._batches and batch.leader_epoch < self._batches[-1].epoch:
            raise ValueError(f"batch epoch {batch.leader_epoch} below {self._batches[-1].epoch}")
        self._batches.append(_Batch(batch.base_offset, batch.last_offset, batch.leader_epoch,
                                    bytes(raw), tuple(r.value or b"" for r in batch.records)))
