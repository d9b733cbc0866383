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
    ElectionKind,
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
from metadata.records import LAST_KNOWN_LEADER_NONE, NO_LEADER_CHANGE, PartitionChangeRecord


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
    # Read once per request, not per partition: whether the sender may go on leading (the
    # builder's election keeps a current leader that is in the new ISR and acceptable), and
    # each proposed member's eligibility by (broker, epoch) (rule 18).
    sender_may_lead = not image.is_fenced(request.broker_id) and not (
        image.is_in_controlled_shutdown(request.broker_id)
    )
    eligible: dict[tuple[int, int], bool] = {}
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
            error = validate_alter_partition(
                image, request.broker_id, registration, data, eligible
            )
            if error is not None:
                results.append(alter_partition_result(data.partition_index, error))
                continue
            isr_only = _isr_only_change(
                registration, data, sender_may_lead, policy.elr_enabled,
                min(topic_min_isr, len(registration.replicas)),
            )
            if isr_only is not None:
                record = PartitionChangeRecord(
                    partition_id=data.partition_index, topic_id=topic_id, isr=isr_only
                )
                changes.append(PartitionChange(record, ElectionKind.NONE))
                # What registration.merge(record) holds, without building it.
                results.append(alter_partition_result(
                    data.partition_index,
                    Errors.NONE,
                    leader_id=registration.leader,
                    leader_epoch=registration.leader_epoch,
                    isr=isr_only,
                    leader_recovery_state=int(registration.leader_recovery_state),
                    partition_epoch=registration.partition_epoch + 1,
                ))
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
    eligible: dict[tuple[int, int], bool] | None = None,
) -> Errors | None:
    """Rule 18's per-partition order after the topic lookup; None when the change is valid.
    `eligible`: members' eligibility by (broker, epoch), kept across the partitions of one
    request (the image does not change within it)."""
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
        key = (member.broker_id, member.broker_epoch)
        ok = None if eligible is None else eligible.get(key)
        if ok is None:
            ok = ineligible_reason(image, member) is None
            if eligible is not None:
                eligible[key] = ok
        if not ok:
            return Errors.INELIGIBLE_REPLICA
    return None


def _isr_only_change(
    registration: PartitionRegistration,
    data: AlterPartitionPartition,
    sender_may_lead: bool,
    elr_enabled: bool,
    min_isr: int,
) -> tuple[int, ...] | None:
    """The new ISR when a valid proposal changes the ISR alone, or None (then the
    PartitionChangeBuilder decides). The builder's result for it is a PartitionChangeRecord
    naming the ISR and nothing else: its sender leads and may go on leading (the election
    keeps it), the recovery state stays, and no ELR state is kept before or after (ELR off,
    or the new ISR at min ISR or more, rules 10-11). A returning broker is added to the ISR of
    every partition its leaders lead, 100,000 at 100,000 partitions; the builder was 40% of
    deciding each (issue 35). Kafka's ReplicationControlManager.alterPartition builds each
    with its PartitionChangeBuilder; the records are the same."""
    new_isr = tuple(b.broker_id for b in data.new_isr_with_epochs)
    if (
        not sender_may_lead
        or new_isr == registration.isr
        or data.leader_recovery_state != registration.leader_recovery_state
        or registration.elr
        or registration.last_known_elr
        or registration.last_known_leader != LAST_KNOWN_LEADER_NONE
        or (elr_enabled and len(new_isr) < min_isr)
    ):
        return None
    return new_isr


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
