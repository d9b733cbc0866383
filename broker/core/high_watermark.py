"""Rule 20 (INVARIANTS.md, KIP-966): where a leader's high watermark may go. Decided here only:
the partition core (broker.core.partition_state) moves the HWM with these functions, and the
rule checkers (the broker simulator, the audit baseline, the Spark audit's column) judge journaled
HwmAdvanced events with `hwm_may_advance` too, so changing the rule is a change of this file
(and of the transcripts, tests/scenarios/broker/*.txt, that show its outcome).

- The HWM is the lowest offset over the maximal ISR (the committed ISR plus members the leader
  has proposed), never moves back, and advances only while the committed ISR is at least the
  effective min ISR.
- Only flushed offsets count: a follower reports the offset it fetched from, after its own fsync
  (a follower's append is fsync'd before its next Fetch); the leader counts its log end, except
  that an append the broker fsyncs before answering (acks=all, log.flush.interval.messages)
  counts only once flushed, as raft's LeaderState counts only the leader's flushed offset.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def hwm_may_advance(committed_isr_size: Any, min_isr: Any) -> Any:
    """Whether the HWM may move with this committed ISR size under this effective min ISR.

    Ints here, from the core and the plain checkers; Spark Columns from the audit, which builds
    its column with this same function (so only operators, no `if`)."""
    return committed_isr_size >= min_isr


def leader_counted_offset(log_end_offset: int, flushed_offset: int, flush_first_to: int) -> int:
    """The leader's own offset toward the HWM: its log end, or its flushed offset while an append
    below `flush_first_to` (one the broker fsyncs before answering it) is not flushed yet."""
    if flushed_offset >= flush_first_to:
        return log_end_offset
    return min(flushed_offset, log_end_offset)


def next_high_watermark(
    current: int,
    committed_isr_size: int,
    min_isr: int,
    leader_offset: int,
    follower_offsets: Iterable[int],
) -> int | None:
    """The new HWM, or None if it does not move: the lowest of the leader's counted offset and
    the maximal ISR followers' fetch offsets, if above `current` and the ISR is at min ISR."""
    if not hwm_may_advance(committed_isr_size, min_isr):
        return None
    candidate = min((leader_offset, *follower_offsets))
    return candidate if candidate > current else None
