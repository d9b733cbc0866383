"""Property tests for the broker's HWM rule (INVARIANTS rule 20) and follower truncation with
the leader epoch cache (rule 22), over random fetch / ISR / election sequences."""

from __future__ import annotations

import uuid
from types import MappingProxyType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.high_watermark import hwm_may_advance
from broker.core.journal_events import HwmAdvanced
from broker.core.partition_state import PartitionState
from kafkawire.broker_lifecycle import alter_partition_result
from kafkawire.constants import ACKS_ALL
from kafkawire.errors import Errors
from metadata.metadata_image import BrokerRegistration, MetadataImage
from metadata.partition_registration import PartitionRegistration
from tests.sim.replica_log import ReplicaLog, truncate_against

LEADER = 1
FOLLOWERS = (2, 3, 4)
EPOCHS = {1: 10, 2: 20, 3: 30, 4: 40}
LAG_MS = 100


def _image() -> MetadataImage:
    return MetadataImage(
        brokers=MappingProxyType(
            {
                b: BrokerRegistration(b, e, uuid.UUID(int=b), fenced=False,
                                      in_controlled_shutdown=False)
                for b, e in EPOCHS.items()
            }
        )
    )


_op = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5), st.booleans()),
    st.tuples(st.just("fetch"), st.sampled_from(FOLLOWERS), st.integers(0, 6)),
    st.tuples(st.just("tick"), st.integers(1, 80), st.just(0)),
    st.tuples(
        st.just("respond"),
        st.sampled_from(["commit", "ineligible", "fenced", "retry", "replay", "other"]),
        st.just(0),
    ),
    st.tuples(st.just("min_isr"), st.integers(1, 4), st.just(0)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial_isr=st.sets(st.sampled_from(FOLLOWERS)), min_isr=st.integers(1, 4),
       ops=st.lists(_op, max_size=60))
