"""The record batch: Apache Kafka's record batch v2, exactly, for the metadata log, snapshots,
partition logs and the wire.

Batch header (big-endian, 61 bytes):

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (2) |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordsCount int32 | records

`batchLength` counts the bytes after itself; the CRC32C covers attributes..end, so a broker
assigns offsets by rewriting baseOffset (`rebase`) and keeps what the producer sent (INVARIANTS
rule 1: stored bytes are served as written). Attributes: bits 0-2 compression (the records
section is compressed as a whole, see storage.core.compression), bit 3 timestamp type, bit 4
transactional, bit 5 control, bit 6 delete horizon. Each record:

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headersCount varint | [headerKeyLength varint | key | headerValueLength varint | value]

Varints are zigzag-encoded as Kafka's ByteUtils. Decoding raises CorruptBatchError at a torn
tail or a CRC mismatch so callers can truncate there (log recovery) or reject the input
(wire: CORRUPT_MESSAGE); a magic other than 2 raises UnsupportedMagicError
(UNSUPPORTED_FOR_MESSAGE_FORMAT on Produce).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from kafkawire.constants import NO_PRODUCER_ID
from storage.core.compression import (
    CODEC_MASK,
    NONE,
    UnsupportedCompressionError,
    compress,
    decompress,
)

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
_TAIL = struct.Struct(">hiqqqhii")  # attributes..recordsCount: the CRC'd part of the header
LENGTH_PREFIX_SIZE = 12  # base_offset + batch_length: what must be read to know a batch's size
_MAGIC_POSITION = 16  # same place in message formats v0/v1, so old magics are recognised
_CRC_START = 8 + 4 + 4 + 1 + 4  # attributes start here
_BATCH_LENGTH_OVERHEAD = 4 + 1 + 4  # partitionLeaderEpoch + magic + crc, counted in batchLength
MAGIC = 2
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
TIMESTAMP_TYPE_FLAG = 0x08  # LogAppendTime when set, CreateTime otherwise
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40
MAX_BATCH_SIZE_BYTES = 64 * 1024 * 1024

__all__ = [
    "CONTROL_FLAG",
    "HEADER_SIZE",
    "MAGIC",
    "BatchHeader",
    "CorruptBatchError",
    "MessageTooLargeError",
    "Record",
    "RecordBatch",
    "UnsupportedCompressionError",
    "UnsupportedMagicError",
    "batch_size_at",
    "decode_batch",
    "delete_horizon_ms",
    "empty_batch_header",
    "encode_batch",
    "encode_retained_batch",
    "is_free_tail",
    "iter_batches",
    "iter_segment_batches",
    "read_header",
    "rebase",
    "record_body_sizes",
    "validate_batch",
    "validated_batch",
    "verify_batch",
    "with_log_append_time",
]


class CorruptBatchError(ValueError):
    """A batch whose CRC, magic or length does not check out (Kafka's CORRUPT_MESSAGE)."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"corrupt record batch at byte {position}: {reason}")
        self.position = position
        self.reason = reason


class UnsupportedMagicError(CorruptBatchError):
    """A message format other than v2 (UNSUPPORTED_FOR_MESSAGE_FORMAT on Produce). A subclass of
    CorruptBatchError so log recovery still stops at it."""

    def __init__(self, position: int, magic: int) -> None:
        super().__init__(position, f"unsupported magic {magic} (only record batch v2)")
        self.magic = magic


class MessageTooLargeError(ValueError):
    """A batch over the size limit (Kafka's MESSAGE_TOO_LARGE)."""

    def __init__(self, position: int, size: int, limit: int) -> None:
        super().__init__(f"record batch at byte {position} is {size} bytes, over {limit}")
        self.position = position
        self.size = size
        self.limit = limit


class Record(NamedTuple):
    """One record. `timestamp_ms` None is the batch's base timestamp and `offset_delta` None the
    record's position in the batch: decoding keeps None for those, so `Record(key, value)`
    compares equal to what it decodes to and a re-encode gives the same bytes.

    A NamedTuple, not a dataclass: the log and the audit decode millions of these and a tuple is
    the cheapest immutable object Python can build."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None
    offset_delta: int | None = None


@dataclass(frozen=True, slots=True)
class RecordBatch:
    base_offset: int
    leader_epoch: int
    timestamp_ms: int  # baseTimestamp
    records: tuple[Record, ...]
    attributes: int = 0
    last_offset_delta: int = -1
    max_timestamp_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    # Bytes the batch takes in the log, as decoded (Kafka's Batch.sizeInBytes): what the
    # metadata loader counts toward metadata.log.max.record.bytes.between.snapshots. Not part
    # of the batch's value (a batch built in memory has 0).
    size_in_bytes: int = field(default=0, compare=False)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    def offset_of(self, index: int) -> int:
        """The offset of records[index] (offset deltas may have gaps after compaction)."""
        delta = self.records[index].offset_delta
        return self.base_offset + (index if delta is None else delta)

    def timestamp_of(self, index: int) -> int:
        ts = self.records[index].timestamp_ms
        return self.timestamp_ms if ts is None else ts


# --- varints (zigzag, as Kafka's ByteUtils.writeVarint/writeVarlong) ---------------------------

_ONE_BYTE = [bytes([n]) for n in range(128)]
_UNZIGZAG = [(n >> 1) ^ -(n & 1) for n in range(128)]
_NULL_LENGTH = b"\x01"  # zigzag(-1)


def _varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    if n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_CACHED = 1 << 14  # lengths and offset deltas below this use precomputed encodings
_LENGTHS = [_varint(n) for n in range(_CACHED)]
_PLAIN_HEADS = [b"\x00\x00" + _varint(n) for n in range(_CACHED)]  # attributes, tsDelta 0, delta


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The multi-byte path; callers inline the one-byte case (most lengths and deltas)."""
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _nullable_bytes(value: bytes | None) -> bytes:
    if value is None:
        return _NULL_LENGTH
    return _varint(len(value)) + value


# --- encoding ----------------------------------------------------------------------------------


def _encode_records(records: Sequence[Record], base_ts: int) -> tuple[bytes, int, int]:
    """The records section; returns it, lastOffsetDelta and maxTimestamp. Varints of small
    lengths and deltas come from tables: this runs for every append of the metadata log."""
    parts: list[bytes] = []
    extend = parts.extend
    lengths = _LENGTHS
    varint = _varint
    max_ts = base_ts
    delta = -1
    for index, (key, value, headers, ts, offset_delta) in enumerate(records):
        delta = index if offset_delta is None else offset_delta
        if ts is None and 0 <= delta < _CACHED:
            head = _PLAIN_HEADS[delta]
        else:
            head = b"\x00" + varint(0 if ts is None else ts - base_ts) + varint(delta)
            if ts is not None:
                max_ts = max(max_ts, ts)
        if key is None:
            key_length, key = _NULL_LENGTH, b""
        else:
            key_length = lengths[len(key)] if len(key) < _CACHED else varint(len(key))
        if value is None:
            value_length, value = _NULL_LENGTH, b""
        else:
            value_length = lengths[len(value)] if len(value) < _CACHED else varint(len(value))
        tail = _encode_headers(headers) if headers else b"\x00"
        size = len(head) + len(key_length) + len(key) + len(value_length) + len(value) + len(tail)
        extend((lengths[size] if size < _CACHED else varint(size), head, key_length, key,
                value_length, value, tail))
    return b"".join(parts), delta, max_ts


def _encode_headers(headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
    out = bytearray(_varint(len(headers)))
    for header_key, header_value in headers:
        out += _nullable_bytes(header_key.encode())
        out += _nullable_bytes(header_value)
    return bytes(out)


def encode_batch(
    base_offset: int,
    leader_epoch: int,
    timestamp_ms: int,
    records: Sequence[Record] | Sequence[bytes],
    is_control: bool = False,
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compression: int = NONE,
    is_transactional: bool = False,
    log_append_time: bool = False,
    max_timestamp_ms: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Encode records (Record, or bare values) as one batch starting at base_offset.
    `max_timestamp_ms`: the batch's maxTimestamp instead of its records' latest (a
    LogAppendTime batch carries the broker's append time there)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    recs = [r if isinstance(r, Record) else Record(None, r) for r in records]
    section, last_delta, max_ts = _encode_records(recs, timestamp_ms)
    if max_timestamp_ms is not None:
        max_ts = max_timestamp_ms
    attributes = compression & CODEC_MASK
    if compression != NONE:
        section = compress(compression, section, compression_level)
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_FLAG
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    tail = _TAIL.pack(
        attributes, last_delta, timestamp_ms, max_ts, producer_id, producer_epoch,
        base_sequence, len(recs),
    ) + section
    crc = crc32c.crc32c(tail)
    batch_length = _BATCH_LENGTH_OVERHEAD + len(tail)
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, MAGIC, crc) + tail


def encode_retained_batch(
    batch: RecordBatch, kept: Sequence[int], delete_horizon_ms: int | None = None
) -> bytes:
    """The batch with only the records at indexes `kept`, as Kafka's log cleaner writes it
    (MemoryRecords.buildRetainedRecordsInto): same base offset, last offset delta, leader
    epoch, producer id/epoch, base sequence, codec and timestamp type, each record at its own
    offset and timestamp; with a delete horizon (KIP-534) the base timestamp is the horizon and
    the attributes carry DELETE_HORIZON_FLAG."""
    if not kept:
        raise ValueError("a retained batch needs at least one record (empty_batch_header)")
    records = [
        Record(
            batch.records[i].key,
            batch.records[i].value,
            batch.records[i].headers,
            batch.timestamp_of(i),
            batch.offset_of(i) - batch.base_offset,
        )
        for i in kept
    ]
    attributes = batch.attributes
    base_ts = batch.timestamp_ms
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG
        base_ts = delete_horizon_ms
    section, _last_delta, _max_ts = _encode_records(records, base_ts)
    if attributes & TIMESTAMP_TYPE_FLAG:
        max_ts = batch.max_timestamp_ms  # LogAppendTime: the append time, kept
    else:
        max_ts = max(r.timestamp_ms for r in records if r.timestamp_ms is not None)
    codec = attributes & CODEC_MASK
    if codec != NONE:
        section = compress(codec, section)
    tail = _TAIL.pack(
        attributes, batch.last_offset_delta, base_ts, max_ts, batch.producer_id,
        batch.producer_epoch, batch.base_sequence, len(records),
    ) + section
    return _frame(batch.base_offset, batch.leader_epoch, tail)


def empty_batch_header(batch: RecordBatch) -> bytes:
    """A batch of no records keeping the original's offsets and producer fields (Kafka's
    DefaultRecordBatch.writeEmptyHeader, the cleaner's RETAIN_EMPTY): the last batch of an
    active producer keeps its sequence, the last batch of a cleaning round the log's end."""
    attributes = batch.attributes & ~CODEC_MASK & ~DELETE_HORIZON_FLAG
    tail = _TAIL.pack(
        attributes, batch.last_offset_delta, batch.max_timestamp_ms, batch.max_timestamp_ms,
        batch.producer_id, batch.producer_epoch, batch.base_sequence, 0,
    )
    return _frame(batch.base_offset, batch.leader_epoch, tail)


def _frame(base_offset: int, leader_epoch: int, tail: bytes) -> bytes:
    crc = crc32c.crc32c(tail)
    batch_length = _BATCH_LENGTH_OVERHEAD + len(tail)
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, MAGIC, crc) + tail


def delete_horizon_ms(batch: RecordBatch) -> int | None:
    """The batch's delete horizon (KIP-534), if the cleaner has set one."""
    return batch.timestamp_ms if batch.attributes & DELETE_HORIZON_FLAG else None


# --- decoding ----------------------------------------------------------------------------------


def batch_size_at(buf: bytes | memoryview, position: int) -> int | None:
    """Total size of the batch starting at position, or None if its length prefix is cut off."""
    if len(buf) - position < LENGTH_PREFIX_SIZE:
        return None
    (batch_length,) = struct.unpack_from(">i", buf, position + 8)
    return 12 + batch_length


def _checked_size(buf: bytes | memoryview, position: int, limit: int = MAX_BATCH_SIZE_BYTES) -> int:
    """The batch's size once its length, magic and completeness check out (not its CRC)."""
    size = batch_size_at(buf, position)
    if size is not None and len(buf) - position > _MAGIC_POSITION:
        magic = buf[position + _MAGIC_POSITION]
        if magic != MAGIC:
            raise UnsupportedMagicError(position, magic)
    if size is None or size < HEADER_SIZE:
        raise CorruptBatchError(position, f"bad batch length {size}")
    if size > limit:
        if limit < MAX_BATCH_SIZE_BYTES:
            raise MessageTooLargeError(position, size, limit)
        raise CorruptBatchError(position, f"bad batch length {size}")
    if len(buf) - position < size:
        raise CorruptBatchError(position, "batch cut off (torn write)")
    return size


def _decode_records(data: bytes, pos: int, count: int, base_ts: int) -> list[Record]:
    """The records section (uncompressed); IndexError/ValueError on malformed input.

    The hot path of log replay and the audit, so the one- and two-byte varint cases are inlined
    (lengths below 8 KiB, deltas below 8192) and each record's end is checked once, against its
    length prefix, instead of bounds-checking every field: a field that runs past the data
    raises IndexError or leaves `pos` off the record's end."""
    records: list[Record] = []
    append = records.append
    unzigzag = _UNZIGZAG
    read = _read_varint
    new = tuple.__new__  # skips NamedTuple's Python-level __new__: a third of the cost
    for index in range(count):
        n = data[pos]
        if n < 0x80:
            length = unzigzag[n]
            pos += 1
        elif data[pos + 1] < 0x80:
            n = (n & 0x7F) | (data[pos + 1] << 7)
            length = (n >> 1) ^ -(n & 1)
            pos += 2
        else:
            length, pos = read(data, pos)
        record_end = pos + length
        n = data[pos + 1]  # timestampDelta, after the (unused) record attributes byte
        if n == 0:
            ts = None
            pos += 2
        elif n < 0x80:
            ts = base_ts + unzigzag[n]
            pos += 2
        else:
            ts_delta, pos = read(data, pos + 1)
            ts = base_ts + ts_delta if ts_delta else None
        n = data[pos]
        if n < 0x80:
            delta: int | None = unzigzag[n]
            pos += 1
        elif data[pos + 1] < 0x80:
            n = (n & 0x7F) | (data[pos + 1] << 7)
            delta = (n >> 1) ^ -(n & 1)
            pos += 2
        else:
            delta, pos = read(data, pos)
        if delta == index:
            delta = None
        n = data[pos]
        if n == 1:  # zigzag(-1): null key, the metadata log's case
            key = None
            pos += 1
        else:
            size, pos = read(data, pos)
            if size < 0:
                key = None
            else:
                key = data[pos : pos + size]
                pos += size
        n = data[pos]
        if n < 0x80:
            if n == 1:
                value = None
                pos += 1
            else:
                pos += 1
                value = data[pos : pos + unzigzag[n]]
                pos += unzigzag[n]
        elif data[pos + 1] < 0x80:
            n = (n & 0x7F) | (data[pos + 1] << 7)
            pos += 2
            size = n >> 1  # even n: a positive length
            value = data[pos : pos + size]
            pos += size
            if n & 1:
                raise ValueError(f"record {index} has a negative value length")
        else:
            size, pos = read(data, pos)
            if size < 0:
                value = None
            else:
                value = data[pos : pos + size]
                pos += size
        if data[pos] == 0 and pos + 1 == record_end:  # no headers
            pos = record_end
            append(new(Record, (key, value, (), ts, delta)))
            continue
        count_headers, pos = read(data, pos)
        headers = []
        for _ in range(count_headers):
            size, pos = read(data, pos)
            if size < 0:
                raise ValueError("a record header key cannot be null")
            header_key = data[pos : pos + size].decode()
            pos += size
            size, pos = read(data, pos)
            header_value = None
            if size >= 0:
                header_value = data[pos : pos + size]
                pos += size
            headers.append((header_key, header_value))
        if pos != record_end:
            raise ValueError(f"record {index} is not {length} bytes long")
        append(new(Record, (key, value, tuple(headers), ts, delta)))
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} bytes after the last record")
    return records


def decode_batch(buf: bytes | memoryview, position: int = 0) -> tuple[RecordBatch, int]:
    """Decode the batch at position; return it and its size.

    Raises CorruptBatchError (torn, bad CRC, malformed records), UnsupportedMagicError, or
    UnsupportedCompressionError when its codec cannot be applied here."""
    size = _checked_size(buf, position)
    (
        base_offset, _length, leader_epoch, _magic, crc, attributes, last_delta, base_ts,
        max_ts, producer_id, producer_epoch, base_sequence, count,
    ) = HEADER.unpack_from(buf, position)
    body = bytes(buf[position + _CRC_START : position + size])
    if crc32c.crc32c(body) != crc:
        raise CorruptBatchError(position, "CRC32C mismatch")
    if count < 0:
        raise CorruptBatchError(position, f"negative record count {count}")
    codec = attributes & CODEC_MASK
    try:
        if codec == NONE:  # the records section starts after the header, in `body`
            records = _decode_records(body, HEADER_SIZE - _CRC_START, count, base_ts)
        else:
            section = decompress(codec, body[HEADER_SIZE - _CRC_START :])
            records = _decode_records(section, 0, count, base_ts)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, UnsupportedCompressionError):
            raise
        raise CorruptBatchError(position, f"undecodable records: {exc}") from exc
    if last_delta < len(records) - 1:
        raise CorruptBatchError(position, "lastOffsetDelta is below the record count")
    batch = RecordBatch(
        base_offset, leader_epoch, base_ts, tuple(records), attributes, last_delta, max_ts,
        producer_id, producer_epoch, base_sequence, size,
    )
    return batch, size


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """What can be read of a batch without decoding its records (index building, scans, the
    broker's Produce validation)."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    leader_epoch: int
    timestamp_ms: int
    is_control: bool
    crc: int = 0
    attributes: int = 0
    max_timestamp_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    record_count: int = 0

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def read_header(buf: bytes | memoryview, position: int) -> BatchHeader:
    """The batch's header fields; checks its length and magic, not its CRC."""
    size = _checked_size(buf, position)
    (
        base_offset, _l, leader_epoch, _magic, crc, attributes, last_delta, base_ts, max_ts,
        producer_id, producer_epoch, base_sequence, count,
    ) = HEADER.unpack_from(buf, position)
    return BatchHeader(
        position, size, base_offset, base_offset + last_delta, leader_epoch, base_ts,
        bool(attributes & CONTROL_FLAG), crc, attributes, max_ts, producer_id, producer_epoch,
        base_sequence, count,
    )


