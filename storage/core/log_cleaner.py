"""The log cleaner's decisions for `cleanup.policy=compact` (Kafka's LogCleaner,
LogCleanerManager and MemoryRecords.filterTo), pure: the runtime (broker/runtime/log_manager.py)
reads the segments in a worker thread, feeds their batches here, writes what comes back to a
`.cleaned` file and swaps it in on the event loop.

- Which log and which part of it (cleanable_range): from the first dirty offset (the cleaner
  checkpoint, else the log start) up to the first uncleanable segment: the one holding the high
  watermark (Kafka's last stable offset without transactions), the active segment, or the first
  segment whose largest timestamp is younger than min.compaction.lag.ms. A log is cleaned when
  its dirty share of bytes exceeds min.cleanable.dirty.ratio, or when a dirty segment waited
  longer than max.compaction.lag.ms.
- The offset map: the last offset of every key in the dirty part, as far as it holds. Kafka's
  SkimpyOffsetMap takes `log.cleaner.dedupe.buffer.size` bytes at 24 bytes an entry (an MD5 hash
  and an offset) and is filled to `load factor` (0.9) of its slots; once full, the round cleans
  only up to the last batch mapped whole, and the rest of the dirty part is the next round's
  (Kafka's Cleaner.buildOffsetMapForSegment). Keys here are compared whole, not by hash, but the
  map holds no more entries than Kafka's would.
- Each batch of the segments up to the map's end (clean_batch): a record stays if it is past the
  map, or it is its key's latest, and it has a value or is a tombstone whose batch's delete
  horizon (KIP-534: set to now + delete.retention.ms the first time the cleaner keeps it) has
  not passed. Retained records keep their offsets and the batch its base offset, last offset
  delta, epoch and producer fields, so producer state and offsets stay valid (rule 25); a batch
  left empty goes, unless it is the last batch of a producer still active or the last batch of
  the round, which stay as empty headers (RETAIN_EMPTY).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from storage.core.log_retention import SegmentView
from storage.core.record_batch import (
    RecordBatch,
    delete_horizon_ms,
    empty_batch_header,
    encode_retained_batch,
)

NO_OFFSET = -1
# The log cleaner's offset map (Kafka's SkimpyOffsetMap): an MD5 hash and an offset per slot,
# filled to the load factor (log.cleaner.io.buffer.load.factor's default); one cleaner thread
# holds the whole log.cleaner.dedupe.buffer.size (metadata.config_defs refuses a smaller one).
OFFSET_MAP_BYTES_PER_ENTRY = 24
DEDUPE_BUFFER_LOAD_FACTOR = 0.9
DEDUPE_BUFFER_MAX = 2**31 - 1  # a Java array: Kafka uses at most 2 GiB per cleaner thread



@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """A compacted partition's effective cleaner configs."""

    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    delete_retention_ms: int = 86_400_000
    segment_bytes: int = 8 * 1024 * 1024

    @classmethod
    def from_configs(cls, values: Mapping[str, str | None], segment_bytes: int) -> CleanerConfig:
        defaults = _DEFAULTS

        def get(key: str, default: str) -> str:
            value = values.get(key)
            return default if value is None else value

        return cls(
            min_cleanable_dirty_ratio=float(
                get("min.cleanable.dirty.ratio", str(defaults.min_cleanable_dirty_ratio))
            ),
            min_compaction_lag_ms=int(
                get("min.compaction.lag.ms", str(defaults.min_compaction_lag_ms))
            ),
            max_compaction_lag_ms=int(
                get("max.compaction.lag.ms", str(defaults.max_compaction_lag_ms))
            ),
            delete_retention_ms=int(get("delete.retention.ms", str(defaults.delete_retention_ms))),
            segment_bytes=segment_bytes,
        )


_DEFAULTS = CleanerConfig()


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """Kafka's LogToClean: [first_dirty_offset, first_uncleanable_offset) is cleanable, both
    on segment boundaries except the first dirty offset; the byte counts give the ratio."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int  # > 0: a dirty segment waited past max.compaction.lag.ms

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def dirty_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    def should_clean(self, config: CleanerConfig) -> bool:
        """grabFilthiestCompactedLog's test."""
        if self.cleanable_bytes <= 0:
            return False
        return self.compaction_delay_ms > 0 or self.dirty_ratio > config.min_cleanable_dirty_ratio


