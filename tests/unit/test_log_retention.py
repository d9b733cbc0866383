"""Retention's decisions (storage/core/log_retention.py, Kafka's deleteOldSegments) and what a
partition log does with them: segments renamed `.deleted`, the log start moved, a roll when every
segment goes, segment.ms rolls, and log recovery of `.deleted`/`.cleaned`/`.swap` files."""

from __future__ import annotations

from pathlib import Path

from broker.runtime.partition_log import PartitionLog
from storage.core.log_retention import (
    RetentionConfig,
    SegmentView,
    segments_to_delete,
    should_roll_by_time,
)
from storage.core.record_batch import Record, encode_batch
from storage.runtime.segment import CLEANED_SUFFIX, SWAP_SUFFIX, segment_file_name

NOW = 1_000_000


def _segments(*rows: tuple[int, int, int]) -> list[SegmentView]:
    return [SegmentView(base, size, ts) for base, size, ts in rows]


def test_time_retention_deletes_expired_segments_below_the_high_watermark_only() -> None:
    segments = _segments((0, 100, NOW - 5000), (10, 100, NOW - 4000), (20, 100, NOW - 100))
    config = RetentionConfig(retention_ms=2000)
    found = segments_to_delete(
        segments, log_start_offset=0, log_end_offset=30, high_watermark=30, config=config,
        now_ms=NOW,
    )
    assert (found.count, found.reasons, found.roll_first) == (2, ("retention time breached",), False)
    # Rule 24: the segment [10, 20) is not wholly below a HWM of 15, so it stays.
    held = segments_to_delete(
        segments, log_start_offset=0, log_end_offset=30, high_watermark=15, config=config,
        now_ms=NOW,
    )
    assert held.count == 1


def test_every_segment_expired_rolls_first_but_an_empty_last_segment_stays() -> None:
    config = RetentionConfig(retention_ms=2000)
    old = _segments((0, 100, NOW - 5000), (10, 100, NOW - 4000))
    everything = segments_to_delete(
        old, log_start_offset=0, log_end_offset=20, high_watermark=20, config=config, now_ms=NOW
    )
    assert (everything.count, everything.roll_first) == (2, True)
    with_empty_active = _segments((0, 100, NOW - 5000), (10, 0, -1))
    found = segments_to_delete(
        with_empty_active, log_start_offset=0, log_end_offset=10, high_watermark=10,
        config=config, now_ms=NOW,
    )
    assert (found.count, found.roll_first) == (1, False)


def test_size_retention_deletes_oldest_while_the_excess_covers_them() -> None:
    segments = _segments((0, 100, NOW), (10, 100, NOW), (20, 100, NOW), (30, 50, NOW))
    config = RetentionConfig(retention_ms=-1, retention_bytes=160)
    found = segments_to_delete(
        segments, log_start_offset=0, log_end_offset=40, high_watermark=40, config=config,
        now_ms=NOW,
    )
    # 350 bytes, 190 too many: the first segment (100) fits the excess, the second would not.
    assert (found.count, found.reasons) == (1, ("retention size breached",))


def test_compact_only_deletes_nothing_but_what_the_log_start_left_behind() -> None:
    segments = _segments((0, 100, NOW - 9000), (10, 100, NOW - 9000), (20, 100, NOW))
    compact = RetentionConfig.from_configs({"cleanup.policy": "compact", "retention.ms": "1"})
    assert (compact.delete, compact.compact) == (False, True)
    found = segments_to_delete(
        segments, log_start_offset=12, log_end_offset=30, high_watermark=30, config=compact,
        now_ms=NOW,
    )
    assert (found.count, found.reasons) == (1, ("log start offset breached",))


def test_segment_ms_rolls_by_the_incoming_timestamp_against_the_first_batch() -> None:
    config = RetentionConfig(segment_ms=300)
    assert not should_roll_by_time(None, NOW, 0, NOW, config)  # empty: never
    assert not should_roll_by_time(NOW, NOW + 300, 0, NOW, config)
    assert should_roll_by_time(NOW, NOW + 301, 0, NOW, config)
    assert should_roll_by_time(-1, -1, NOW - 400, NOW, config)  # no timestamps: creation time


def _append(log: PartitionLog, timestamp_ms: int, count: int = 5) -> None:
    raw = encode_batch(0, 0, timestamp_ms, [Record(b"k", b"v")] * count)
    log.append_as_leader(raw, 0)


def test_a_partition_log_rolls_by_time_deletes_renames_and_moves_its_start(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    log.retention = RetentionConfig(retention_ms=2000, segment_ms=100)
    _append(log, NOW - 5000)
    _append(log, NOW - 4000)  # 1000 ms later: rolls
    _append(log, NOW - 100)  # rolls again
    assert [s.base_offset for s in log.segments()] == [0, 5, 10]
    deletion, removed = log.delete_old_segments(high_watermark=15, now_ms=NOW)
    assert deletion.count == 2
    assert [s.path.name for s in removed] == [
        segment_file_name(0) + ".deleted", segment_file_name(5) + ".deleted",
    ]
    assert log.log_start_offset == 10
    assert log.read(10, 1 << 20, 15)  # still served
    for segment in removed:
        segment.delete()
    assert sorted(p.name for p in log.directory.glob("*.log*")) == [segment_file_name(10)]
    log.close()
    reopened = PartitionLog(tmp_path, "t", 0, log_start_offset=10)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (10, 15)
    reopened.close()


def test_recovery_drops_deleted_and_cleaned_files_and_completes_a_swap(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    log.retention = RetentionConfig(segment_ms=100)
    _append(log, NOW)
    _append(log, NOW + 1000)
    _append(log, NOW + 2000)
    directory = log.directory
    first = (directory / segment_file_name(0)).read_bytes()
    log.close()
    # A crash mid-swap: the cleaned copy of [0, 5) renamed .swap, the originals still there,
    # plus a leftover .cleaned and a .deleted file.
    (directory / (segment_file_name(0) + SWAP_SUFFIX)).write_bytes(first)
    (directory / (segment_file_name(5) + CLEANED_SUFFIX)).write_bytes(b"partial")
    (directory / (segment_file_name(99) + ".deleted")).write_bytes(b"old")
    reopened = PartitionLog(tmp_path, "t", 0)
    names = sorted(p.name for p in directory.iterdir() if ".log" in p.name)
    assert names == [segment_file_name(0), segment_file_name(5), segment_file_name(10)]
    assert reopened.log_end_offset == 15
    reopened.close()
