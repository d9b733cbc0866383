"""broker.core.partition_state: the HWM rule (20), ISR changes with broker epochs (17, 18) and
leader recovery (21), driven with explicit now_ms and no I/O."""

from __future__ import annotations

import uuid
from dataclasses import replace
from types import MappingProxyType

import pytest

from broker.core.journal_events import (
    HwmAdvanced,
    IsrResult,
    RecoveryStateChanged,
    RoleChanged,
    Truncated,
    event_map,
)
from broker.core.partition_state import (
    CONSUMER_REPLICA_ID,
    IsrProposal,
    PartitionReady,
    PartitionState,
    ProposalKind,
    Role,
)
from kafkawire.broker_lifecycle import (
    AlterPartitionPartitionResult,
    alter_partition_result,
    broker_state,
)
from kafkawire.constants import ACKS_ALL
from kafkawire.errors import Errors
from metadata.metadata_image import BrokerRegistration, MetadataImage
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from storage.core.leader_epoch_cache import EpochEntry

LAG_MS = 10_000


def image(epochs: dict[int, int], fenced: frozenset[int] = frozenset()) -> MetadataImage:
    brokers = {
        b: BrokerRegistration(b, e, uuid.UUID(int=b), fenced=b in fenced,
                              in_controlled_shutdown=False)
        for b, e in epochs.items()
    }
    return MetadataImage(brokers=MappingProxyType(brokers))


EPOCHS = {1: 100, 2: 200, 3: 300}


def reg(
    isr: tuple[int, ...],
    *,
    leader: int = 1,
    leader_epoch: int = 5,
    partition_epoch: int = 10,
    recovery: LeaderRecoveryState = LeaderRecoveryState.RECOVERED,
) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=(1, 2, 3),
        isr=isr,
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        leader_recovery_state=recovery,
    )


def leader(
    isr: tuple[int, ...] = (1, 2, 3),
    min_isr: int = 2,
    log_end_offset: int = 0,
    brokers: MetadataImage | None = None,
    **kwargs: object,
) -> tuple[PartitionState, PartitionReady]:
    state = PartitionState("foo", 0, 1, replica_lag_time_max_ms=LAG_MS,
                           log_end_offset=log_end_offset, flushed_offset=log_end_offset)
    ready = state.apply_registration(
        reg(isr, **kwargs),  # type: ignore[arg-type]
        min_isr,
        brokers or image(EPOCHS),
        now_ms=0,
    )
    return state, ready


def proposing_isr_123() -> tuple[PartitionState, IsrProposal]:
    """Leader 1 of ISR 1,2 (min ISR 2) at log end 4; follower 3 (broker epoch 300) fetched up to
    it, so the leader has proposed ISR 1,2,3."""
    state, _ = leader(isr=(1, 2), min_isr=2)
    state.update_local_log(4, 4, now_ms=1)
    proposal = state.on_follower_fetch(3, 4, 300, now_ms=1).alter_partition
    assert proposal is not None
    return state, proposal


def committed(state: PartitionState, isr: tuple[int, ...], partition_epoch: int,
              recovery: LeaderRecoveryState = LeaderRecoveryState.RECOVERED,
              ) -> AlterPartitionPartitionResult:
    return alter_partition_result(
        partition_index=0, error=Errors.NONE, leader_id=1, leader_epoch=state.leader_epoch,
        isr=isr, leader_recovery_state=int(recovery), partition_epoch=partition_epoch,
    )


def test_become_leader_assigns_the_epoch_at_the_log_end() -> None:
    state, ready = leader(log_end_offset=42)
    assert state.role is Role.LEADER
    assert ready.assign_leader_epoch == EpochEntry(5, 42)
    assert state.leader_epoch_start_offset == 42


def test_hwm_is_the_minimum_log_end_over_the_isr() -> None:
    state, _ = leader()
    state.update_local_log(10, 10, now_ms=1)
    state.on_follower_fetch(2, 10, 200, now_ms=2)
    assert state.high_watermark == 0  # replica 3 has not fetched: it holds the HWM
    ready = state.on_follower_fetch(3, 7, 300, now_ms=3)
    assert state.high_watermark == 7
    assert [e.new for e in ready.events if isinstance(e, HwmAdvanced)] == [7]


def test_hwm_does_not_move_while_committed_isr_is_under_min_isr() -> None:
    state, _ = leader(isr=(1,), min_isr=2)
    state.update_local_log(10, 10, now_ms=1)
    # Every replica has the data, but the controller has committed only ISR [1] (rule 20).
    ready = state.on_follower_fetch(2, 10, 200, now_ms=2)
    assert state.high_watermark == 0
    assert not [e for e in ready.events if isinstance(e, HwmAdvanced)]
    assert ready.alter_partition is not None
    assert ready.alter_partition.isr == (1, 2)
    state.on_follower_fetch(3, 10, 300, now_ms=3)
    assert state.high_watermark == 0
    # Only the committed expansion lets it move.
    done = state.on_alter_partition_response(
        ready.alter_partition.proposal_id, Errors.NONE, committed(state, (1, 2), 11), now_ms=4
    )
    assert state.committed_isr == (1, 2)
    assert state.high_watermark == 10
    event = next(e for e in done.events if isinstance(e, HwmAdvanced))
    assert (event.isr_size, event.min_isr, event.old, event.new) == (2, 2, 0, 10)


