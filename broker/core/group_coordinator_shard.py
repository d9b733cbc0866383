"""The groups and committed offsets of one `__consumer_offsets` partition (after Kafka's
GroupCoordinatorShard with its GroupMetadataManager and OffsetMetadataManager), for the classic
protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit validation, OffsetDelete,
static members (KIP-345: a group.instance.id keeps its member's place and assignment across a
restart), the session and rebalance deadlines, and the replay of the partition's records when
its leader loads it.

Pure: the runtime passes `now_ms` and fresh member-id suffixes in, writes `ShardResult.records`
to the partition (acks=all) and completes the join/sync answers the result lists. A JoinGroup
or SyncGroup that must wait is answered later, through a result of another call or of `tick`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from broker.core.classic_group import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    ClassicGroup,
    GroupMember,
    GroupState,
)
from kafkawire.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from kafkawire.errors import Errors
from kafkawire.group_coordinator_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    Key,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Value,
)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Kafka's broker settings for classic groups (group.* in NodeConfig)."""

    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: Errors
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinMember, ...] = ()  # the leader's answer lists every member
    skip_assignment: bool = False  # v9+: a static leader's rejoin, the assignment stands


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: Errors
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class StoreGroup:
    """A group record to write; once written (or not), call `on_group_stored`."""

    group_id: str
    generation_id: int


@dataclass(frozen=True, slots=True)
class StoreStaticMember:
    """A static member replaced in a Stable group (KIP-345): the group record naming its new
    member id is written first, then `on_group_stored` answers its JoinGroup (or, the write
    failed, restores the old id, as Kafka's updateStaticMemberThenRebalanceOrCompleteJoin)."""

    group_id: str
    instance_id: str
    old_member_id: str
    new_member_id: str
    old_protocols: tuple[tuple[str, bytes], ...]
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    leader_before: str | None
    supports_skip_assignment: bool


@dataclass
class ShardResult:
    joins: list[tuple[str, str, JoinResult]] = field(default_factory=list)  # group, member
    syncs: list[tuple[str, str, SyncResult]] = field(default_factory=list)
    records: list[tuple[Key, Value | None]] = field(default_factory=list)
    store: StoreGroup | StoreStaticMember | None = None

    def extend(self, other: ShardResult) -> None:
        self.joins.extend(other.joins)
        self.syncs.extend(other.syncs)
        self.records.extend(other.records)
        self.store = other.store or self.store


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool  # JoinGroup v4+ (KIP-394)
    supports_skip_assignment: bool = False  # JoinGroup v9+


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    log_offset: int  # where the record sits: a later record of the same key wins


