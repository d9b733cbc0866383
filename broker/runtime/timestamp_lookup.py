"""ListOffsets by timestamp over a partition log (after Kafka's time index lookup, as a scan):
the first offset whose record timestamp is at or after a target, and the offset of the record
with the largest timestamp (KIP-734). Reads stop at the HWM: a consumer never learns of an offset
it may not read (rule 20)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.runtime.partition_log import PartitionLog
from storage.core.record_batch import decode_batch, read_header

MAX_TIMESTAMP = -3  # ListOffsets' "the record with the largest timestamp" (KIP-734)
_SCAN_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    offset: int
    timestamp_ms: int
    leader_epoch: int


def _max_timestamp(header: Any) -> int:
    # Kafka's batch v2 header carries maxTimestamp; older layouts only the base timestamp.
    value = getattr(header, "max_timestamp_ms", -1)
    return int(value) if value is not None and value >= 0 else int(header.timestamp_ms)


def find_offset_by_timestamp(
    log: PartitionLog, timestamp: int, high_watermark: int, leader_epoch: int
) -> OffsetAndTimestamp:
    """MAX_TIMESTAMP, or the first record at or after `timestamp`; offset -1 when none."""
    best = OffsetAndTimestamp(-1, -1, leader_epoch)
    offset = log.log_start_offset
    while offset < high_watermark:
        raw = log.read(offset, _SCAN_CHUNK_BYTES, high_watermark)
        if not raw:
            break
        position = 0
        while position < len(raw):
            header = read_header(raw, position)
            batch_max = _max_timestamp(header)
            if timestamp == MAX_TIMESTAMP:
                if batch_max > best.timestamp_ms:
                    best = OffsetAndTimestamp(
                        _offset_of_timestamp(raw, position, batch_max, exact=True),
                        batch_max,
                        leader_epoch,
                    )
            elif batch_max >= timestamp:
                found = _offset_of_timestamp(raw, position, timestamp, exact=False)
                return OffsetAndTimestamp(found, _timestamp_at(raw, position, found), leader_epoch)
            position += header.size
            offset = header.last_offset + 1
    return best


def _records(raw: bytes, position: int) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of the batch at position."""
    batch, _size = decode_batch(raw, position)
    timestamp_of = getattr(batch, "timestamp_of", None)
    offset_of = getattr(batch, "offset_of", None)
    rows = []
    for index in range(len(batch.records)):
        offset = offset_of(index) if offset_of else batch.base_offset + index
        ts = timestamp_of(index) if timestamp_of else batch.timestamp_ms
        rows.append((int(offset), int(ts)))
    return rows


def _offset_of_timestamp(raw: bytes, position: int, timestamp: int, *, exact: bool) -> int:
    for offset, ts in _records(raw, position):
        if (ts == timestamp) if exact else (ts >= timestamp):
            return offset
    return read_header(raw, position).base_offset


def _timestamp_at(raw: bytes, position: int, offset: int) -> int:
    for found, ts in _records(raw, position):
        if found == offset:
            return ts
    return -1
