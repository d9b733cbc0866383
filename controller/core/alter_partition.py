"""AlterPartition validation and the resulting ISR change (rules 17-19; seeds 000, 002).

Checks run in rule 18's order: STALE_BROKER_EPOCH for the whole request; then per partition
UNKNOWN_TOPIC_ID, NOT_CONTROLLER, FENCED_LEADER_EPOCH, INVALID_REQUEST (sender not the leader,
bad ISR, rule 19's recovery-state checks), INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA, and
NEW_LEADER_ELECTED when the accepted change elected another leader (the change is still written).
"""

from __future__ import annotations

from collections.abc import Callable

from controller.core.controller_result import ControllerResult
from controller.core.election_policy import DEFAULT_POLICY, ElectionPolicy
from controller.core.partition_change import (
    PartitionChange,
    PartitionChangeBuilder,
    written_records,
)
from controller.core.steps import SLICE_PARTITIONS, Steps, drained
from kafkawire.broker_lifecycle import (
    AlterPartitionPartition,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerState,
    alter_partition_response,
    alter_partition_result,
)
from kafkawire.constants import NO_BROKER_EPOCH, ZERO_UUID
from kafkawire.errors import Errors
from metadata.metadata_image import MetadataImage
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from metadata.records import NO_LEADER_CHANGE


def alter_partition_steps(
    image: MetadataImage,
    request: AlterPartitionRequest,
    policy_for: Callable[[str], ElectionPolicy] = lambda _topic: DEFAULT_POLICY,
) -> Steps[ControllerResult[AlterPartitionResponse]]:
    """Validate and apply one AlterPartition (the wire's request, v3) against the committed
    image; `policy_for(topic)` is the election policy for a topic (its unclean setting, rule
    13). The response is the wire's too. In slices of SLICE_PARTITIONS partitions: a broker's
    request names every ISR change it has pending, thousands after a big create at 100,000
    partitions, and the active controller serves Raft and heartbeats between the slices (issue
    35)."""
    registered = image.broker_epoch(request.broker_id)
    if registered != request.broker_epoch:
        # Rule 18: a differing epoch, higher or lower (or no registration), fails everything.
        return ControllerResult(
            (),
            alter_partition_response(Errors.STALE_BROKER_EPOCH),
            message=f"broker {request.broker_id} sent epoch {request.broker_epoch}, "
            f"registered epoch is {registered if registered is not None else 'none'}",
        )
    changes: list[PartitionChange] = []
    topic_results = []
    seen = 0
    for topic in request.topics:
        topic_id = topic.topic_id or ZERO_UUID
        topic_image = image.topics.get(topic_id)
        results = []
        # Read once per topic, not per partition (a broker's request names thousands at
        # 100,000 partitions, issue 35): its election policy and min.insync.replicas (rule 9).
        if topic_image is not None:
            policy = policy_for(topic_image.name)
            topic_min_isr = image.topic_min_insync_replicas(topic_image.name)
        for data in topic.partitions:
            seen += 1
            if seen % SLICE_PARTITIONS == 0:
                yield
            if topic_image is None:
                results.append(alter_partition_result(data.partition_index, Errors.UNKNOWN_TOPIC_ID))
                continue
            registration = topic_image.partitions.get(data.partition_index)
            if registration is None:
                results.append(
                    alter_partition_result(data.partition_index, Errors.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            error = validate_alter_partition(image, request.broker_id, registration, data)
            if error is not None:
                results.append(alter_partition_result(data.partition_index, error))
                continue
            builder = PartitionChangeBuilder(
                registration,
                topic_id,
                data.partition_index,
                image,
                min(topic_min_isr, len(registration.replicas)),  # image.effective_min_isr
                policy,
            )
            builder.set_target_isr(b.broker_id for b in data.new_isr_with_epochs)
            builder.set_target_leader_recovery_state(
                LeaderRecoveryState(data.leader_recovery_state)
            )
            change = builder.build()
            after = registration
            error_code = Errors.NONE
            if change.record is not None:
                changes.append(change)
                after = registration.merge(change.record)
                leader = change.record.leader
                if leader != NO_LEADER_CHANGE and leader != request.broker_id:
                    error_code = Errors.NEW_LEADER_ELECTED
            results.append(_partition_result(data.partition_index, error_code, after))
        topic_results.append((topic_id, results))
    return ControllerResult(
        tuple(written_records(changes)),
        alter_partition_response(Errors.NONE, topic_results),
        tuple(changes),
    )


alter_partition = drained(alter_partition_steps)

_RECOVERY_STATES = frozenset(int(state) for state in LeaderRecoveryState)


def validate_alter_partition(
    image: MetadataImage,
    sender_id: int,
    registration: PartitionRegistration,
    data: AlterPartitionPartition,
) -> Errors | None:
    """Rule 18's per-partition order after the topic lookup; None when the change is valid."""
    if (
        data.leader_epoch > registration.leader_epoch
        or data.partition_epoch > registration.partition_epoch
    ):
        return Errors.NOT_CONTROLLER  # this controller is behind the sender
    if data.leader_epoch < registration.leader_epoch:
        return Errors.FENCED_LEADER_EPOCH  # before "not the leader": a stale ex-leader gets it
    if sender_id != registration.leader:
        return Errors.INVALID_REQUEST
    new_isr = [b.broker_id for b in data.new_isr_with_epochs]
    if (
        len(set(new_isr)) != len(new_isr)
        or any(r not in registration.replicas for r in new_isr)
        or registration.leader not in new_isr
    ):
        return Errors.INVALID_REQUEST
    if data.leader_recovery_state not in _RECOVERY_STATES:
        return Errors.INVALID_REQUEST
    requested = LeaderRecoveryState(data.leader_recovery_state)
    if requested == LeaderRecoveryState.RECOVERING and len(new_isr) > 1:
        return Errors.INVALID_REQUEST  # rule 19 / KIP-704
    if (
        registration.leader_recovery_state == LeaderRecoveryState.RECOVERED
        and requested == LeaderRecoveryState.RECOVERING
    ):
        return Errors.INVALID_REQUEST  # rule 19: RECOVERED -> RECOVERING
    if data.partition_epoch < registration.partition_epoch:
        return Errors.INVALID_UPDATE_VERSION
    for member in data.new_isr_with_epochs:
        if ineligible_reason(image, member) is not None:
            return Errors.INELIGIBLE_REPLICA
    return None


def ineligible_reason(image: MetadataImage, member: BrokerState) -> str | None:
    """Rule 18 / KIP-903: why a proposed ISR member may not join, or None."""
    registration = image.brokers.get(member.broker_id)
    if registration is None:
        return "not registered"
    if registration.in_controlled_shutdown:
        return "in controlled shutdown"
    if registration.fenced:
        return "fenced"
    if member.broker_epoch != NO_BROKER_EPOCH and member.broker_epoch != registration.epoch:
        return f"broker epoch {member.broker_epoch} is not the registered {registration.epoch}"
    return None


def _partition_result(
    partition_index: int, error: Errors, registration: PartitionRegistration
) -> AlterPartitionPartitionResult:
    return alter_partition_result(
        partition_index,
        error,
        leader_id=registration.leader,
        leader_epoch=registration.leader_epoch,
        isr=registration.isr,
        leader_recovery_state=int(registration.leader_recovery_state),
        partition_epoch=registration.partition_epoch,
    )