def test_acks_all_is_refused_under_min_isr_and_acks_1_is_not() -> None:
    state, _ = leader(isr=(1,), min_isr=2)
    assert state.check_produce(ACKS_ALL) is Errors.NOT_ENOUGH_REPLICAS
    assert state.check_produce(1) is Errors.NONE
    assert state.check_produce(0) is Errors.NONE
    assert state.check_produce(2) is Errors.INVALID_REQUIRED_ACKS
    # An acks=1 write is appended but stays above the HWM: consumers cannot see it.
    state.update_local_log(3, 3, now_ms=1)
    assert state.fetch_upper_bound(CONSUMER_REPLICA_ID) == 0
    assert state.fetch_upper_bound(2) == 3


def test_acks_all_completes_when_the_hwm_passes_the_batch() -> None:
    state, _ = leader(isr=(1, 2), min_isr=2)
    assert state.check_produce(ACKS_ALL) is Errors.NONE
    state.update_local_log(5, 5, now_ms=1)
    ready = state.await_high_watermark(ack_id=7, base_offset=0, last_offset=4, now_ms=1)
    assert ready.completed_acks == ()
    ready = state.on_follower_fetch(2, 4, 200, now_ms=2)
    assert ready.completed_acks == ()  # HWM 4 does not cover offset 4
    ready = state.on_follower_fetch(2, 5, 200, now_ms=3)
    assert ready.completed_acks == (7,)
    assert state.pending_ack_ids() == ()


def test_pending_acks_fail_when_leadership_moves() -> None:
    state, _ = leader(isr=(1, 2), min_isr=2)
    state.update_local_log(5, 5, now_ms=1)
    state.await_high_watermark(ack_id=1, base_offset=0, last_offset=4, now_ms=1)
    ready = state.apply_registration(reg((2, 3), leader=2, leader_epoch=6, partition_epoch=11),
                                     2, image(EPOCHS), now_ms=2)
    assert state.role is Role.FOLLOWER
    assert ready.failed_acks == ((1, Errors.NOT_LEADER_OR_FOLLOWER),)
    assert state.check_produce(1) is Errors.NOT_LEADER_OR_FOLLOWER


def test_isr_expansion_carries_the_broker_epoch_the_follower_fetched_with() -> None:
    state, _ = leader(isr=(1, 2), min_isr=2)
    state.update_local_log(4, 4, now_ms=1)
    state.on_follower_fetch(2, 4, 200, now_ms=1)
    ready = state.on_follower_fetch(3, 4, 300, now_ms=2)
    proposal = ready.alter_partition
    assert proposal is not None
    assert proposal.kind is ProposalKind.EXPAND
    assert proposal.new_isr_with_epochs == (
        broker_state(1, 100), broker_state(2, 200), broker_state(3, 300)
    )
    assert (proposal.leader_epoch, proposal.partition_epoch) == (5, 10)
    assert state.maximal_isr == (1, 2, 3)
    # At most one AlterPartition in flight.
    assert state.on_follower_fetch(3, 4, 300, now_ms=3).alter_partition is None


def test_follower_fetching_with_a_stale_broker_epoch_is_not_proposed() -> None:
    state, _ = leader(isr=(1, 2), min_isr=2)
    state.update_local_log(4, 4, now_ms=1)
    # Broker 3 re-registered with epoch 301; it still fetches with 300 (rule 17, KIP-903).
    state.update_metadata(2, image({1: 100, 2: 200, 3: 301}), now_ms=1)
    ready = state.on_follower_fetch(3, 4, 300, now_ms=2)
    assert ready.alter_partition is None
    assert state.inflight is None
    # Fenced followers are not proposed either.
    state.update_metadata(2, image(EPOCHS, fenced=frozenset({3})), now_ms=3)
    assert state.on_follower_fetch(3, 4, 300, now_ms=4).alter_partition is None
    state.update_metadata(2, image(EPOCHS), now_ms=5)
    assert state.on_follower_fetch(3, 4, 300, now_ms=6).alter_partition is not None


def assert_proposes_3(state: PartitionState, broker_epoch: int, now_ms: int) -> None:
    """A fetch of follower 3 with `broker_epoch` makes the leader propose it, with that epoch."""
    again = state.on_follower_fetch(3, 4, broker_epoch, now_ms=now_ms).alter_partition
    assert again is not None
    assert again.new_isr_with_epochs[-1] == broker_state(3, broker_epoch)


