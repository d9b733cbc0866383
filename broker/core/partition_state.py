"""One partition replica on one broker: leader or follower, HWM, ISR changes, leader recovery.

Pure, after Kafka's Partition.scala: the runtime feeds it metadata (`apply_registration`,
`update_metadata`), local log progress (`update_local_log`), follower fetches
(`on_follower_fetch`), AlterPartition outcomes and ticks, each with `now_ms`; every call returns
a `PartitionReady` saying what to persist (leader epoch entry, flush), what to send
(AlterPartition), which acks=all produces to complete or fail, and journal events to write.
The runtime acts on a ready in order: persist the epoch entry, flush, write events, then send.

Leader-only data (followers' progress, the ISR proposal in flight, acks=all waiting for the
HWM) lives in a `LeaderState` and follower-only data in a `FollowerState`, one of which is the
partition's role state: a follower cannot hold leader data by construction, and becoming leader
starts from fresh remote replica states (Kafka's Partition keeps them only while leader).

Rules: 17 (expand only with the fetched broker epoch matching the image), 18 (revert on
INELIGIBLE_REPLICA / FENCED_LEADER_EPOCH, no blind retry), 20 (the HWM: broker.core.high_watermark
decides where it may go), 21 (RECOVERING refuses requests until RECOVERED commits).
"""

from __future__ import annotations

import functools
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, TypedDict, cast

from broker.core.high_watermark import leader_counted_offset, next_high_watermark
from broker.core.journal_events import (
    HwmAdvanced,
    IsrProposed,
    IsrResult,
    JournalEvent,
    ProduceAcked,
    RecoveryStateChanged,
    RoleChanged,
    Truncated,
)
from kafkawire.broker_lifecycle import AlterPartitionPartitionResult, BrokerState, broker_state
from kafkawire.constants import ACKS_ALL, NO_BROKER_EPOCH, NO_LEADER_EPOCH
from kafkawire.errors import Errors
from kafkawire.slots import slot_constructor
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from storage.core.leader_epoch_cache import EpochEntry

VALID_ACKS = frozenset({0, 1, ACKS_ALL})
CONSUMER_REPLICA_ID = -1
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000
UNKNOWN_OFFSET = -1

_RETRY_ERRORS = frozenset(
    {
        Errors.NOT_CONTROLLER,
        Errors.REQUEST_TIMED_OUT,
        Errors.NETWORK_EXCEPTION,
        Errors.STALE_BROKER_EPOCH,
        Errors.UNKNOWN_SERVER_ERROR,
        Errors.BROKER_NOT_AVAILABLE,
    }
)


class _EventKey(TypedDict):
    broker_id: int
    topic: str
    topic_id: str
    partition: int


class BrokerView(Protocol):
    """What the leader needs of its metadata image (metadata.MetadataImage fits)."""

    def broker_epoch(self, broker_id: int) -> int | None: ...

    def is_fenced(self, broker_id: int) -> bool: ...

    def is_in_controlled_shutdown(self, broker_id: int) -> bool: ...


class _NoBrokers:
    def broker_epoch(self, broker_id: int) -> int | None:
        return None

    def is_fenced(self, broker_id: int) -> bool:
        return True

    def is_in_controlled_shutdown(self, broker_id: int) -> bool:
        return False


_NO_BROKERS = _NoBrokers()  # it holds nothing: one for every state (issue 35)


class Role(Enum):
    NONE = "none"  # not a replica, or no metadata yet
    LEADER = "leader"
    FOLLOWER = "follower"


class ProposalKind(Enum):
    EXPAND = "expand"
    SHRINK = "shrink"
    RECOVERED = "recovered"


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An AlterPartition for this partition; at most one is in flight."""

    proposal_id: int
    kind: ProposalKind
    leader_epoch: int
    partition_epoch: int
    new_isr_with_epochs: tuple[BrokerState, ...]
    leader_recovery_state: LeaderRecoveryState
    # The members' ids, taken once: the proposal's event, the follower's idle check at each
    # read, the outcome and the maximal ISR read them (issue 35: 66,000 on one leader while
    # a broker comes back, each built the tuple again at every read).
    isr: tuple[int, ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(b.broker_id for b in self.new_isr_with_epochs))


# Events of a new HWM and the acks=all produces it completes: news for consumers only.
_HWM_NEWS = (HwmAdvanced, ProduceAcked)
# An ISR proposal and its outcome: news for no fetch. No answer reads the ISR, and the HWM an
# outcome moves comes as its own HwmAdvanced. A follower returning to 66,000 partitions woke
# its own parked Fetch, a read of every partition, at each of 66,000 outcomes (issue 35).
_ISR_EVENTS = (IsrProposed, IsrResult)
# The event types that are news for no parked fetch, and for no parked follower fetch.
_NO_FETCH_NEWS = frozenset(_ISR_EVENTS)
_NO_FOLLOWER_NEWS = frozenset(_HWM_NEWS + _ISR_EVENTS)


def _any_news(events: tuple[JournalEvent, ...], quiet: frozenset[type]) -> bool:
    """Whether an event is not of the `quiet` types. One event, most often (a proposal, an
    outcome, a new HWM): looked up without a generator's walk, twice for each of the 66,000
    proposals and outcomes a leader handles while a broker comes back (issue 35)."""
    if len(events) == 1:
        return type(events[0]) not in quiet
    return any(type(event) not in quiet for event in events)


@dataclass(frozen=True, slots=True)
class PartitionReady:
    """What one input asks the runtime to do, in this order."""

    high_watermark: int
    assign_leader_epoch: EpochEntry | None = None  # persist to leader-epoch-checkpoint first
    flush_wanted: bool = False  # leader recovery waits for the log to be flushed to its end
    events: tuple[JournalEvent, ...] = ()
    alter_partition: IsrProposal | None = None  # send (new, or a resend after a retriable error)
    completed_acks: tuple[int, ...] = ()
    failed_acks: tuple[tuple[int, Errors], ...] = ()
    # A replica left the members a follower's session may skip as idle (follower_idle: the
    # committed ISR and an expansion in flight) without a registration applied: its sessions
    # must read the partition again (HostedPartition.changed).
    idle_members_left: bool = False

    @property
    def news_for_fetches(self) -> bool:
        """Whether parked fetches have something to learn: a completed ack or any event but
        an ISR proposal's (_ISR_EVENTS)."""
        return bool(self.completed_acks) or _any_news(self.events, _NO_FETCH_NEWS)

    @property
    def news_for_followers(self) -> bool:
        """Whether parked follower fetches have: anything but a new HWM and the acks=all
        produces it completes (and an ISR proposal's events). A follower reads to the log
        end, so a HWM move alone gives it no records, and its woken fetch would park again
        (issue 17)."""
        return _any_news(self.events, _NO_FOLLOWER_NEWS)

    @property
    def empty(self) -> bool:
        return (
            self.assign_leader_epoch is None
            and not self.flush_wanted
            and not self.events
            and self.alter_partition is None
            and not self.completed_acks
            and not self.failed_acks
            and not self.idle_members_left
        )


