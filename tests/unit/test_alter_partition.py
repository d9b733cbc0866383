"""AlterPartition validation order and results (rules 17-19; seeds 000, 002)."""

from __future__ import annotations

import uuid

import pytest

from controller.core import alter_partition as ap
from controller.core.alter_partition import alter_partition, ineligible_reason
from controller.core.election_policy import ElectionPolicy
from kafkawire.broker_lifecycle import (
    AlterPartitionRequest,
    alter_partition_partition,
    alter_partition_request,
    broker_state,
)
from kafkawire.errors import Errors
from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.records import (
    BROKER_FLAG_TRUE,
    CONFIG_RESOURCE_TOPIC,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)

FOO = uuid.UUID(int=100)


def image_with(extra: list[MetadataRecord] | None = None) -> MetadataImage:
    """Brokers 1-3 (epochs 0-2), topic foo with two partitions, min ISR 2."""
    records: list[MetadataRecord] = []
    for broker in (1, 2, 3):
        records.append(RegisterBrokerRecord(broker, uuid.UUID(int=broker), broker - 1))
    for broker in (1, 2, 3):
        records.append(UnfenceBrokerRecord(broker, broker - 1))
    records += [
        TopicRecord("foo", FOO),
        ConfigRecord(CONFIG_RESOURCE_TOPIC, "foo", "min.insync.replicas", "2"),
        PartitionRecord(0, FOO, (1, 2, 3), (1, 2, 3), leader=1, leader_epoch=4, partition_epoch=6),
        PartitionRecord(1, FOO, (2, 3, 1), (2, 3, 1), leader=2),
    ]
    records += extra or []
    delta = MetadataDelta()
    for offset, record in enumerate(records):
        delta.replay(record, offset)
    return delta.image()


def request(
    isr: tuple[int, ...],
    sender: int = 1,
    sender_epoch: int = 0,
    leader_epoch: int = 4,
    partition_epoch: int = 6,
    partition: int = 0,
    recovery: int = 0,
) -> AlterPartitionRequest:
    epochs = {1: 0, 2: 1, 3: 2}
    item = alter_partition_partition(
        partition,
        leader_epoch,
        tuple(broker_state(b, epochs.get(b, -1)) for b in isr),
        recovery,
        partition_epoch,
    )
    return alter_partition_request(sender, sender_epoch, [(FOO, (item,))])


def partition_error(image: MetadataImage, req: AlterPartitionRequest) -> Errors:
    response = alter_partition(image, req).response
    assert response.error_code == Errors.NONE
    return response.topics[0].partitions[0].error_code


def test_shrink_is_written_and_answered_with_the_new_state() -> None:
    image = image_with()
    result = alter_partition(image, request((1, 2)))
    assert result.records == (PartitionChangeRecord(0, FOO, isr=(1, 2)),)
    part = result.response.topics[0].partitions[0]
    assert (part.error_code, part.isr, part.leader_id) == (Errors.NONE, (1, 2), 1)
    assert (part.leader_epoch, part.partition_epoch) == (4, 7)


def test_stale_broker_epoch_fails_the_whole_request_higher_lower_or_unregistered() -> None:
    image = image_with()
    for sender, epoch in ((1, 1), (1, -1), (9, 0)):
        result = alter_partition(image, request((1, 2), sender=sender, sender_epoch=epoch))
        assert result.response.error_code == Errors.STALE_BROKER_EPOCH
        assert result.response.topics == ()
        assert result.records == ()


def test_unknown_topic_id_and_unknown_partition() -> None:
    image = image_with()
    req = request((1, 2))
    unknown = alter_partition_request(1, 0, [(uuid.UUID(int=5), req.topics[0].partitions)])
    assert partition_error(image, unknown) == Errors.UNKNOWN_TOPIC_ID
    assert partition_error(image, request((1, 2), partition=9)) == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_order_not_controller_then_fenced_leader_epoch_then_invalid_request() -> None:
    image = image_with()
    assert partition_error(image, request((1, 2), leader_epoch=5)) == Errors.NOT_CONTROLLER
    assert partition_error(image, request((1, 2), partition_epoch=7)) == Errors.NOT_CONTROLLER
    stale_non_leader = request((2, 3), sender=2, sender_epoch=1, leader_epoch=3)
    assert partition_error(image, stale_non_leader) == Errors.FENCED_LEADER_EPOCH
    non_leader = request((2, 3), sender=2, sender_epoch=1)
    assert partition_error(image, non_leader) == Errors.INVALID_REQUEST
    assert partition_error(image, request((1, 1))) == Errors.INVALID_REQUEST
    assert partition_error(image, request((2, 3), partition_epoch=5)) == Errors.INVALID_REQUEST
    assert (
        partition_error(image, request((1, 2), partition_epoch=5)) == Errors.INVALID_UPDATE_VERSION
    )


def test_recovery_state_rules_are_invalid_request() -> None:
    image = image_with()
    assert partition_error(image, request((1,), recovery=1)) == Errors.INVALID_REQUEST
    assert partition_error(image, request((1, 2), recovery=1)) == Errors.INVALID_REQUEST
    assert partition_error(image, request((1,), recovery=7)) == Errors.INVALID_REQUEST