def test_ineligible_replica_reverts_and_does_not_retry_blindly() -> None:
    state, proposal = proposing_isr_123()
    ready = state.on_alter_partition_response(
        proposal.proposal_id, Errors.INELIGIBLE_REPLICA, None, now_ms=2
    )
    assert state.committed_isr == (1, 2)
    assert state.maximal_isr == (1, 2)
    assert state.inflight is None
    assert ready.alter_partition is None
    # Same follower epoch, same image: no new proposal (rule 18).
    assert state.on_follower_fetch(3, 4, 300, now_ms=3).alter_partition is None
    # The follower restarts and the leader's image learns its new epoch: propose again.
    state.update_metadata(2, image({1: 100, 2: 200, 3: 302}), now_ms=4)
    assert_proposes_3(state, 302, now_ms=5)


def test_a_leader_keeps_a_new_broker_view_unless_a_refusal_or_recovery_reads_it() -> None:
    """A change of the brokers alone (a returning broker's unfencing, issue 35): a leader
    with nothing refused and not RECOVERING keeps the new view (its followers' eligibility is
    read from it as they fetch); one whose proposal was refused (rule 18) or that is
    RECOVERING goes through update_metadata, which may propose again."""
    state, proposal = proposing_isr_123()
    state.on_alter_partition_response(
        proposal.proposal_id, Errors.NONE, committed(state, (1, 2, 3), 11), now_ms=2
    )
    view = image({1: 100, 2: 200, 3: 302})
    assert state.keep_brokers(view)
    assert state.replica_progress(3) is not None
    refused, proposal = proposing_isr_123()
    refused.on_alter_partition_response(
        proposal.proposal_id, Errors.INELIGIBLE_REPLICA, None, now_ms=2
    )
    assert not refused.keep_brokers(view)
    refused.update_metadata(2, view, now_ms=4)
    assert_proposes_3(refused, 302, now_ms=5)
    recovering, _ = leader(isr=(1,), min_isr=1, recovery=LeaderRecoveryState.RECOVERING)
    assert not recovering.keep_brokers(view)
    # A leader that kept the view judges a follower's eligibility by it.
    kept, _ = leader(isr=(1, 2), min_isr=2, log_end_offset=4)
    assert kept.keep_brokers(image(EPOCHS, fenced=frozenset({3})))
    assert kept.on_follower_fetch(3, 4, 300, now_ms=1).alter_partition is None
    assert kept.keep_brokers(image(EPOCHS))
    assert_proposes_3(kept, 300, now_ms=2)


def test_ineligible_replica_is_proposed_again_after_a_fence_and_unfence() -> None:
    state, proposal = proposing_isr_123()
    state.on_alter_partition_response(proposal.proposal_id, Errors.INELIGIBLE_REPLICA, None, 2)
    assert state.on_follower_fetch(3, 4, 300, now_ms=3).alter_partition is None
    # The image catches up: the follower was fenced, then unfenced with the same epoch (its
    # heartbeats resumed). That is a change, so the same ISR may be proposed again (rule 18).
    state.update_metadata(2, image(EPOCHS, fenced=frozenset({3})), now_ms=4)
    assert state.on_follower_fetch(3, 4, 300, now_ms=5).alter_partition is None
    state.update_metadata(2, image(EPOCHS), now_ms=6)
    assert_proposes_3(state, 300, now_ms=7)


def test_ineligible_replica_is_proposed_again_when_one_change_fences_and_unfences_it() -> None:
    state, proposal = proposing_isr_123()
    state.on_alter_partition_response(proposal.proposal_id, Errors.INELIGIBLE_REPLICA, None, 2)
    # A change naming only a broker outside the proposal is no reason to propose it again.
    state.update_metadata(2, image(EPOCHS), now_ms=3, touched_brokers=frozenset({4}))
    assert state.on_follower_fetch(3, 4, 300, now_ms=4).alter_partition is None
    # The leader's metadata was behind: one change replays the follower's fence and unfence
    # (same epoch), so the image ends as it was, but the follower's registration moved.
    state.update_metadata(2, image(EPOCHS), now_ms=5, touched_brokers=frozenset({3}))
    assert_proposes_3(state, 300, now_ms=6)


def test_fenced_leader_epoch_reverts_until_new_metadata() -> None:
    state, proposal = proposing_isr_123()
    state.on_alter_partition_response(proposal.proposal_id, Errors.FENCED_LEADER_EPOCH, None, 2)
    assert state.committed_isr == (1, 2)
    assert state.on_follower_fetch(3, 4, 300, now_ms=3).alter_partition is None
    state.apply_registration(reg((1, 2), partition_epoch=11), 2, image(EPOCHS), now_ms=4)
    assert state.on_follower_fetch(3, 4, 300, now_ms=5).alter_partition is not None