# PartitionReady and IsrProposal from every field in order, through their slots
# (kafkawire.slots): the frozen __init__ was a tenth of a leader's cost of proposing and
# committing an expansion (issue 35).
_new_ready = slot_constructor(PartitionReady)
_new_proposal = slot_constructor(IsrProposal)


@functools.lru_cache(maxsize=1024)
def _members(isr: tuple[int, ...], epochs: tuple[int, ...]) -> tuple[BrokerState, ...]:
    """A proposal's members, one tuple per (ISR, broker epochs): the same few for each of a
    leader's 66,000 expansions while a broker comes back (issue 35)."""
    return tuple(map(broker_state, isr, epochs))


@functools.lru_cache(maxsize=1024)
def _nothing_to_do(high_watermark: int) -> PartitionReady:
    """The answer to an input that asks nothing of the runtime, one per HWM (it is frozen):
    most inputs are, and a frozen dataclass of eight fields was 2.5% of a leader's samples
    while a follower came back to 66,000 partitions (issue 35)."""
    return PartitionReady(high_watermark)


@dataclass(slots=True)
class _Builder:
    assign_leader_epoch: EpochEntry | None = None
    flush_wanted: bool = False
    events: list[JournalEvent] = field(default_factory=list)
    alter_partition: IsrProposal | None = None
    completed_acks: list[int] = field(default_factory=list)
    failed_acks: list[tuple[int, Errors]] = field(default_factory=list)
    idle_members_left: bool = False


