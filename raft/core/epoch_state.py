"""What every EpochState answers (Kafka's EpochState interface), with the answer most roles
give; each state in raft.core.quorum_state (and LeaderState) overrides where its role differs."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from raft.core.replica_key import ReplicaKey


class EpochStateBase:
    __slots__ = ()

    def leader_of(self, local_id: int) -> int | None:
        """The leader this replica knows in its epoch (local_id: itself)."""
        return None

    def voted_key_of(self, local_key: ReplicaKey) -> ReplicaKey | None:
        """Whom this replica voted for in its epoch (a candidate or leader: itself)."""
        return local_key

    def last_leader_id(self) -> int | None:
        """The leader a pre-vote started from falls back to (KIP-996)."""
        return None

    def deadlines(self, may_stand: bool) -> list[int]:
        """When tick() next has something to do in this role."""
        return []

    def has_live_leader(self, now_ms: int, fetch_timeout_ms: int) -> bool:
        """Rule 7: whether a leader was heard recently enough to refuse pre-votes."""
        return False

    def accepts_leader(self, leader_id: int, endpoint: str, from_leader: bool) -> bool:
        """Whether word of leader_id in this same epoch makes this replica its follower."""
        return True

    def stand_by_for_successor(self, leader_id: int, now_ms: int,
                               delay_ms: Callable[[], int]) -> None:
        """EndQuorumEpoch from leader_id: stand after delay_ms() if this role waits for it."""

    # A replica in this role that may not stand is an observer.
    observes: ClassVar[bool] = False
    # A replica in this role may start a pre-vote (rule 7).
    may_pre_vote: ClassVar[bool] = True
