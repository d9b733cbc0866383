"""PartitionChangeBuilder and PartitionRegistration.merge (rules 8-16, 19; seeds 000, 001, 004)."""

from __future__ import annotations

import uuid

import pytest

from controller.core.election_policy import ElectionPolicy
from controller.core.partition_change import (
    ElectionKind,
    ElectionType,
    PartitionChangeBuilder,
    designated_election_error,
)
from kafkawire.errors import Errors
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from metadata.records import (
    LAST_KNOWN_LEADER_UNCHANGED,
    NO_LEADER_CHANGE,
    PartitionChangeRecord,
)

TOPIC = uuid.UUID(int=7)
RECOVERING = LeaderRecoveryState.RECOVERING


class Brokers:
    def __init__(self, fenced: set[int] | None = None, shutdown: set[int] | None = None) -> None:
        self.fenced = fenced or set()
        self.shutdown = shutdown or set()

    def is_fenced(self, broker_id: int) -> bool:
        return broker_id in self.fenced

    def is_in_controlled_shutdown(self, broker_id: int) -> bool:
        return broker_id in self.shutdown


def reg(
    replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, **kw: object
) -> PartitionRegistration:
    return PartitionRegistration(replicas=replicas, isr=isr, leader=leader, **kw)  # type: ignore[arg-type]


def builder(
    r: PartitionRegistration,
    brokers: Brokers,
    min_isr: int,
    elr_enabled: bool = True,
    unclean_allowed: bool = False,
) -> PartitionChangeBuilder:
    policy = ElectionPolicy(elr_enabled=elr_enabled, unclean_allowed=unclean_allowed)
    return PartitionChangeBuilder(r, TOPIC, 0, brokers, min_isr, policy)


def apply(r: PartitionRegistration, b: PartitionChangeBuilder) -> PartitionRegistration:
    change = b.build().record
    assert change is not None
    return r.merge(change)


def test_rule_10_fencing_two_members_one_at_a_time_gives_elr_of_the_second() -> None:
    brokers = Brokers()
    r = reg((0, 1, 2, 3), (0, 1, 2, 3), 0)
    brokers.fenced.add(2)
    r = apply(r, builder(r, brokers, 3).fence_broker(2))
    assert (r.isr, r.elr) == ((0, 1, 3), ())
    brokers.fenced.add(3)
    r = apply(r, builder(r, brokers, 3).fence_broker(3))
    assert (r.isr, r.elr) == ((0, 1), (3,))
    assert (r.leader, r.leader_epoch, r.partition_epoch) == (0, 0, 2)


def test_rule_10_one_shrink_below_min_isr_puts_every_leaver_in_the_elr() -> None:
    r = reg((1, 2, 3, 4), (1, 2, 3, 4), 1)
    r = apply(r, builder(r, Brokers(), 3).set_target_isr([1, 2]))
    assert (r.isr, r.elr) == ((1, 2), (3, 4))


def test_elr_empties_completely_when_isr_reaches_min_isr() -> None:
    r = reg((1, 2, 3, 4), (1, 2), 1, elr=(3, 4), last_known_elr=())
    r = apply(r, builder(r, Brokers(), 3).set_target_isr([1, 2, 3]))
    assert (r.isr, r.elr) == ((1, 2, 3), ())


def test_no_change_builds_none() -> None:
    r = reg((1, 2, 3), (1, 2, 3), 1)
    assert builder(r, Brokers(), 2).build().record is None
    assert builder(r, Brokers(), 2).set_target_isr([1, 2, 3]).build().record is None
    assert builder(r, Brokers(), 2).unfence_broker(2).build().record is None


def test_fencing_the_last_isr_member_sets_last_known_leader() -> None:
    r = reg((1, 2, 3), (1,), 1, elr=(2,))
    change = builder(r, Brokers({1, 2, 3}), 2).fence_broker(1).build().record
    assert change is not None
    assert change.leader == -1
    assert change.isr == ()
    assert change.eligible_leader_replicas == (1, 2)
    assert change.last_known_leader == 1
    after = r.merge(change)
    assert (after.leader_epoch, after.partition_epoch) == (1, 1)


def test_first_unfenced_elr_member_in_replica_order_is_elected_with_isr_of_itself() -> None:
    r = reg((3, 2, 1), (), -1, elr=(3, 2, 1), last_known_leader=3)
    b = builder(r, Brokers({3}), 2).unfence_broker(1).unfence_broker(2)
    after = apply(r, b)
    assert b.build().election == ElectionKind.ELR
    assert (after.leader, after.isr, after.elr) == (2, (2,), (3, 1))
    assert after.last_known_leader == -1
    assert after.leader_recovery_state == LeaderRecoveryState.RECOVERED


def test_last_known_leader_is_never_elected_while_elr_is_non_empty() -> None:
    r = reg((1, 2, 3), (), -1, elr=(2,), last_known_leader=1)
    assert builder(r, Brokers({2, 3}), 2).unfence_broker(1).build().record is None


