"""Which old segments of a partition log retention deletes (Kafka's UnifiedLog.deleteOldSegments),
and when the active segment rolls by time (LogSegment.shouldRoll's segment.ms part). Pure: the
runtime passes the segments, offsets and clock in and removes what this returns
(broker/runtime/log_manager.py).

Kafka's rules, in its order: segments wholly below the log start offset (DeleteRecords, a
follower following its leader's start) always go; with cleanup.policy containing `delete`, then
the oldest segments while the log is larger than retention.bytes by at least their size, then
the oldest segments whose largest timestamp is more than retention.ms old. Each pass stops at the
first segment that may not go, and never takes a segment that is not wholly below the high
watermark (so the log start never passes it, rule 24) nor a last segment that is empty. When
every segment goes, the log first rolls a new, empty active segment (deleteSegments: "we must
always have at least one segment").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from storage.core.record_validation import COMPACT

DELETE = "delete"
NO_LIMIT = -1


@dataclass(frozen=True, slots=True)
class SegmentView:
    """What retention reads of one segment: `largest_timestamp_ms` is its largest batch
    maxTimestamp, or the file's modification time when no batch has a timestamp (Kafka's
    LogSegment.largestTimestamp)."""

    base_offset: int
    size_bytes: int
    largest_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class RetentionConfig:
    """A partition's effective retention configs (topic override, else broker synonym, else
    Kafka's default)."""

    retention_ms: int = 604_800_000
    retention_bytes: int = NO_LIMIT
    delete: bool = True  # cleanup.policy names delete
    compact: bool = False  # cleanup.policy names compact (the log cleaner's business)
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    file_delete_delay_ms: int = 60_000

    @classmethod
    def from_configs(cls, values: Mapping[str, str | None]) -> RetentionConfig:
        """From a topic's effective configs (name -> value, as config_defs prints them)."""

        defaults = _DEFAULTS

        def number(key: str, default: int) -> int:
            value = values.get(key)
            return default if value is None else int(value)

        policy = [p.strip().lower() for p in (values.get("cleanup.policy") or DELETE).split(",")]
        return cls(
            retention_ms=number("retention.ms", defaults.retention_ms),
            retention_bytes=number("retention.bytes", defaults.retention_bytes),
            delete=DELETE in policy,
            compact=COMPACT in policy,
            segment_ms=number("segment.ms", defaults.segment_ms),
            segment_jitter_ms=number("segment.jitter.ms", defaults.segment_jitter_ms),
            file_delete_delay_ms=number("file.delete.delay.ms", defaults.file_delete_delay_ms),
        )


_DEFAULTS = RetentionConfig()


@dataclass(frozen=True, slots=True)
class Deletion:
    """How many of the oldest segments go, and why (Kafka's SegmentDeletionReason, one per
    pass that took any); `roll_first`: every segment goes, so the log rolls before."""

    count: int
    reasons: tuple[str, ...] = ()
    roll_first: bool = False


def _deletable(
    segments: Sequence[SegmentView],
    log_end_offset: int,
    high_watermark: int,
    predicate: _Predicate,
) -> int:
    """Kafka's deletableSegments: the oldest segments for which predicate holds, stopping at
    the first that is not wholly below the high watermark, and never a last segment that is
    empty."""
    count = 0
    for index, segment in enumerate(segments):
        is_last = index == len(segments) - 1
        upper_bound = log_end_offset if is_last else segments[index + 1].base_offset
        if is_last and segment.size_bytes == 0:
            break
        # Rule 24: the log start offset never passes the high watermark.
        if high_watermark < upper_bound or not predicate(segment, index):
            break
        count += 1
    return count


# Whether a deletion pass takes this segment (the oldest first; the pass stops at the first no).
_Predicate = Callable[[SegmentView, int], bool]


class _BelowLogStart:
    def __init__(self, segments: Sequence[SegmentView], log_start_offset: int) -> None:
        self._segments = segments
        self._log_start_offset = log_start_offset

    def __call__(self, segment: SegmentView, index: int) -> bool:
        following = self._segments[index + 1] if index + 1 < len(self._segments) else None
        return following is not None and following.base_offset <= self._log_start_offset


class _OverSize:
    def __init__(self, excess_bytes: int) -> None:
        self._excess = excess_bytes

    def __call__(self, segment: SegmentView, index: int) -> bool:
        if self._excess - segment.size_bytes < 0:
            return False
        self._excess -= segment.size_bytes
        return True


class _Expired:
    def __init__(self, now_ms: int, retention_ms: int) -> None:
        self._now_ms = now_ms
        self._retention_ms = retention_ms

    def __call__(self, segment: SegmentView, index: int) -> bool:
        return self._now_ms - segment.largest_timestamp_ms > self._retention_ms


def segments_to_delete(
    segments: Sequence[SegmentView],
    *,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    config: RetentionConfig,
    now_ms: int,
) -> Deletion:
    """The oldest segments retention deletes now (the three passes of deleteOldSegments, each
    over what the ones before left)."""
    remaining = list(segments)
    total = 0
    reasons: list[str] = []

    def run(predicate: _Predicate, reason: str) -> None:
        nonlocal remaining, total
        count = _deletable(remaining, log_end_offset, high_watermark, predicate)
        if count:
            reasons.append(reason)
            total += count
            remaining = remaining[count:]

    run(_BelowLogStart(remaining, log_start_offset), "log start offset breached")
    if config.delete:
        if config.retention_bytes >= 0:
            size = sum(s.size_bytes for s in remaining)
            if size >= config.retention_bytes:
                run(_OverSize(size - config.retention_bytes), "retention size breached")
        if config.retention_ms >= 0:
            run(_Expired(now_ms, config.retention_ms), "retention time breached")
    return Deletion(total, tuple(reasons), roll_first=total > 0 and not remaining)


def should_roll_by_time(
    first_batch_timestamp_ms: int | None,
    incoming_max_timestamp_ms: int,
    created_ms: int,
    now_ms: int,
    config: RetentionConfig,
) -> bool:
    """LogSegment.shouldRoll's time part for a non-empty active segment: the incoming batch's
    timestamp is more than segment.ms (less the jitter) past the segment's first batch
    (timeWaitedForRoll; the segment's creation time when its batches carry no timestamp)."""
    if first_batch_timestamp_ms is None:
        return False  # an empty segment never rolls by time
    if first_batch_timestamp_ms >= 0:
        waited = incoming_max_timestamp_ms - first_batch_timestamp_ms
    else:
        waited = now_ms - created_ms
    return waited > config.segment_ms - config.segment_jitter_ms
