"""The epoch states of a Raft replica as values, after Kafka's QuorumState/EpochState.

A replica holds exactly one at a time; what must survive a restart is the ElectionState
(the quorum-state file: epoch, leader id, voted key), durable before a vote or a leadership
claim is sent (INVARIANTS rule 1).

What differs by role is answered by the state itself (Kafka's EpochState methods: which leader it
knows, whom it voted for, when it next has something to do), so the replica asks its state
instead of testing its type. The leader's state is raft.core.leader_state.LeaderState.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from raft.core.epoch_state import EpochStateBase
from raft.core.leader_state import LeaderState
from raft.core.replica_key import ReplicaKey

NO_DEADLINE_MS = 1 << 62


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int
    leader_id: int | None = None
    voted_key: ReplicaKey | None = None


@dataclass(slots=True)
class UnattachedState(EpochStateBase):
    """No leader known in this epoch; a voter starts a pre-vote at election_deadline_ms."""

    epoch: int
    voted_key: ReplicaKey | None
    election_deadline_ms: int
    name: str = "Unattached"

    def voted_key_of(self, local_key: ReplicaKey) -> ReplicaKey | None:
        return self.voted_key

    def deadlines(self, may_stand: bool) -> list[int]:
        return [self.election_deadline_ms] if may_stand else []

    def stand_by_for_successor(self, leader_id: int, now_ms: int,
                               delay_ms: Callable[[], int]) -> None:
        # The leader is leaving: stand after the delay (the successors in order).
        self.election_deadline_ms = min(self.election_deadline_ms, now_ms + delay_ms())

    observes: ClassVar[bool] = True


@dataclass(slots=True)
class ProspectiveState(EpochStateBase):
    """Pre-vote round (KIP-996, rule 7): the epoch is not bumped and nothing is persisted."""

    epoch: int
    voted_key: ReplicaKey | None
    leader_id: int | None
    election_deadline_ms: int
    granted: set[ReplicaKey] = field(default_factory=set)
    rejected: set[ReplicaKey] = field(default_factory=set)
    name: str = "Prospective"

    def voted_key_of(self, local_key: ReplicaKey) -> ReplicaKey | None:
        return self.voted_key

    def last_leader_id(self) -> int | None:
        return self.leader_id

    def deadlines(self, may_stand: bool) -> list[int]:
        return [self.election_deadline_ms] if may_stand else []

    def accepts_leader(self, leader_id: int, endpoint: str, from_leader: bool) -> bool:
        # KIP-996: the leader we timed out on; others may not know it is gone yet.
        return from_leader or self.leader_id != leader_id


@dataclass(slots=True)
class CandidateState(EpochStateBase):
    epoch: int
    election_deadline_ms: int
    granted: set[ReplicaKey] = field(default_factory=set)
    rejected: set[ReplicaKey] = field(default_factory=set)
    name: str = "Candidate"

    def deadlines(self, may_stand: bool) -> list[int]:
        return [self.election_deadline_ms] if may_stand else []

    may_pre_vote: ClassVar[bool] = False


@dataclass(slots=True)
class FollowerState(EpochStateBase):
    epoch: int
    leader_id: int
    leader_endpoint: str
    voted_key: ReplicaKey | None
    fetch_deadline_ms: int  # KIP-595 fetch timeout: a voter turns prospective here
    last_fetch_success_ms: int  # last word from the leader; pre-votes are refused until timeout
    next_fetch_ms: int = 0
    # The fetch timer ran out or the connection to the leader was reset: the replica stands
    # (turns prospective) at fetch_deadline_ms, a random moment so the survivors do not all
    # stand at once and split the vote.
    leader_lost: bool = False
    # KIP-853: this voter told the leader of this epoch its listeners (UpdateRaftVoter), or
    # they already matched; next_update_voter_ms spaces out the retries.
    updated_leader: bool = False
    next_update_voter_ms: int = 0
    name: str = "Follower"

    def leader_of(self, local_id: int) -> int | None:
        return self.leader_id

    def voted_key_of(self, local_key: ReplicaKey) -> ReplicaKey | None:
        return self.voted_key

    def last_leader_id(self) -> int | None:
        return self.leader_id

    def deadlines(self, may_stand: bool) -> list[int]:
        return [self.fetch_deadline_ms]

    def has_live_leader(self, now_ms: int, fetch_timeout_ms: int) -> bool:
        return now_ms < self.last_fetch_success_ms + fetch_timeout_ms

    def accepts_leader(self, leader_id: int, endpoint: str, from_leader: bool) -> bool:
        if self.leader_id != leader_id:
            return True
        if endpoint and not self.leader_endpoint:
            self.leader_endpoint = endpoint
        return False

    def stand_by_for_successor(self, leader_id: int, now_ms: int,
                               delay_ms: Callable[[], int]) -> None:
        """EndQuorumEpoch from our leader: cut the fetch timer short, keep the leader (Kafka)."""
        if leader_id != self.leader_id:
            return
        self.fetch_deadline_ms = min(self.fetch_deadline_ms, now_ms + delay_ms())
        self.last_fetch_success_ms = -NO_DEADLINE_MS  # pre-votes may be granted now
        self.leader_lost = True  # the delay orders the successors: no more jitter

    observes: ClassVar[bool] = True


@dataclass(slots=True)
class ResignedState(EpochStateBase):
    """A leader that stepped down (check-quorum or shutdown); it waits for the next election."""

    epoch: int
    election_deadline_ms: int
    unacked_voters: set[ReplicaKey]
    preferred_successors: list[int]
    next_send_ms: int = 0
    name: str = "Resigned"

    def leader_of(self, local_id: int) -> int | None:
        return local_id

    def deadlines(self, may_stand: bool) -> list[int]:
        if self.unacked_voters:
            return [self.election_deadline_ms, self.next_send_ms]
        return [self.election_deadline_ms]

    def accepts_leader(self, leader_id: int, endpoint: str, from_leader: bool) -> bool:
        return False  # another leader in our epoch would break rule 1; never follow it


EpochState = (
    UnattachedState | ProspectiveState | CandidateState | LeaderState | FollowerState
    | ResignedState
)