def test_member_in_controlled_shutdown_is_ineligible_even_if_already_in_isr() -> None:
    image = image_with(
        [BrokerRegistrationChangeRecord(3, 2, in_controlled_shutdown=BROKER_FLAG_TRUE)]
    )
    assert image.partition(FOO, 0) is not None
    assert 3 in image.partition(FOO, 0).isr  # type: ignore[union-attr]
    assert ineligible_reason(image, broker_state(3, 2)) == "in controlled shutdown"
    assert partition_error(image, request((1, 2, 3))) == Errors.INELIGIBLE_REPLICA
    assert partition_error(image, request((1, 2))) == Errors.NONE


def test_member_with_another_epoch_is_ineligible_and_minus_one_skips_the_check() -> None:
    image = image_with()
    stale = alter_partition_request(
        1, 0, [(FOO, [alter_partition_partition(0, 4, (broker_state(1, 0), broker_state(2, 7)), 0, 6)])]
    )
    assert partition_error(image, stale) == Errors.INELIGIBLE_REPLICA
    unchecked = alter_partition_request(
        1, 0, [(FOO, [alter_partition_partition(0, 4, (broker_state(1, 0), broker_state(2, -1)), 0, 6)])]
    )
    assert partition_error(image, unchecked) == Errors.NONE


def test_partitions_of_one_request_are_judged_independently() -> None:
    image = image_with()
    good = alter_partition_partition(0, 4, (broker_state(1, 0), broker_state(2, 1)), 0, 6)
    bad = alter_partition_partition(1, 0, (broker_state(2, 1),), 0, 0)  # sender 1 is not its leader
    req = alter_partition_request(1, 0, [(FOO, (good, bad))])
    result = alter_partition(image, req)
    errors = [p.error_code for p in result.response.topics[0].partitions]
    assert errors == [Errors.NONE, Errors.INVALID_REQUEST]
    assert len(result.records) == 1


def test_same_isr_writes_nothing_and_answers_current_state() -> None:
    image = image_with()
    result = alter_partition(image, request((1, 2, 3)))
    assert result.records == ()
    part = result.response.topics[0].partitions[0]
    assert (part.error_code, part.isr, part.partition_epoch) == (Errors.NONE, (1, 2, 3), 6)


def test_an_isr_only_change_is_decided_without_the_builder_as_the_builder_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A returning broker is added to 100,000 ISRs (issue 35): a valid proposal that changes the
    ISR alone is decided without a PartitionChangeBuilder, and the records and answers are the
    builder's, for expansions and shrinks, with ELR on and off, below and at min ISR, with ELR
    state left over, a RECOVERING partition, and a sender shutting down."""
    builds: list[object] = []
    real_builder = ap.PartitionChangeBuilder

    class CountingBuilder(real_builder):  # type: ignore[misc, valid-type]
        def build(self):  # type: ignore[no-untyped-def]
            builds.append(self)
            return super().build()

    monkeypatch.setattr(ap, "PartitionChangeBuilder", CountingBuilder)
    expand = request((1, 2, 3))
    base = image_with([PartitionChangeRecord(0, FOO, isr=(1, 2), leader=1)])  # epochs 5 / 7
    expand = request((1, 2, 3), leader_epoch=5, partition_epoch=7)
    result = alter_partition(base, expand)
    assert result.records == (PartitionChangeRecord(0, FOO, isr=(1, 2, 3)),)
    assert builds == []

    def decided(image: MetadataImage, req: AlterPartitionRequest, elr: bool) -> object:
        policy = ElectionPolicy(elr_enabled=elr)
        fast = ap.alter_partition(image, req, lambda _topic: policy)
        with monkeypatch.context() as m:
            m.setattr(ap, "_isr_only_change", lambda *args: None)
            slow = ap.alter_partition(image, req, lambda _topic: policy)
        assert (fast.records, fast.response, fast.changes) == (
            slow.records, slow.response, slow.changes
        )
        return fast.records

    shutting_down = BrokerRegistrationChangeRecord(1, 0, in_controlled_shutdown=BROKER_FLAG_TRUE)
    cases = [
        ([], (1, 2, 3)),
        ([], (1, 2)),
        ([], (1,)),  # below min ISR 2: ELR on keeps 2 and 3 eligible
        ([PartitionRecord(0, FOO, (1, 2, 3), (1,), leader=1, leader_epoch=5, partition_epoch=7,
                          eligible_leader_replicas=(2,), last_known_elr=(3,))], (1, 2)),
        ([PartitionRecord(0, FOO, (1, 2, 3), (1,), leader=1, leader_epoch=5, partition_epoch=7,
                          last_known_leader=1)], (1, 2, 3)),
        ([PartitionRecord(0, FOO, (1, 2, 3), (1,), leader=1, leader_epoch=5, partition_epoch=7,
                          leader_recovery_state=1)], (1,)),
        ([shutting_down], (1, 2)),
    ]
    written = []
    for extra, isr in cases:
        image = image_with([PartitionChangeRecord(0, FOO, isr=(1, 2), leader=1), *extra])
        for recovery in (0, 1):
            req = request(isr, leader_epoch=5, partition_epoch=7, recovery=recovery)
            for elr in (True, False):
                written.append(decided(image, req, elr))
    assert any(written) and not all(written)