def verify_batch(buf: bytes | memoryview, position: int = 0) -> BatchHeader:
    """The header of a batch whose length, magic and CRC check out, records left undecoded:
    what log recovery and a follower's append need (Kafka's RecordBatch.ensureValid), at a
    fraction of decode_batch's cost. Raises CorruptBatchError / UnsupportedMagicError."""
    header = read_header(buf, position)
    body = buf[position + _CRC_START : position + header.size]
    if crc32c.crc32c(body) != header.crc:
        raise CorruptBatchError(position, "CRC32C mismatch")
    return header


def is_free_tail(buf: bytes | memoryview, position: int) -> bool:
    """Whether every byte from position to the end is zero: room a segment file was extended by
    ahead of its appends (`log.preallocate`) and nothing has been written to yet. No batch
    starts with zeros that run to the end of a file (its magic is 2, its length at least the
    header's), so a torn or corrupt batch is never taken for free space; a batch whose first
    page never reached the disk before a power cut reads as free space, which is what log
    recovery would make of it anyway (it truncates there)."""
    tail = bytes(buf[position:])
    return tail.count(0) == len(tail)


def validate_batch(
    buf: bytes | memoryview, position: int = 0, max_batch_bytes: int = MAX_BATCH_SIZE_BYTES
) -> BatchHeader:
    """What a broker checks of a producer's batch before storing it as received (Kafka's
    LogValidator for v2): magic 2 (UnsupportedMagicError), size (MessageTooLargeError), CRC and
    well-formed records whose offset deltas are 0..n-1 (CorruptBatchError), a codec this
    process can read (UnsupportedCompressionError)."""
    return validated_batch(buf, position, max_batch_bytes)[0]


