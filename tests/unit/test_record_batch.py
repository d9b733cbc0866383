"""Kafka's record batch v2: golden bytes, round trips, compression, corruption, the broker's
validation, and interop with kio's independent reader and writer."""

from __future__ import annotations

import datetime
import io
import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch as kio_read_batch
from kio.records.schema import NewRecordBatch, RecordHeader
from kio.records.schema import Record as KioRecord
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from storage.core.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, UnsupportedCompressionError
from storage.core.record_batch import (
    HEADER_SIZE,
    CorruptBatchError,
    MessageTooLargeError,
    Record,
    UnsupportedMagicError,
    decode_batch,
    encode_batch,
    iter_batches,
    read_header,
    rebase,
    validate_batch,
    verify_batch,
)


def _resign(raw: bytes) -> bytes:
    """A batch with its CRC recomputed over attributes..end (to craft well-signed oddities)."""
    return raw[:17] + struct.pack(">I", crc32c.crc32c(raw[21:])) + raw[21:]


def test_golden_bytes_of_one_small_batch() -> None:
    # Laid out by hand from Kafka's DefaultRecordBatch/DefaultRecord: the record body is
    # attributes 0, timestampDelta 0, offsetDelta 0, key len zigzag(1)=02 'k', value len 02
    # 'v', 0 headers: 8 bytes, so its length prefix is zigzag(8)=0x10.
    records = bytes.fromhex("10 00 00 00 02 6b 02 76 00")
    tail = bytes.fromhex(
        "0000"  # attributes: no compression, CreateTime, not transactional, not control
        "00000000"  # lastOffsetDelta
        "00000000000003e8"  # baseTimestamp 1000
        "00000000000003e8"  # maxTimestamp 1000
        "ffffffffffffffff" "ffff" "ffffffff"  # no producer id / epoch / sequence
        "00000001"  # one record
    ) + records
    expected = (
        bytes.fromhex("0000000000000005")  # baseOffset
        + struct.pack(">i", 9 + len(tail))  # batchLength: epoch + magic + crc + tail
        + bytes.fromhex("00000003" "02")  # partitionLeaderEpoch 3, magic 2
        + struct.pack(">I", crc32c.crc32c(tail))
        + tail
    )
    assert len(expected) == HEADER_SIZE + len(records) == 70
    assert encode_batch(5, 3, 1000, [Record(b"k", b"v")]) == expected


keys = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=40)),
                   max_size=3).map(tuple)
records = st.builds(
    Record, keys, keys, headers,
    st.none() | st.integers(-(2**40), 2**40).map(lambda d: 1_700_000_000_000 + d),
    st.none(),
)


@settings(max_examples=60, deadline=None)
@given(
    batch_records=st.lists(records, min_size=1, max_size=20),
    base_offset=st.integers(0, 2**62),
    epoch=st.integers(0, 2**31 - 1),
    producer=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**15 - 1),
                       st.integers(-1, 2**31 - 1)),
    codec=st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]),
    control=st.booleans(),
)
def test_round_trip(batch_records: list[Record], base_offset: int, epoch: int,
                    producer: tuple[int, int, int], codec: int, control: bool) -> None:
    ts = 1_700_000_000_000
    raw = encode_batch(base_offset, epoch, ts, batch_records, control, producer_id=producer[0],
                       producer_epoch=producer[1], base_sequence=producer[2], compression=codec)
    batch, size = decode_batch(raw)
    assert size == len(raw)
    normalized = tuple(r._replace(timestamp_ms=None) if r.timestamp_ms == ts else r
                       for r in batch_records)
    assert batch.records == normalized
    assert (batch.base_offset, batch.leader_epoch, batch.timestamp_ms) == (base_offset, epoch, ts)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.compression == codec and batch.is_control == control
    assert batch.last_offset == base_offset + len(batch_records) - 1
    assert batch.max_timestamp_ms == max([ts] + [r.timestamp_ms for r in batch_records
                                                 if r.timestamp_ms is not None])
    header = read_header(raw, 0)
    assert (header.record_count, header.producer_id, header.last_offset, header.size) == (
        len(batch_records), producer[0], batch.last_offset, len(raw))
    # Re-encoding what was decoded gives the same bytes (exactness for uncompressed batches).
    if codec == NONE:
        assert encode_batch(base_offset, epoch, ts, batch.records, control,
                            producer_id=producer[0], producer_epoch=producer[1],
                            base_sequence=producer[2]) == raw