def test_retriable_errors_resend_the_same_proposal_and_stale_answers_are_ignored() -> None:
    state, proposal = proposing_isr_123()
    ready = state.on_alter_partition_response(proposal.proposal_id, Errors.NOT_CONTROLLER, None, 2)
    assert ready.alter_partition == proposal
    ignored = state.on_alter_partition_response(proposal.proposal_id + 99, Errors.NONE,
                                                committed(state, (1, 2, 3), 11), 3)
    assert ignored.empty
    assert state.committed_isr == (1, 2)


def test_replayed_change_commits_the_pending_expansion() -> None:
    state, proposal = proposing_isr_123()
    state.apply_registration(reg((1, 2, 3), partition_epoch=11), 2, image(EPOCHS), now_ms=2)
    assert state.inflight is None
    assert state.committed_isr == (1, 2, 3)
    # The late response for the same proposal changes nothing.
    late = state.on_alter_partition_response(proposal.proposal_id, Errors.NONE,
                                             committed(state, (1, 2, 3), 11), 3)
    assert late.empty


def test_a_leader_holds_the_registration_its_answer_committed_and_nothing_else() -> None:
    """holds(): apply_registration would change nothing (issue 35: the runtime skips the
    core for the PartitionChangeRecord of a leader's own expansion). Not while the proposal
    is in flight, nor for another ISR, epoch, min ISR or broker view, nor while RECOVERING."""
    brokers = image(EPOCHS)
    state, _ = leader(isr=(1, 2), min_isr=2, brokers=brokers)
    state.update_local_log(4, 4, now_ms=1)
    proposal = state.on_follower_fetch(3, 4, 300, now_ms=1).alter_partition
    assert proposal is not None
    record = reg((1, 2, 3), partition_epoch=11)
    assert not state.holds(record, 2, brokers)  # in flight: the record commits it
    state.on_alter_partition_response(proposal.proposal_id, Errors.NONE,
                                      committed(state, (1, 2, 3), 11), 2)
    assert state.holds(record, 2, brokers)
    assert not state.holds(reg((1, 2, 3), partition_epoch=12), 2, brokers)
    assert not state.holds(reg((1, 3), partition_epoch=11), 2, brokers)
    assert not state.holds(reg((1, 2, 3), partition_epoch=11, leader_epoch=6), 2, brokers)
    assert not state.holds(record, 3, brokers)
    assert not state.holds(record, 2, image(EPOCHS))
    recovering, _ = leader(isr=(1,), min_isr=1, brokers=brokers,
                           recovery=LeaderRecoveryState.RECOVERING)
    assert not recovering.holds(reg((1,), recovery=LeaderRecoveryState.RECOVERING), 1, brokers)
    follower = PartitionState("foo", 0, 2)
    follower.apply_registration(record, 2, brokers, now_ms=0)
    assert not follower.holds(record, 2, brokers)


def test_a_follower_keeps_an_isr_change_as_apply_registration_would() -> None:
    """follow_on(): a follower's ISR or partition epoch change under the same leader, epoch
    and recovery state is kept as apply_registration keeps it (issue 35: the runtime skips
    the PartitionReady for the 66,000 a fencing shrinks); anything that moves the leadership
    or the recovery state, or is older, is left to apply_registration."""
    brokers = image(EPOCHS)

    def follower() -> PartitionState:
        state = PartitionState("foo", 0, 2)
        state.apply_registration(reg((1, 2, 3)), 2, brokers, now_ms=0)
        return state

    def view(state: PartitionState) -> tuple[object, ...]:
        return (state.role, state.leader_id, state.leader_epoch, state.partition_epoch,
                state.replicas, state.committed_isr, state.effective_min_isr,
                state.leader_recovery_state, state.truncation_pending, state._brokers)

    shrunk = reg((1, 3), partition_epoch=11)
    kept, applied = follower(), follower()
    later = image(EPOCHS, fenced=frozenset({2}))
    assert kept.follow_on(shrunk, 1, later)
    assert applied.apply_registration(shrunk, 1, later, now_ms=5).empty
    assert view(kept) == view(applied)
    for other in (
        reg((1, 3), partition_epoch=9),  # older
        reg((1, 3), leader=3, leader_epoch=6, partition_epoch=11),
        reg((1, 3), leader_epoch=6, partition_epoch=11),
        reg((1, 3), partition_epoch=11, recovery=LeaderRecoveryState.RECOVERING),
        reg((2, 3), leader=2, leader_epoch=6, partition_epoch=11),  # this broker leads
    ):
        state = follower()
        before = view(state)
        assert not state.follow_on(other, 2, brokers)
        assert view(state) == before
    leader_state, _ = leader(isr=(1, 2), min_isr=2, brokers=brokers)
    assert not leader_state.follow_on(reg((1,), partition_epoch=11), 2, brokers)


