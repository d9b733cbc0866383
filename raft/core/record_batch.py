"""The record batch: one format for the metadata log, snapshots, partition logs and the wire.

Layout (big-endian), after Kafka's v2 batch without producer fields:

    base_offset int64 | batch_length int32 | leader_epoch int32 | magic int8 | crc uint32 |
    attributes int16 | last_offset_delta int32 | base_timestamp int64 | max_timestamp int64 |
    record_count int32 | payload

`batch_length` counts the bytes after itself, CRC32C covers attributes..payload. The payload is
a msgpack array of `[key, value]` pairs (key may be nil). A control batch (attribute bit 5)
holds Raft control records. Decoding stops at a torn tail and raises CorruptBatchError on a CRC
mismatch so callers can truncate there (log recovery) or reject the input (wire).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c
import msgpack

HEADER = struct.Struct(">qiibIhiqqi")
HEADER_SIZE = HEADER.size  # 47
LENGTH_PREFIX_SIZE = 12  # base_offset + batch_length: what must be read to know a batch's size
_CRC_START = 8 + 4 + 4 + 1 + 4  # attributes start here
MAGIC = 2
CONTROL_FLAG = 0x20
MAX_BATCH_SIZE_BYTES = 64 * 1024 * 1024


class CorruptBatchError(ValueError):
    """A batch whose CRC, magic or length does not check out (Kafka's CORRUPT_MESSAGE)."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"corrupt record batch at byte {position}: {reason}")
        self.position = position
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Record:
    key: bytes | None
    value: bytes


@dataclass(frozen=True, slots=True)
class RecordBatch:
    base_offset: int
    leader_epoch: int
    timestamp_ms: int
    records: tuple[Record, ...]
    is_control: bool = False

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)


def encode_batch(
    base_offset: int,
    leader_epoch: int,
    timestamp_ms: int,
    records: Sequence[Record] | Sequence[bytes],
    is_control: bool = False,
) -> bytes:
    """Encode records (Record, or bare values) as one batch starting at base_offset."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    pairs = [[r.key, r.value] if isinstance(r, Record) else [None, r] for r in records]
    payload = msgpack.packb(pairs, use_bin_type=True)
    attributes = CONTROL_FLAG if is_control else 0
    count = len(pairs)
    tail = struct.pack(">hiqqi", attributes, count - 1, timestamp_ms, timestamp_ms, count) + payload
    crc = crc32c.crc32c(tail)
    batch_length = 4 + 1 + 4 + len(tail)
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, MAGIC, crc) + tail


def batch_size_at(buf: bytes | memoryview, position: int) -> int | None:
    """Total size of the batch starting at position, or None if its length prefix is cut off."""
    if len(buf) - position < LENGTH_PREFIX_SIZE:
        return None
    (batch_length,) = struct.unpack_from(">i", buf, position + 8)
    return 12 + batch_length


def decode_batch(buf: bytes | memoryview, position: int = 0) -> tuple[RecordBatch, int]:
    """Decode the batch at position; return it and its size. Raises CorruptBatchError."""
    size = batch_size_at(buf, position)
    if size is None or size < HEADER_SIZE or size > MAX_BATCH_SIZE_BYTES:
        raise CorruptBatchError(position, f"bad batch length {size}")
    if len(buf) - position < size:
        raise CorruptBatchError(position, "batch cut off (torn write)")
    (
        base_offset,
        _length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_delta,
        base_ts,
        _max_ts,
        count,
    ) = HEADER.unpack_from(buf, position)
    if magic != MAGIC:
        raise CorruptBatchError(position, f"unknown magic {magic}")
    body = bytes(buf[position + _CRC_START : position + size])
    if crc32c.crc32c(body) != crc:
        raise CorruptBatchError(position, "CRC32C mismatch")
    try:
        pairs = msgpack.unpackb(body[HEADER_SIZE - _CRC_START :], raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several types for garbage
        raise CorruptBatchError(position, f"undecodable payload: {exc}") from exc
    if not isinstance(pairs, list) or len(pairs) != count or count != last_delta + 1:
        raise CorruptBatchError(position, "record count does not match the header")
    records = tuple(Record(k, v) for k, v in pairs)
    batch = RecordBatch(
        base_offset, leader_epoch, base_ts, records, bool(attributes & CONTROL_FLAG)
    )
    return batch, size


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """What can be read of a batch without decoding its records (index building, scans)."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    leader_epoch: int
    timestamp_ms: int
    is_control: bool


def read_header(buf: bytes | memoryview, position: int) -> BatchHeader:
    size = batch_size_at(buf, position)
    if size is None or size < HEADER_SIZE or size > MAX_BATCH_SIZE_BYTES:
        raise CorruptBatchError(position, f"bad batch length {size}")
    if len(buf) - position < size:
        raise CorruptBatchError(position, "batch cut off (torn write)")
    (base_offset, _l, leader_epoch, magic, _crc, attributes, last_delta, base_ts, _m, _c) = (
        HEADER.unpack_from(buf, position)
    )
    if magic != MAGIC:
        raise CorruptBatchError(position, f"unknown magic {magic}")
    return BatchHeader(
        position,
        size,
        base_offset,
        base_offset + last_delta,
        leader_epoch,
        base_ts,
        bool(attributes & CONTROL_FLAG),
    )


def iter_batches(buf: bytes | memoryview) -> Iterator[tuple[RecordBatch, int]]:
    """Decode consecutive batches; yields (batch, size). Raises CorruptBatchError on the first bad one."""
    position = 0
    while position < len(buf):
        batch, size = decode_batch(buf, position)
        yield batch, size
        position += size


def rebase(raw: bytes, base_offset: int) -> bytes:
    """The same encoded batch with a new base offset (the CRC does not cover the offset)."""
    return struct.pack(">q", base_offset) + raw[8:]


def verify_batch(buf: bytes | memoryview, position: int) -> tuple[BatchHeader, int]:
    """The header and CRC32C of the batch at position, the CRC checked without decoding its
    records: scans that compare replicas batch by batch (the audit's rule 2) need the checksum,
    not the records. Raises CorruptBatchError like decode_batch."""
    header = read_header(buf, position)
    (crc,) = struct.unpack_from(">I", buf, position + _CRC_START - 4)
    if crc32c.crc32c(memoryview(buf)[position + _CRC_START : position + header.size]) != crc:
        raise CorruptBatchError(position, "CRC32C mismatch")
    return header, crc