@dataclass(slots=True)
class ReplicaProgress:
    """The leader's view of one follower (Kafka's Replica state)."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    broker_epoch: int = NO_BROKER_EPOCH  # the epoch it last fetched with (KIP-903)
    fetched: bool = False
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = 0
    last_caught_up_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class _PendingAck:
    ack_id: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class LeaderState:
    """What only a leader holds, from its election to the end of its leadership."""

    epoch_start_offset: int  # the log end when this leader epoch began
    progress: dict[int, ReplicaProgress]  # every other replica (Kafka's remote replica states)
    inflight: IsrProposal | None = None  # at most one AlterPartition (rule 18)
    # Rule 18: after FENCED_LEADER_EPOCH nothing is proposed until new metadata arrives;
    # after INELIGIBLE_REPLICA the same proposal is not repeated until an input changes.
    fenced_until_metadata: bool = False
    ineligible_signature: tuple[object, ...] | None = None
    pending_acks: list[_PendingAck] = field(default_factory=list)  # acks=all under the HWM


@dataclass(frozen=True, slots=True)
class FollowerState:
    """What only a follower holds."""

    truncation_pending: bool = True  # rule 22: truncate before the first fetch


_ROLES: dict[type, Role] = {LeaderState: Role.LEADER, FollowerState: Role.FOLLOWER}


class PartitionState:
    def __init__(
        self,
        topic: str,
        partition: int,
        local_broker_id: int,
        *,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        log_end_offset: int = 0,
        flushed_offset: int = 0,
        high_watermark: int = 0,
        topic_id: str = "",
    ) -> None:
        self.topic = topic
        # Journaled with every event (Kafka's base64 text), so the audit keeps a re-created
        # topic's partitions apart from the deleted one's.
        self.topic_id = topic_id
        self.partition = partition
        self.local_broker_id = local_broker_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._role_state: LeaderState | FollowerState | None = None  # None: Role.NONE
        self._leader_id = -1
        self._leader_epoch = -1
        self._partition_epoch = -1
        self._replicas: tuple[int, ...] = ()
        self._committed_isr: tuple[int, ...] = ()
        self._recovery_state = LeaderRecoveryState.RECOVERED
        self._min_isr = 1
        self._brokers: BrokerView = _NO_BROKERS
        self._log_end_offset = log_end_offset
        self._flushed_offset = min(flushed_offset, log_end_offset)
        # The end of the last append the broker fsyncs before answering it: it counts toward
        # the HWM only once flushed (rule 20, broker.core.high_watermark).
        self._flush_first_to = 0
        # A checkpointed HWM past the recovered log end is capped (the tail was lost).
        self._high_watermark = max(0, min(high_watermark, log_end_offset))
        # Across leaderships, so a late answer never matches a newer proposal.
        self._next_proposal_id = 1

    # ---- views ----

    @property
    def role(self) -> Role:
        state = self._role_state
        return Role.NONE if state is None else _ROLES[type(state)]

    @property
    def _leader(self) -> LeaderState | None:
        state = self._role_state
        return state if isinstance(state, LeaderState) else None

    @property
    def leader_id(self) -> int:
        return self._leader_id

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self._partition_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._replicas

    @property
    def committed_isr(self) -> tuple[int, ...]:
        return self._committed_isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """Committed ISR plus a member being added; a pending shrink still counts everyone."""
        proposal = self.inflight
        if proposal is not None and proposal.kind is ProposalKind.EXPAND:
            extra = tuple(r for r in proposal.isr if r not in self._committed_isr)
            return self._committed_isr + extra
        return self._committed_isr

    @property
    def leader_recovery_state(self) -> LeaderRecoveryState:
        return self._recovery_state

    @property
    def is_recovering(self) -> bool:
        return self._recovery_state is LeaderRecoveryState.RECOVERING

    @property
    def effective_min_isr(self) -> int:
        return self._min_isr

    @property
    def is_under_min_isr(self) -> bool:
        return self._leader is not None and len(self._committed_isr) < self._min_isr

    @property
    def is_under_replicated(self) -> bool:
        """A leader whose ISR lacks a replica (Kafka's Partition.isUnderReplicated)."""
        return type(self._role_state) is LeaderState and len(self._committed_isr) < len(
            self._replicas
        )

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def flushed_offset(self) -> int:
        return self._flushed_offset

    @property
    def leader_epoch_start_offset(self) -> int:
        leader = self._leader
        return UNKNOWN_OFFSET if leader is None else leader.epoch_start_offset

    @property
    def inflight(self) -> IsrProposal | None:
        leader = self._leader
        return None if leader is None else leader.inflight

    @property
    def truncation_pending(self) -> bool:
        """A follower must truncate with OffsetsForLeaderEpoch before it fetches (rule 22)."""
        state = self._role_state
        return isinstance(state, FollowerState) and state.truncation_pending

    def replica_progress(self, replica_id: int) -> ReplicaProgress | None:
        leader = self._leader
        return None if leader is None else leader.progress.get(replica_id)

    def pending_ack_ids(self) -> tuple[int, ...]:
        leader = self._leader
        return () if leader is None else tuple(a.ack_id for a in leader.pending_acks)

    # ---- request admission ----

    def check_produce(self, acks: int, current_leader_epoch: int = NO_LEADER_EPOCH) -> Errors:
        if acks not in VALID_ACKS:
            return Errors.INVALID_REQUIRED_ACKS
        error = self.check_leader_request(current_leader_epoch)
        if error is not Errors.NONE:
            return error
        if acks == ACKS_ALL and len(self._committed_isr) < self._min_isr:
            return Errors.NOT_ENOUGH_REPLICAS  # rule 20: judged on the committed ISR
        return Errors.NONE

    def check_fetch(self, replica_id: int, current_leader_epoch: int = NO_LEADER_EPOCH) -> Errors:
        """Follower fetch (replica_id >= 0) or consumer fetch (CONSUMER_REPLICA_ID)."""
        error = self.check_leader_request(current_leader_epoch)
        if error is not Errors.NONE:
            return error
        if replica_id >= 0 and replica_id not in self._replicas:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.NONE

    def check_leader_request(self, current_leader_epoch: int = NO_LEADER_EPOCH) -> Errors:
        """PRODUCE, FETCH, LIST_OFFSETS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH (rule 21)."""
        if self._role_state is None:
            return Errors.NOT_LEADER_OR_FOLLOWER
        if current_leader_epoch != NO_LEADER_EPOCH:
            if current_leader_epoch < self._leader_epoch:
                return Errors.FENCED_LEADER_EPOCH
            if current_leader_epoch > self._leader_epoch:
                return Errors.UNKNOWN_LEADER_EPOCH
        if self.is_recovering:
            return Errors.NOT_LEADER_OR_FOLLOWER  # KIP-704: leader and followers alike
        if self._leader is None:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.NONE

    def fetch_upper_bound(self, replica_id: int) -> int:
        """Followers read to the log end, consumers only to the HWM (rule 20)."""
        return self._log_end_offset if replica_id >= 0 else self._high_watermark

    # ---- metadata ----

    def apply_registration(
        self,
        registration: PartitionRegistration,
        effective_min_isr: int,
        brokers: BrokerView,
        now_ms: int,
        touched_brokers: AbstractSet[int] = frozenset(),
    ) -> PartitionReady:
        """A committed PartitionRecord / PartitionChangeRecord for this partition was replayed.
        `touched_brokers`: the brokers whose registration records the same change replayed.

        The runtime keeps `update_local_log` current first: a new leader starts its epoch at
        the log end offset it knows."""
        out = _Builder()
        self._brokers = brokers
        self._forget_refusal_if_image_moved(touched_brokers)
        self._min_isr = effective_min_isr
        if registration.leader_epoch < self._leader_epoch or (
            registration.leader_epoch == self._leader_epoch
            and registration.partition_epoch < self._partition_epoch
        ):
            return self._ready(out)  # older than what we hold (e.g. an AlterPartition answer)
        local = self.local_broker_id
        leader = self._leader
        if registration.leader == local:
            if leader is None or registration.leader_epoch > self._leader_epoch:
                self._become_leader(registration, now_ms, out)
            else:
                self._update_leader(leader, registration, now_ms, out)
        elif local in registration.replicas:
            if (
                not isinstance(self._role_state, FollowerState)
                or registration.leader_epoch > self._leader_epoch
                or registration.leader != self._leader_id
            ):
                self._become_follower(registration, now_ms, out)
            else:
                self._update_follower(registration, now_ms, out)
        else:
            self._stop(registration, now_ms, out)
        return self._ready(out)

    def follow_on(
        self, registration: PartitionRegistration, effective_min_isr: int, brokers: BrokerView
    ) -> bool:
        """A follower's registration change that keeps its leader, leader epoch and recovery
        state, this broker a replica and not the leader (an ISR or replica change, a newer
        partition epoch): what apply_registration does with it (_update_follower) is to keep
        it, with no event and nothing for the runtime, so it is kept here (True). Anything
        else answers False: apply_registration. A fencing at 100,000 partitions shrinks the ISR
        of each of a broker's 66,000 followed ones, and its return expands them again (Kafka's
        Partition.makeFollower only records the new ISR either way) (issue 35)."""
        return (
            type(self._role_state) is FollowerState
            and registration.leader == self._leader_id
            and registration.leader_epoch == self._leader_epoch
            and registration.partition_epoch >= self._partition_epoch
            and registration.leader_recovery_state is self._recovery_state
            and registration.leader != self.local_broker_id
            and self.local_broker_id in registration.replicas
            and self._keep_follower_registration(registration, effective_min_isr, brokers)
        )

    def _keep_follower_registration(
        self, registration: PartitionRegistration, effective_min_isr: int, brokers: BrokerView
    ) -> bool:
        self._brokers = brokers
        self._min_isr = effective_min_isr
        self._set_registration(registration)
        return True

    def lead_on(
        self, registration: PartitionRegistration, effective_min_isr: int, brokers: BrokerView
    ) -> bool:
        """A leader's newer registration that keeps its leader epoch, replicas and RECOVERED
        state, with no proposal in flight or refused and a high watermark at its log end
        (an ISR change the controller made: a fenced or shutting-down follower leaving it):
        what apply_registration does with it (_update_leader) is to keep it, with no event,
        proposal or HWM move, so it is kept here (True). Anything else answers False:
        apply_registration. A fencing at 100,000 partitions shrinks the ISR of each of a
        leader's 33,000-66,000 partitions (Kafka's Partition.makeLeader with the same leader
        epoch only records the new assignment and ISR) (issue 35)."""
        leader = self._role_state
        if not (
            type(leader) is LeaderState
            and leader.inflight is None
            and leader.ineligible_signature is None
            and registration.leader == self.local_broker_id
            and registration.leader_epoch == self._leader_epoch
            and registration.partition_epoch > self._partition_epoch
            and registration.leader_recovery_state is LeaderRecoveryState.RECOVERED
            and self._recovery_state is LeaderRecoveryState.RECOVERED
            and registration.replicas == self._replicas
            # _maybe_advance_hwm has nothing to advance, whatever the ISR and min ISR
            and self._high_watermark >= self._log_end_offset
        ):
            return False
        self._brokers = brokers
        self._min_isr = effective_min_isr
        leader.fenced_until_metadata = False
        self._set_registration(registration)
        return True

    def holds(
        self, registration: PartitionRegistration, effective_min_isr: int, brokers: BrokerView
    ) -> bool:
        """Whether apply_registration would change nothing: a leader with nothing in flight
        that already holds this registration's leadership, epochs, replicas, ISR and recovery
        state, the same min ISR and broker view. The PartitionChangeRecord of the leader's own
        ISR change, which it learned from the AlterPartition answer (Kafka's
        Partition.makeLeader finds the same partition state and does nothing either): a
        returning broker's 66,000 expansions on one leader were 66,000 such records (issue
        35)."""
        leader = self._role_state
        return (
            type(leader) is LeaderState
            and leader.inflight is None
            and not leader.fenced_until_metadata
            and registration.leader == self.local_broker_id
            and registration.leader_epoch == self._leader_epoch
            and registration.partition_epoch == self._partition_epoch
            and registration.isr == self._committed_isr
            and registration.replicas == self._replicas
            and registration.leader_recovery_state is self._recovery_state
            and self._recovery_state is LeaderRecoveryState.RECOVERED
            and effective_min_isr == self._min_isr
            and brokers is self._brokers
        )

    def keep_brokers(self, brokers: BrokerView) -> bool:
        """A new image whose brokers alone moved (no config: the min ISR stays): a partition
        this broker does not lead reads the broker view only once it leads (ISR eligibility,
        rule 18's refusals, the recovered proposal), so it keeps the view and has nothing to do
        (True, no PartitionReady). A leader reads it as its followers fetch (ISR eligibility)
        and otherwise only for a refused proposal (rule 18: it may go again) or while
        RECOVERING (the recovered proposal): those answer False (update_metadata); any other
        leader keeps the view too. Kafka's ReplicaManager.applyDelta walks no partition for a
        broker change at all; a restarted broker's unfencing walked all its 100,000 partitions
        through update_metadata, and each of its leaders their 33,000-66,000 (issue 35)."""
        leader = self._role_state
        if type(leader) is LeaderState and (
            leader.ineligible_signature is not None or self.is_recovering
        ):
            return False
        self._brokers = brokers
        return True

    def update_metadata(
        self, effective_min_isr: int, brokers: BrokerView, now_ms: int,
        touched_brokers: AbstractSet[int] = frozenset(),
    ) -> PartitionReady:
        """A new image without a change to this partition: broker epochs/fencing, min ISR.
        `touched_brokers`: the brokers whose registration records the change replayed."""
        out = _Builder()
        self._brokers = brokers
        self._forget_refusal_if_image_moved(touched_brokers)
        if effective_min_isr != self._min_isr:
            self._min_isr = effective_min_isr
            self._maybe_advance_hwm(now_ms, out)
        self._maybe_propose_recovered(now_ms, out)
        return self._ready(out)

    def _become_leader(
        self, registration: PartitionRegistration, now_ms: int, out: _Builder
    ) -> None:
        was_recovering = self._role_state is not None and self.is_recovering
        self._fail_pending_acks(Errors.NOT_LEADER_OR_FOLLOWER, out)
        self._set_registration(registration)
        start = self._log_end_offset
        out.assign_leader_epoch = EpochEntry(registration.leader_epoch, start)
        # Kafka resetReplicaState: ISR members get a fresh lag clock, others none.
        self._role_state = LeaderState(
            epoch_start_offset=start,
            progress={
                replica: ReplicaProgress(
                    replica_id=replica,
                    last_fetch_time_ms=now_ms,
                    last_fetch_leader_log_end_offset=start,
                    last_caught_up_time_ms=now_ms if replica in registration.isr else 0,
                )
                for replica in registration.replicas
                if replica != self.local_broker_id
            },
        )
        out.events.append(self._role_event("leader", now_ms))
        if self.is_recovering and not was_recovering:
            out.events.append(
                self._recovery_event(
                    LeaderRecoveryState.RECOVERED,
                    LeaderRecoveryState.RECOVERING,
                    "elected uncleanly",
                    now_ms,
                )
            )
        self._maybe_propose_recovered(now_ms, out)
        self._maybe_advance_hwm(now_ms, out)

    def _update_leader(
        self, leader: LeaderState, registration: PartitionRegistration, now_ms: int, out: _Builder
    ) -> None:
        old_recovery = self._recovery_state
        newer = registration.partition_epoch > self._partition_epoch
        before = self._committed_isr
        self._set_registration(registration)
        leader.fenced_until_metadata = False
        if newer and leader.inflight is not None:
            # The committed state overrides whatever was pending (Kafka: metadata wins).
            proposal = leader.inflight
            out.idle_members_left = self._members_left(proposal, before)
            matched = (
                proposal.isr == registration.isr
                and proposal.leader_recovery_state is registration.leader_recovery_state
            )
            outcome = "committed" if matched else "superseded"
            out.events.append(self._result_event(proposal, Errors.NONE, outcome, now_ms))
            leader.inflight = None
            leader.ineligible_signature = None
        for replica in registration.replicas:
            if replica != self.local_broker_id and replica not in leader.progress:
                leader.progress[replica] = ReplicaProgress(
                    replica_id=replica,
                    last_fetch_time_ms=now_ms,
                    last_fetch_leader_log_end_offset=self._log_end_offset,
                )
        if old_recovery is not self._recovery_state:
            out.events.append(
                self._recovery_event(old_recovery, self._recovery_state, "metadata", now_ms)
            )
        self._maybe_propose_recovered(now_ms, out)
        self._maybe_advance_hwm(now_ms, out)

    def _become_follower(
        self, registration: PartitionRegistration, now_ms: int, out: _Builder
    ) -> None:
        self._fail_pending_acks(Errors.NOT_LEADER_OR_FOLLOWER, out)
        self._set_registration(registration)
        self._role_state = FollowerState(truncation_pending=True)  # rule 22
        out.events.append(self._role_event("follower", now_ms))

    def _update_follower(
        self, registration: PartitionRegistration, now_ms: int, out: _Builder
    ) -> None:
        old_recovery = self._recovery_state
        self._set_registration(registration)
        if old_recovery is not self._recovery_state:
            out.events.append(
                self._recovery_event(old_recovery, self._recovery_state, "metadata", now_ms)
            )

    def _stop(self, registration: PartitionRegistration, now_ms: int, out: _Builder) -> None:
        self._fail_pending_acks(Errors.NOT_LEADER_OR_FOLLOWER, out)
        was_replica = self._role_state is not None
        self._set_registration(registration)
        self._role_state = None
        if was_replica:
            out.events.append(self._role_event("none", now_ms))

    def _set_registration(self, registration: PartitionRegistration) -> None:
        self._leader_id = registration.leader
        self._leader_epoch = registration.leader_epoch
        self._partition_epoch = registration.partition_epoch
        self._replicas = registration.replicas
        self._committed_isr = registration.isr
        self._recovery_state = registration.leader_recovery_state

    # ---- local log ----

    def update_local_log(
        self, log_end_offset: int, flushed_offset: int, now_ms: int, *, flush_first: bool = False
    ) -> PartitionReady:
        """After an append or a flush on this broker's log. `flush_first`: the append just made
        is one the broker fsyncs before answering (acks=all, log.flush.interval.messages), so
        it counts toward the HWM only once `flushed_offset` covers it (rule 20)."""
        out = _Builder()
        self._log_end_offset = log_end_offset
        self._flushed_offset = min(flushed_offset, log_end_offset)
        if flush_first:
            self._flush_first_to = log_end_offset
        self._flush_first_to = min(self._flush_first_to, log_end_offset)
        if self._leader is not None:
            self._maybe_propose_recovered(now_ms, out)
            self._maybe_advance_hwm(now_ms, out)
        return self._ready(out)

    def on_truncated(
        self, from_offset: int, to_offset: int, flushed_offset: int, reason: str, now_ms: int,
        *, complete: bool = True,
    ) -> PartitionReady:
        """A follower cut its log at to_offset; `complete` False asks for another round."""
        out = _Builder()
        self._log_end_offset = to_offset
        self._flushed_offset = min(flushed_offset, to_offset)
        self._flush_first_to = min(self._flush_first_to, to_offset)
        if to_offset < self._high_watermark:
            # Only an unclean election can take committed data away; the audit attributes it.
            reason = f"{reason}; below high watermark {self._high_watermark}"
            self._high_watermark = to_offset
        if to_offset < from_offset:
            out.events.append(
                Truncated(
                    **self._event_key(),
                    from_offset=from_offset,
                    to_offset=to_offset,
                    reason=reason,
                    leader_epoch=self._leader_epoch,
                    high_watermark=self._high_watermark,
                    ts=now_ms,
                )
            )
        if isinstance(self._role_state, FollowerState):
            self._role_state = FollowerState(truncation_pending=not complete)
        return self._ready(out)

    def on_fetch_response(
        self, leader_high_watermark: int, log_end_offset: int, flushed_offset: int, now_ms: int
    ) -> PartitionReady:
        """A follower appended what it fetched; its HWM follows the leader's, capped at its log
        end. It never moves back here: the data under it was committed (rule 20)."""
        out = _Builder()
        self._log_end_offset = log_end_offset
        self._flushed_offset = min(flushed_offset, log_end_offset)
        if isinstance(self._role_state, FollowerState):
            self._high_watermark = max(
                self._high_watermark, min(leader_high_watermark, log_end_offset)
            )
        return self._ready(out)

    # ---- leader: followers, HWM, ISR ----

    def on_follower_fetch(
        self, replica_id: int, fetch_offset: int, broker_epoch: int, now_ms: int
    ) -> PartitionReady:
        """A follower fetched at fetch_offset (its log end) with broker_epoch. The runtime has
        already checked `check_fetch` and that the follower does not diverge."""
        out = _Builder()
        leader = self._leader
        progress = None if leader is None else leader.progress.get(replica_id)
        if leader is None or self.is_recovering or progress is None:
            return self._ready(out)
        if fetch_offset > self._log_end_offset:
            return self._ready(out)  # past our end: it diverged; it must truncate (rule 22)
        leader_end = self._log_end_offset
        # Kafka's Replica.updateFetchState: caught up if at the leader's end now, or at the
        # end the leader had when this follower last fetched.
        if fetch_offset >= leader_end:
            progress.last_caught_up_time_ms = max(progress.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= progress.last_fetch_leader_log_end_offset:
            progress.last_caught_up_time_ms = max(
                progress.last_caught_up_time_ms, progress.last_fetch_time_ms
            )
        progress.last_fetch_leader_log_end_offset = leader_end
        progress.last_fetch_time_ms = now_ms
        progress.log_end_offset = fetch_offset
        progress.broker_epoch = broker_epoch
        progress.fetched = True
        self._maybe_expand_isr(leader, progress, now_ms, out)
        self._maybe_advance_hwm(now_ms, out)
        return self._ready(out)

    def follower_idle(self, replica_id: int, fetch_offset: int) -> bool:
        """Whether a follower's fetch at fetch_offset has nothing to change here until the
        partition changes: a leader's, not recovering, the follower caught up (at the log
        end) and in the ISR or in the expansion in flight, so fetches at the same offset only
        refresh its clocks, which on_follower_idle does for the fetches a session skipped
        (issue 35: a follower back to 66,000 partitions had each read again at every Fetch
        until its expansion committed). A member leaving (a shrink, a refused or superseded
        expansion) reads it again: PartitionReady.idle_members_left, or the registration."""
        leader = self._leader
        return (
            leader is not None
            and not self.is_recovering
            and fetch_offset == self._log_end_offset
            and (
                replica_id in self._committed_isr
                or (
                    (inflight := leader.inflight) is not None
                    and replica_id in inflight.isr
                )
            )
            and (progress := leader.progress.get(replica_id)) is not None
            and progress.log_end_offset == fetch_offset
        )

    def _members_left(self, proposal: IsrProposal, before: tuple[int, ...]) -> bool:
        """Whether a member of `before` (the committed ISR while `proposal` was in flight) or
        of the proposal is out of the committed ISR now that it is not in flight."""
        isr = self._committed_isr
        return any(r not in isr for r in before) or (
            isr is not proposal.isr and any(r not in isr for r in proposal.isr)
        )

    def on_follower_idle(self, replica_id: int, fetch_ms: int) -> None:
        """The follower fetched at fetch_ms without being read: its session skipped this
        partition as idle (follower_idle held when it last was read, and nothing changed since,
        so the follower was at the leader's log end then). Kafka's updateFetchState for that
        fetch: caught up then. The runtime calls it when the partition changes (a new log end
        may already be set: the check reads only what the last read recorded), so a follower
        that fetched every round is not taken for one that stopped when the partition went
        idle, and one that did stop is judged from its last fetch, as in Kafka."""
        leader = self._leader
        progress = None if leader is None else leader.progress.get(replica_id)
        if progress is None or progress.log_end_offset != progress.last_fetch_leader_log_end_offset:
            return
        progress.last_caught_up_time_ms = max(progress.last_caught_up_time_ms, fetch_ms)
        progress.last_fetch_time_ms = max(progress.last_fetch_time_ms, fetch_ms)

    def isr_shrink_due(self, now_ms: int) -> bool:
        """Whether maybe_shrink_isr would propose a shrink now, without building its answer:
        the periodic pass asks every hosted partition, and a broker leading 33,000 of them
        spent a tenth of its loop on the answers of partitions with nothing to shrink (issue
        35; Kafka's maybeShrinkIsr is the same lastCaughtUpTime compare per partition)."""
        leader = self._role_state
        if (
            type(leader) is not LeaderState
            or not self._may_propose(leader)
        ):
            return False
        local, end, lag_max = self.local_broker_id, self._log_end_offset, self.replica_lag_time_max_ms
        progress = leader.progress
        for replica in self._committed_isr:
            if replica == local:
                continue
            follower = progress.get(replica)
            if follower is None or (
                follower.log_end_offset != end
                and now_ms - follower.last_caught_up_time_ms > lag_max
            ):
                return True
        return False

    def maybe_shrink_isr(self, now_ms: int) -> PartitionReady:
        """Periodic: propose dropping followers not caught up for replica.lag.time.max.ms."""
        out = _Builder()
        leader = self._leader
        if leader is None or not self._may_propose(leader):
            return self._ready(out)
        out_of_sync = [
            replica
            for replica in self._committed_isr
            if replica != self.local_broker_id and self._is_out_of_sync(leader, replica, now_ms)
        ]
        if out_of_sync:
            new_isr = tuple(r for r in self._committed_isr if r not in out_of_sync)
            self._propose(leader, ProposalKind.SHRINK, new_isr, None, now_ms, out)
        return self._ready(out)

    def _is_out_of_sync(self, leader: LeaderState, replica: int, now_ms: int) -> bool:
        progress = leader.progress.get(replica)
        if progress is None:
            return True
        return (
            progress.log_end_offset != self._log_end_offset
            and now_ms - progress.last_caught_up_time_ms > self.replica_lag_time_max_ms
        )

    def _may_propose(self, leader: LeaderState) -> bool:
        return (
            leader.inflight is None
            and not leader.fenced_until_metadata
            and not self.is_recovering
        )

    def _maybe_expand_isr(
        self, leader: LeaderState, progress: ReplicaProgress, now_ms: int, out: _Builder
    ) -> None:
        replica = progress.replica_id
        if not self._may_propose(leader) or replica in self._committed_isr:
            return
        # Kafka isFollowerInSync: at the HWM and past the start of this leader epoch.
        if progress.log_end_offset < self._high_watermark:
            return
        if progress.log_end_offset < leader.epoch_start_offset:
            return
        if not self._isr_eligible(progress):
            return
        new_isr = (*self._committed_isr, replica)
        self._propose(leader, ProposalKind.EXPAND, new_isr, None, now_ms, out)

    def _isr_eligible(self, progress: ReplicaProgress) -> bool:
        """Rule 17 / KIP-903: unfenced, not shutting down, and fetched with the epoch the
        image has for it (-1 from an old follower skips the epoch comparison)."""
        replica = progress.replica_id
        image_epoch = self._brokers.broker_epoch(replica)
        if image_epoch is None or self._brokers.is_fenced(replica):
            return False
        if self._brokers.is_in_controlled_shutdown(replica):
            return False
        return progress.broker_epoch in (NO_BROKER_EPOCH, image_epoch)

    def _maybe_propose_recovered(self, now_ms: int, out: _Builder) -> None:
        """Rule 21: once the log is flushed to its end, report RECOVERED with ISR [leader]."""
        leader = self._leader
        if leader is None or not self.is_recovering:
            return
        if leader.inflight is not None or leader.fenced_until_metadata:
            return
        if self._flushed_offset < self._log_end_offset:
            out.flush_wanted = True
            return
        self._propose(
            leader,
            ProposalKind.RECOVERED,
            (self.local_broker_id,),
            LeaderRecoveryState.RECOVERED,
            now_ms,
            out,
        )

    def _propose(
        self,
        leader: LeaderState,
        kind: ProposalKind,
        new_isr: tuple[int, ...],
        recovery: LeaderRecoveryState | None,
        now_ms: int,
        out: _Builder,
    ) -> None:
        epochs = tuple([self._member_epoch(leader, r) for r in new_isr])
        members = _members(new_isr, epochs)
        refused = leader.ineligible_signature
        if refused is not None and self._signature(kind, members) == refused:
            return  # rule 18: the controller refused exactly this; wait for something to change
        # IsrProposal's fields in order; `isr` is new_isr, the members' ids.
        proposal = _new_proposal(
            self._next_proposal_id,
            kind,
            self._leader_epoch,
            self._partition_epoch,
            members,
            recovery if recovery is not None else self._recovery_state,
            new_isr,
        )
        self._next_proposal_id += 1
        leader.inflight = proposal
        out.alter_partition = proposal
        # The fields named, not merged from _event_key: one for each of the 66,000 expansions
        # a leader proposes while a broker comes back (issue 35).
        out.events.append(
            IsrProposed(
                broker_id=self.local_broker_id,
                topic=self.topic,
                topic_id=self.topic_id,
                partition=self.partition,
                proposal_id=proposal.proposal_id,
                kind=kind.value,
                leader_epoch=proposal.leader_epoch,
                partition_epoch=proposal.partition_epoch,
                committed_isr=self._committed_isr,
                proposed_isr=proposal.isr,
                broker_epochs=epochs,
                leader_recovery_state=int(proposal.leader_recovery_state),
                ts=now_ms,
            )
        )

    def _member_epoch(self, leader: LeaderState, replica: int) -> int:
        """Kafka addBrokerEpochToIsr: our own registered epoch, a follower's fetched one, else
        -1 (an existing member that has not fetched yet is not re-checked)."""
        if replica == self.local_broker_id:
            epoch = self._brokers.broker_epoch(replica)
            return NO_BROKER_EPOCH if epoch is None else epoch
        progress = leader.progress.get(replica)
        if progress is None or not progress.fetched:
            return NO_BROKER_EPOCH
        return progress.broker_epoch

    def _forget_refusal_if_image_moved(self, touched_brokers: AbstractSet[int]) -> None:
        """Rule 18: a refused proposal may go again once the image changed for one of its
        members: a record about a member (a fence then unfence with the same epoch counts,
        even when one change replays both and the member ends as it was), or a member's
        state differing from the refused one."""
        leader = self._leader
        refused = None if leader is None else leader.ineligible_signature
        if leader is None or refused is None:
            return
        kind = cast(ProposalKind, refused[0])
        view = cast(tuple[tuple[int, int, object, object, object], ...], refused[3])
        if any(member[0] in touched_brokers for member in view):
            leader.ineligible_signature = None
            return
        members = tuple(broker_state(member[0], member[1]) for member in view)
        if self._signature(kind, members) != refused:
            leader.ineligible_signature = None

    def _signature(self, kind: ProposalKind, members: tuple[BrokerState, ...]) -> tuple[object, ...]:
        view = tuple(
            (
                m.broker_id,
                m.broker_epoch,
                self._brokers.broker_epoch(m.broker_id),
                self._brokers.is_fenced(m.broker_id),
                self._brokers.is_in_controlled_shutdown(m.broker_id),
            )
            for m in members
        )
        return (kind, self._leader_epoch, self._partition_epoch, view)

    def _maybe_advance_hwm(self, now_ms: int, out: _Builder) -> None:
        """Rule 20, as broker.core.high_watermark decides it (never while RECOVERING, rule 21)."""
        leader = self._leader
        if leader is None or self._high_watermark >= self._log_end_offset or self.is_recovering:
            # Nothing to advance: the HWM never passes the leader's log end (next_high_watermark
            # takes the leader's counted offset, at most its log end). A leader's idle
            # partitions are asked four times per ISR expansion (issue 35).
            return
        followers = (
            UNKNOWN_OFFSET if progress is None else progress.log_end_offset
            for progress in (
                leader.progress.get(r) for r in self.maximal_isr if r != self.local_broker_id
            )
        )
        candidate = next_high_watermark(
            self._high_watermark,
            len(self._committed_isr),
            self._min_isr,
            leader_counted_offset(self._log_end_offset, self._flushed_offset, self._flush_first_to),
            followers,
        )
        if candidate is None:
            return
        old = self._high_watermark
        self._high_watermark = candidate
        out.events.append(
            HwmAdvanced(
                **self._event_key(),
                old=old,
                new=candidate,
                isr_size=len(self._committed_isr),
                min_isr=self._min_isr,
                leader_epoch=self._leader_epoch,
                ts=now_ms,
                isr=self._committed_isr,
            )
        )
        self._complete_acks(leader, now_ms, out)

    # ---- AlterPartition outcomes ----

    def on_alter_partition_response(
        self,
        proposal_id: int,
        error: Errors,
        result: AlterPartitionPartitionResult | None,
        now_ms: int,
    ) -> PartitionReady:
        """The outcome of proposal `proposal_id`: a request-level error (result None) or the
        partition's result. Answers for a proposal no longer in flight are ignored."""
        out = _Builder()
        leader = self._leader
        proposal = None if leader is None else leader.inflight
        if leader is None or proposal is None or proposal.proposal_id != proposal_id:
            return self._ready(out)
        if result is not None and error is Errors.NONE and result.error_code:
            error = Errors.of(result.error_code)
        if error is Errors.NONE and result is not None:
            self._apply_success(leader, proposal, result, now_ms, out)
        elif error in (Errors.INELIGIBLE_REPLICA, Errors.FENCED_LEADER_EPOCH):
            # Rule 18: back to the committed ISR; do not resend the same thing blindly.
            leader.inflight = None
            out.idle_members_left = self._members_left(proposal, self._committed_isr)
            if error is Errors.FENCED_LEADER_EPOCH:
                leader.fenced_until_metadata = True
            else:
                leader.ineligible_signature = self._signature(
                    proposal.kind, proposal.new_isr_with_epochs
                )
            out.events.append(self._result_event(proposal, error, "reverted", now_ms))
            self._maybe_advance_hwm(now_ms, out)
        elif error in _RETRY_ERRORS:
            out.alter_partition = proposal
            out.events.append(self._result_event(proposal, error, "retry", now_ms))
        else:
            # NEW_LEADER_ELECTED, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_*: the metadata that
            # explains it is on its way and will reset the pending state (Kafka does the same).
            out.events.append(self._result_event(proposal, error, "pending", now_ms))
        return self._ready(out)

    def _apply_success(
        self,
        leader: LeaderState,
        proposal: IsrProposal,
        result: AlterPartitionPartitionResult,
        now_ms: int,
        out: _Builder,
    ) -> None:
        if result.leader_epoch != self._leader_epoch or result.partition_epoch < self._partition_epoch:
            out.events.append(self._result_event(proposal, Errors.NONE, "stale", now_ms))
            return  # stays pending until metadata catches up
        old_recovery = self._recovery_state
        before = self._committed_isr
        leader.inflight = None
        leader.ineligible_signature = None
        # What was proposed, most often: its tuple is kept, and the recovery state looked up
        # only when it moves (issue 35: 66,000 outcomes on one leader while a broker comes back).
        isr = result.isr
        self._committed_isr = proposal.isr if isr == proposal.isr else tuple(int(b) for b in isr)
        out.idle_members_left = self._members_left(proposal, before)
        self._partition_epoch = int(result.partition_epoch)
        if result.leader_recovery_state != old_recovery:
            self._recovery_state = LeaderRecoveryState(result.leader_recovery_state)
        out.events.append(self._result_event(proposal, Errors.NONE, "committed", now_ms))
        if old_recovery is not self._recovery_state:
            out.events.append(
                self._recovery_event(
                    old_recovery, self._recovery_state, "AlterPartition committed", now_ms
                )
            )
        self._maybe_advance_hwm(now_ms, out)

    # ---- acks=all ----

    def await_high_watermark(
        self, ack_id: int, base_offset: int, last_offset: int, now_ms: int
    ) -> PartitionReady:
        """Complete `ack_id` once the HWM passes last_offset (acks=all, rule 20)."""
        out = _Builder()
        leader = self._leader
        if leader is None:
            out.failed_acks.append((ack_id, Errors.NOT_LEADER_OR_FOLLOWER))
            return self._ready(out)
        leader.pending_acks.append(_PendingAck(ack_id, base_offset, last_offset))
        self._complete_acks(leader, now_ms, out)
        return self._ready(out)

    def cancel_ack(self, ack_id: int) -> bool:
        """The runtime timed the produce out; True if it was still waiting."""
        leader = self._leader
        if leader is None:
            return False
        before = len(leader.pending_acks)
        leader.pending_acks = [a for a in leader.pending_acks if a.ack_id != ack_id]
        return len(leader.pending_acks) != before

    def _complete_acks(self, leader: LeaderState, now_ms: int, out: _Builder) -> None:
        still: list[_PendingAck] = []
        for ack in leader.pending_acks:
            if ack.last_offset < self._high_watermark:
                out.completed_acks.append(ack.ack_id)
                out.events.append(
                    ProduceAcked(
                        **self._event_key(),
                        base_offset=ack.base_offset,
                        last_offset=ack.last_offset,
                        acks=ACKS_ALL,
                        leader_epoch=self._leader_epoch,
                        high_watermark=self._high_watermark,
                        ts=now_ms,
                    )
                )
            else:
                still.append(ack)
        leader.pending_acks = still

    def _fail_pending_acks(self, error: Errors, out: _Builder) -> None:
        """Leadership ends or restarts: no ack waits across it (the new state starts empty)."""
        leader = self._leader
        if leader is not None:
            out.failed_acks.extend((a.ack_id, error) for a in leader.pending_acks)
            leader.pending_acks = []

    # ---- helpers ----

    def _event_key(self) -> _EventKey:
        """How every journal event names this replica (journal_events.PartitionEvent)."""
        return {
            "broker_id": self.local_broker_id,
            "topic": self.topic,
            "topic_id": self.topic_id,
            "partition": self.partition,
        }

    def _ready(self, out: _Builder) -> PartitionReady:
        if not (
            out.events
            or out.alter_partition is not None
            or out.assign_leader_epoch is not None
            or out.flush_wanted
            or out.completed_acks
            or out.failed_acks
            or out.idle_members_left
        ):
            return _nothing_to_do(self._high_watermark)
        # PartitionReady's fields in order.
        return _new_ready(
            self._high_watermark,
            out.assign_leader_epoch,
            out.flush_wanted,
            tuple(out.events),
            out.alter_partition,
            tuple(out.completed_acks),
            tuple(out.failed_acks),
            out.idle_members_left,
        )

    def _role_event(self, role: str, now_ms: int) -> RoleChanged:
        # The fields named directly, not merged from _event_key and a dict of the committed
        # state: one for each partition a restarted broker opens (100,000 at scale; issue 35).
        return RoleChanged(
            broker_id=self.local_broker_id,
            topic=self.topic,
            topic_id=self.topic_id,
            partition=self.partition,
            leader_epoch=self._leader_epoch,
            partition_epoch=self._partition_epoch,
            isr=self._committed_isr,
            leader_recovery_state=int(self._recovery_state),
            role=role,
            leader_id=self._leader_id,
            log_end_offset=self._log_end_offset,
            high_watermark=self._high_watermark,
            ts=now_ms,
        )

    def _recovery_event(
        self,
        old: LeaderRecoveryState,
        new: LeaderRecoveryState,
        reason: str,
        now_ms: int,
    ) -> RecoveryStateChanged:
        return RecoveryStateChanged(
            **self._event_key(),
            leader_epoch=self._leader_epoch,
            old_state=int(old),
            new_state=int(new),
            reason=reason,
            ts=now_ms,
        )

    def _result_event(
        self, proposal: IsrProposal, error: Errors, outcome: str, now_ms: int
    ) -> IsrResult:
        # IsrResult's fields in declaration order (topic_id is keyword-only), not merged from
        # two dicts: one for each of the 66,000 outcomes a leader handles while a broker
        # comes back (issue 35).
        return IsrResult(
            self.local_broker_id,
            self.topic,
            self.partition,
            proposal.proposal_id,
            error.name,
            outcome,
            self._committed_isr,
            self._leader_epoch,
            self._partition_epoch,
            int(self._recovery_state),
            now_ms,
            topic_id=self.topic_id,
        )