def test_a_leader_keeps_an_isr_change_as_apply_registration_would() -> None:
    """lead_on(): a leader's newer registration under the same leader epoch, replicas and
    RECOVERED state, with nothing in flight or refused and its HWM at its log end, is kept
    as apply_registration keeps it (issue 35: the runtime skips the PartitionReady for the
    33,000-66,000 ISRs a fencing shrinks on each leader); anything that proposes, journals or
    moves the HWM is left to apply_registration."""
    brokers = image(EPOCHS)
    later = image(EPOCHS, fenced=frozenset({3}))

    def view(state: PartitionState) -> tuple[object, ...]:
        inflight = state.inflight
        return (state.role, state.leader_id, state.leader_epoch, state.partition_epoch,
                state.replicas, state.committed_isr, state.effective_min_isr,
                state.leader_recovery_state, state.high_watermark, state._brokers,
                None if inflight is None else inflight.proposal_id,
                state.leader_epoch_start_offset)

    shrunk = reg((1, 2), partition_epoch=11)
    for min_isr in (2, 3):  # under min ISR after it too: nothing to advance at the log end
        kept, applied = leader(log_end_offset=4)[0], leader(log_end_offset=4)[0]
        for state in (kept, applied):
            state.on_follower_fetch(2, 4, 200, now_ms=1)
            state.on_follower_fetch(3, 4, 300, now_ms=1)
            assert state.high_watermark == 4
        assert kept.lead_on(shrunk, min_isr, later)
        assert applied.apply_registration(shrunk, min_isr, later, now_ms=5).empty
        assert view(kept) == view(applied)
        assert kept.is_under_replicated and kept.is_under_min_isr == (min_isr == 3)

    def refused_state() -> PartitionState:
        state, _ = leader(isr=(1, 2), brokers=brokers)
        proposal = state.on_follower_fetch(3, 0, 300, now_ms=1).alter_partition
        assert proposal is not None
        state.on_alter_partition_response(proposal.proposal_id, Errors.INELIGIBLE_REPLICA, None, 2)
        return state

    def behind() -> PartitionState:
        state, _ = leader(isr=(1, 2, 3))
        state.update_local_log(4, 4, now_ms=1)  # followers not there yet: HWM 0 < 4
        return state

    def in_flight() -> PartitionState:
        state, _ = leader(isr=(1, 2))
        assert state.on_follower_fetch(3, 0, 300, now_ms=1).alter_partition is not None
        return state

    cases = [
        (lambda: leader()[0], reg((1, 2), partition_epoch=10)),  # not newer
        (lambda: leader()[0], reg((1, 2), leader_epoch=6, partition_epoch=11)),  # new epoch
        (lambda: leader()[0], reg((2, 3), leader=2, leader_epoch=6, partition_epoch=11)),
        (lambda: leader()[0], reg((1,), partition_epoch=11,
                                  recovery=LeaderRecoveryState.RECOVERING)),
        (lambda: leader(recovery=LeaderRecoveryState.RECOVERING)[0],
         reg((1,), partition_epoch=11, recovery=LeaderRecoveryState.RECOVERING)),
        (in_flight, reg((1, 2, 3), partition_epoch=11)),  # the proposal is answered by it
        (refused_state, reg((1, 2), partition_epoch=11)),  # rule 18: the refusal may go
        (behind, reg((1, 2), partition_epoch=11)),  # the HWM may move with the ISR
    ]
    for make, other in cases:
        state = make()
        before = view(state)
        assert not state.lead_on(other, 2, brokers)
        assert view(state) == before
    other_replicas = PartitionRegistration(replicas=(1, 2, 4), isr=(1, 2), leader=1,
                                           leader_epoch=5, partition_epoch=11)
    state, _ = leader()
    assert not state.lead_on(other_replicas, 2, brokers)  # a new replica needs its progress
    follower = PartitionState("foo", 0, 2)
    follower.apply_registration(reg((1, 2, 3)), 2, brokers, now_ms=0)
    assert not follower.lead_on(reg((1, 2), partition_epoch=11), 2, brokers)


def test_shrink_after_replica_lag_time() -> None:
    state, _ = leader(isr=(1, 2, 3), min_isr=2)
    state.update_local_log(10, 10, now_ms=0)
    state.on_follower_fetch(2, 10, 200, now_ms=1)
    state.on_follower_fetch(3, 2, 300, now_ms=1)
    assert not state.isr_shrink_due(now_ms=LAG_MS)
    assert state.maybe_shrink_isr(now_ms=LAG_MS).alter_partition is None
    state.on_follower_fetch(2, 10, 200, now_ms=LAG_MS)  # 2 keeps up, 3 stays at 2
    assert state.isr_shrink_due(now_ms=LAG_MS + 1)  # the periodic pass's cheap check agrees
    ready = state.maybe_shrink_isr(now_ms=LAG_MS + 1)
    proposal = ready.alter_partition
    assert proposal is not None
    assert proposal.kind is ProposalKind.SHRINK
    assert proposal.isr == (1, 2)
    assert state.maximal_isr == (1, 2, 3)  # a pending shrink still waits for 3
    assert not state.isr_shrink_due(now_ms=LAG_MS + 1)  # one proposal in flight at a time
    assert state.high_watermark == 2
    state.on_alter_partition_response(proposal.proposal_id, Errors.NONE,
                                      committed(state, (1, 2), 11), LAG_MS + 2)
    assert state.high_watermark == 10


