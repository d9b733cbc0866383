"""PartitionChangeBuilder: the one place ISR, ELR, LastKnownELR/Leader and elections are decided.

Feed it the current PartitionRegistration, a broker view, the effective min ISR (rule 9) and the
ElectionPolicy; apply operations (target ISR, fence/unfence/restart of a broker, an election type,
RECOVERED); `build()` returns a PartitionChange: the PartitionChangeRecord (None when nothing
changes) and the ElectionKind it decided, which callers log and count instead of re-deriving it.
Rules 8-16 and 19 of INVARIANTS.md (seed 001 KIP-966, seed 000 KIP-704, seed 004 DESIGNATED).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from controller.core.election_policy import DEFAULT_POLICY, ElectionPolicy
from kafkawire.errors import Errors
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from metadata.records import (
    LAST_KNOWN_LEADER_NONE,
    LAST_KNOWN_LEADER_UNCHANGED,
    LEADER_RECOVERY_STATE_UNCHANGED,
    NO_LEADER,
    NO_LEADER_CHANGE,
    PartitionChangeRecord,
)


class BrokerView(Protocol):
    """What the builder needs to know about brokers; MetadataImage implements it."""

    def is_fenced(self, broker_id: int) -> bool: ...

    def is_in_controlled_shutdown(self, broker_id: int) -> bool: ...


class ElectionType(IntEnum):
    """ElectLeaders' types (Kafka's PREFERRED=0, UNCLEAN=1; seed 004 adds DESIGNATED)."""

    PREFERRED = 0
    UNCLEAN = 1
    DESIGNATED = 2
    ONLINE = 3  # the controller's own election after a broker change: clean, or unclean if allowed


class ElectionKind(IntEnum):
    """How the builder's leader was chosen; the controller logs and counts it (metrics)."""

    NONE = 0  # leader unchanged
    CLEAN = 1  # from the ISR
    ELR = 2  # from the ELR with ISR = [it] (rule 13)
    LAST_KNOWN_LEADER = 3  # unclean (rule 13)
    UNCLEAN = 4
    DESIGNATED = 5
    NO_LEADER = 6  # the leader went away and nobody could be elected
    PREFERRED = 7  # a PREFERRED election moved leadership to the first replica (clean)


# The kinds that put a new leader in place.
ELECTED_KINDS = frozenset(
    {
        ElectionKind.CLEAN,
        ElectionKind.ELR,
        ElectionKind.LAST_KNOWN_LEADER,
        ElectionKind.UNCLEAN,
        ElectionKind.DESIGNATED,
        ElectionKind.PREFERRED,
    }
)

# The kinds that elect outside the ISR: the new leader's ISR is [it] (rule 13).
_ISR_RESET = frozenset(
    {
        ElectionKind.ELR,
        ElectionKind.LAST_KNOWN_LEADER,
        ElectionKind.UNCLEAN,
        ElectionKind.DESIGNATED,
    }
)
# The unclean ones: RECOVERING, and the ELR is forgotten (rule 13, KIP-704).
UNCLEAN_KINDS = frozenset(
    {ElectionKind.LAST_KNOWN_LEADER, ElectionKind.UNCLEAN, ElectionKind.DESIGNATED}
)


@dataclass(frozen=True, slots=True)
class _Election:
    leader: int
    kind: ElectionKind


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """What `build()` decided: the record to write (None: nothing changes) and how its leader
    was chosen (ElectionKind.NONE when the leader stays)."""

    record: PartitionChangeRecord | None
    election: ElectionKind


def written_records(changes: Iterable[PartitionChange]) -> list[PartitionChangeRecord]:
    """The records of the changes that change something, in order."""
    return [c.record for c in changes if c.record is not None]


def _ordered(members: Iterable[int], replicas: tuple[int, ...]) -> tuple[int, ...]:
    """Members in replica order: ELR and LastKnownELR are kept so, 'first' is unambiguous."""
    wanted = set(members)
    return tuple(r for r in replicas if r in wanted)


