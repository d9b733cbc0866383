"""The epoch states of a Raft replica as values, after Kafka's QuorumState/EpochState.

A replica holds exactly one at a time; what must survive a restart is the ElectionState
(the quorum-state file: epoch, leader id, voted key), durable before a vote or a leadership
claim is sent (INVARIANTS rule 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raft.core.leader_state import LeaderState
from raft.core.replica_key import ReplicaKey


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int
    leader_id: int | None = None
    voted_key: ReplicaKey | None = None


@dataclass(slots=True)
class UnattachedState:
    """No leader known in this epoch; a voter starts a pre-vote at election_deadline_ms."""

    epoch: int
    voted_key: ReplicaKey | None
    election_deadline_ms: int
    name: str = "Unattached"


@dataclass(slots=True)
class ProspectiveState:
    """Pre-vote round (KIP-996, rule 7): the epoch is not bumped and nothing is persisted."""

    epoch: int
    voted_key: ReplicaKey | None
    leader_id: int | None
    election_deadline_ms: int
    granted: set[ReplicaKey] = field(default_factory=set)
    rejected: set[ReplicaKey] = field(default_factory=set)
    name: str = "Prospective"


@dataclass(slots=True)
class CandidateState:
    epoch: int
    election_deadline_ms: int
    granted: set[ReplicaKey] = field(default_factory=set)
    rejected: set[ReplicaKey] = field(default_factory=set)
    name: str = "Candidate"


@dataclass(slots=True)
class FollowerState:
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


@dataclass(slots=True)
class ResignedState:
    """A leader that stepped down (check-quorum or shutdown); it waits for the next election."""

    epoch: int
    election_deadline_ms: int
    unacked_voters: set[ReplicaKey]
    preferred_successors: list[int]
    next_send_ms: int = 0
    name: str = "Resigned"


EpochState = (
    UnattachedState | ProspectiveState | CandidateState | LeaderState | FollowerState
    | ResignedState
)