def test_recovering_leader_refuses_until_recovered_is_committed() -> None:
    state = PartitionState("foo", 0, 1, log_end_offset=8, flushed_offset=5)
    ready = state.apply_registration(
        reg((1,), recovery=LeaderRecoveryState.RECOVERING), 1, image(EPOCHS), now_ms=0
    )
    assert any(isinstance(e, RecoveryStateChanged) and e.new_state == 1 for e in ready.events)
    assert ready.flush_wanted  # rule 21: flush to the log end first
    assert ready.alter_partition is None
    for error in (
        state.check_fetch(2),
        state.check_fetch(CONSUMER_REPLICA_ID),
        state.check_produce(1),
        state.check_leader_request(),
    ):
        assert error is Errors.NOT_LEADER_OR_FOLLOWER
    assert state.on_follower_fetch(2, 8, 200, now_ms=1).alter_partition is None
    ready = state.update_local_log(8, 8, now_ms=2)
    proposal = ready.alter_partition
    assert proposal is not None
    assert proposal.kind is ProposalKind.RECOVERED
    assert proposal.leader_recovery_state is LeaderRecoveryState.RECOVERED
    assert proposal.isr == (1,)
    assert state.check_fetch(2) is Errors.NOT_LEADER_OR_FOLLOWER  # sent, not yet committed
    state.on_alter_partition_response(
        proposal.proposal_id, Errors.NONE, committed(state, (1,), 11), now_ms=3
    )
    assert not state.is_recovering
    assert state.check_fetch(2) is Errors.NONE
    assert state.check_produce(1) is Errors.NONE
    # Now it expands the ISR again.
    assert state.on_follower_fetch(2, 8, 200, now_ms=4).alter_partition is not None


def test_follower_of_a_recovering_partition_refuses_consumers() -> None:
    state = PartitionState("foo", 0, 2)
    state.apply_registration(
        reg((1,), recovery=LeaderRecoveryState.RECOVERING), 1, image(EPOCHS), now_ms=0
    )
    assert state.role is Role.FOLLOWER
    assert state.check_fetch(CONSUMER_REPLICA_ID) is Errors.NOT_LEADER_OR_FOLLOWER
    assert state.truncation_pending


def test_leader_epoch_checks_on_requests() -> None:
    state, _ = leader()
    assert state.check_fetch(2, current_leader_epoch=4) is Errors.FENCED_LEADER_EPOCH
    assert state.check_fetch(2, current_leader_epoch=6) is Errors.UNKNOWN_LEADER_EPOCH
    assert state.check_fetch(2, current_leader_epoch=5) is Errors.NONE
    assert state.check_fetch(9) is Errors.NOT_LEADER_OR_FOLLOWER


def test_fetch_past_the_leaders_end_is_not_counted() -> None:
    state, _ = leader(isr=(1,), min_isr=1)
    state.update_local_log(5, 5, now_ms=0)
    ready = state.on_follower_fetch(2, 9, 200, now_ms=1)
    assert ready.alter_partition is None
    progress = state.replica_progress(2)
    assert progress is not None and progress.log_end_offset == -1


def test_hwm_never_moves_backwards() -> None:
    state, _ = leader(isr=(1, 2), min_isr=1)
    state.update_local_log(10, 10, now_ms=0)
    state.on_follower_fetch(2, 10, 200, now_ms=1)
    assert state.high_watermark == 10
    # A new follower state with a lower offset (it restarted) cannot lower the HWM.
    state.on_follower_fetch(2, 3, 200, now_ms=2)
    assert state.high_watermark == 10
    # Nor can an expansion that adds a lagging member's offset.
    state.on_follower_fetch(3, 10, 300, now_ms=3)
    assert state.high_watermark == 10


def test_stale_registration_is_ignored() -> None:
    state, _ = leader(isr=(1, 2), partition_epoch=10)
    ready = state.apply_registration(reg((1,), partition_epoch=9), 2, image(EPOCHS), now_ms=1)
    assert ready.empty
    assert state.committed_isr == (1, 2)


def test_follower_truncation_and_hwm() -> None:
    state = PartitionState("foo", 0, 2, log_end_offset=20, flushed_offset=20, high_watermark=12)
    state.apply_registration(reg((1, 2)), 2, image(EPOCHS), now_ms=0)
    assert state.truncation_pending
    ready = state.on_truncated(20, 15, 15, "epoch 5 ends at 15", now_ms=1)
    assert not state.truncation_pending
    assert [type(e) for e in ready.events] == [Truncated]
    assert state.high_watermark == 12
    state.on_fetch_response(leader_high_watermark=30, log_end_offset=18, flushed_offset=18,
                            now_ms=2)
    assert state.high_watermark == 18
    state.on_fetch_response(leader_high_watermark=16, log_end_offset=18, flushed_offset=18,
                            now_ms=3)
    assert state.high_watermark == 18