def validated_batch(
    buf: bytes | memoryview, position: int = 0, max_batch_bytes: int = MAX_BATCH_SIZE_BYTES
) -> tuple[BatchHeader, RecordBatch]:
    """validate_batch, with the decoded batch for checks of its records (LogValidator's)."""
    _checked_size(buf, position, max_batch_bytes)
    batch, _size = decode_batch(buf, position)
    header = read_header(buf, position)
    if header.record_count == 0:
        raise CorruptBatchError(position, "a produced batch needs at least one record")
    if batch.last_offset_delta != len(batch.records) - 1 or any(
        r.offset_delta is not None for r in batch.records
    ):
        raise CorruptBatchError(position, "record offset deltas are not 0..n-1")
    return header, batch


def record_body_sizes(batch: RecordBatch) -> list[int]:
    """The length each record of `batch` declares (its body, after the length varint) in the
    batch's uncompressed records section: a compressed batch's records once decompressed."""
    section, _, _ = _encode_records(batch.records, batch.timestamp_ms)
    sizes: list[int] = []
    position = 0
    while position < len(section):
        length, position = _read_varint(section, position)
        sizes.append(length)
        position += length
    return sizes


def with_log_append_time(raw: bytes, append_time_ms: int) -> bytes:
    """The same batch as a LogAppendTime batch stamped at append_time_ms: the timestamp type
    attribute set and maxTimestamp replaced, CRC recomputed (Kafka's setMaxTimestamp, the
    broker's in-place path: the records and their compression are kept as sent)."""
    data = bytearray(raw)
    attributes = struct.unpack_from(">h", data, _CRC_START)[0] | TIMESTAMP_TYPE_FLAG
    struct.pack_into(">h", data, _CRC_START, attributes)
    struct.pack_into(">q", data, _CRC_START + 2 + 4 + 8, append_time_ms)
    struct.pack_into(">I", data, _CRC_START - 4, crc32c.crc32c(bytes(data[_CRC_START:])))
    return bytes(data)


