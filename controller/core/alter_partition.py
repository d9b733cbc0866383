"""AlterPartition validation and the resulting ISR change (rules 17-19; seeds 000, 002).

Checks run in rule 18's order: STALE_BROKER_EPOCH for the whole request; then per partition
UNKNOWN_TOPIC_ID, NOT_CONTROLLER, FENCED_LEADER_EPOCH, INVALID_REQUEST (sender not the leader,
bad ISR, rule 19's recovery-state checks), INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA, and
NEW_LEADER_ELECTED when the accepted change elected another leader (the change is still written).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from controller.core.controller_result import ControllerResult
from controller.core.election_policy import DEFAULT_POLICY, ElectionPolicy
from controller.core.partition_change import (
    PartitionChange,
    PartitionChangeBuilder,
    written_records,
)
from kafkawire.errors import Errors
from metadata.metadata_image import MetadataImage
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from metadata.records import NO_LEADER, NO_LEADER_CHANGE

NO_BROKER_EPOCH = -1  # KIP-903: a sender that cannot report a member's epoch skips the check


@dataclass(frozen=True, slots=True)
class BrokerState:
    broker_id: int
    broker_epoch: int = NO_BROKER_EPOCH


@dataclass(frozen=True, slots=True)
class AlterPartitionPartition:
    partition_index: int
    leader_epoch: int
    new_isr_with_epochs: tuple[BrokerState, ...]
    leader_recovery_state: int = int(LeaderRecoveryState.RECOVERED)
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionTopic:
    topic_id: uuid.UUID
    partitions: tuple[AlterPartitionPartition, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    topics: tuple[AlterPartitionTopic, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionPartitionResult:
    partition_index: int
    error: Errors
    leader_id: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    leader_recovery_state: int = int(LeaderRecoveryState.RECOVERED)
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AlterPartitionTopicResult:
    topic_id: uuid.UUID
    partitions: tuple[AlterPartitionPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    error: Errors
    topics: tuple[AlterPartitionTopicResult, ...] = ()


def alter_partition(
    image: MetadataImage,
    request: AlterPartitionRequest,
    policy_for: Callable[[str], ElectionPolicy] = lambda _topic: DEFAULT_POLICY,
) -> ControllerResult[AlterPartitionResponse]:
    """Validate and apply one AlterPartition against the committed image; `policy_for(topic)`
    is the election policy for a topic (its unclean setting, rule 13)."""
    if image.broker_epoch(request.broker_id) != request.broker_epoch:
        # Rule 18: a differing epoch, higher or lower (or no registration), fails everything.
        return ControllerResult((), AlterPartitionResponse(Errors.STALE_BROKER_EPOCH))
    changes: list[PartitionChange] = []
    topic_results = []
    for topic in request.topics:
        topic_image = image.topics.get(topic.topic_id)
        results = []
        for data in topic.partitions:
            if topic_image is None:
                results.append(
                    AlterPartitionPartitionResult(data.partition_index, Errors.UNKNOWN_TOPIC_ID)
                )
                continue
            registration = topic_image.partitions.get(data.partition_index)
            if registration is None:
                results.append(
                    AlterPartitionPartitionResult(
                        data.partition_index, Errors.UNKNOWN_TOPIC_OR_PARTITION
                    )
                )
                continue
            error = validate_alter_partition(image, request.broker_id, registration, data)
            if error is not None:
                results.append(AlterPartitionPartitionResult(data.partition_index, error))
                continue
            builder = PartitionChangeBuilder(
                registration,
                topic.topic_id,
                data.partition_index,
                image,
                image.effective_min_isr(topic.topic_id, data.partition_index),
                policy_for(topic_image.name),
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
        topic_results.append(AlterPartitionTopicResult(topic.topic_id, tuple(results)))
    return ControllerResult(
        tuple(written_records(changes)),
        AlterPartitionResponse(Errors.NONE, tuple(topic_results)),
        tuple(changes),
    )


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
    if data.leader_recovery_state not in (s.value for s in LeaderRecoveryState):
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
    return AlterPartitionPartitionResult(
        partition_index=partition_index,
        error=error,
        leader_id=registration.leader,
        leader_epoch=registration.leader_epoch,
        isr=registration.isr,
        leader_recovery_state=int(registration.leader_recovery_state),
        partition_epoch=registration.partition_epoch,
    )
