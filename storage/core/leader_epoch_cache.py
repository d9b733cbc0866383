"""The leader epoch cache of one partition replica, after Kafka's LeaderEpochFileCache.

Entries are (leader epoch, start offset) pairs, strictly increasing in both. The leader assigns
its epoch at its log end offset when elected, a follower assigns each new epoch it fetches at the
batch's base offset. The cache answers OffsetsForLeaderEpoch, and a follower uses the leader's
answer to decide where to truncate before it fetches (INVARIANTS rule 22, KIP-101/KIP-279).
Pure: the runtime persists `entries()` to `leader-epoch-checkpoint`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """An OffsetsForLeaderEpoch answer: the largest epoch <= the one asked for, and its end."""

    leader_epoch: int
    end_offset: int

    @property
    def undefined(self) -> bool:
        return self.end_offset == UNDEFINED_EPOCH_OFFSET


UNDEFINED_EPOCH_END_OFFSET = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


@dataclass(frozen=True, slots=True)
class TruncationDecision:
    """Where a follower truncates; `complete` False means ask the leader again (KIP-279)."""

    offset: int
    complete: bool
    reason: str


class LeaderEpochCache:
    def __init__(self, entries: Iterable[EpochEntry] = ()) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for entry in entries:
            self.assign(entry.epoch, entry.start_offset)

    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(EpochEntry(e, s) for e, s in zip(self._epochs, self._starts, strict=True))

    def __len__(self) -> int:
        return len(self._epochs)

    def latest_epoch(self) -> int:
        """The last epoch in the cache, UNDEFINED_EPOCH (-1) when empty."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    def start_offset_of(self, epoch: int) -> int | None:
        index = bisect.bisect_left(self._epochs, epoch)
        if index < len(self._epochs) and self._epochs[index] == epoch:
            return self._starts[index]
        return None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the entry at offset was written in, if the cache covers it."""
        index = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[index] if index >= 0 else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the cache changed.

        Kafka's rule: a new entry removes every entry at its end whose epoch or start offset is
        not below the new one's, so the cache stays strictly increasing in both.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"cannot assign epoch {epoch} at offset {start_offset}")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop every epoch starting at or after end_offset (the log was truncated there)."""
        if end_offset < 0:
            return False
        changed = False
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
            changed = True
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop epochs wholly below start_offset; the last of them now starts at start_offset."""
        index = bisect.bisect_right(self._starts, start_offset)
        if index == 0:
            return False
        kept_epoch = self._epochs[index - 1]
        if index == 1 and self._starts[0] == start_offset:
            return False
        del self._epochs[:index]
        del self._starts[:index]
        self._epochs.insert(0, kept_epoch)
        self._starts.insert(0, start_offset)
        return True

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
        """Kafka's endOffsetFor: the OffsetsForLeaderEpoch answer for `requested_epoch`."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH_END_OFFSET
        if requested_epoch == self._epochs[-1]:
            # The current (latest) epoch is still being written: it ends at the log end.
            return EpochEndOffset(requested_epoch, log_end_offset)
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher >= len(self._epochs):
            return UNDEFINED_EPOCH_END_OFFSET  # larger than any known epoch
        if higher == 0:
            # Older than anything we keep: the data is gone, send the follower to our first epoch.
            return EpochEndOffset(requested_epoch, self._starts[0])
        return EpochEndOffset(self._epochs[higher - 1], self._starts[higher])


def diverging_epoch(
    cache: LeaderEpochCache, fetch_offset: int, last_fetched_epoch: int, log_end_offset: int
) -> EpochEndOffset | None:
    """Leader-side Fetch validation (Kafka's validateFetchOffsetAndMaybeGetDivergingEpoch):
    the epoch and end offset the follower must truncate to, or None if its log is a prefix of
    ours up to fetch_offset. UNDEFINED_EPOCH skips the check (followers without epochs)."""
    if last_fetched_epoch == UNDEFINED_EPOCH:
        return None
    answer = cache.end_offset_for_epoch(last_fetched_epoch, log_end_offset)
    if answer.undefined:
        return None
    if answer.leader_epoch < last_fetched_epoch or answer.end_offset < fetch_offset:
        return answer
    return None


def follower_truncation(
    leader_answer: EpochEndOffset,
    follower_cache: LeaderEpochCache,
    follower_log_end_offset: int,
    follower_high_watermark: int,
) -> TruncationDecision:
    """Rule 22: where a follower truncates, given the leader's OffsetsForLeaderEpoch answer for
    the follower's latest epoch (Kafka's AbstractFetcherThread.getOffsetTruncationState)."""
    leo = follower_log_end_offset
    if leader_answer.undefined:
        # The leader knows no epoch at or below ours: fall back to our high watermark.
        offset = min(follower_high_watermark, leo)
        return TruncationDecision(offset, True, "leader has no epoch at or below ours")
    if leader_answer.leader_epoch == UNDEFINED_EPOCH:
        offset = min(leader_answer.end_offset, leo)
        return TruncationDecision(offset, True, "leader answered without an epoch")
    ours = follower_cache.end_offset_for_epoch(leader_answer.leader_epoch, leo)
    if ours.undefined:
        offset = min(leader_answer.end_offset, leo)
        return TruncationDecision(offset, True, "no local epoch at or below the leader's")
    if ours.leader_epoch != leader_answer.leader_epoch:
        # We never saw the leader's epoch: cut to the end of our older epoch and ask again.
        return TruncationDecision(
            min(ours.end_offset, leo),
            False,
            f"local epoch {ours.leader_epoch} below leader's epoch {leader_answer.leader_epoch}",
        )
    offset = min(ours.end_offset, leader_answer.end_offset, leo)
    return TruncationDecision(
        offset, True, f"epoch {leader_answer.leader_epoch} ends at {leader_answer.end_offset}"
    )