def test_last_known_leader_elected_uncleanly_once_unfenced_with_empty_elr() -> None:
    r = reg((1, 2, 3), (), -1, last_known_elr=(2,), last_known_leader=1)
    b = builder(r, Brokers({2, 3}), 2).unfence_broker(1)
    after = apply(r, b)
    assert b.build().election == ElectionKind.LAST_KNOWN_LEADER
    assert (after.leader, after.isr, after.leader_recovery_state) == (1, (1,), RECOVERING)
    assert after.last_known_leader == -1
    assert after.last_known_elr == (2,)  # rule 11: kept until the ISR reaches min ISR


def test_unclean_restart_moves_elr_member_to_last_known_elr() -> None:
    r = reg((1, 2, 3), (1,), 1, elr=(2, 3))
    after = apply(r, builder(r, Brokers(), 2).unclean_restart(3))
    assert (after.isr, after.elr, after.last_known_elr) == ((1,), (2,), (3,))
    assert after.leader_epoch == 0


def test_clean_restart_keeps_elr_membership() -> None:
    r = reg((1, 2, 3), (1,), 1, elr=(2, 3))
    assert builder(r, Brokers({3}), 2).clean_restart(3).build().record is None


def test_unclean_restart_of_sole_isr_member_is_last_known_leader_not_elr() -> None:
    r = reg((1, 2, 3), (1,), 1, elr=(2,))
    after = apply(r, builder(r, Brokers({2, 3}), 2).unclean_restart(1))
    assert (after.leader, after.isr, after.elr, after.last_known_leader) == (-1, (), (2,), 1)


def test_min_isr_lowered_clears_elr_and_last_known_elr_without_leader_bump() -> None:
    r = reg((1, 2, 3), (1, 2), 1, elr=(3,), last_known_elr=(), leader_epoch=4, partition_epoch=9)
    after = apply(r, builder(r, Brokers({3}), 2))
    assert (after.elr, after.last_known_elr) == ((), ())
    assert (after.leader_epoch, after.partition_epoch) == (4, 10)


def test_elr_off_never_empties_isr_and_writes_no_elr_fields() -> None:
    r = reg((1, 2, 3), (1, 2), 1)
    change = builder(r, Brokers({2}), 3, elr_enabled=False).fence_broker(2).build().record
    assert change is not None
    assert change.isr == (1,)
    assert change.eligible_leader_replicas is None
    assert change.last_known_elr is None
    assert change.last_known_leader == LAST_KNOWN_LEADER_UNCHANGED
    r = r.merge(change)
    change = builder(r, Brokers({1, 2}), 3, elr_enabled=False).fence_broker(1).build().record
    assert change is not None
    assert change.isr is None  # the fenced sole member stays in the ISR
    assert change.leader == -1
    assert change.eligible_leader_replicas is None


def test_unclean_election_only_when_allowed_first_unfenced_replica() -> None:
    r = reg((1, 2, 3), (), -1, elr=(1,), last_known_leader=1)
    assert builder(r, Brokers({1}), 2).unfence_broker(3).build().record is None
    b = builder(r, Brokers({1}), 2, unclean_allowed=True).unfence_broker(3)
    after = apply(r, b)
    assert b.build().election == ElectionKind.UNCLEAN
    assert (after.leader, after.isr, after.elr, after.last_known_leader) == (2, (2,), (), -1)
    assert after.leader_recovery_state == RECOVERING


def test_preferred_never_falls_back_to_unclean() -> None:
    r = reg((1, 2, 3), (), -1, last_known_leader=3)
    b = builder(r, Brokers({1}), 2, unclean_allowed=True)
    assert b.set_election_type(ElectionType.PREFERRED).build().record is None


def test_preferred_moves_leadership_to_first_replica_in_isr() -> None:
    r = reg((1, 2, 3), (2, 1), 2, leader_epoch=3)
    after = apply(r, builder(r, Brokers(), 2).set_election_type(ElectionType.PREFERRED))
    assert (after.leader, after.leader_epoch, after.isr) == (1, 4, (2, 1))


def test_designated_only_when_offline_and_replica_unfenced() -> None:
    online = reg((1, 2, 3), (1,), 1)
    offline = reg((1, 2, 3), (), -1, elr=(1,), last_known_leader=1)
    brokers = Brokers({1})
    assert designated_election_error(online, 2, brokers) == Errors.ELECTION_NOT_NEEDED
    assert designated_election_error(offline, 4, brokers) == Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert designated_election_error(offline, 1, brokers) == Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert designated_election_error(offline, 3, brokers) is None
    b = builder(offline, brokers, 2).set_election_type(ElectionType.DESIGNATED, 3)
    after = apply(offline, b)
    assert b.build().election == ElectionKind.DESIGNATED
    assert (after.leader, after.isr, after.elr, after.last_known_leader) == (3, (3,), (), -1)
    assert after.leader_recovery_state == RECOVERING
    refused = builder(offline, brokers, 2).set_election_type(ElectionType.DESIGNATED, 1)
    assert refused.build().record is None


