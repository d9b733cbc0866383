"""The leader's view of its epoch: per-replica fetch progress and the high watermark.

High watermark (INVARIANTS rule 3): the offset a majority of the voter set in force has (the
leader counts its own *flushed* offset, rule 2), moved only once it covers an entry of the
leader's own epoch, and never backwards (KIP-853: even when the voter set changes).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from raft.core.epoch_state import EpochStateBase
from raft.core.replica_key import ReplicaKey
from raft.core.voter_set import VoterSet

# Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS: DescribeQuorum forgets an observer that has
# not fetched for this long (one that never fetched at once).
OBSERVER_SESSION_TIMEOUT_MS = 300_000


@dataclass(slots=True)
class ReplicaProgress:
    key: ReplicaKey
    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    endpoint: str = ""  # where an observer listens, from its Fetch (seed 003's AddVoter)


@dataclass(slots=True)
class LeaderState(EpochStateBase):
    epoch: int
    local_key: ReplicaKey
    epoch_start_offset: int  # offset of this epoch's LeaderChange record
    high_watermark: int
    start_ms: int
    granting_voters: set[int] = field(default_factory=set)
    progress: dict[ReplicaKey, ReplicaProgress] = field(default_factory=dict)
    unacked_begin_epoch: dict[ReplicaKey, int] = field(default_factory=dict)  # -> retry at ms
    next_check_quorum_ms: int = 0
    name: str = "Leader"

    # -- where the leader's role differs (raft.core.epoch_state) -------------------------------
    def leader_of(self, local_id: int) -> int | None:
        return local_id

    def deadlines(self, may_stand: bool) -> list[int]:
        return [self.next_check_quorum_ms, *self.unacked_begin_epoch.values()]

    def has_live_leader(self, now_ms: int, fetch_timeout_ms: int) -> bool:
        return True

    def accepts_leader(self, leader_id: int, endpoint: str, from_leader: bool) -> bool:
        return False  # another leader in our epoch would break rule 1; never follow it

    may_pre_vote: ClassVar[bool] = False

    # -- progress --------------------------------------------------------------------------------

    def update_local(self, flushed_offset: int, now_ms: int) -> None:
        p = self.progress.setdefault(self.local_key, ReplicaProgress(self.local_key))
        p.log_end_offset = flushed_offset
        p.last_fetch_ms = now_ms
        p.last_caught_up_ms = now_ms

    def update_replica(self, replica_id: int, directory_id: uuid.UUID, fetch_offset: int,
                       leader_end_offset: int, now_ms: int, endpoint: str = "") -> None:
        """A validated Fetch at fetch_offset: the replica holds, durably, everything below it."""
        key = ReplicaKey(replica_id, directory_id)
        p = self.progress.setdefault(key, ReplicaProgress(key))
        p.log_end_offset = fetch_offset
        p.last_fetch_ms = now_ms
        if endpoint:
            p.endpoint = endpoint
        if fetch_offset >= leader_end_offset:
            p.last_caught_up_ms = now_ms
        self.unacked_begin_epoch.pop(key, None)  # fetching in our epoch acknowledges it

    def touch(self, replica_id: int, directory_id: uuid.UUID, now_ms: int) -> None:
        """A fetch that proved the replica alive without acknowledging an offset."""
        key = ReplicaKey(replica_id, directory_id)
        self.progress.setdefault(key, ReplicaProgress(key)).last_fetch_ms = now_ms
        self.unacked_begin_epoch.pop(key, None)

    def is_caught_up(self, key: ReplicaKey, leader_end_offset: int, max_lag: int,
                     fetched_since_ms: int) -> bool:
        """Rule 5: a replica about to become a voter fetches now and is near the log end, so
        adding it does not stall the high watermark."""
        p = self.progress.get(key)
        return p is not None and p.last_fetch_ms >= fetched_since_ms and (
            p.log_end_offset >= leader_end_offset - max_lag)

    def maybe_advance_high_watermark(self, voters: VoterSet) -> bool:
        """Recompute the majority-acked offset of `voters` (rule 3); True if the HWM moved."""
        if not voters:
            return False
        offsets = sorted((self.progress[k].log_end_offset if k in self.progress else -1
                          for k in voters), reverse=True)
        majority_offset = offsets[voters.majority_size - 1]
        # Rule 3: only an offset past this epoch's first entry commits (Raft's "current term" rule).
        if majority_offset > self.epoch_start_offset and majority_offset > self.high_watermark:
            self.high_watermark = majority_offset
            return True
        return False

    def majority_heard_since(self, voters: VoterSet, since_ms: int) -> bool:
        """Kafka's check-quorum: a majority of voters (the leader counts) fetched since since_ms."""
        heard = 0
        for key in voters:
            if key == self.local_key:
                heard += 1
                continue
            p = self.progress.get(key)
            if p is not None and p.last_fetch_ms >= since_ms:
                heard += 1
        return heard >= voters.majority_size

    def voter_progress(self, voters: VoterSet) -> list[ReplicaProgress]:
        return [self.progress.get(k) or ReplicaProgress(k) for k in voters]

    def observer_progress(self, voters: VoterSet) -> list[ReplicaProgress]:
        return [p for k, p in self.progress.items() if k not in voters]

    def described_observers(self, voters: VoterSet, now_ms: int) -> list[ReplicaProgress]:
        """The observers DescribeQuorum lists (a removed voter that still fetches included), as
        Kafka's LeaderState does: those that fetched within the observer session timeout, and
        the leader itself once it removed itself (rule 6)."""
        return [p for p in self.observer_progress(voters) if p.key == self.local_key
                or now_ms - p.last_fetch_ms < OBSERVER_SESSION_TIMEOUT_MS]

    def successors_by_progress(self, voters: VoterSet) -> list[int]:
        """Other voters, most caught up first (EndQuorumEpoch's preferred successors)."""
        others = [p for p in self.voter_progress(voters) if p.key != self.local_key]
        others.sort(key=lambda p: (-p.log_end_offset, p.key.id))
        return [p.key.id for p in others]
