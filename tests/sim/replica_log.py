"""A replica's log reduced to the leader epoch of each entry, with its leader epoch cache: the
data the broker rules (20, 22) are about, shared by the broker property tests
(tests/unit/test_partition_properties_broker.py) and the broker simulator (broker_sim.py)."""

from __future__ import annotations

from storage.core.leader_epoch_cache import UNDEFINED_EPOCH, LeaderEpochCache, follower_truncation


class ReplicaLog:
    def __init__(self) -> None:
        self.entries: list[int] = []  # the leader epoch of each offset
        self.cache = LeaderEpochCache()
        self.flushed = 0

    @property
    def end_offset(self) -> int:
        return len(self.entries)

    def append(self, epoch: int) -> None:
        if epoch > self.cache.latest_epoch():
            self.cache.assign(epoch, len(self.entries))
        self.entries.append(epoch)

    def truncate(self, offset: int) -> None:
        del self.entries[offset:]
        self.cache.truncate_from_end(offset)
        self.flushed = min(self.flushed, offset)

    def holds(self, other: ReplicaLog, end: int) -> bool:
        """This log has `other`'s entries below `end`."""
        return len(self.entries) >= end and self.entries[:end] == other.entries[:end]


def truncate_against(follower: ReplicaLog, leader: ReplicaLog, follower_hwm: int = 0) -> None:
    """Rule 22: OffsetsForLeaderEpoch rounds until the follower's decision is complete."""
    for _round in range(64):
        requested = follower.cache.latest_epoch()
        answer = leader.cache.end_offset_for_epoch(requested, len(leader.entries))
        # With no epoch yet the follower has no entries either.
        assert requested != UNDEFINED_EPOCH or not follower.entries
        decision = follower_truncation(answer, follower.cache, len(follower.entries), follower_hwm)
        follower.truncate(decision.offset)
        if decision.complete:
            return
    raise AssertionError("truncation did not converge")