def test_election_while_recovering_keeps_recovering_with_isr_of_new_leader() -> None:
    r = reg((1, 2, 3), (), -1, elr=(1, 2), leader_recovery_state=RECOVERING)
    after = apply(r, builder(r, Brokers({1}), 3).unfence_broker(2))
    assert (after.leader, after.isr, after.leader_recovery_state) == (2, (2,), RECOVERING)


def test_recovered_from_alter_partition_does_not_bump_leader_epoch() -> None:
    r = reg((1, 2, 3), (1,), 1, leader_recovery_state=RECOVERING, leader_epoch=5)
    b = builder(r, Brokers(), 1).set_target_leader_recovery_state(LeaderRecoveryState.RECOVERED)
    change = b.build().record
    assert change == PartitionChangeRecord(0, TOPIC, leader_recovery_state=0)
    after = r.merge(change)
    assert (after.leader_epoch, after.leader_recovery_state) == (5, LeaderRecoveryState.RECOVERED)


def test_controlled_shutdown_of_leader_moves_leadership() -> None:
    r = reg((1, 2, 3), (1, 2, 3), 1)
    after = apply(r, builder(r, Brokers(shutdown={1}), 2).controlled_shutdown(1))
    assert (after.leader, after.isr, after.leader_epoch) == (2, (2, 3), 1)


def test_merge_null_fields_are_unchanged_and_every_record_bumps_partition_epoch() -> None:
    r = reg((1, 2, 3), (1, 2), 1, elr=(3,), last_known_leader=-1, leader_epoch=2)
    after = r.merge(PartitionChangeRecord(0, TOPIC))
    assert (after.isr, after.elr, after.leader, after.leader_epoch) == ((1, 2), (3,), 1, 2)
    assert after.partition_epoch == r.partition_epoch + 1
    same_leader = r.merge(PartitionChangeRecord(0, TOPIC, leader=1))
    assert same_leader.leader_epoch == 3  # naming the leader is how a bump is requested
    assert PartitionChangeRecord(0, TOPIC).leader == NO_LEADER_CHANGE


def test_merge_sets_every_field_as_the_constructor_would_and_stays_frozen() -> None:
    """merge builds its result through the slots, not the frozen constructor (issue 35): the
    result is the constructor's, field for field, hashes alike and cannot be assigned to."""
    import dataclasses

    r = reg((1, 2, 3), (1, 2), 1, elr=(3,), last_known_leader=2, leader_epoch=2)
    change = PartitionChangeRecord(
        0, TOPIC, isr=(2, 3), leader=2, replicas=(2, 3, 4), removing_replicas=(1,),
        adding_replicas=(4,), leader_recovery_state=1, eligible_leader_replicas=(),
        last_known_elr=(1,), last_known_leader=-1,
    )
    after = r.merge(change)
    built = PartitionRegistration(
        replicas=(2, 3, 4), isr=(2, 3), elr=(), last_known_elr=(1,), last_known_leader=-1,
        leader=2, leader_recovery_state=LeaderRecoveryState.RECOVERING, leader_epoch=3,
        partition_epoch=r.partition_epoch + 1, removing_replicas=(1,), adding_replicas=(4,),
    )
    assert after == built and hash(after) == hash(built)
    assert type(after.leader_recovery_state) is LeaderRecoveryState
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.isr = (1,)  # type: ignore[misc]


def test_rule_11_a_partition_that_keeps_its_leader_has_no_last_known_leader() -> None:
    """Found by the Spark audit on a demo run: the sole ISR member in controlled shutdown with
    every other replica fenced kept leadership (no one else can lead) while LastKnownLeader was
    set to it. A partition with a leader has no LastKnownLeader (rule 11)."""
    # The cluster stopping: 1 and 2 already in controlled shutdown, 2 in the ELR, 3 the last;
    # the change is computed from the image before 3's own shutdown flag is written.
    r = reg((1, 2, 3), (3,), 3, elr=(2,))
    brokers = Brokers(shutdown={1, 2})
    after = apply(r, builder(r, brokers, min_isr=2).controlled_shutdown(3))
    assert after.leader == -1 and after.last_known_leader == 3  # it cannot lead any more
    assert after.isr == () and 3 in after.elr
    # ...and a leaderless partition still remembers its last leader.
    fenced = apply(r, builder(r, Brokers(fenced={1, 2, 3}), min_isr=2).fence_broker(3))
    assert fenced.leader == -1 and fenced.last_known_leader == 3


def test_rule_10_empty_target_isr_with_elr_off_keeps_the_isr() -> None:
    # Kafka's PartitionChangeBuilder.build sets an empty target ISR only while ELR is enabled;
    # with ELR off the ISR never empties (rule 10), however the change was asked for.
    r = reg((1, 2, 3), (1, 2), 1)
    change = builder(r, Brokers(), 2, elr_enabled=False).set_target_isr([]).build()
    assert change.record is None
    # With ELR on (both members fenced, so neither is elected from the ELR) the same target
    # empties the ISR and the leavers go to the ELR.
    r = apply(r, builder(r, Brokers({1, 2}), 2).set_target_isr([]))
    assert (r.isr, r.elr, r.leader) == ((), (1, 2), -1)