def test_truncation_below_the_hwm_is_journaled_as_such() -> None:
    state = PartitionState("foo", 0, 2, log_end_offset=20, flushed_offset=20, high_watermark=12)
    state.apply_registration(reg((1, 2)), 2, image(EPOCHS), now_ms=0)
    ready = state.on_truncated(20, 10, 10, "unclean leader", now_ms=1)
    event = ready.events[0]
    assert isinstance(event, Truncated)
    assert "below high watermark 12" in event.reason
    assert state.high_watermark == 10


def test_min_isr_change_lets_the_hwm_move() -> None:
    state, _ = leader(isr=(1,), min_isr=2)
    state.update_local_log(6, 6, now_ms=0)
    assert state.high_watermark == 0
    assert state.is_under_min_isr
    state.update_metadata(1, image(EPOCHS), now_ms=1)
    assert state.high_watermark == 6


def test_becoming_leader_again_resets_follower_progress() -> None:
    state, _ = leader(isr=(1, 2), min_isr=2)
    state.update_local_log(6, 6, now_ms=0)
    state.on_follower_fetch(2, 6, 200, now_ms=1)
    state.apply_registration(replace(reg((1, 2)), leader_epoch=7, partition_epoch=12), 2,
                             image(EPOCHS), now_ms=2)
    progress = state.replica_progress(2)
    assert progress is not None
    assert progress.log_end_offset == -1
    assert state.leader_epoch_start_offset == 6