def test_bare_values_and_nulls() -> None:
    raw = encode_batch(0, 0, 7, [b"a", Record(None, None), Record(b"", b"")])
    batch, _ = decode_batch(raw)
    assert batch.records == (Record(None, b"a"), Record(None, None), Record(b"", b""))
    assert [batch.offset_of(i) for i in range(3)] == [0, 1, 2]
    assert batch.timestamp_of(0) == 7


def test_offset_delta_gaps_decode_and_validation_rejects_them() -> None:
    # A compacted batch keeps its records' offset deltas (0 and 2 here).
    raw = encode_batch(10, 1, 5, [Record(b"a", b"1"), Record(b"c", b"3", offset_delta=2)])
    batch, _ = decode_batch(raw)
    assert [batch.offset_of(i) for i in range(2)] == [10, 12]
    assert batch.last_offset == 12 and batch.next_offset == 13
    with pytest.raises(CorruptBatchError, match="offset deltas"):
        validate_batch(raw)


def test_crc_flip_is_corrupt_everywhere_after_the_crc() -> None:
    raw = encode_batch(0, 1, 2, [Record(b"key", b"value", (("h", b"v"),))])
    for index in range(21, len(raw)):
        flipped = bytearray(raw)
        flipped[index] ^= 0x01
        with pytest.raises(CorruptBatchError, match="CRC32C"):
            decode_batch(bytes(flipped))
        with pytest.raises(CorruptBatchError, match="CRC32C"):
            validate_batch(bytes(flipped))
        with pytest.raises(CorruptBatchError, match="CRC32C"):
            verify_batch(memoryview(bytes(flipped)))
    header = verify_batch(memoryview(raw))
    assert (header.size, header.record_count, header.last_offset) == (len(raw), 1, 0)


def test_torn_tail_stops_iteration_at_the_cut() -> None:
    one = encode_batch(0, 1, 2, [b"x" * 50])
    two = encode_batch(1, 1, 2, [b"y" * 50])
    for cut in (1, 11, HEADER_SIZE, len(two) - 1):
        data = one + two[:cut]
        seen = []
        with pytest.raises(CorruptBatchError) as info:
            for batch, _size in iter_batches(data):
                seen.append(batch.base_offset)
        assert seen == [0] and info.value.position == len(one)


def test_malformed_records_with_a_valid_crc_are_corrupt() -> None:
    raw = bytearray(encode_batch(0, 1, 2, [Record(b"k", b"v")]))
    struct.pack_into(">i", raw, 57, 2)  # recordsCount 2 but one record
    with pytest.raises(CorruptBatchError, match="undecodable records"):
        decode_batch(_resign(bytes(raw)))
    raw = bytearray(encode_batch(0, 1, 2, [Record(b"k", b"v")]))
    raw[HEADER_SIZE] = 0x0E  # record length 7, one byte short
    with pytest.raises(CorruptBatchError, match="undecodable records"):
        decode_batch(_resign(bytes(raw)))


def _legacy_v1_message(value: bytes) -> bytes:
    """A magic 1 message set entry: offset, size, crc, magic, attributes, timestamp, key, value."""
    body = struct.pack(">bbqi", 1, 0, 1000, -1) + struct.pack(">i", len(value)) + value
    crc = 0  # legacy messages use CRC32 (not checked: the magic is rejected first)
    return struct.pack(">qiI", 0, 4 + len(body), crc) + body


def test_magic_1_is_rejected_distinctly() -> None:
    legacy = _legacy_v1_message(b"hello")
    with pytest.raises(UnsupportedMagicError) as info:
        validate_batch(legacy)
    assert info.value.magic == 1
    with pytest.raises(UnsupportedMagicError):
        decode_batch(legacy)
    # Log recovery treats it as corruption (stops there) because it is a CorruptBatchError.
    assert isinstance(info.value, CorruptBatchError)


