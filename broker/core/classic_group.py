"""One consumer group under the classic rebalance protocol (after Kafka's ClassicGroup): its
members, generation, chosen protocol, leader and state, and the transitions between the states

    Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance ...

Pure: the shard (group_coordinator_shard.py) drives it with `now_ms` and says what to answer.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from kafkawire.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscription_topics
from kafkawire.errors import Errors

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
    # KIP-345: group.instance.id -> the member id it holds now (Kafka's staticMembers).
    static_members: dict[str, str] = field(default_factory=dict)
    # What the members subscribe to, as of the last generation (None: unknown, not "consumer").
    subscribed_topics: frozenset[str] | None = None

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

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Kafka's computeSubscribedTopics: the union of the members' subscriptions under the
        chosen protocol, for protocol type "consumer" only; None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(subscription_topics(member.metadata_for(self.protocol_name)))
        except ValueError:
            return None
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        """Kafka's isSubscribedToTopic: when the topics are unknown, a "consumer" group counts
        as subscribed to everything (its offsets are not deleted under it)."""
        if self.subscribed_topics is None:
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in self.subscribed_topics

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def add_member(self, member: GroupMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> GroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            instance_id = member.group_instance_id
            if instance_id is not None and self.static_members.get(instance_id) == member_id:
                del self.static_members[instance_id]
            if self.leader_id == member_id:
                self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> GroupMember:
        """Kafka's replaceStaticMember: the member keeps everything (its assignment too) but
        its id; the old id is out of the group (its waiting answers are the caller's to fence)."""
        old = self.members.pop(old_id)
        member = replace(old, member_id=new_id, awaiting_join=False, awaiting_sync=False)
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return member

    def validate_member(self, member_id: str, instance_id: str | None) -> Errors:
        """Kafka's validateMember: an instance id must map to this member id (another id holds
        it: FENCED_INSTANCE_ID, none: UNKNOWN_MEMBER_ID); the member id must be a member."""
        if instance_id is not None:
            holder = self.static_members.get(instance_id)
            if holder is None:
                return Errors.UNKNOWN_MEMBER_ID
            if holder != member_id:
                return Errors.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return Errors.UNKNOWN_MEMBER_ID
        return Errors.NONE

    def elect_joined_leader(self) -> bool:
        """Kafka's maybeElectNewJoinedLeader: a leader that did not rejoin (a static member
        keeps its place) hands over to the first member that did; False when none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False