def test_a_leader_at_its_log_end_does_not_look_for_a_new_hwm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 35: a follower's return asks each of 66,000 idle partitions for a new HWM four
    times (its fetch, the AlterPartition answer, the registration, the log sync); with the
    HWM at the log end none can move, and none is computed."""
    from broker.core import partition_state as ps

    state, _ = leader(isr=(1, 2), log_end_offset=7)
    state.on_follower_fetch(2, 7, EPOCHS[2], now_ms=1)
    assert state.high_watermark == 7
    asked: list[int] = []
    real = ps.next_high_watermark

    def counted(*args: object) -> int | None:
        asked.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(ps, "next_high_watermark", counted)
    ready = state.on_follower_fetch(3, 7, EPOCHS[3], now_ms=2)
    assert ready.alter_partition is not None and ready.alter_partition.isr == (1, 2, 3)
    state.update_local_log(7, 7, now_ms=3)
    assert asked == []
    state.update_local_log(8, 8, now_ms=4)  # an append: the HWM may move again
    assert asked == [1]


def test_a_proposed_isr_member_is_one_object_per_broker_and_epoch() -> None:
    """kio's BrokerState is frozen: one per (broker, epoch), not three built with kio's range
    checks for each of 66,000 expansions (issue 35)."""
    assert broker_state(3, 300) is broker_state(3, 300)
    assert broker_state(3, 301) == broker_state(3, 301) != broker_state(3, 300)


def test_an_input_that_asks_nothing_answers_one_shared_ready() -> None:
    """Most inputs ask nothing of the runtime (an idle follower's fetch, a log sync with
    nothing new): one frozen answer per HWM instead of a new one each (issue 35)."""
    state, _ = leader(isr=(1, 2, 3), log_end_offset=7)
    first = state.update_local_log(7, 7, now_ms=1)
    again = state.update_local_log(7, 7, now_ms=2)
    assert first.empty and first is again and first.high_watermark == state.high_watermark


def test_a_proposal_takes_its_isr_once_and_its_commit_keeps_that_tuple() -> None:
    """A leader proposing 66,000 expansions while a broker comes back (issue 35): the proposal
    holds its members' ids (one tuple, read by its event, the follower's idle check and the
    outcome), the committed ISR is that tuple when the controller committed what was asked,
    and the events carry what they carried."""
    state, _ = leader(isr=(1, 2), min_isr=2)
    state.update_local_log(4, 4, now_ms=1)
    proposed = state.on_follower_fetch(3, 4, 300, now_ms=1)
    proposal = proposed.alter_partition
    assert proposal is not None
    assert proposal.isr == (1, 2, 3) and proposal.isr is proposal.isr
    assert [event_map(e) for e in proposed.events] == [{
        "event": "IsrProposed", "version": 0, "broker_id": 1, "topic": "foo", "partition": 0,
        "proposal_id": proposal.proposal_id, "kind": "expand", "leader_epoch": 5,
        "partition_epoch": 10, "committed_isr": (1, 2), "proposed_isr": (1, 2, 3),
        "broker_epochs": (100, -1, 300), "leader_recovery_state": 0, "ts": 1, "topic_id": "",
    }]
    assert state.follower_idle(3, 4)
    ready = state.on_alter_partition_response(
        proposal.proposal_id, Errors.NONE, committed(state, (1, 2, 3), 11), now_ms=2
    )
    assert state.committed_isr is proposal.isr
    assert (state.partition_epoch, state.leader_recovery_state) == (11, LeaderRecoveryState.RECOVERED)
    assert [event_map(e) for e in ready.events] == [{
        "event": "IsrResult", "version": 0, "broker_id": 1, "topic": "foo", "partition": 0,
        "proposal_id": proposal.proposal_id, "error": "NONE", "outcome": "committed",
        "isr": (1, 2, 3), "leader_epoch": 5, "partition_epoch": 11, "leader_recovery_state": 0,
        "ts": 2, "topic_id": "",
    }]
    # The controller may commit another ISR than the one asked (here without 2): its own.
    state, proposal = proposing_isr_123()
    state.on_alter_partition_response(
        proposal.proposal_id, Errors.NONE, committed(state, (1, 3), 11), now_ms=2
    )
    assert state.committed_isr == (1, 3) and all(type(b) is int for b in state.committed_isr)


def test_a_proposal_and_its_answers_are_built_without_the_frozen_inits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """IsrProposal and PartitionReady are frozen: the core builds them through their slots
    (kafkawire.slots), not through __init__'s object.__setattr__ per field (issue 35: one of
    each per expansion, 66,000 on a leader while a broker comes back). What it builds equals
    what __init__ builds."""
    state, _ = leader(isr=(1, 2), min_isr=2)
    state.update_local_log(4, 4, now_ms=1)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("built through the frozen __init__")

    monkeypatch.setattr(IsrProposal, "__init__", refuse)
    monkeypatch.setattr(PartitionReady, "__init__", refuse)
    proposed = state.on_follower_fetch(3, 4, 300, now_ms=1)
    proposal = proposed.alter_partition
    assert proposal is not None
    answered = state.on_alter_partition_response(
        proposal.proposal_id, Errors.NONE, committed(state, (1, 2, 3), 11), now_ms=2
    )
    monkeypatch.undo()
    assert proposal == IsrProposal(
        proposal_id=proposal.proposal_id,
        kind=ProposalKind.EXPAND,
        leader_epoch=5,
        partition_epoch=10,
        new_isr_with_epochs=(broker_state(1, 100), broker_state(2, -1), broker_state(3, 300)),
        leader_recovery_state=LeaderRecoveryState.RECOVERED,
    )
    # Follower 2 has not fetched yet: the HWM stays at 0.
    assert proposed == PartitionReady(
        high_watermark=0, events=proposed.events, alter_partition=proposal
    )
    assert answered == PartitionReady(high_watermark=0, events=answered.events)
    assert [type(e).__name__ for e in proposed.events + answered.events] == [
        "IsrProposed", "IsrResult"
    ]


def test_proposals_of_the_same_members_share_one_tuple_of_them() -> None:
    """A leader's 66,000 expansions while a broker comes back propose the same few member
    lists (issue 35): one tuple of BrokerStates per ISR and broker epochs."""
    _, one = proposing_isr_123()
    _, other = proposing_isr_123()
    assert one.new_isr_with_epochs is other.new_isr_with_epochs
    assert one.new_isr_with_epochs == (
        broker_state(1, 100), broker_state(2, -1), broker_state(3, 300)
    )
    # Follower 2 fetched with its epoch first: other members.
    state, _ = leader(isr=(1, 2), min_isr=2)
    state.update_local_log(4, 4, now_ms=1)
    state.on_follower_fetch(2, 4, 200, now_ms=1)
    third = state.on_follower_fetch(3, 4, 300, now_ms=1).alter_partition
    assert third is not None and third.new_isr_with_epochs == (
        broker_state(1, 100), broker_state(2, 200), broker_state(3, 300)
    )


def test_which_events_are_news_for_parked_fetches() -> None:
    """A PartitionReady of one event (a proposal's, an outcome's, a new HWM's) is judged as
    one of several is: ISR events are news for no fetch, a new HWM for consumers only,
    anything else for every fetch."""
    key = {"broker_id": 1, "topic": "t", "partition": 0}
    hwm = HwmAdvanced(**key, old=0, new=1, isr_size=3, min_isr=2, leader_epoch=5, ts=1)
    result = IsrResult(**key, proposal_id=1, error="NONE", outcome="committed", isr=(1, 2),
                       leader_epoch=5, partition_epoch=6, leader_recovery_state=0, ts=1)
    role = RoleChanged(**key, role="leader", leader_id=1, leader_epoch=5, partition_epoch=6,
                       isr=(1, 2), leader_recovery_state=0, log_end_offset=0,
                       high_watermark=0, ts=1)
    news = [
        (
            PartitionReady(0, events=events).news_for_fetches,
            PartitionReady(0, events=events).news_for_followers,
        )
        for events in [(hwm,), (result,), (role,), (result, hwm), (result, role), ()]
    ]
    assert news == [
        (True, False), (False, False), (True, True), (True, False), (True, True),
        (False, False),
    ]
    assert PartitionReady(0, events=(result,), completed_acks=(3,)).news_for_fetches
