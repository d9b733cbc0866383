"""The log cleaner's decisions (storage/core/log_cleaner.py, after Kafka's LogCleaner,
LogCleanerManager and MemoryRecords.filterTo) and a whole cleaning round of the runtime
(broker/runtime/log_manager.py) over a real partition log."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.runtime.log_manager import CleanerIo, _CleanJob, _run_clean_job
from broker.runtime.partition_log import PartitionLog
from storage.core.log_cleaner import (
    CleanerConfig,
    OffsetMap,
    clean_batch,
    cleanable_range,
    group_segments,
)
from storage.core.log_retention import RetentionConfig, SegmentView
from storage.core.record_batch import (
    DELETE_HORIZON_FLAG,
    Record,
    decode_batch,
    delete_horizon_ms,
    encode_batch,
    iter_segment_batches,
)
from storage.core.throttler import UNLIMITED

NOW = 1_000_000


def _batch(base: int, records: list[tuple[bytes, bytes | None]], **kwargs: int) -> bytes:
    return encode_batch(base, 3, NOW - 10_000, [Record(k, v) for k, v in records], **kwargs)


def _map(*batches: bytes) -> OffsetMap:
    offset_map = OffsetMap()
    for raw in batches:
        offset_map.add_batch(decode_batch(raw)[0], 1 << 62)
    return offset_map


def test_only_each_keys_latest_record_stays_with_its_offset_and_the_batch_its_bounds() -> None:
    old = _batch(0, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], producer_id=7, producer_epoch=0,
                 base_sequence=0)
    new = _batch(3, [(b"b", b"2")])
    offset_map = _map(old, new)
    kept, count = clean_batch(
        decode_batch(old)[0], old, offset_map, now_ms=NOW, delete_retention_ms=0,
        upper_bound_offset=4, last_offsets_of_active_producers={},
    )
    assert count == 1 and kept is not None
    batch, _size = decode_batch(kept)
    # Rule 25: the record keeps offset 2, the batch its base offset, last offset delta,
    # epoch and producer fields (Kafka's buildRetainedRecordsInto).
    assert (batch.base_offset, batch.last_offset, batch.leader_epoch) == (0, 2, 3)
    assert (batch.producer_id, batch.base_sequence) == (7, 0)
    assert [(batch.offset_of(i), r.key, r.value) for i, r in enumerate(batch.records)] == [
        (2, b"a", b"2")
    ]
    # Untouched batches are copied byte for byte.
    same, _ = clean_batch(
        decode_batch(new)[0], new, offset_map, now_ms=NOW, delete_retention_ms=0,
        upper_bound_offset=4, last_offsets_of_active_producers={},
    )
    assert same == new


def test_a_tombstone_gets_a_delete_horizon_then_goes_once_it_passed() -> None:
    raw = _batch(0, [(b"a", b"1"), (b"a", None)])
    offset_map = _map(raw)
    first, _ = clean_batch(
        decode_batch(raw)[0], raw, offset_map, now_ms=NOW, delete_retention_ms=500,
        upper_bound_offset=99, last_offsets_of_active_producers={},
    )
    assert first is not None
    marked = decode_batch(first)[0]
    assert marked.attributes & DELETE_HORIZON_FLAG and delete_horizon_ms(marked) == NOW + 500
    assert [(marked.offset_of(0), marked.records[0].value)] == [(1, None)]
    assert marked.timestamp_of(0) == NOW - 10_000  # the record's own timestamp survives
    before, kept_before = clean_batch(
        marked, first, offset_map, now_ms=NOW + 499, delete_retention_ms=500,
        upper_bound_offset=99, last_offsets_of_active_producers={},
    )
    assert kept_before == 1 and before == first
    gone, kept = clean_batch(
        marked, first, offset_map, now_ms=NOW + 500, delete_retention_ms=500,
        upper_bound_offset=99, last_offsets_of_active_producers={},
    )
    assert (gone, kept) == (None, 0)


def test_an_emptied_batch_stays_as_a_header_for_an_active_producer_or_the_rounds_end() -> None:
    raw = _batch(0, [(b"a", b"1")], producer_id=9, producer_epoch=1, base_sequence=4)
    offset_map = _map(raw, _batch(1, [(b"a", b"2")]))
    batch = decode_batch(raw)[0]
    kept, _ = clean_batch(batch, raw, offset_map, now_ms=NOW, delete_retention_ms=0,
                          upper_bound_offset=99, last_offsets_of_active_producers={9: 0})
    assert kept is not None
    header = decode_batch(kept)[0]
    assert (header.records, header.base_offset, header.last_offset) == ((), 0, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 1, 4)
    end, _ = clean_batch(batch, raw, offset_map, now_ms=NOW, delete_retention_ms=0,
                         upper_bound_offset=1, last_offsets_of_active_producers={})
    assert end is not None and decode_batch(end)[0].records == ()
    dropped, _ = clean_batch(batch, raw, offset_map, now_ms=NOW, delete_retention_ms=0,
                             upper_bound_offset=99, last_offsets_of_active_producers={9: 5})
    assert dropped is None


def test_dirty_ratio_min_compaction_lag_and_the_active_segment_bound_what_is_cleaned() -> None:
    segments = [SegmentView(0, 100, NOW - 9000), SegmentView(10, 100, NOW - 8000),
                SegmentView(20, 100, NOW - 10), SegmentView(30, 50, NOW)]
    firsts: list[int | None] = [NOW - 9500, NOW - 8500, NOW - 20, NOW]
    config = CleanerConfig(min_cleanable_dirty_ratio=0.5)
    found = cleanable_range(segments, firsts, checkpoint=10, log_start_offset=0,
                            log_end_offset=35, high_watermark=35, config=config, now_ms=NOW)
    assert (found.first_dirty_offset, found.first_uncleanable_offset) == (10, 30)
    assert (found.clean_bytes, found.cleanable_bytes) == (100, 200)
    assert found.should_clean(config)
    lagged = CleanerConfig(min_cleanable_dirty_ratio=0.5, min_compaction_lag_ms=1000)
    held = cleanable_range(segments, firsts, checkpoint=10, log_start_offset=0,
                           log_end_offset=35, high_watermark=35, config=lagged, now_ms=NOW)
    assert held.first_uncleanable_offset == 20 and held.dirty_ratio == 0.5
    assert not held.should_clean(lagged)  # 0.5 is not over 0.5
    # The HWM inside segment [10, 20) makes it uncleanable.
    below = cleanable_range(segments, firsts, checkpoint=None, log_start_offset=0,
                            log_end_offset=35, high_watermark=15, config=config, now_ms=NOW)
    assert below.first_uncleanable_offset == 10
    assert group_segments(segments[:3], 30, 200) == [[0, 1], [2]]


def _keyed_log(tmp_path: Path) -> PartitionLog:
    log = PartitionLog(tmp_path, "c", 0)
    log.retention = RetentionConfig(segment_ms=100, compact=True, delete=False)
    ts = NOW
    for wave in range(4):
        records = [Record(b"k%d" % (i % 5), b"w%d-%d" % (wave, i), timestamp_ms=ts)
                   for i in range(10)]
        log.append_as_leader(encode_batch(0, 0, ts, records), 0)
        ts += 1000
    log.append_as_leader(encode_batch(0, 0, ts, [Record(b"k0", None)]), 0)  # tombstone
    ts += 1000
    log.append_as_leader(encode_batch(0, 0, ts, [Record(b"sentinel", b"x")]), 0)
    return log


def test_a_cleaning_round_compacts_swaps_and_survives_a_reopen(tmp_path: Path) -> None:
    log = _keyed_log(tmp_path)
    segments = log.segments()
    assert len(segments) == 6
    config = CleanerConfig(min_cleanable_dirty_ratio=0.01, delete_retention_ms=0)
    rng = cleanable_range(
        log.segment_views(), [s.first_batch_timestamp_ms() for s in segments], checkpoint=None,
        log_start_offset=0, log_end_offset=log.log_end_offset, high_watermark=log.log_end_offset,
        config=config, now_ms=NOW + 10_000,
    )
    assert rng.first_uncleanable_offset == 41 and rng.should_clean(config)

    class Hosted:
        pass

    hosted = Hosted()
    hosted.log = log  # type: ignore[attr-defined]
    job = _CleanJob(
        hosted=hosted,  # type: ignore[arg-type]
        segments=segments[:-1],
        entries=[[(e.position, e.size, e.last_offset) for e in s.entries] for s in segments[:-1]],
        views=log.segment_views()[:-1], range=rng, config=config, now_ms=NOW + 10_000,
        producer_last_offsets={}, io=CleanerIo(UNLIMITED),
    )
    asyncio.run(asyncio.to_thread(_run_clean_job, job))
    assert job.end_offset == 41
    for indexes, cleaned in job.results:
        log.replace_segments(cleaned, [job.segments[i] for i in indexes])

    def contents(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
        rows = []
        for segment in plog.segments():
            data = segment.path.read_bytes()
            for _p, batch, _s in iter_segment_batches(data):
                rows.extend((batch.offset_of(i), r.key, r.value) for i, r in enumerate(batch.records))
        return rows

    # k1..k4's last values at 36..39, k0's tombstone (first pass: it gets a horizon), the
    # sentinel in the active segment; offsets unchanged, reads across the gaps work.
    expected = [(36, b"k1", b"w3-6"), (37, b"k2", b"w3-7"), (38, b"k3", b"w3-8"),
                (39, b"k4", b"w3-9"), (40, b"k0", None), (41, b"sentinel", b"x")]
    assert contents(log) == expected
    raw = log.read(0, 1 << 20, log.log_end_offset)
    assert raw and decode_batch(raw)[0].base_offset >= 0
    log.close()
    reopened = PartitionLog(tmp_path, "c", 0)
    assert contents(reopened) == expected
    assert reopened.log_end_offset == 42
    reopened.close()