def test_hwm_rule_holds_over_random_fetch_and_isr_sequences(
    initial_isr: set[int], min_isr: int, ops: list[tuple[str, object, object]]
) -> None:
    image = _image()
    isr = (LEADER, *sorted(initial_isr))
    partition_epoch = 1
    state = PartitionState("t", 0, LEADER, replica_lag_time_max_ms=LAG_MS)
    registration = PartitionRegistration(
        replicas=(LEADER, *FOLLOWERS), isr=isr, leader=LEADER, leader_epoch=1,
        partition_epoch=partition_epoch,
    )
    readies = [state.apply_registration(registration, min_isr, image, now_ms=0)]
    true_leo = {r: 0 for r in (LEADER, *FOLLOWERS)}
    acks: dict[int, int] = {}  # ack id -> last offset
    now = 0
    previous_hwm = 0
    next_ack = 1
    for kind, a, b in ops:
        committed_before = state.committed_isr
        if kind == "append":
            count, acks_all = int(a), bool(b)  # type: ignore[call-overload]
            error = state.check_produce(ACKS_ALL if acks_all else 1)
            if acks_all and len(state.committed_isr) < state.effective_min_isr:
                assert error is Errors.NOT_ENOUGH_REPLICAS
                continue
            assert error is Errors.NONE
            base = true_leo[LEADER]
            true_leo[LEADER] += count
            readies.append(state.update_local_log(true_leo[LEADER], true_leo[LEADER], now))
            if acks_all:
                acks[next_ack] = true_leo[LEADER] - 1
                readies.append(state.await_high_watermark(next_ack, base, acks[next_ack], now))
                next_ack += 1
        elif kind == "fetch":
            replica, advance = int(a), int(b)  # type: ignore[call-overload]
            true_leo[replica] = min(true_leo[LEADER], true_leo[replica] + advance)
            readies.append(state.on_follower_fetch(replica, true_leo[replica],
                                                   EPOCHS[replica], now))
        elif kind == "tick":
            now += int(a)  # type: ignore[call-overload]
            readies.append(state.maybe_shrink_isr(now))
        elif kind == "min_isr":
            min_isr = int(a)  # type: ignore[call-overload]
            readies.append(state.update_metadata(min_isr, image, now))
        else:
            proposal = state.inflight
            if proposal is None:
                if a == "replay":  # an unrelated change record (e.g. ELR) lifts any block
                    partition_epoch += 1
                    registration = PartitionRegistration(
                        replicas=registration.replicas, isr=state.committed_isr, leader=LEADER,
                        leader_epoch=1, partition_epoch=partition_epoch,
                    )
                    readies.append(state.apply_registration(registration, min_isr, image, now))
                continue
            if a in ("commit", "replay"):
                partition_epoch += 1
                if a == "commit":
                    result = alter_partition_result(
                        0, Errors.NONE, LEADER, 1, proposal.isr, 0, partition_epoch
                    )
                    readies.append(state.on_alter_partition_response(
                        proposal.proposal_id, Errors.NONE, result, now))
                else:
                    registration = PartitionRegistration(
                        replicas=registration.replicas, isr=proposal.isr, leader=LEADER,
                        leader_epoch=1, partition_epoch=partition_epoch,
                    )
                    readies.append(state.apply_registration(registration, min_isr, image, now))
                assert state.committed_isr == proposal.isr
                assert state.inflight is None
            else:
                error = {
                    "ineligible": Errors.INELIGIBLE_REPLICA,
                    "fenced": Errors.FENCED_LEADER_EPOCH,
                    "retry": Errors.REQUEST_TIMED_OUT,
                    "other": Errors.INVALID_UPDATE_VERSION,
                }[str(a)]
                readies.append(state.on_alter_partition_response(
                    proposal.proposal_id, error, None, now))
                # Rule 18: a refusal reverts to the committed ISR, nothing else changes it.
                assert state.committed_isr == committed_before
                if error in (Errors.INELIGIBLE_REPLICA, Errors.FENCED_LEADER_EPOCH):
                    assert state.inflight is None
                    assert state.maximal_isr == state.committed_isr
        # Rule 20, after every step.
        hwm = state.high_watermark
        assert hwm >= previous_hwm, "the HWM moved backwards"
        assert hwm <= true_leo[LEADER]
        for ready in readies:
            for event in ready.events:
                if isinstance(event, HwmAdvanced):
                    assert hwm_may_advance(event.isr_size, event.min_isr)
                    assert event.new > event.old
                    for member in state.maximal_isr:
                        assert true_leo[member] >= event.new
            for ack_id in ready.completed_acks:
                last = acks.pop(ack_id)
                assert last < hwm
                holders = [r for r, leo in true_leo.items() if leo > last]
                # An acked acks=all write is on enough replicas to have moved the HWM.
                assert hwm_may_advance(len(holders), min(state.effective_min_isr, len(true_leo)))
        if hwm > previous_hwm:
            assert hwm_may_advance(len(state.committed_isr), state.effective_min_isr)
        previous_hwm = hwm
        readies = []
    for ack_id, last in acks.items():
        assert last >= state.high_watermark, f"ack {ack_id} passed by the HWM but not completed"


# ---- rule 22: follower truncation with the leader epoch cache ----


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


_epoch_step = st.tuples(
    st.integers(0, 2),  # who leads this epoch
    st.integers(0, 4),  # entries it writes
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 8)), max_size=3),  # who copies how much
)


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(_epoch_step, min_size=1, max_size=12))
def test_follower_truncation_keeps_exactly_the_common_prefix(
    steps: list[tuple[int, int, list[tuple[int, int]]]],
) -> None:
    replicas = [ReplicaLog() for _ in range(3)]
    for epoch, (leader_index, writes, copies) in enumerate(steps, start=1):
        leader = replicas[leader_index]
        # Elected: the epoch starts at the leader's log end (Kafka's makeLeader), then it writes.
        leader.cache.assign(epoch, len(leader.entries))
        for _ in range(writes):
            leader.entries.append(epoch)
        for follower_index, amount in copies:
            if follower_index == leader_index:
                continue
            follower = replicas[follower_index]
            expected = _common_prefix(follower.entries, leader.entries)
            truncate_against(follower, leader)
            # Rule 22: nothing the leader lacks survives, and nothing shared is dropped.
            assert follower.entries == leader.entries[: len(follower.entries)]
            assert len(follower.entries) == expected
            for offset in range(len(follower.entries), min(len(leader.entries),
                                                           len(follower.entries) + amount)):
                follower.append(leader.entries[offset])
