"""Idempotent producer state of one partition replica (Kafka's ProducerStateManager,
ProducerStateEntry and ProducerAppendInfo, without transactions).

Per producer id: its epoch and the metadata of its last five batches (first/last sequence,
first/last offset). A producer's batch from a client is checked against it before it is
appended:
- a batch whose epoch and exact sequence range match a retained batch is a duplicate: it is not
  appended and is answered with success and the ORIGINAL offsets (Kafka returns the earlier
  append; DUPLICATE_SEQUENCE_NUMBER is never sent by Kafka 4.x brokers);
- an older epoch is INVALID_PRODUCER_EPOCH;
- a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
- the same epoch must continue at last sequence + 1 (wrapping from Int.MaxValue to 0), else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
- an unknown producer (no state: new, or its batches are gone from this log) is accepted at any
  sequence (Kafka since KIP-360: the broker no longer answers UNKNOWN_PRODUCER_ID).
Batches a follower appends, and batches replayed from the log on open or after truncation, are
recorded without checks (Kafka's REPLICATION origin), so every replica holds the same state and
a new leader dedups retries of batches its predecessor appended.

The snapshot (`<offset>.snapshot`, 20-digit offset, Kafka's name) uses Kafka's ProducerSnapshot
v1 layout (int16 version, uint32 CRC32C of the rest, an array of 46-byte entries); we write one
entry per retained batch, oldest first, so all five batches survive a restart (a Kafka reader
keeps the last entry per producer, which is its own view).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import crc32c

from kafkawire.constants import NO_PRODUCER_ID
from kafkawire.errors import Errors, KafkaError

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # Kafka's ProducerSnapshot.ProducerEntry
_CRC_START = 6  # Kafka: the CRC covers everything after the version and the CRC itself
_NO_COORDINATOR_EPOCH = -1
_NO_TXN_OFFSET = -1


class CorruptSnapshotError(ValueError):
    """A producer snapshot that does not parse or whose CRC does not match."""


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap at Int.MaxValue to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_file_name(name: str) -> int | None:
    stem = name[: -len(SNAPSHOT_SUFFIX)] if name.endswith(SNAPSHOT_SUFFIX) else ""
    return int(stem) if stem.isdigit() else None


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """The producer fields of one record batch header, with the offsets it has (or gets)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp_ms: int = -1

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.offset_delta)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp_ms: int = -1

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: tuple[BatchMetadata, ...] = ()

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def with_batch(self, batch: ProducerBatch) -> ProducerStateEntry:
        """Kafka's addBatch: a new epoch clears the retained batches; at most five are kept."""
        kept = self.batches if batch.producer_epoch == self.producer_epoch else ()
        added = BatchMetadata(
            batch.last_sequence, batch.last_offset, batch.offset_delta, batch.max_timestamp_ms
        )
        return ProducerStateEntry(
            self.producer_id,
            batch.producer_epoch,
            (*kept, added)[-NUM_BATCHES_TO_RETAIN:],
        )

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        """The retained batch with this epoch and exactly this sequence range, if any."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        first, last = batch.base_sequence, batch.last_sequence
        for retained in self.batches:
            if retained.first_seq == first and retained.last_seq == last:
                return retained
        return None


@dataclass(frozen=True, slots=True)
class ProducerAppend:
    """The outcome of checking a client's batches: a duplicate (answer with its offsets, append
    nothing), or the producer entries to record once the batches are appended."""

    duplicate: BatchMetadata | None = None
    updates: Mapping[int, ProducerStateEntry] = field(default_factory=dict)


def _check_epoch(current: ProducerStateEntry, batch: ProducerBatch) -> None:
    if batch.producer_epoch < current.producer_epoch:
        raise KafkaError(
            Errors.INVALID_PRODUCER_EPOCH,
            f"epoch {batch.producer_epoch} of producer {batch.producer_id} is older than"
            f" {current.producer_epoch}",
        )


def _check_sequence(current: ProducerStateEntry, batch: ProducerBatch) -> None:
    """Kafka's ProducerAppendInfo.checkSequence (no transaction verification)."""
    first_seq = batch.base_sequence
    if batch.producer_epoch != current.producer_epoch:
        if first_seq != 0 and current.producer_epoch != NO_PRODUCER_EPOCH:
            raise KafkaError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"new epoch {batch.producer_epoch} of producer {batch.producer_id} starts at"
                f" sequence {first_seq}, not 0",
            )
        return
    if current.producer_epoch == NO_PRODUCER_EPOCH:
        return  # no state for this producer: any sequence is accepted (Kafka)
    if not in_sequence(current.last_seq, first_seq):
        raise KafkaError(
            Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {batch.producer_id}: sequence {first_seq} does not follow"
            f" {current.last_seq}",
        )