def cleanable_range(
    segments: Sequence[SegmentView],
    first_batch_timestamps: Sequence[int | None],
    *,
    checkpoint: int | None,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    config: CleanerConfig,
    now_ms: int,
) -> CleanableRange:
    """Kafka's cleanableOffsets + calculateCleanableBytes + maxCompactionDelay. `segments` end
    with the active one; `first_batch_timestamps` are each segment's first batch maxTimestamp."""
    first_dirty = checkpoint if checkpoint is not None else log_start_offset
    if first_dirty < log_start_offset or first_dirty > log_end_offset:
        first_dirty = log_start_offset  # a truncated log or a start moved past the checkpoint
    active_base = segments[-1].base_offset
    uncleanable = min(high_watermark, active_base)
    dirty_closed = [
        (index, s) for index, s in enumerate(segments[:-1])
        if _next_base(segments, index) > first_dirty
    ]
    if config.min_compaction_lag_ms > 0:
        for _index, segment in dirty_closed:
            if segment.largest_timestamp_ms > now_ms - config.min_compaction_lag_ms:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    uncleanable = max(first_dirty, uncleanable)
    # The first uncleanable segment is the one holding `uncleanable`: only segments wholly
    # below it are cleaned.
    first_uncleanable = active_base
    for index, segment in enumerate(segments[:-1]):
        if _next_base(segments, index) > uncleanable:
            first_uncleanable = segment.base_offset
            break
    clean_bytes = sum(
        s.size_bytes for i, s in enumerate(segments) if _next_base(segments, i) <= first_dirty
        and s.base_offset < first_uncleanable
    )
    cleanable_bytes = sum(
        s.size_bytes for i, s in enumerate(segments)
        if s.base_offset < first_uncleanable and _next_base(segments, i) > first_dirty
    )
    earliest = min(
        (ts for (index, _s) in dirty_closed
         if (ts := first_batch_timestamps[index]) is not None and ts > 0),
        default=None,
    )
    delay = 0
    clean_until = now_ms - max(config.max_compaction_lag_ms, 0)
    if earliest is not None and earliest < clean_until:
        delay = clean_until - earliest
    return CleanableRange(first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, delay)


def _next_base(segments: Sequence[SegmentView], index: int) -> int:
    return segments[index + 1].base_offset if index + 1 < len(segments) else 2**63 - 1


DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024


def offset_map_capacity(
    dedupe_buffer_size: int, load_factor: float = DEDUPE_BUFFER_LOAD_FACTOR
) -> int:
    """How many keys one round may map (Kafka's maxDesiredMapSize = slots * load factor, with
    one cleaner thread holding the whole buffer, at most 2 GiB as a Java array)."""
    slots = min(dedupe_buffer_size, DEDUPE_BUFFER_MAX) // OFFSET_MAP_BYTES_PER_ENTRY
    return int(slots * load_factor)


class OffsetMap:
    """Key -> the last offset it was written at in the dirty part (Kafka's SkimpyOffsetMap, here
    exact: keys are compared whole, not by hash), holding at most `max_entries` keys."""

    def __init__(self, max_entries: int | None = None) -> None:
        self._offsets: dict[bytes, int] = {}
        self.max_entries = max_entries
        self.latest_offset = NO_OFFSET

    def add_batch(self, batch: RecordBatch, upto_offset: int, start_offset: int = 0) -> bool:
        """Index the batch's keyed records in [start_offset, upto_offset); True when the map
        was full before the batch was mapped whole (Kafka's buildOffsetMapForSegment: the
        check comes before every keyed put, and a batch cut short does not move the latest
        offset, so this round cleans only up to the batches mapped whole)."""
        if batch.is_control:
            return False
        offsets = self._offsets
        cap = self.max_entries
        for index, record in enumerate(batch.records):
            offset = batch.offset_of(index)
            if offset >= upto_offset:
                break
            if record.key is not None and offset >= start_offset:
                if cap is not None and len(offsets) >= cap:
                    return True
                offsets[record.key] = offset
        if batch.last_offset >= start_offset:
            self.latest_offset = max(self.latest_offset, min(batch.last_offset, upto_offset - 1))
        return False

    def segment_mapped(self, next_segment_start_offset: int) -> None:
        """A segment mapped whole: the latest offset jumps over any offset gap to the next
        segment (Kafka's updateLatestOffset(nextSegmentStartOffset - 1))."""
        self.latest_offset = max(self.latest_offset, next_segment_start_offset - 1)

    @property
    def full(self) -> bool:
        return self.max_entries is not None and len(self._offsets) >= self.max_entries

    def get(self, key: bytes) -> int:
        return self._offsets.get(key, NO_OFFSET)

    def __len__(self) -> int:
        return len(self._offsets)


