"""Leader and follower state as values (broker/core/partition_state.py LeaderState /
FollowerState): what only a leader holds does not outlive its leadership, seen through the
public API (the runtime's view)."""

from __future__ import annotations

from dataclasses import replace

from broker.core.partition_state import ProposalKind, Role
from kafkawire.constants import ACKS_ALL
from kafkawire.errors import Errors
from tests.unit.test_partition_state import EPOCHS, image, leader, reg


def test_a_follower_holds_no_leader_data_and_a_new_leader_starts_fresh() -> None:
    state, _ = leader(isr=(1, 2), min_isr=2)
    state.update_local_log(6, 6, now_ms=0)
    expand = state.on_follower_fetch(3, 6, EPOCHS[3], now_ms=1).alter_partition
    assert expand is not None and expand.kind is ProposalKind.EXPAND
    assert state.check_produce(ACKS_ALL) is Errors.NONE
    waiting = state.await_high_watermark(7, 6, 9, now_ms=1)
    assert waiting.completed_acks == () and state.pending_ack_ids() == (7,)

    # Broker 2 leads epoch 6: the ack fails, the proposal and the followers' progress go.
    follower = state.apply_registration(
        replace(reg((1, 2)), leader=2, leader_epoch=6, partition_epoch=11), 2, image(EPOCHS),
        now_ms=2)
    assert state.role is Role.FOLLOWER and state.truncation_pending
    assert follower.failed_acks == ((7, Errors.NOT_LEADER_OR_FOLLOWER),)
    assert state.inflight is None and state.pending_ack_ids() == ()
    assert state.replica_progress(3) is None and state.leader_epoch_start_offset == -1
    assert not state.cancel_ack(7)
    assert state.await_high_watermark(8, 6, 6, now_ms=2).failed_acks == (
        (8, Errors.NOT_LEADER_OR_FOLLOWER),)

    # Leader again in epoch 7: nothing of the first leadership (rule 18's refusal, progress).
    state.on_fetch_response(0, 6, 6, now_ms=3)
    became = state.apply_registration(
        replace(reg((1, 2)), leader_epoch=7, partition_epoch=12), 2, image(EPOCHS), now_ms=3)
    assert state.role is Role.LEADER and not state.truncation_pending
    assert became.alter_partition is None and state.inflight is None
    progress = state.replica_progress(3)
    assert progress is not None and not progress.fetched and progress.log_end_offset == -1
    assert state.leader_epoch_start_offset == 6
