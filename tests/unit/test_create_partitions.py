"""CreatePartitions on the controller core: a topic grows to a new partition count with placed or
assigned replicas, and Kafka's errors name every refusal (INVALID_PARTITIONS, UNKNOWN_TOPIC_OR_
PARTITION, INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR, INVALID_REQUEST); validate-only
and refusals write nothing. New partitions pass the partition invariants (rule 8)."""

from __future__ import annotations

from controller.core.create_partitions import create_partitions
from controller.core.invariants import check_partition
from kafkawire.admin_messages import CreatePartitionsTopic, create_partitions_request
from kafkawire.admin_messages import create_partitions_topic as topic
from kafkawire.errors import Errors
from metadata.metadata_image import MetadataImage
from metadata.records import PartitionRecord
from tests.unit.test_replication_control import FOO, apply, brokers, with_foo


def foo_on(count: int = 4, fenced: tuple[int, ...] = ()) -> MetadataImage:
    """foo with one partition on brokers 1-3 (RF 3), in a cluster of `count` brokers."""
    return with_foo(brokers(count, fenced=fenced), isr=(1, 2, 3))


def grow(image: MetadataImage, *topics: CreatePartitionsTopic, validate_only: bool = False):  # type: ignore[no-untyped-def]
    return create_partitions(image, create_partitions_request(topics, validate_only))


def test_added_partitions_are_placed_with_the_topics_replication_factor() -> None:
    image = foo_on()
    result = grow(image, topic("foo", 3))
    assert [(r.name, r.error_code) for r in result.response.results] == [("foo", Errors.NONE)]
    after = apply(image, result.records)
    partitions = after.topics[FOO].partitions
    assert sorted(partitions) == [0, 1, 2]
    for partition_id in (1, 2):
        reg = partitions[partition_id]
        assert len(reg.replicas) == 3 and len(set(reg.replicas)) == 3
        assert reg.isr == reg.replicas and reg.leader == reg.replicas[0]
        assert check_partition(reg, after, after.effective_min_isr(FOO, partition_id)) == []
    # Leaders of the new partitions spread: not both on one broker.
    assert partitions[1].leader != partitions[2].leader


def test_manual_assignment_is_taken_and_fenced_replicas_stay_out_of_the_isr() -> None:
    image = foo_on(count=4, fenced=(4,))
    result = grow(image, topic("foo", 2, [[4, 2, 1]]))
    assert result.response.results[0].error_code == Errors.NONE
    (record,) = result.records
    assert isinstance(record, PartitionRecord)
    assert (record.partition_id, record.replicas, record.isr, record.leader) == (
        1,
        (4, 2, 1),
        (2, 1),
        2,
    )


def test_kafkas_errors_and_nothing_written() -> None:
    image = foo_on(count=3)
    cases = [
        (topic("foo", 1), Errors.INVALID_PARTITIONS),  # already has 1
        (topic("foo", 0), Errors.INVALID_PARTITIONS),  # fewer than now
        (topic("nope", 3), Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (topic("foo", 3, [[1, 2, 3]]), Errors.INVALID_REPLICA_ASSIGNMENT),
        (topic("foo", 2, [[1, 2]]), Errors.INVALID_REPLICA_ASSIGNMENT),
        (topic("foo", 2, [[1, 1, 2]]), Errors.INVALID_REPLICA_ASSIGNMENT),
        (topic("foo", 2, [[1, 2, 9]]), Errors.INVALID_REPLICA_ASSIGNMENT),
    ]
    for request, error in cases:
        result = grow(image, request)
        assert [r.error_code for r in result.response.results] == [error], request
        assert result.records == (), request
    twice = grow(image, topic("foo", 2), topic("foo", 3))
    assert [r.error_code for r in twice.response.results] == [Errors.INVALID_REQUEST] * 2
    assert twice.records == ()


def test_adding_more_than_ten_thousand_partitions_is_a_policy_violation() -> None:
    # Kafka counts the partitions added to existing topics only; an unknown topic adds none.
    image = foo_on(count=3)
    result = grow(image, topic("foo", 10_002), topic("nope", 5))
    assert [(r.error_code, r.error_message) for r in result.response.results] == [
        (Errors.POLICY_VIOLATION, "Excessively large number of additional partitions per request.")
    ] * 2
    assert result.records == ()
    assert grow(image, topic("foo", 10_001), validate_only=True).response.results[
        0].error_code == Errors.NONE


def test_too_few_usable_brokers_and_all_fenced_assignments_are_refused() -> None:
    short = foo_on(count=3, fenced=(3,))
    result = grow(short, topic("foo", 2))
    assert result.response.results[0].error_code == Errors.INVALID_REPLICATION_FACTOR
    fenced = with_foo(brokers(5, fenced=(4, 5)), isr=(1, 2, 3), replicas=(1, 2, 3))
    result = grow(fenced, topic("foo", 2, [[4, 5, 3]]))
    assert result.response.results[0].error_code == Errors.NONE  # broker 3 is unfenced: it leads
    result = grow(
        with_foo(brokers(5, fenced=(3, 4, 5)), isr=(1, 2), replicas=(1, 2, 3)),
        topic("foo", 2, [[4, 5, 3]]),
    )
    assert result.response.results[0].error_code == Errors.INVALID_REPLICA_ASSIGNMENT


def test_validate_only_answers_without_writing() -> None:
    result = grow(foo_on(), topic("foo", 3), validate_only=True)
    assert result.response.results[0].error_code == Errors.NONE
    assert result.records == ()