@dataclass(frozen=True, slots=True)
class CleanStats:
    records_read: int = 0
    records_kept: int = 0
    batches_read: int = 0
    batches_kept: int = 0


def clean_batch(
    batch: RecordBatch,
    raw: bytes,
    offset_map: OffsetMap,
    *,
    now_ms: int,
    delete_retention_ms: int,
    upper_bound_offset: int,
    last_offsets_of_active_producers: Mapping[int, int],
) -> tuple[bytes | None, int]:
    """What of one batch goes into the cleaned segment (filterTo with Kafka's cleaner filter):
    its original bytes when every record stays and no delete horizon is to be set, a rebuilt
    batch of the records kept, an empty header (RETAIN_EMPTY), or None. Also how many records
    were kept."""
    if batch.is_control:
        return raw, len(batch.records)  # no transactions here: markers never occur; keep as is
    horizon = delete_horizon_ms(batch)
    kept: list[int] = []
    has_tombstone = False
    for index, record in enumerate(batch.records):
        offset = batch.offset_of(index)
        if offset > offset_map.latest_offset:
            keep = True  # past the map: not looked at this round
        elif record.key is None:
            keep = False  # Kafka drops keyless records of a compacted log
        else:
            latest = offset >= offset_map.get(record.key)
            retain_delete = horizon is None or now_ms < horizon
            keep = latest and (record.value is not None or retain_delete)
        if keep:
            kept.append(index)
            has_tombstone |= record.value is None
    if kept:
        needs_horizon = has_tombstone and horizon is None
        if len(kept) == len(batch.records) and not needs_horizon:
            return raw, len(kept)
        new_horizon = now_ms + delete_retention_ms if needs_horizon else horizon
        return encode_retained_batch(batch, kept, new_horizon), len(kept)
    last_of_producer = (
        batch.producer_id >= 0
        and last_offsets_of_active_producers.get(batch.producer_id) == batch.last_offset
    )
    if last_of_producer or batch.next_offset == upper_bound_offset:
        return empty_batch_header(batch), 0
    return None, 0


def group_segments(
    segments: Sequence[SegmentView], end_offset: int, max_size_bytes: int
) -> list[list[int]]:
    """Kafka's groupSegmentsBySize over the segments holding offsets below end_offset (indexes
    into `segments`, which are all closed): consecutive segments whose sizes sum to at most
    segment.bytes are cleaned into one."""
    candidates = [i for i, s in enumerate(segments) if s.base_offset < end_offset]
    groups: list[list[int]] = []
    for index in candidates:
        size = segments[index].size_bytes
        if groups:
            current = groups[-1]
            total = sum(segments[i].size_bytes for i in current)
            if total + size <= max_size_bytes:
                current.append(index)
                continue
        groups.append([index])
    return groups


def build_offset_map(
    segments: Iterable[tuple[int, Iterable[RecordBatch]]],
    first_dirty: int,
    upto_offset: int,
    max_entries: int | None = None,
) -> OffsetMap:
    """The offset map over [first_dirty, upto_offset) (Kafka's buildOffsetMap): `segments` are
    (next segment's start offset, its batches) in order; it stops where the map fills."""
    offset_map = OffsetMap(max_entries)
    for next_start, batches in segments:
        for batch in batches:
            if batch.last_offset < first_dirty:
                continue
            if offset_map.add_batch(batch, upto_offset, first_dirty):
                return offset_map
        offset_map.segment_mapped(min(next_start, upto_offset))
    return offset_map