def iter_batches(buf: bytes | memoryview) -> Iterator[tuple[RecordBatch, int]]:
    """Decode consecutive batches; yields (batch, size). Raises CorruptBatchError on the first bad one."""
    position = 0
    while position < len(buf):
        batch, size = decode_batch(buf, position)
        yield batch, size
        position += size


def iter_segment_batches(data: bytes | memoryview) -> Iterator[tuple[int, RecordBatch, int]]:
    """Decode a segment file's batches: (byte position, batch, size) each. Stops at free space
    past the last batch (is_free_tail); raises CorruptBatchError at the first bad batch."""
    position = 0
    while position < len(data):
        try:
            batch, size = decode_batch(data, position)
        except CorruptBatchError:
            if is_free_tail(data, position):
                return
            raise
        yield position, batch, size
        position += size


def rebase(raw: bytes, base_offset: int, leader_epoch: int | None = None) -> bytes:
    """The same encoded batch with a new base offset and, if given, partition leader epoch:
    what a leader assigns on append (Kafka's LogValidator). Neither is under the CRC, so the
    producer's bytes from attributes on are kept as sent."""
    if leader_epoch is None:
        return struct.pack(">q", base_offset) + raw[8:]
    return struct.pack(">q", base_offset) + raw[8:12] + struct.pack(">i", leader_epoch) + raw[16:]