def test_validate_batch_checks_size_and_returns_the_header() -> None:
    raw = encode_batch(0, 0, 1, [Record(b"k", b"v" * 100)] * 3, producer_id=42,
                       producer_epoch=7, base_sequence=100, compression=GZIP)
    header = validate_batch(raw, 0, max_batch_bytes=len(raw))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 7, 100)
    assert (header.record_count, header.compression, header.last_offset_delta) == (3, GZIP, 2)
    with pytest.raises(MessageTooLargeError) as info:
        validate_batch(raw, 0, max_batch_bytes=len(raw) - 1)
    assert info.value.size == len(raw)


def test_unknown_codec_is_unsupported_not_corrupt() -> None:
    raw = bytearray(encode_batch(0, 0, 1, [b"v"]))
    struct.pack_into(">h", raw, 21, 5)  # compression id 5 does not exist
    with pytest.raises(UnsupportedCompressionError):
        decode_batch(_resign(bytes(raw)))


def test_garbage_compressed_section_is_corrupt() -> None:
    raw = bytearray(encode_batch(0, 0, 1, [b"v" * 100], compression=ZSTD))
    raw[HEADER_SIZE + 5] ^= 0xFF
    with pytest.raises(CorruptBatchError, match="undecodable records"):
        decode_batch(_resign(bytes(raw)))


def test_rebase_keeps_the_crc_valid() -> None:
    raw = encode_batch(0, 4, 1, [b"a", b"b"], producer_id=9, producer_epoch=0, base_sequence=0)
    moved = rebase(raw, 1234)
    assert moved[8:] == raw[8:]
    batch, _ = decode_batch(moved)
    assert (batch.base_offset, batch.last_offset, batch.producer_id) == (1234, 1235, 9)
    assert validate_batch(moved).base_offset == 1234
    stamped = rebase(raw, 99, leader_epoch=12)
    assert stamped[16:] == raw[16:]
    header = validate_batch(stamped)
    assert (header.base_offset, header.leader_epoch, header.size) == (99, 12, len(raw))


def _kio_batch(recs: tuple[KioRecord, ...]) -> bytes:
    buffer = io.BytesIO()
    write_new_batch(buffer, NewRecordBatch(
        producer_id=i64(5), producer_epoch=i16(1), base_sequence=i32(10), attributes=i16(0),
        records=recs, partition_leader_epoch=i32(8)))
    return buffer.getvalue()


SECOND = datetime.datetime.fromtimestamp(1_700_000_000, datetime.UTC)


def test_a_batch_written_by_kio_decodes_with_ours() -> None:
    recs = (
        KioRecord(attributes=i8(0), timestamp=TZAwareMicros.parse(SECOND), offset=i64(0),
                  key=b"k0", value=b"v0", headers=(RecordHeader(key=b"h", value=b"x"),)),
        KioRecord(attributes=i8(0), timestamp=TZAwareMicros.parse(SECOND), offset=i64(1),
                  key=None, value=None, headers=(RecordHeader(key=b"n", value=None),)),
    )
    batch, size = decode_batch(_kio_batch(recs))
    assert batch.records == (Record(b"k0", b"v0", (("h", b"x"),)),
                             Record(None, None, (("n", None),)))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (5, 1, 10)
    assert (batch.leader_epoch, batch.timestamp_ms) == (8, 1_700_000_000_000)
    assert validate_batch(_kio_batch(recs)).size == size


def test_a_batch_written_by_ours_decodes_with_kio() -> None:
    ts = 1_700_000_000_000
    raw = encode_batch(100, 2, ts, [Record(b"k", b"v", (("h", b"x"),)),
                                    Record(None, None, (), ts + 3000)],
                       producer_id=5, producer_epoch=1, base_sequence=10)
    batch, size = kio_read_batch(raw, 0)
    assert size == len(raw)
    assert (batch.base_offset, batch.partition_leader_epoch, batch.producer_id) == (100, 2, 5)
    assert (batch.max_timestamp, batch.last_offset_delta) == (ts + 3000, 1)
    assert [(r.offset, r.key, r.value) for r in batch.records] == [(100, b"k", b"v"),
                                                                   (101, None, None)]
    assert batch.records[0].headers == (RecordHeader(key=b"h", value=b"x"),)
    assert batch.records[1].timestamp.timestamp() == (ts + 3000) / 1000