class ProducerStateManager:
    """Producer entries of one partition, as of `map_end_offset` (every batch below it is
    reflected). Pure: the partition log feeds it headers and persists its snapshots."""

    def __init__(
        self, entries: Iterable[ProducerStateEntry] = (), map_end_offset: int = 0
    ) -> None:
        self.producers: dict[int, ProducerStateEntry] = {e.producer_id: e for e in entries}
        self.map_end_offset = map_end_offset

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def check_client_batches(self, batches: Sequence[ProducerBatch]) -> ProducerAppend:
        """Check a producer's batches (offsets as they would be assigned) against the state,
        Kafka's analyzeAndValidateProducerState for a CLIENT append. Raises KafkaError with
        INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER; changes nothing."""
        updates: dict[int, ProducerStateEntry] = {}
        for batch in batches:
            if not batch.has_producer_id:
                continue
            known = self.producers.get(batch.producer_id)
            if known is not None:
                duplicate = known.find_duplicate(batch)
                if duplicate is not None:
                    return ProducerAppend(duplicate=duplicate)
            current = updates.get(batch.producer_id) or known or ProducerStateEntry(
                batch.producer_id
            )
            _check_epoch(current, batch)
            _check_sequence(current, batch)
            updates[batch.producer_id] = current.with_batch(batch)
        return ProducerAppend(updates=updates)

    def commit(self, append: ProducerAppend, end_offset: int) -> None:
        """Record a checked client append once its batches are in the log."""
        self.producers.update(append.updates)
        self.map_end_offset = max(self.map_end_offset, end_offset)

    def replay(self, batch: ProducerBatch) -> None:
        """Record a batch already in the log (follower append, rebuild): no sequence checks."""
        if batch.has_producer_id:
            current = self.producers.get(batch.producer_id) or ProducerStateEntry(
                batch.producer_id
            )
            if batch.producer_epoch >= current.producer_epoch:
                self.producers[batch.producer_id] = current.with_batch(batch)
        self.map_end_offset = max(self.map_end_offset, batch.last_offset + 1)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Kafka: producers whose last batch is wholly below the new log start are forgotten
        (DeleteRecords); their next batch is then accepted at any sequence."""
        gone = [
            pid
            for pid, entry in self.producers.items()
            if not entry.batches or entry.batches[-1].last_offset < log_start_offset
        ]
        for pid in gone:
            del self.producers[pid]
        self.map_end_offset = max(self.map_end_offset, log_start_offset)

    def last_data_offsets(self) -> dict[int, int]:
        """Producer id -> the last offset of its last batch: the batch the log cleaner keeps,
        even empty, so the producer's sequence survives compaction (Kafka's
        lastRecordsOfActiveProducers)."""
        return {
            pid: entry.batches[-1].last_offset
            for pid, entry in self.producers.items()
            if entry.batches
        }

    def update_map_end_offset(self, end_offset: int) -> None:
        self.map_end_offset = max(self.map_end_offset, end_offset)

    # ---- snapshots ----

    def encode_snapshot(self) -> bytes:
        entries = b"".join(
            _SNAPSHOT_ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                batch.last_seq,
                batch.last_offset,
                batch.offset_delta,
                batch.timestamp_ms,
                _NO_COORDINATOR_EPOCH,
                _NO_TXN_OFFSET,
            )
            for entry in sorted(self.producers.values(), key=lambda e: e.producer_id)
            for batch in entry.batches
        )
        count = len(entries) // _SNAPSHOT_ENTRY.size
        body = struct.pack(">i", count) + entries
        return struct.pack(">hI", SNAPSHOT_VERSION, crc32c.crc32c(body)) + body

    @classmethod
    def decode_snapshot(cls, data: bytes, offset: int) -> ProducerStateManager:
        if len(data) < _SNAPSHOT_HEAD.size:
            raise CorruptSnapshotError(f"{len(data)} bytes is too short for a producer snapshot")
        version, crc, count = _SNAPSHOT_HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"unknown producer snapshot version {version}")
        if crc32c.crc32c(data[_CRC_START:]) != crc:
            raise CorruptSnapshotError("producer snapshot CRC mismatch")
        if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
            raise CorruptSnapshotError(f"producer snapshot of {len(data)} bytes, {count} entries")
        manager = cls(map_end_offset=offset)
        for index in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, _coordinator, _txn = (
                _SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEAD.size + index * _SNAPSHOT_ENTRY.size)
            )
            current = manager.producers.get(pid) or ProducerStateEntry(pid, epoch)
            if epoch != current.producer_epoch:
                current = ProducerStateEntry(pid, epoch)
            batch = BatchMetadata(last_seq, last_offset, delta, ts)
            manager.producers[pid] = replace(
                current, batches=(*current.batches, batch)[-NUM_BATCHES_TO_RETAIN:]
            )
        return manager
