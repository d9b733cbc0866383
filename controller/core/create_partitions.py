"""CreatePartitions on the active controller (Kafka's ReplicationControlManager.createPartitions):
raise a topic's partition count, placing the new partitions' replicas or taking the operator's
assignment. Pure: reads a committed MetadataImage, returns the records and per-topic results.

Kafka's checks, in Kafka's order: a topic named twice is INVALID_REQUEST; an unknown topic
UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one INVALID_PARTITIONS; an assignment
that does not give one replica set of the topic's replication factor per new partition, names a
broker twice or an unregistered broker, or only fenced ones, INVALID_REPLICA_ASSIGNMENT; too few
usable brokers for the replication factor INVALID_REPLICATION_FACTOR. New partitions start as a
new topic's do (rule 8): the unfenced replicas are the ISR and the first of them leads.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.core.controller_result import ControllerResult
from controller.core.replication_control import (
    CREATE_SLICE_PARTITIONS,
    MAX_PARTITIONS_PER_REQUEST,
    assignment_error,
    new_partition,
    place_replicas,
    usable_brokers,
)
from controller.core.steps import Steps, drained
from kafkawire.admin_messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    create_partitions_response,
    create_partitions_result,
)
from kafkawire.errors import Errors
from metadata.metadata_image import MetadataImage, TopicImage
from metadata.records import MetadataRecord


def create_partitions_steps(
    image: MetadataImage, create: CreatePartitionsRequest
) -> Steps[ControllerResult[CreatePartitionsResponse]]:
    """Yields every CREATE_SLICE_PARTITIONS new partitions built (issue 35)."""
    topics = create.topics
    records: list[MetadataRecord] = []
    results: list[CreatePartitionsTopicResult] = []
    if _added(image, topics) > MAX_PARTITIONS_PER_REQUEST:  # Kafka's limit, before any check
        return ControllerResult((), create_partitions_response(
            create_partitions_result(t.name, Errors.POLICY_VIOLATION, TOO_MANY_ADDITIONAL)
            for t in topics
        ))
    names = [t.name for t in topics]
    brokers = usable_brokers(image)
    # Start where existing partitions left off, so new leaders spread like a new topic's.
    placed = sum(len(t.partitions) for t in image.topics.values())
    for request in topics:
        if names.count(request.name) > 1:
            results.append(
                create_partitions_result(
                    request.name, Errors.INVALID_REQUEST, "topic named more than once"
                )
            )
            continue
        topic = image.topics_by_name.get(request.name)
        if topic is None:
            results.append(
                create_partitions_result(
                    request.name,
                    Errors.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {request.name!r} does not exist",
                )
            )
            continue
        new_replicas, error, message = _new_replicas(image, topic, request, brokers, placed)
        if error is not Errors.NONE:
            results.append(create_partitions_result(request.name, error, message))
            continue
        placed += len(new_replicas)
        results.append(create_partitions_result(request.name))
        if create.validate_only:
            continue
        first = len(topic.partitions)
        usable = frozenset(brokers)
        for offset, replicas in enumerate(new_replicas):
            records.append(new_partition(image, topic.topic_id, first + offset, replicas, usable))
            if offset % CREATE_SLICE_PARTITIONS == CREATE_SLICE_PARTITIONS - 1:
                yield
    return ControllerResult(tuple(records), create_partitions_response(results))


create_partitions = drained(create_partitions_steps)


TOO_MANY_ADDITIONAL = "Excessively large number of additional partitions per request."


def _added(image: MetadataImage, topics: Sequence[CreatePartitionsTopic]) -> int:
    """The partitions the request would add to existing topics (Kafka counts these only)."""
    added = 0
    for request in topics:
        topic = image.topics_by_name.get(request.name)
        if topic is not None and request.count > len(topic.partitions):
            added += request.count - len(topic.partitions)
    return added


def _new_replicas(
    image: MetadataImage,
    topic: TopicImage,
    request: CreatePartitionsTopic,
    brokers: list[int],
    placed: int,
) -> tuple[list[tuple[int, ...]], Errors, str]:
    current = len(topic.partitions)
    if request.count < current:
        return (
            [],
            Errors.INVALID_PARTITIONS,
            f"topic currently has {current} partitions, which is higher than the requested "
            f"{request.count}",
        )
    if request.count == current:
        return [], Errors.INVALID_PARTITIONS, f"topic already has {current} partitions"
    adding = request.count - current
    replication_factor = len(topic.partitions[min(topic.partitions)].replicas)
    if request.assignments is None:
        if replication_factor > len(brokers):
            return (
                [],
                Errors.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the {len(brokers)} "
                "available broker(s)",
            )
        return place_replicas(brokers, adding, replication_factor, placed), Errors.NONE, ""
    assignments = [[int(b) for b in a.broker_ids] for a in request.assignments]
    if len(assignments) != adding:
        return (
            [],
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"{len(assignments)} replica set(s) given for {adding} new partition(s)",
        )
    new: list[tuple[int, ...]] = []
    for index, replicas in enumerate(assignments):
        reason = assignment_error(image, current + index, replicas, replication_factor)
        if reason is not None:
            return [], Errors.INVALID_REPLICA_ASSIGNMENT, reason
        new.append(tuple(int(b) for b in replicas))
    return new, Errors.NONE, ""