class PartitionChangeBuilder:
    def __init__(
        self,
        registration: PartitionRegistration,
        topic_id: uuid.UUID,
        partition_id: int,
        brokers: BrokerView,
        min_isr: int,
        policy: ElectionPolicy = DEFAULT_POLICY,
    ) -> None:
        self._reg = registration
        self._topic_id = topic_id
        self._partition_id = partition_id
        self._brokers = brokers
        self._min_isr = min_isr  # already effective (rule 9)
        self._elr_enabled = policy.elr_enabled
        self._unclean_allowed = policy.unclean_allowed
        self._recovery_manager = policy.recovery_manager  # rule 14
        self._target_isr: tuple[int, ...] = registration.isr
        self._target_recovery: LeaderRecoveryState = registration.leader_recovery_state
        self._fenced_overrides: dict[int, bool] = {}
        self._shutting_down: set[int] = set()
        self._unclean_restarted: set[int] = set()
        self._last_isr_member_removed: int | None = None
        self._election_type = ElectionType.ONLINE
        self._designated_leader = NO_LEADER

    # -- broker view, with this change's own fence/unfence applied ---------------------------

    def _is_fenced(self, broker_id: int) -> bool:
        if broker_id in self._fenced_overrides:
            return self._fenced_overrides[broker_id]
        return self._brokers.is_fenced(broker_id)

    def _is_acceptable_leader(self, broker_id: int) -> bool:
        if broker_id in self._shutting_down:
            return False
        return not self._is_fenced(broker_id) and not self._brokers.is_in_controlled_shutdown(
            broker_id
        )

    # -- operations ---------------------------------------------------------------------------

    def set_target_isr(self, isr: Iterable[int]) -> PartitionChangeBuilder:
        """An ISR proposed by the leader (AlterPartition), already validated (rule 18). Rule 10:
        with ELR off the ISR never empties, so an empty target keeps the current ISR (Kafka's
        build() writes an empty ISR only while ELR is enabled)."""
        target = tuple(isr)
        if target or self._elr_enabled:
            self._target_isr = target
        return self

    def set_target_leader_recovery_state(
        self, state: LeaderRecoveryState
    ) -> PartitionChangeBuilder:
        self._target_recovery = state
        return self

    def set_election_type(
        self, election_type: ElectionType, designated_leader: int = NO_LEADER
    ) -> PartitionChangeBuilder:
        self._election_type = election_type
        self._designated_leader = designated_leader
        return self

    def fence_broker(self, broker_id: int) -> PartitionChangeBuilder:
        """Rule 12: a fenced broker leaves the ISR (ELR on) but keeps its ELR membership."""
        self._fenced_overrides[broker_id] = True
        self._remove_from_isr(broker_id)
        return self

    def controlled_shutdown(self, broker_id: int) -> PartitionChangeBuilder:
        """A broker shutting down leaves the ISR like a fenced one, and cannot lead (even when
        the image the change is computed from does not mark it as shutting down yet)."""
        self._shutting_down.add(broker_id)
        self._remove_from_isr(broker_id)
        return self

    def unfence_broker(self, broker_id: int) -> PartitionChangeBuilder:
        """Rule 16: unfencing re-runs the election; it joins the ISR only via rule 13's ELR step."""
        self._fenced_overrides[broker_id] = False
        return self

    def clean_restart(self, broker_id: int) -> PartitionChangeBuilder:
        """Rule 12: a clean restart keeps ELR membership (the sole ISR member joins the ELR)."""
        return self.fence_broker(broker_id)

    def unclean_restart(self, broker_id: int) -> PartitionChangeBuilder:
        """Rules 10-12: leaves ISR and ELR; an ELR member joins LastKnownELR."""
        self._unclean_restarted.add(broker_id)
        return self.fence_broker(broker_id)

    def _remove_from_isr(self, broker_id: int) -> None:
        if broker_id not in self._target_isr:
            return
        remaining = tuple(r for r in self._target_isr if r != broker_id)
        if not remaining and not self._elr_enabled:
            return  # rule 10: with ELR off the ISR never empties
        if not remaining:
            self._last_isr_member_removed = broker_id
        self._target_isr = remaining

    # -- build --------------------------------------------------------------------------------

    def build(self) -> PartitionChange:
        reg = self._reg
        isr = self._target_isr
        elr, last_known_elr, last_known_leader = self._next_elr_state(isr)
        recovery = self._target_recovery

        election = self._elect(isr, elr, last_known_leader)
        leader = election.leader
        if election.kind in _ISR_RESET:
            isr = (leader,)
            elr = tuple(r for r in elr if r != leader)
        if election.kind in UNCLEAN_KINDS:
            # Rule 13 / KIP-704: an unclean election recovers first and forgets the ELR;
            # LastKnownELR stays until the ISR reaches min ISR (rule 11).
            recovery = LeaderRecoveryState.RECOVERING
            elr = ()
        last_known_elr = tuple(r for r in last_known_elr if r not in isr)
        if (
            recovery == LeaderRecoveryState.RECOVERING
            and leader != NO_LEADER
            and leader != reg.leader
        ):
            isr = (leader,)  # rule 19: an election while RECOVERING keeps ISR = [new leader]
        if self._elr_enabled and leader != NO_LEADER:
            # Rule 11: LastKnownLeader names the last leader of a leaderless partition; a
            # partition with a leader (a new one, or one that kept its leader) has none.
            last_known_leader = LAST_KNOWN_LEADER_NONE
        if self._elr_enabled and len(isr) >= self._min_isr:
            elr, last_known_elr = (), ()  # rules 10-11, 15

        # One record, built once (fencing a broker builds 100,000 of these, issue 35).
        isr_field = isr if isr != reg.isr else None
        leader_field = leader if leader != reg.leader else NO_LEADER_CHANGE
        recovery_field = (
            int(recovery)
            if recovery != reg.leader_recovery_state
            else LEADER_RECOVERY_STATE_UNCHANGED
        )
        elr_field = elr if elr != reg.elr else None
        last_known_elr_field = last_known_elr if last_known_elr != reg.last_known_elr else None
        last_known_leader_field = (
            last_known_leader
            if last_known_leader != reg.last_known_leader
            else LAST_KNOWN_LEADER_UNCHANGED
        )
        if (
            isr_field is None
            and leader_field == NO_LEADER_CHANGE
            and recovery_field == LEADER_RECOVERY_STATE_UNCHANGED
            and elr_field is None
            and last_known_elr_field is None
            and last_known_leader_field == LAST_KNOWN_LEADER_UNCHANGED
        ):
            return PartitionChange(None, election.kind)
        record = PartitionChangeRecord(
            partition_id=self._partition_id,
            topic_id=self._topic_id,
            isr=isr_field,
            leader=leader_field,
            leader_recovery_state=recovery_field,
            eligible_leader_replicas=elr_field,
            last_known_elr=last_known_elr_field,
            last_known_leader=last_known_leader_field,
        )
        return PartitionChange(record, election.kind)

    def _next_elr_state(self, isr: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """ELR, LastKnownELR and LastKnownLeader for the target ISR, before the election."""
        reg = self._reg
        if not self._elr_enabled:
            # Rule 10: with ELR off no ELR state is kept; every change wipes what was written
            # while it was on (Kafka's PartitionChangeBuilder.maybeUpdateRecordElr).
            return (), (), LAST_KNOWN_LEADER_NONE
        unclean = self._unclean_restarted
        in_isr = set(isr)
        elr: tuple[int, ...] = ()
        if len(isr) < self._min_isr:
            # Rule 10: ELR = (old ELR + old ISR) - new ISR - replicas that restarted uncleanly.
            # Applied per event, so members that left while the ISR stayed >= min ISR are in
            # neither the old ELR nor the old ISR and never enter it.
            elr = _ordered(
                (r for r in reg.elr + reg.isr if r not in in_isr and r not in unclean),
                reg.replicas,
            )
        # Rule 11: an ELR member restarting uncleanly moves to LastKnownELR.
        last_known_elr: tuple[int, ...] = ()
        if reg.last_known_elr or unclean:
            last_known_elr = _ordered(
                (
                    r
                    for r in reg.last_known_elr + tuple(r for r in reg.elr if r in unclean)
                    if r not in in_isr and r not in elr
                ),
                reg.replicas,
            )
        last_known_leader = reg.last_known_leader
        if self._last_isr_member_removed is not None:
            last_known_leader = self._last_isr_member_removed  # rule 11
        return elr, last_known_elr, last_known_leader

    def _elect(
        self, isr: tuple[int, ...], elr: tuple[int, ...], last_known_leader: int
    ) -> _Election:
        """Rule 13's order, with PREFERRED (never unclean) and DESIGNATED (seed 004)."""
        reg = self._reg
        replicas = reg.replicas
        current = reg.leader
        election_type = self._election_type

        if (
            election_type == ElectionType.DESIGNATED
            and _designated_error(
                reg, self._designated_leader, self._is_fenced, self._brokers.is_in_controlled_shutdown
            )
            is None
        ):
            return _Election(self._designated_leader, ElectionKind.DESIGNATED)
        if election_type == ElectionType.PREFERRED and replicas:
            preferred = replicas[0]
            if preferred in isr and self._is_acceptable_leader(preferred):
                kind = ElectionKind.NONE if preferred == current else ElectionKind.PREFERRED
                return _Election(preferred, kind)

        if current != NO_LEADER and current in isr and self._is_acceptable_leader(current):
            return _Election(current, ElectionKind.NONE)
        for replica in replicas:
            if replica in isr and self._is_acceptable_leader(replica):
                return _Election(replica, ElectionKind.CLEAN)
        if self._elr_enabled and not isr:
            for replica in elr:
                if self._is_acceptable_leader(replica):
                    return _Election(replica, ElectionKind.ELR)
        # PREFERRED never falls back to unclean (rule 13); a refused DESIGNATED neither.
        manager_owns = self._recovery_manager and election_type == ElectionType.ONLINE
        if election_type not in (ElectionType.PREFERRED, ElectionType.DESIGNATED) and not manager_owns:
            if (
                self._elr_enabled
                and not elr
                and last_known_leader >= 0
                and last_known_leader in replicas
                and self._is_acceptable_leader(last_known_leader)
            ):
                return _Election(last_known_leader, ElectionKind.LAST_KNOWN_LEADER)
            if self._unclean_allowed or election_type == ElectionType.UNCLEAN:
                for replica in replicas:
                    if self._is_acceptable_leader(replica):
                        return _Election(replica, ElectionKind.UNCLEAN)
        if current == NO_LEADER:
            return _Election(NO_LEADER, ElectionKind.NONE)
        return _Election(NO_LEADER, ElectionKind.NO_LEADER)


def fenced_replica_change(
    registration: PartitionRegistration,
    topic_id: uuid.UUID,
    partition_id: int,
    broker_id: int,
    min_isr: int,
    elr_enabled: bool,
    acceptable_leader: Callable[[int], bool],
) -> PartitionChange | None:
    """The change `fence_broker(broker_id)` builds for a partition whose ISR keeps a member
    that may lead, or None (then the builder decides): the ISR without the broker, and a new
    leader when it led (the first replica in replica order left in the ISR that may lead: a
    clean election, rule 13). That is the builder's whole record when no ELR state is kept
    before or after (ELR off, or the ISR left at min ISR or more, rules 10-11) and the
    partition is RECOVERED (rule 19 is not asked). A broker's fencing at 100,000 partitions is
    100,000 of these; the builder was 1.45 CPU-s of them in a micro, the write's critical path
    before a restarted broker's registration is answered (issue 35). Kafka's
    handleBrokerFenced builds each with its PartitionChangeBuilder; the records are the same.
    `acceptable_leader`: unfenced and not in controlled shutdown in the image."""
    isr = registration.isr
    if (
        broker_id not in isr
        or len(isr) < 2
        or registration.elr
        or registration.last_known_elr
        or registration.last_known_leader != LAST_KNOWN_LEADER_NONE
        or registration.leader_recovery_state != LeaderRecoveryState.RECOVERED
    ):
        return None
    remaining = tuple(r for r in isr if r != broker_id)
    if elr_enabled and len(remaining) < min_isr:
        return None
    leader = registration.leader
    if leader != broker_id:
        if leader == NO_LEADER or leader not in remaining or not acceptable_leader(leader):
            return None
        record = PartitionChangeRecord(
            partition_id=partition_id, topic_id=topic_id, isr=remaining
        )
        return PartitionChange(record, ElectionKind.NONE)
    for replica in registration.replicas:
        if replica in remaining and acceptable_leader(replica):
            record = PartitionChangeRecord(
                partition_id=partition_id, topic_id=topic_id, isr=remaining, leader=replica
            )
            return PartitionChange(record, ElectionKind.CLEAN)
    return None


def designated_election_error(
    registration: PartitionRegistration, designated_leader: int, brokers: BrokerView
) -> Errors | None:
    """Seed 004: only an offline partition, only an unfenced member of the replica set."""
    return _designated_error(
        registration, designated_leader, brokers.is_fenced, brokers.is_in_controlled_shutdown
    )


def designated_election_reason(
    registration: PartitionRegistration, designated_leader: int, brokers: BrokerView
) -> str:
    """Why a DESIGNATED election is refused, in words for the operator (seed 004)."""
    if registration.leader != NO_LEADER:
        return f"the partition is already online with leader {registration.leader}"
    if designated_leader not in registration.replicas:
        return (
            f"broker {designated_leader} is not in the replica set {list(registration.replicas)}"
        )
    if brokers.is_fenced(designated_leader):
        return f"broker {designated_leader} is fenced"
    if brokers.is_in_controlled_shutdown(designated_leader):
        return f"broker {designated_leader} is in controlled shutdown"
    return ""


def _designated_error(
    registration: PartitionRegistration,
    designated_leader: int,
    is_fenced: Callable[[int], bool],
    in_controlled_shutdown: Callable[[int], bool],
) -> Errors | None:
    if registration.leader != NO_LEADER:
        return Errors.ELECTION_NOT_NEEDED
    if designated_leader not in registration.replicas or is_fenced(designated_leader):
        return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
    if in_controlled_shutdown(designated_leader):
        return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE  # it is leaving: leading would not last
    return None
