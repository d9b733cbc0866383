"""One consumer group under the classic rebalance protocol (after Kafka's ClassicGroup): its
members, generation, chosen protocol, leader and state, and the transitions between the states

    Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance ...

Pure: the shard (group_coordinator_shard.py) drives it with `now_ms` and says what to answer.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


class GroupState(enum.Enum):
    # Kafka's names, as ListGroups/DescribeGroups print them.
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class GroupMember:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's preference order
    group_instance_id: str | None = None
    assignment: bytes = b""
    last_heartbeat_ms: int = 0
    awaiting_join: bool = False
    awaiting_sync: bool = False

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def session_expired(self, now_ms: int) -> bool:
        """A member waiting for a join or sync answer is kept alive (Kafka's shouldKeepAlive)."""
        if self.awaiting_join or self.awaiting_sync:
            return False
        return self.last_heartbeat_ms + self.session_timeout_ms <= now_ms


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, GroupMember] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED (KIP-394), until the member joins with it.
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline ms
    join_deadline_ms: int = 0
    initial_join_deadline_ms: int | None = None  # the initial delay's hard cap (rebalance timeout)
    in_initial_delay: bool = False
    state_timestamp_ms: int = -1

    @property
    def is_empty(self) -> bool:
        return not self.members

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    def supports(self, protocol_type: str, protocol_names: Iterable[str]) -> bool:
        """Kafka's supportsProtocols: an empty group accepts any non-empty protocol set; else
        the type must match and one protocol must be common to every member and this one."""
        names = set(protocol_names)
        if not protocol_type or not names:
            return False
        if self.is_empty:
            return True
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        candidates: set[str] | None = None
        for member in self.members.values():
            names = {name for name, _ in member.protocols}
            candidates = names if candidates is None else candidates & names
        return candidates or set()

    def select_protocol(self) -> str | None:
        """Each member votes for its first preference among the common protocols; the most
        votes win, ties to the protocol listed first by the leader (Kafka's selectProtocol)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next((name for name, _ in member.protocols if name in candidates), None)
            if choice is not None:
                votes[choice] = votes.get(choice, 0) + 1
        if not votes:
            return None
        order = [name for member in self.members.values() for name, _ in member.protocols]
        return max(votes, key=lambda name: (votes[name], -order.index(name)))

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def add_member(self, member: GroupMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> GroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None and self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member