class GroupCoordinatorShard:
    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}

    # ---- JoinGroup ----

    def join(
        self, request: JoinRequest, now_ms: int, member_id_suffix: str
    ) -> tuple[str, JoinResult | None, ShardResult]:
        """(member id, immediate answer or None when the answer waits for the rebalance, what
        else to answer and write)."""
        result = ShardResult()
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:
                return request.member_id, JoinResult(Errors.UNKNOWN_MEMBER_ID), result
            group = ClassicGroup(request.group_id, state_timestamp_ms=now_ms)
            self.groups[request.group_id] = group
        error = self._validate_join(group, request)
        if error is not Errors.NONE:
            return request.member_id, JoinResult(error, request.member_id), result
        instance_id = request.group_instance_id
        if request.member_id == UNKNOWN_MEMBER_ID:
            # Kafka's generateMemberId: a static member's id starts with its instance id.
            prefix = request.client_id if instance_id is None else instance_id
            member_id = f"{prefix}-{member_id_suffix}"
            if len(group.members) + len(group.pending_members) >= self.config.max_size:
                return member_id, JoinResult(Errors.GROUP_MAX_SIZE_REACHED), result
            if instance_id is not None:
                existing = group.static_members.get(instance_id)
                if existing is not None:
                    # KIP-345: a static member back with a fresh start takes its old place.
                    self._replace_static_member(group, request, existing, member_id, now_ms, result)
                    return member_id, None, result
            elif request.require_known_member_id:
                # KIP-394: hand out the id first, so a member that never returns costs nothing
                # (not to static members: their instance id already names them).
                group.pending_members[member_id] = now_ms + request.session_timeout_ms
                return member_id, JoinResult(Errors.MEMBER_ID_REQUIRED, member_id), result
            self._add_member_and_rebalance(group, request, member_id, now_ms, result)
            return member_id, None, result
        member_id = request.member_id
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._add_member_and_rebalance(group, request, member_id, now_ms, result)
            return member_id, None, result
        error = group.validate_member(member_id, instance_id)
        if error is not Errors.NONE:
            return member_id, JoinResult(error, member_id), result
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member(member, request, now_ms)
            result.extend(self._maybe_complete_join(group, now_ms))
            return member_id, None, result
        if group.state is GroupState.COMPLETING_REBALANCE:
            if member.protocols == request.protocols:
                # A lost join answer: send it again (Kafka does the same).
                return member_id, self._join_answer(group, member), result
            self._update_member(member, request, now_ms)
            result.extend(self._prepare_rebalance(group, now_ms))
            return member_id, None, result
        if group.state is GroupState.STABLE:
            if member_id == group.leader_id or member.protocols != request.protocols:
                # The leader rejoining (it may have new topics) or new metadata: rebalance.
                self._update_member(member, request, now_ms)
                result.extend(self._prepare_rebalance(group, now_ms))
                return member_id, None, result
            return member_id, self._join_answer(group, member), result
        return member_id, JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id), result

    def _validate_join(self, group: ClassicGroup, request: JoinRequest) -> Errors:
        if not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return Errors.INVALID_SESSION_TIMEOUT
        if group.state is GroupState.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if not group.supports(request.protocol_type, (name for name, _ in request.protocols)):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return Errors.NONE

    def _add_member_and_rebalance(
        self, group: ClassicGroup, request: JoinRequest, member_id: str, now_ms: int,
        result: ShardResult,
    ) -> None:
        member = GroupMember(
            member_id=member_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            group_instance_id=request.group_instance_id,
            last_heartbeat_ms=now_ms,
            awaiting_join=True,
        )
        group.add_member(member)
        if group.state is GroupState.PREPARING_REBALANCE:
            if group.in_initial_delay and group.initial_join_deadline_ms is not None:
                # Kafka's InitialDelayedJoin: each newcomer extends the wait, up to the cap.
                group.join_deadline_ms = min(
                    now_ms + self.config.initial_rebalance_delay_ms, group.initial_join_deadline_ms
                )
            result.extend(self._maybe_complete_join(group, now_ms))
        else:
            result.extend(self._prepare_rebalance(group, now_ms))

    def _replace_static_member(
        self, group: ClassicGroup, request: JoinRequest, old_id: str, new_id: str, now_ms: int,
        result: ShardResult,
    ) -> None:
        """Kafka's updateStaticMemberThenRebalanceOrCompleteJoin: the instance's old member id
        is fenced (its waiting join or sync gets FENCED_INSTANCE_ID) and the new id takes its
        assignment. In a Stable group whose protocol stays, nobody else rebalances."""
        assert request.group_instance_id is not None
        leader_before = group.leader_id
        old = group.members[old_id]
        if old.awaiting_join:
            result.joins.append((group.group_id, old_id, JoinResult(Errors.FENCED_INSTANCE_ID, old_id)))
        if old.awaiting_sync:
            result.syncs.append((group.group_id, old_id, SyncResult(Errors.FENCED_INSTANCE_ID)))
        member = group.replace_static_member(request.group_instance_id, old_id, new_id)
        store = StoreStaticMember(
            group.group_id, request.group_instance_id, old_id, new_id, member.protocols,
            member.rebalance_timeout_ms, member.session_timeout_ms, leader_before,
            request.supports_skip_assignment,
        )
        self._update_member(member, request, now_ms)
        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                result.records.append(self._group_record(group))
                result.store = store
            else:
                result.extend(self._prepare_rebalance(group, now_ms))
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may already have assigned to the old id: assign again.
            result.extend(self._prepare_rebalance(group, now_ms))
        else:
            result.extend(self._maybe_complete_join(group, now_ms))

    def _on_static_member_stored(
        self, store: StoreStaticMember, error: Errors, now_ms: int
    ) -> ShardResult:
        result = ShardResult()
        group = self.groups.get(store.group_id)
        if group is None or group.static_members.get(store.instance_id) != store.new_member_id:
            return result  # replaced or removed again meanwhile
        member = group.members[store.new_member_id]
        if group.state is not GroupState.STABLE or not member.awaiting_join:
            return result  # a rebalance answered it meanwhile
        member.awaiting_join = False
        if error is not Errors.NONE:
            # The log does not name the new id: back to the old one, the joiner is refused.
            member.protocols = store.old_protocols
            member.rebalance_timeout_ms = store.old_rebalance_timeout_ms
            member.session_timeout_ms = store.old_session_timeout_ms
            old = group.replace_static_member(store.instance_id, store.new_member_id, store.old_member_id)
            old.last_heartbeat_ms = now_ms
            answer = JoinResult(
                error, UNKNOWN_MEMBER_ID, group.generation_id, group.protocol_type,
                group.protocol_name, store.leader_before or "",
            )
        elif store.supports_skip_assignment:
            # v9+: the leader learns the members but keeps the assignment it made.
            is_leader = group.leader_id == store.new_member_id
            answer = replace(self._join_answer(group, member), skip_assignment=is_leader)
        else:
            # Older clients: the leader before the replacement is named, so a returning leader
            # does not assign again; it syncs and gets its assignment back.
            answer = replace(self._join_answer(group, member), leader_id=store.leader_before or "", members=())
        result.joins.append((group.group_id, store.new_member_id, answer))
        return result

    @staticmethod
    def _update_member(member: GroupMember, request: JoinRequest, now_ms: int) -> None:
        member.protocols = request.protocols
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.last_heartbeat_ms = now_ms
        member.awaiting_join = True

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> ShardResult:
        result = ShardResult()
        if group.state is GroupState.COMPLETING_REBALANCE:
            # Members waiting in SyncGroup learn that the generation is over.
            result.extend(self._answer_syncs(group, Errors.REBALANCE_IN_PROGRESS))
            for member in group.members.values():
                member.assignment = b""
        rebalance_timeout_ms = group.max_rebalance_timeout_ms()
        if group.state is GroupState.EMPTY:
            group.in_initial_delay = True
            group.initial_join_deadline_ms = now_ms + rebalance_timeout_ms
            group.join_deadline_ms = now_ms + min(
                self.config.initial_rebalance_delay_ms, rebalance_timeout_ms
            )
        else:
            group.in_initial_delay = False
            group.initial_join_deadline_ms = None
            group.join_deadline_ms = now_ms + rebalance_timeout_ms
        group.transition(GroupState.PREPARING_REBALANCE, now_ms)
        result.extend(self._maybe_complete_join(group, now_ms))
        return result

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int) -> ShardResult:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return ShardResult()
        if group.in_initial_delay and now_ms < group.join_deadline_ms:
            return ShardResult()
        if group.all_members_joined() or now_ms >= group.join_deadline_ms:
            return self._complete_join(group, now_ms)
        return ShardResult()

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> ShardResult:
        """The join phase ends: members that did not rejoin are out, the generation advances,
        every waiting member gets its answer (the leader: the member list)."""
        result = ShardResult()
        # Static members that did not rejoin keep their place until their session ends.
        for member in [
            m for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None
        ]:
            group.remove_member(member.member_id)
        group.in_initial_delay = False
        group.initial_join_deadline_ms = None
        if not group.is_empty and not group.elect_joined_leader():
            # Nobody rejoined (only absent static members are left): wait another rebalance
            # timeout, until sessions expire them (Kafka's completeClassicGroupJoin).
            group.join_deadline_ms = now_ms + group.max_rebalance_timeout_ms()
            return result
        group.generation_id += 1
        if group.is_empty:
            group.protocol_name = None
            group.leader_id = None
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition(GroupState.EMPTY, now_ms)
            result.records.append(self._group_record(group))
            return result
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        for member in group.members.values():
            member.last_heartbeat_ms = now_ms
            if member.awaiting_join:
                member.awaiting_join = False
                result.joins.append((group.group_id, member.member_id, self._join_answer(group, member)))
        return result

    @staticmethod
    def _join_answer(group: ClassicGroup, member: GroupMember) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        return JoinResult(
            Errors.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            tuple(
                JoinMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            )
            if is_leader
            else (),
        )

    # ---- SyncGroup ----

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        now_ms: int,
        group_instance_id: str | None = None,
    ) -> tuple[SyncResult | None, ShardResult]:
        result = ShardResult()
        group = self.groups.get(group_id)
        if group is None or group.is_empty:
            return SyncResult(Errors.UNKNOWN_MEMBER_ID), result
        if group.state is GroupState.DEAD:
            return SyncResult(Errors.COORDINATOR_NOT_AVAILABLE), result
        error = group.validate_member(member_id, group_instance_id)
        if error is not Errors.NONE:
            return SyncResult(error), result
        if generation_id != group.generation_id:
            return SyncResult(Errors.ILLEGAL_GENERATION), result
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(Errors.INCONSISTENT_GROUP_PROTOCOL), result
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(Errors.REBALANCE_IN_PROGRESS), result
        if group.state is GroupState.STABLE:
            member.last_heartbeat_ms = now_ms
            return self._sync_answer(group, member), result
        if group.state is not GroupState.COMPLETING_REBALANCE:
            return SyncResult(Errors.UNKNOWN_MEMBER_ID), result
        member.awaiting_sync = True
        member.last_heartbeat_ms = now_ms
        if member_id == group.leader_id:
            for other in group.members.values():
                # A member the leader left out gets an empty assignment (Kafka does the same).
                other.assignment = assignments.get(other.member_id, b"")
            result.records.append(self._group_record(group))
            result.store = StoreGroup(group_id, group.generation_id)
        return None, result

    def on_group_stored(
        self, store: StoreGroup | StoreStaticMember, error: Errors, now_ms: int
    ) -> ShardResult:
        """The group record reached the log (or did not): answer the waiting syncs (the
        leader's assignment) or the replaced static member's join."""
        if isinstance(store, StoreStaticMember):
            return self._on_static_member_stored(store, error, now_ms)
        group = self.groups.get(store.group_id)
        if (
            group is None
            or group.generation_id != store.generation_id
            or group.state is not GroupState.COMPLETING_REBALANCE
        ):
            return ShardResult()
        if error is not Errors.NONE:
            result = self._answer_syncs(group, error)
            result.extend(self._prepare_rebalance(group, now_ms))
            return result
        group.transition(GroupState.STABLE, now_ms)
        return self._answer_syncs(group, Errors.NONE)

    def _answer_syncs(self, group: ClassicGroup, error: Errors) -> ShardResult:
        result = ShardResult()
        for member in group.members.values():
            if member.awaiting_sync:
                member.awaiting_sync = False
                answer = self._sync_answer(group, member) if error is Errors.NONE else SyncResult(error)
                result.syncs.append((group.group_id, member.member_id, answer))
        return result

    @staticmethod
    def _sync_answer(group: ClassicGroup, member: GroupMember) -> SyncResult:
        return SyncResult(Errors.NONE, group.protocol_type, group.protocol_name, member.assignment)

    # ---- Heartbeat / LeaveGroup ----

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, now_ms: int,
        group_instance_id: str | None = None,
    ) -> Errors:
        group = self.groups.get(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        if group.state is GroupState.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, group_instance_id)
        if error is not Errors.NONE:
            return error
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        group.members[member_id].last_heartbeat_ms = now_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def leave(
        self, group_id: str, members: Iterable[tuple[str, str | None]], now_ms: int
    ) -> tuple[Errors, list[Errors], ShardResult]:
        """(top-level error, one error per (member id, instance id) leaving, what to answer and
        write). An empty member id with an instance id removes that static member (LeaveGroup
        v3+, an admin's removal, as Kafka's classicGroupLeaveToClassicGroup)."""
        result = ShardResult()
        group = self.groups.get(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID, [], result
        if group.state is GroupState.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE, [], result
        errors = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                holder = group.static_members.get(instance_id) if instance_id is not None else None
                if holder is None:
                    errors.append(Errors.UNKNOWN_MEMBER_ID)
                    continue
                errors.append(Errors.NONE)
                result.extend(self._remove_member_and_rebalance(group, holder, now_ms))
                continue
            if group.pending_members.pop(member_id, None) is not None:
                errors.append(Errors.NONE)
                result.extend(self._maybe_complete_join(group, now_ms))
                continue
            error = group.validate_member(member_id, instance_id)
            errors.append(error)
            if error is Errors.NONE:
                result.extend(self._remove_member_and_rebalance(group, member_id, now_ms))
        return Errors.NONE, errors, result

    def _remove_member_and_rebalance(
        self, group: ClassicGroup, member_id: str, now_ms: int
    ) -> ShardResult:
        result = ShardResult()
        member = group.remove_member(member_id)
        if member is None:
            return result
        if member.awaiting_join:
            result.joins.append((group.group_id, member_id, JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id)))
        if member.awaiting_sync:
            result.syncs.append((group.group_id, member_id, SyncResult(Errors.UNKNOWN_MEMBER_ID)))
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            result.extend(self._prepare_rebalance(group, now_ms))
        elif group.state is GroupState.PREPARING_REBALANCE:
            result.extend(self._maybe_complete_join(group, now_ms))
        return result

    # ---- deadlines ----

    def tick(self, now_ms: int) -> ShardResult:
        """Expire sessions (members and handed-out member ids) and end join phases whose
        rebalance timeout passed."""
        result = ShardResult()
        for group in list(self.groups.values()):
            for member_id, deadline_ms in list(group.pending_members.items()):
                if deadline_ms <= now_ms:
                    del group.pending_members[member_id]
                    result.extend(self._maybe_complete_join(group, now_ms))
            for member in list(group.members.values()):
                if member.session_expired(now_ms):
                    result.extend(self._remove_member_and_rebalance(group, member.member_id, now_ms))
            result.extend(self._maybe_complete_join(group, now_ms))
        return result

    # ---- OffsetCommit / OffsetFetch ----

    def validate_offset_commit(
        self, group_id: str, member_id: str, generation_id: int, now_ms: int,
        group_instance_id: str | None = None,
    ) -> Errors:
        """Kafka's checks before a commit is written (ClassicGroup.validateOffsetCommit): a
        simple consumer (generation -1) commits to an empty or unknown group; a group member
        must be current (else UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID: a static member's id was
        taken over, or ILLEGAL_GENERATION: a stale generation)."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)
                return Errors.NONE
            return Errors.ILLEGAL_GENERATION
        if group.state is GroupState.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return Errors.NONE
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = group.validate_member(member_id, group_instance_id)
            if error is not Errors.NONE:
                return error
            if generation_id != group.generation_id:
                return Errors.ILLEGAL_GENERATION
        elif group.state is not GroupState.EMPTY:
            return Errors.UNKNOWN_MEMBER_ID
        if group.state is GroupState.COMPLETING_REBALANCE:
            return Errors.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is not None:
            member.last_heartbeat_ms = now_ms
        return Errors.NONE

    def offset_records(
        self, group_id: str, commits: Iterable[tuple[str, int, int, int, str]], now_ms: int
    ) -> list[tuple[Key, Value | None]]:
        """The records of (topic, partition, offset, leader epoch, metadata) commits."""
        return [
            (
                OffsetCommitKey(group=group_id, topic=topic, partition=partition),  # type: ignore[arg-type]
                OffsetCommitValue(
                    offset=offset,  # type: ignore[arg-type]
                    leader_epoch=leader_epoch,  # type: ignore[arg-type]
                    metadata=metadata,
                    commit_timestamp=now_ms,  # type: ignore[arg-type]
                ),
            )
            for topic, partition, offset, leader_epoch, metadata in commits
        ]

    def committed(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        return self.offsets.get(group_id, {})

    # ---- OffsetDelete ----

    def delete_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> tuple[Errors, list[Errors], list[tuple[Key, Value | None]]]:
        """Kafka's OffsetMetadataManager.deleteOffsets: (top-level error, one error per
        (topic, partition), the tombstones of the committed ones). A group still consuming a
        topic keeps its offsets (GROUP_SUBSCRIBED_TO_TOPIC); a live group that is not a
        consumer group keeps them all (NON_EMPTY_GROUP)."""
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return Errors.GROUP_ID_NOT_FOUND, [], []
        if group.state is not GroupState.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return Errors.NON_EMPTY_GROUP, [], []
        committed = self.committed(group_id)
        errors: list[Errors] = []
        tombstones: list[tuple[Key, Value | None]] = []
        for topic, partition in partitions:
            if group.is_subscribed_to(topic):
                errors.append(Errors.GROUP_SUBSCRIBED_TO_TOPIC)
                continue
            errors.append(Errors.NONE)
            if (topic, partition) in committed:
                key = OffsetCommitKey(group=group_id, topic=topic, partition=partition)  # type: ignore[arg-type]
                tombstones.append((key, None))
        return Errors.NONE, errors, tombstones

    # ---- DeleteGroups ----

    def prepare_delete(self, group_id: str, now_ms: int) -> tuple[Errors, list[tuple[Key, Value | None]]]:
        """Mark an empty group Dead and return its tombstones (group and every offset)."""
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return Errors.GROUP_ID_NOT_FOUND, []
        if group.state is not GroupState.EMPTY:
            return Errors.NON_EMPTY_GROUP, []
        group.transition(GroupState.DEAD, now_ms)
        tombstones: list[tuple[Key, Value | None]] = [
            (OffsetCommitKey(group=group_id, topic=t, partition=p), None)  # type: ignore[arg-type]
            for t, p in sorted(self.committed(group_id))
        ]
        tombstones.append((GroupMetadataKey(group=group_id), None))
        return Errors.NONE, tombstones

    def finish_delete(self, group_id: str, error: Errors, now_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state is not GroupState.DEAD:
            return
        if error is Errors.NONE:
            del self.groups[group_id]
            self.offsets.pop(group_id, None)
        else:
            group.transition(GroupState.EMPTY, now_ms)

    # ---- replay (loading the partition, and applying acknowledged commits) ----

    def replay(self, key: Key, value: Value | None, log_offset: int, now_ms: int) -> None:
        """Apply one record of the partition. Offsets: always (a later record of a key wins).
        Group metadata: only while loading (the live group is already in memory)."""
        if isinstance(key, OffsetCommitKey):
            offsets = self.offsets.setdefault(key.group, {})
            tp = (key.topic, int(key.partition))
            current = offsets.get(tp)
            if current is not None and current.log_offset > log_offset:
                return
            if value is None:
                offsets.pop(tp, None)
                return
            assert isinstance(value, OffsetCommitValue)
            offsets[tp] = CommittedOffset(
                int(value.offset), int(value.leader_epoch), value.metadata,
                int(value.commit_timestamp), log_offset,
            )
            if key.group not in self.groups:
                # Offsets without group metadata: a simple consumer's group, Empty (as Kafka).
                self.groups[key.group] = ClassicGroup(key.group, state_timestamp_ms=now_ms)
            return
        if value is None:
            self.groups.pop(key.group, None)
            self.offsets.pop(key.group, None)
            return
        assert isinstance(value, GroupMetadataValue)
        self.groups[key.group] = self._loaded_group(key.group, value, now_ms)

    @staticmethod
    def _loaded_group(group_id: str, value: GroupMetadataValue, now_ms: int) -> ClassicGroup:
        group = ClassicGroup(
            group_id,
            generation_id=int(value.generation),
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
            state_timestamp_ms=now_ms,
        )
        for m in value.members:
            group.add_member(GroupMember(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=int(m.rebalance_timeout),
                session_timeout_ms=int(m.session_timeout),
                protocol_type=value.protocol_type,
                protocols=((value.protocol or "", bytes(m.subscription)),),
                group_instance_id=m.group_instance_id,
                assignment=bytes(m.assignment),
                last_heartbeat_ms=now_ms,  # sessions restart at load, as Kafka does
            ))
        group.protocol_type = value.protocol_type or None  # add_member took the member's
        # Members were Stable when written; they heartbeat or expire from here.
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def _group_record(self, group: ClassicGroup) -> tuple[Key, Value | None]:
        return (
            GroupMetadataKey(group=group.group_id),
            GroupMetadataValue(
                protocol_type=group.protocol_type or "",
                generation=group.generation_id,  # type: ignore[arg-type]
                protocol=group.protocol_name,
                leader=group.leader_id,
                current_state_timestamp=group.state_timestamp_ms,  # type: ignore[arg-type]
                members=tuple(
                    MemberMetadata(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        rebalance_timeout=m.rebalance_timeout_ms,  # type: ignore[arg-type]
                        session_timeout=m.session_timeout_ms,  # type: ignore[arg-type]
                        subscription=m.metadata_for(group.protocol_name),
                        assignment=m.assignment,
                    )
                    for m in group.members.values()
                ),
            ),
        )
