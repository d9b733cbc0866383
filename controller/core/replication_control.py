"""Topics, partitions and elections on the active controller (Kafka's ReplicationControlManager).

Every function reads a committed MetadataImage and returns ControllerResult(records, response):
nothing changes until the records are committed and replayed (STYLE.md). Partition changes all go
through PartitionChangeBuilder, so rules 8-16 and 19 of INVARIANTS.md live in one place.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass

from controller.core import alter_partition as ap
from controller.core import config_control
from controller.core.config_control import topic_config_error, unclean_allowed
from controller.core.controller_result import ControllerResult
from controller.core.election_policy import DEFAULT_POLICY, ElectionPolicy
from controller.core.partition_change import (
    ELECTED_KINDS,
    ElectionKind,
    ElectionType,
    PartitionChange,
    PartitionChangeBuilder,
    designated_election_error,
    designated_election_reason,
    fenced_replica_change,
    written_records,
)
from controller.core.partition_metrics import PartitionMetrics
from controller.core.steps import SLICE_PARTITIONS, SLICE_SCANNED, Steps, drained
from controller.core.unclean_recovery import Strategy
from kafkawire import admin_messages as am
from kafkawire import constants
from kafkawire import topic as topic_names
from kafkawire.broker_lifecycle import AlterPartitionRequest, AlterPartitionResponse
from kafkawire.config import NodeConfig
from kafkawire.errors import Errors
from metadata import kafka_describe
from metadata.metadata_image import (
    MetadataImage,
    TopicImage,
)
from metadata.partition_registration import PartitionRegistration
from metadata.records import (
    CONFIG_RESOURCE_TOPIC,
    NO_LEADER,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)

# Kafka's ReplicationControlManager refuses a CreateTopics or CreatePartitions request that would
# add more partitions than this in all (POLICY_VIOLATION, every topic of the request), before
# any other check: one request must not write an unbounded batch of records.
MAX_PARTITIONS_PER_REQUEST = 10_000
# Kafka's defaults for a CreateTopics that leaves partitions / replication factor to the
# controller (-1): its `num.partitions` and `default.replication.factor`.
CREATE_TOPICS_DEFAULTS = {"num.partitions": "1", "default.replication.factor": "1"}
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
# New partitions a CreateTopics or CreatePartitions builds between two yields of its steps: a
# create of 5,000 was one stretch of 30-45 ms of the active controller's loop, late samples of
# 130-210 ms at load 4-7 (issue 35). About 1.5 ms on an idle core.
CREATE_SLICE_PARTITIONS = 500


def builder_for(
    image: MetadataImage, topic: TopicImage, partition_id: int, policy: ElectionPolicy
) -> PartitionChangeBuilder:
    """A builder for one partition under `policy`, with its topic's unclean setting (rule 13)."""
    return _TopicBuilders(image, topic, policy).builder(partition_id)


class _TopicBuilders:
    """Builders for the partitions of one topic: the topic's min.insync.replicas and unclean
    setting are read once, not once per partition (fencing a broker of 100,000 partitions
    spent a third of its time re-reading them, issue 35)."""

    __slots__ = ("image", "min_isr", "policy", "topic")

    def __init__(self, image: MetadataImage, topic: TopicImage, policy: ElectionPolicy) -> None:
        self.image = image
        self.topic = topic
        self.min_isr = image.topic_min_insync_replicas(topic.name)
        self.policy = policy.for_topic(unclean_allowed(image, topic.name, policy.controller_id))

    def builder(self, partition_id: int) -> PartitionChangeBuilder:
        registration = self.topic.partitions[partition_id]
        return PartitionChangeBuilder(
            registration,
            self.topic.topic_id,
            partition_id,
            self.image,
            min(self.min_isr, len(registration.replicas)),  # rule 9
            self.policy,
        )


def pending_election(
    image: MetadataImage, topic: TopicImage, partition_id: int, policy: ElectionPolicy
) -> ElectionKind:
    """The election PartitionChangeBuilder decides for a partition as it stands (rule 13 under
    `policy`); the recovery manager asks it before recovering anything (rule 14)."""
    return builder_for(image, topic, partition_id, policy).build().election


def _partitions(image: MetadataImage) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    """Every partition in a stable order (topic name, partition id): records are deterministic."""
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        for partition_id in sorted(topic.partitions):
            yield topic, partition_id, topic.partitions[partition_id]


# -- CreateTopics ----------------------------------------------------------------------------


def usable_brokers(image: MetadataImage) -> list[int]:
    """Brokers a new replica may be placed on: registered, unfenced, not shutting down."""
    return sorted(b for b in image.brokers if _usable(image, b))


def place_replicas(
    brokers: list[int], num_partitions: int, replication_factor: int, start_index: int
) -> list[tuple[int, ...]]:
    """Round-robin placement: partition p starts at broker (start + p), then the next RF - 1, so
    leaders (first replicas) spread evenly and no broker holds two replicas of one partition.
    There are only as many replica lists as brokers: each is built once and shared by the
    partitions that start on the same broker (a create of 5,000 built 5,000, issue 35)."""
    count = len(brokers)
    rotations = [
        tuple(brokers[(first + i) % count] for i in range(replication_factor))
        for first in range(count)
    ]
    return [rotations[(start_index + p) % count] for p in range(num_partitions)]


def new_partition(
    image: MetadataImage,
    topic_id: uuid.UUID,
    partition_id: int,
    replicas: tuple[int, ...],
    usable: Collection[int] | None = None,
) -> PartitionRecord:
    """A new partition (leader epoch 0): the usable replicas form the ISR (rule 12: a fenced
    broker is in no ISR; Kafka's isActive also leaves out one in controlled shutdown) and the
    first of them leads; callers refuse an assignment with no usable broker. `usable`: the
    image's usable brokers, when the caller builds many partitions (usable_brokers)."""
    if usable is None:
        isr = tuple(b for b in replicas if _usable(image, b))
    elif all(b in usable for b in replicas):
        isr = replicas  # the common case: the same tuple, not a copy per partition
    else:
        isr = tuple(b for b in replicas if b in usable)
    return PartitionRecord(partition_id, topic_id, replicas, isr, leader=isr[0])


def assignment_error(
    image: MetadataImage, partition_id: int, replicas: Sequence[int], replication_factor: int
) -> str | None:
    """Kafka's checks of a manual assignment (INVALID_REPLICA_ASSIGNMENT): RF distinct brokers,
    every one registered, at least one usable to lead."""
    if len(replicas) != replication_factor or len(set(replicas)) != len(replicas):
        return (
            f"partition {partition_id}: replicas {list(replicas)} are not "
            f"{replication_factor} distinct brokers"
        )
    unknown = [b for b in replicas if b not in image.brokers]
    if unknown:
        return f"partition {partition_id}: brokers {unknown} are not registered"
    if not any(_usable(image, b) for b in replicas):
        return (
            f"partition {partition_id}: every broker of {list(replicas)} is fenced or in "
            "controlled shutdown"
        )
    return None


def _usable(image: MetadataImage, broker_id: int) -> bool:
    return not image.is_fenced(broker_id) and not image.is_in_controlled_shutdown(broker_id)


@dataclass(frozen=True, slots=True)
class _NewTopic:
    """A CreatableTopic with the controller's defaults filled in (Kafka's
    ReplicationControlManager.createTopic)."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]
    assignments: list[list[int]]


def create_topics_steps(
    image: MetadataImage,
    request: am.CreateTopicsRequest,
    new_topic_id: Callable[[], uuid.UUID],
    node: NodeConfig,
) -> Steps[ControllerResult[am.CreateTopicsResponse]]:
    """CreateTopics v7 (older versions lifted by the runtime): a result per topic, in the
    request's order; -1 partitions / replication factor take `node`'s num.partitions and
    default.replication.factor, and a created topic's result lists its every config (v5+,
    KIP-525, as DescribeConfigs would). Yields every CREATE_SLICE_PARTITIONS partitions built
    (issue 35)."""
    names = [str(t.name) for t in request.topics]
    # Kafka's ControllerApis: a name given twice is refused first, whatever else is wrong.
    duplicates = {n for n in names if names.count(n) > 1}
    refused: dict[int, tuple[Errors, str]] = {}
    topics: dict[int, _NewTopic] = {}
    for index, creatable in enumerate(request.topics):
        parsed = (
            (Errors.INVALID_REQUEST, "Duplicate topic name.")
            if names[index] in duplicates
            else _new_topic(creatable, node)
        )
        if isinstance(parsed, _NewTopic):
            topics[index] = parsed
        else:
            refused[index] = parsed
    total = sum(len(t.assignments) if t.assignments else max(0, t.num_partitions)
                for t in topics.values())
    if total > MAX_PARTITIONS_PER_REQUEST:
        refused.update((i, (Errors.POLICY_VIOLATION, TOO_MANY_PARTITIONS)) for i in topics)
        topics = {}
    records: list[MetadataRecord] = []
    created: dict[int, am.CreatableTopicResult] = {}
    brokers = usable_brokers(image)
    # Start where the last topic left off, so successive topics do not all lead on one broker.
    placed = sum(len(t.partitions) for t in image.topics.values())
    for index, topic in topics.items():
        error, message = _create_topic_error(image, topic, brokers)
        if error is not None:
            refused[index] = (Errors.of(error), message)
            continue
        topic_id = new_topic_id()
        assignment = (
            [tuple(replicas) for replicas in topic.assignments]
            if topic.assignments
            else place_replicas(brokers, topic.num_partitions, topic.replication_factor, placed)
        )
        placed += topic.num_partitions
        created[index] = am.creatable_topic_result(
            topic.name,
            topic_id=topic_id,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            configs=kafka_describe.created_topic_configs(
                am.CreatableTopicConfigs, image, topic.configs, node
            ),
        )
        if request.validate_only:
            continue
        records.append(TopicRecord(topic.name, topic_id))
        for key in sorted(topic.configs):
            records.append(ConfigRecord(CONFIG_RESOURCE_TOPIC, topic.name, key, topic.configs[key]))
        usable = frozenset(brokers)
        for partition_id, replicas in enumerate(assignment):
            records.append(new_partition(image, topic_id, partition_id, replicas, usable))
            if partition_id % CREATE_SLICE_PARTITIONS == CREATE_SLICE_PARTITIONS - 1:
                yield
    results = (
        created[i] if i in created else am.creatable_topic_result(names[i], *refused[i])
        for i in range(len(names))
    )
    return ControllerResult(tuple(records), am.create_topics_response(results))


create_topics = drained(create_topics_steps)


def _new_topic(topic: am.CreatableTopic, node: NodeConfig) -> _NewTopic | tuple[Errors, str]:
    """A manual assignment fixes the counts, -1 takes the controller's defaults."""
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:  # Kafka's ControllerConfigurationValidator
        return Errors.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}"
    assignments = {int(a.partition_index): [int(b) for b in a.broker_ids] for a in topic.assignments}
    num_partitions = int(topic.num_partitions)
    replication_factor = int(topic.replication_factor)
    replica_lists: list[list[int]] = []
    if assignments:
        if num_partitions not in (-1, len(assignments)) or replication_factor not in (
            -1,
            *(len(r) for r in assignments.values()),
        ):
            # Kafka refuses both; counts that agree with the assignment are let through.
            return (
                Errors.INVALID_REQUEST,
                "a replica assignment and different partitions/replication factor were given",
            )
        if sorted(assignments) != list(range(len(assignments))):
            return (
                Errors.INVALID_REPLICA_ASSIGNMENT,
                "partitions of a replica assignment must be 0..n-1",
            )
        replica_lists = [assignments[p] for p in range(len(assignments))]
        num_partitions = len(replica_lists)
        replication_factor = len(replica_lists[0])
    defaults = {**CREATE_TOPICS_DEFAULTS, **node.props}
    if num_partitions == -1:
        num_partitions = int(defaults["num.partitions"])
    if replication_factor == -1:
        replication_factor = int(defaults["default.replication.factor"])
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    return _NewTopic(str(topic.name), num_partitions, replication_factor, configs, replica_lists)


def _create_topic_error(
    image: MetadataImage,
    topic: _NewTopic,
    brokers: list[int],
) -> tuple[int | None, str]:
    """Kafka's checks in Kafka's order, with its messages (ControllerApis.createTopics, then
    ReplicationControlManager's); (error code, why) or (None, "")."""
    if topic.name == topic_names.CLUSTER_METADATA_TOPIC:
        return (
            Errors.INVALID_REQUEST,
            f"Creation of internal topic {topic_names.CLUSTER_METADATA_TOPIC} is prohibited.",
        )
    reason = topic_names.invalid_topic_reason(topic.name)
    if reason is not None:
        return Errors.INVALID_TOPIC_EXCEPTION, reason
    if topic.name in image.topics_by_name:
        return Errors.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists."
    colliding = topic_names.colliding_topic(topic.name, image.topics_by_name)
    if colliding is not None:
        return Errors.INVALID_TOPIC_EXCEPTION, topic_names.collision_message(topic.name, colliding)
    if topic.num_partitions <= 0:
        return Errors.INVALID_PARTITIONS, f"number of partitions {topic.num_partitions} is not > 0"
    if topic.replication_factor <= 0:
        return (
            Errors.INVALID_REPLICATION_FACTOR,
            f"replication factor {topic.replication_factor} is not > 0",
        )
    if not topic.assignments and topic.replication_factor > len(brokers):
        # Kafka checks the factor against usable brokers only for placement; a manual
        # assignment is checked broker by broker below.
        return (
            Errors.INVALID_REPLICATION_FACTOR,
            f"replication factor {topic.replication_factor} is larger than the "
            f"{len(brokers)} available broker(s)",
        )
    for partition_id, replicas in enumerate(topic.assignments):
        reason = assignment_error(image, partition_id, replicas, topic.replication_factor)
        if reason is not None:
            return Errors.INVALID_REPLICA_ASSIGNMENT, reason
    if topic.assignments and len(topic.assignments) != topic.num_partitions:
        return Errors.INVALID_REPLICA_ASSIGNMENT, "one replica set per partition is needed"
    for key, value in sorted(topic.configs.items()):
        reason = topic_config_error(key, value)
        if reason is not None:
            return Errors.INVALID_CONFIG, reason
    return None, ""


# -- DeleteTopics ----------------------------------------------------------------------------


def delete_topics(
    image: MetadataImage, request: am.DeleteTopicsRequest
) -> ControllerResult[am.DeleteTopicsResponse]:
    records: list[MetadataRecord] = []
    results = []
    seen: set[str] = set()
    for name in deleted_names(image, request):
        topic = image.topics_by_name.get(name)
        if name in seen:
            results.append(
                am.deletable_topic_result(name, error=Errors.INVALID_REQUEST, message="named twice")
            )
            continue
        seen.add(name)
        if topic is None:
            results.append(
                am.deletable_topic_result(
                    name,
                    error=Errors.UNKNOWN_TOPIC_OR_PARTITION,
                    message=f"topic {name!r} does not exist",
                )
            )
            continue
        records.append(RemoveTopicRecord(topic.topic_id))  # replay drops its configs too
        results.append(am.deletable_topic_result(name, topic_id=topic.topic_id))
    return ControllerResult(tuple(records), am.delete_topics_response(results))


def deleted_names(image: MetadataImage, request: am.DeleteTopicsRequest) -> list[str]:
    """Each topic's name; a v6 request may give a topic id instead (KIP-516)."""
    names = []
    for t in request.topics:
        if t.name:
            names.append(str(t.name))
        else:
            found = image.topics.get(t.topic_id) if t.topic_id is not None else None
            names.append(found.name if found is not None else f"<unknown id {t.topic_id}>")
    return names


# -- IncrementalAlterConfigs: what a config change does to partitions ------------------------


def incremental_alter_configs(
    image: MetadataImage,
    request: am.IncrementalAlterConfigsRequest | am.AlterConfigsRequest,
    policy: ElectionPolicy = DEFAULT_POLICY,
) -> ControllerResult[am.IncrementalAlterConfigsResponse]:
    """config_control's IncrementalAlterConfigs, or its AlterConfigs (api 33) for an
    AlterConfigsRequest, with this module's partition changes (rule 15)."""

    def changes(before: MetadataImage, after: MetadataImage) -> list[PartitionChange]:
        return partition_changes_after_configs(before, after, policy)

    if isinstance(request, am.AlterConfigsRequest):
        return config_control.legacy_alter_configs(
            image, request, policy.elr_enabled, changes, policy.controller_id
        )
    return config_control.incremental_alter_configs(
        image, request, policy.elr_enabled, changes, policy.controller_id
    )


def partition_changes_after_configs(
    before: MetadataImage, after: MetadataImage, policy: ElectionPolicy
) -> list[PartitionChange]:
    """Rule 15 (a min ISR change clears ELR/LastKnownELR once ISR >= the new effective min ISR)
    and, when unclean election becomes allowed, elections for leaderless partitions; `after` is
    `before` with the config records replayed (Kafka's minIsrConfigUpdatePartitionHandler).
    With ELR off a min ISR change touches no partition (Kafka's createClearElrRecordsAsNeeded
    returns at once)."""
    changes = []
    controller_id = policy.controller_id
    for topic, partition_id, _ in _partitions(after):
        min_isr_changed = policy.elr_enabled and after.topic_min_insync_replicas(
            topic.name
        ) != before.topic_min_insync_replicas(topic.name)
        unclean_changed = unclean_allowed(after, topic.name, controller_id) != unclean_allowed(
            before, topic.name, controller_id
        )
        if not min_isr_changed and not unclean_changed:
            continue
        # A plain build re-derives ELR for the new min ISR and re-runs a leaderless election.
        change = builder_for(after, topic, partition_id, policy).build()
        if change.record is not None:
            changes.append(change)
    return changes


# -- broker lifecycle effects on partitions (rules 10-13, 16) --------------------------------


def _in_isr_or_leads(broker_id: int) -> Callable[[PartitionRegistration], bool]:
    """The partitions a fence or a controlled shutdown of the broker changes: those it is in
    the ISR of or leads (Kafka's brokersToIsrs.partitionsWithBrokerInIsr)."""
    return lambda reg: broker_id in reg.isr or reg.leader == broker_id


def broker_fenced_steps(
    image: MetadataImage, broker_id: int, policy: ElectionPolicy = DEFAULT_POLICY
) -> Steps[list[PartitionChange]]:
    """Rule 12: the fenced broker leaves every ISR (ELR on), keeps its ELR membership, and its
    partitions elect another leader per rule 13."""
    acceptable: dict[int, bool] = {}

    def acceptable_leader(leader: int) -> bool:
        # A handful of brokers lead 100,000 partitions: each is looked up once.
        ok = acceptable.get(leader)
        if ok is None:
            ok = acceptable[leader] = not image.is_fenced(
                leader
            ) and not image.is_in_controlled_shutdown(leader)
        return ok

    def fast(builders: _TopicBuilders, partition_id: int) -> PartitionChange | None:
        return fenced_replica_change(
            builders.topic.partitions[partition_id],
            builders.topic.topic_id,
            partition_id,
            broker_id,
            builders.min_isr,
            builders.policy.elr_enabled,
            acceptable_leader,
        )

    return _broker_changes(
        image,
        policy,
        _in_isr_or_leads(broker_id),
        lambda b: b.fence_broker(broker_id),
        fast=fast,
    )


broker_fenced_changes = drained(broker_fenced_steps)


def broker_unfenced_steps(
    image: MetadataImage, broker_id: int, policy: ElectionPolicy = DEFAULT_POLICY
) -> Steps[list[PartitionChange]]:
    """Rule 16: unfencing re-runs the election of every leaderless partition it hosts."""
    return _broker_changes(
        image,
        policy,
        lambda reg: reg.leader == NO_LEADER and broker_id in reg.replicas,
        lambda builder: builder.unfence_broker(broker_id),
    )


broker_unfenced_changes = drained(broker_unfenced_steps)


def broker_restart_steps(
    image: MetadataImage, broker_id: int, clean: bool, policy: ElectionPolicy = DEFAULT_POLICY
) -> Steps[list[PartitionChange]]:
    """Rule 12: a clean restart keeps ELR membership; an unclean one leaves ISR and ELR (an ELR
    member moves to LastKnownELR, rule 11)."""

    def apply(builder: PartitionChangeBuilder) -> PartitionChangeBuilder:
        if clean:
            return builder.clean_restart(broker_id)
        return builder.unclean_restart(broker_id)

    return _broker_changes(
        image,
        policy,
        lambda reg: broker_id in reg.isr or broker_id in reg.elr or reg.leader == broker_id,
        apply,
    )


broker_restart_changes = drained(broker_restart_steps)


def broker_controlled_shutdown_steps(
    image: MetadataImage,
    broker_ids: Iterable[int],
    policy: ElectionPolicy = DEFAULT_POLICY,
    limit: int | None = None,
    start: tuple[str, int] | None = None,
) -> Steps[list[PartitionChange]]:
    """Controlled shutdown of `broker_ids` (Kafka's handleBrokerInControlledShutdown): their
    leaderships move away and they leave the ISRs. At most `limit` changes, the first in the
    stable order from `start` round: the rest are left to the next heartbeat (issue 35, see
    cluster_control.CONTROLLED_SHUTDOWN_BATCH). Each partition gets one change for every
    broker of `broker_ids` in it: brokers stopping together (`minikraft down`) are moved out
    of a partition in one record, not one record each."""
    shutting = frozenset(broker_ids)

    def affected(reg: PartitionRegistration) -> bool:
        return reg.leader in shutting or not shutting.isdisjoint(reg.isr)

    def operation(builder: PartitionChangeBuilder) -> PartitionChangeBuilder:
        for broker_id in sorted(shutting):
            builder.controlled_shutdown(broker_id)
        return builder

    return _broker_changes(image, policy, affected, operation, limit, start)


broker_controlled_shutdown_changes = drained(broker_controlled_shutdown_steps)


def partition_counts(
    image: MetadataImage,
    strategy_for: Callable[[str], Strategy | None] = lambda _: None,
    controller_id: int = -1,
) -> dict[str, int]:
    """The controller's partition gauges of `image` (partition_metrics.PartitionMetrics, which
    the runtime keeps between scrapes)."""
    return PartitionMetrics().counts(image, strategy_for, controller_id)


def electable_leaders(image: MetadataImage) -> list[tuple[str, int, int]]:
    """KIP-966's electable leaders metric: (topic, partition, size of ISR + ELR) per partition."""
    return PartitionMetrics().electable_leaders(image)


def leaderships(image: MetadataImage, broker_id: int) -> int:
    return sum(1 for _, _, reg in _partitions(image) if reg.leader == broker_id)


def _broker_changes(
    image: MetadataImage,
    policy: ElectionPolicy,
    affected: Callable[[PartitionRegistration], bool],
    operation: Callable[[PartitionChangeBuilder], PartitionChangeBuilder],
    limit: int | None = None,
    start: tuple[str, int] | None = None,
    fast: Callable[[_TopicBuilders, int], PartitionChange | None] | None = None,
) -> Steps[list[PartitionChange]]:
    """The changes of every affected partition (the first `limit` of them), in the stable
    order of _partitions, from `start` (topic name, partition id) round to just before it;
    yields every SLICE_PARTITIONS built and every SLICE_SCANNED looked at (issue 35).
    `fast`: the change without a builder where it can tell it (None: the builder decides)."""
    changes: list[PartitionChange] = []
    built = scanned = 0
    for name, low, high in _segments(image, start):
        if limit is not None and len(changes) >= limit:
            break
        topic = image.topics_by_name[name]
        builders: _TopicBuilders | None = None
        partitions = topic.partitions
        for partition_id in sorted(partitions):
            if not low <= partition_id < high:
                continue
            scanned += 1
            if scanned % SLICE_SCANNED == 0:
                yield
            if not affected(partitions[partition_id]):
                continue
            if builders is None:
                builders = _TopicBuilders(image, topic, policy)
            change = fast(builders, partition_id) if fast is not None else None
            if change is None:
                change = operation(builders.builder(partition_id)).build()
            if change.record is not None:
                changes.append(change)
                if limit is not None and len(changes) >= limit:
                    break
            built += 1
            if built % SLICE_PARTITIONS == 0:
                yield
    return changes


def _segments(
    image: MetadataImage, start: tuple[str, int] | None
) -> list[tuple[str, int, int]]:
    """(topic name, first partition id, end) in the stable order, rotated to begin at `start`:
    every partition exactly once."""
    names = sorted(image.topics_by_name)
    end = 1 << 31
    if start is None:
        return [(name, 0, end) for name in names]
    name, partition_id = start
    after = [n for n in names if n > name]
    before = [n for n in names if n < name]
    head = [(name, partition_id, end)] if name in image.topics_by_name else []
    tail = [(name, 0, partition_id)] if name in image.topics_by_name else []
    return head + [(n, 0, end) for n in after + before] + tail


# -- AlterPartition --------------------------------------------------------------------------


def alter_partition_steps(
    image: MetadataImage,
    request: AlterPartitionRequest,
    policy: ElectionPolicy = DEFAULT_POLICY,
) -> Steps[ControllerResult[AlterPartitionResponse]]:
    """controller.core.alter_partition (rule 18's order, in slices) under each topic's
    election policy."""
    return ap.alter_partition_steps(
        image,
        request,
        lambda topic: policy.for_topic(unclean_allowed(image, topic, policy.controller_id)),
    )


alter_partition = drained(alter_partition_steps)


# -- ElectLeaders ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ElectionTarget:
    topic: str
    partition_id: int
    designated_leader: int = NO_LEADER
    error: Errors = Errors.NONE
    message: str = ""


def elect_leaders(
    image: MetadataImage,
    request: am.ElectLeadersRequest,
    policy: ElectionPolicy = DEFAULT_POLICY,
) -> ControllerResult[am.ElectLeadersResponse]:
    """ElectLeaders v3 (older versions lifted by the runtime); a request refused as a whole
    answers its top-level error, and why goes to the controller's log (no v1+ field says it)."""
    try:
        election_type = ElectionType(request.election_type)
    except ValueError:
        election_type = ElectionType.ONLINE
    if election_type == ElectionType.ONLINE:
        return ControllerResult(
            (),
            am.elect_leaders_response(error=Errors.INVALID_REQUEST),
            message=f"unknown election type {request.election_type}",
        )
    if request.topic_partitions is None and election_type == ElectionType.DESIGNATED:
        return ControllerResult(
            (),
            am.elect_leaders_response(error=Errors.INVALID_REQUEST),
            message="a DESIGNATED election names its partitions and leaders",
        )
    changes: list[PartitionChange] = []
    by_topic: dict[str, list[am.ElectLeadersPartitionResult]] = {}
    served = 0
    every_partition = request.topic_partitions is None
    for target in _election_targets(image, request):
        results = by_topic.setdefault(target.topic, [])
        if target.error != Errors.NONE:
            results.append(_election_result(target.partition_id, target.error, target.message))
            continue
        if served >= constants.ELECT_LEADERS_MAX_PARTITIONS:
            results.append(
                _election_result(
                    target.partition_id,
                    Errors.REQUEST_LIMIT_REACHED,
                    f"at most {constants.ELECT_LEADERS_MAX_PARTITIONS} partitions per request",
                )
            )
            continue
        served += 1
        topic = image.topics_by_name[target.topic]
        change, result = _elect_one(image, topic, target, election_type, policy)
        if change is not None:
            changes.append(change)
        if every_partition and result.error_code == Errors.ELECTION_NOT_NEEDED:
            continue  # Kafka leaves partitions that already have their leader out of "all"
        results.append(result)
    response = am.elect_leaders_response(
        am.ElectLeadersTopicResult(topic=topic, partition_result=tuple(results))
        for topic, results in by_topic.items()
        if results
    )
    return ControllerResult(tuple(written_records(changes)), response, tuple(changes))


def _election_targets(
    image: MetadataImage, request: am.ElectLeadersRequest
) -> Iterable[_ElectionTarget]:
    if request.topic_partitions is None:
        for every_topic, partition_id, _ in _partitions(image):
            yield _ElectionTarget(every_topic.name, partition_id)
        return
    seen: set[tuple[str, int]] = set()
    for entry in request.topic_partitions:
        topic = image.topics_by_name.get(entry.topic)
        designated = entry.designated_leaders
        for index, partition in enumerate(entry.partitions):
            partition_id = int(partition)
            key = (entry.topic, partition_id)
            if key in seen:
                yield _ElectionTarget(
                    entry.topic, partition_id, error=Errors.INVALID_REQUEST, message="named twice"
                )
                continue
            seen.add(key)
            if topic is None or partition_id not in topic.partitions:
                # Kafka's words (ReplicationControlManager.electLeader), which its
                # kafka-leader-election prints.
                yield _ElectionTarget(
                    entry.topic,
                    partition_id,
                    error=Errors.UNKNOWN_TOPIC_OR_PARTITION,
                    message=f"No such topic as {entry.topic}" if topic is None
                    else f"No such partition as {entry.topic}-{partition_id}",
                )
                continue
            if designated is not None and index >= len(designated):
                yield _ElectionTarget(
                    entry.topic,
                    partition_id,
                    error=Errors.INVALID_REQUEST,
                    message="no designated leader for this partition",
                )
                continue
            leader = int(designated[index]) if designated is not None else NO_LEADER
            yield _ElectionTarget(entry.topic, partition_id, designated_leader=leader)


def _election_result(
    partition_id: int, error: Errors, message: str = "", leader: int = NO_LEADER
) -> am.ElectLeadersPartitionResult:
    return am.election_result(partition_id, error, message, leader)


def _elect_one(
    image: MetadataImage,
    topic: TopicImage,
    target: _ElectionTarget,
    election_type: ElectionType,
    policy: ElectionPolicy,
) -> tuple[PartitionChange | None, am.ElectLeadersPartitionResult]:
    """One partition's election; the builder's ElectionKind says whether it elected."""
    registration = topic.partitions[target.partition_id]
    pid = target.partition_id
    builder = builder_for(image, topic, pid, policy)
    if election_type == ElectionType.PREFERRED:
        preferred = registration.replicas[0] if registration.replicas else NO_LEADER
        if registration.leader == preferred:
            return None, _election_result(pid, Errors.ELECTION_NOT_NEEDED, "", preferred)
        change = builder.set_election_type(ElectionType.PREFERRED).build()
        if change.election is not ElectionKind.PREFERRED:
            # Only the preferred replica counts; nothing is written otherwise (Kafka).
            return None, _election_result(
                pid,
                Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                f"preferred replica {preferred} is not an unfenced ISR member",
                registration.leader,
            )
        return change, _election_result(pid, Errors.NONE, "", preferred)
    if election_type == ElectionType.DESIGNATED:
        error = designated_election_error(registration, target.designated_leader, image)
        if error is not None:
            return None, _election_result(
                pid,
                error,
                f"cannot elect broker {target.designated_leader}: "
                + designated_election_reason(registration, target.designated_leader, image),
                registration.leader,
            )
        builder.set_election_type(ElectionType.DESIGNATED, target.designated_leader)
    else:
        if registration.leader != NO_LEADER:
            return None, _election_result(pid, Errors.ELECTION_NOT_NEEDED, "", registration.leader)
        builder.set_election_type(ElectionType.UNCLEAN)
    change = builder.build()
    if change.record is None or change.election not in ELECTED_KINDS:
        return None, _election_result(
            pid, Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no unfenced replica to elect"
        )
    return change, _election_result(pid, Errors.NONE, "", change.record.leader)


# -- what a written change did, in a sentence (logs and metrics) -----------------------------

# How each election kind reads in the log; the kind itself comes from the builder.
_ELECTION_WORDS = {
    ElectionKind.CLEAN: ("ISR", "from ISR"),
    ElectionKind.PREFERRED: ("ISR", "from ISR (preferred)"),
    ElectionKind.ELR: ("ELR", "from ELR"),
    ElectionKind.LAST_KNOWN_LEADER: ("unclean", "uncleanly (LastKnownLeader, RECOVERING)"),
    ElectionKind.UNCLEAN: ("unclean", "uncleanly (RECOVERING)"),
    ElectionKind.DESIGNATED: ("unclean", "uncleanly (designated, RECOVERING)"),
}


@dataclass(frozen=True, slots=True)
class ChangeSummary:
    topic: str
    partition_id: int
    election: str  # "", "ISR", "ELR", "unclean", "offline"
    message: str


def election_label(kind: ElectionKind) -> str:
    """The `election` word summarize_change gives a change of this kind, without the image."""
    if kind in _ELECTION_WORDS:
        return _ELECTION_WORDS[kind][0]
    return "offline" if kind is ElectionKind.NO_LEADER else ""


def summarize_change(image: MetadataImage, change: PartitionChange) -> ChangeSummary | None:
    """Describe `change` against the image it was computed from (None for an unknown partition
    or an empty change); the election words follow the builder's ElectionKind."""
    record = change.record
    topic = None if record is None else image.topics.get(record.topic_id)
    if record is None or topic is None or record.partition_id not in topic.partitions:
        return None
    before = topic.partitions[record.partition_id]
    after = before.merge(record)
    name = f"{topic.name}-{record.partition_id}"
    if change.election in _ELECTION_WORDS:
        election, source = _ELECTION_WORDS[change.election]
        return ChangeSummary(
            topic.name,
            record.partition_id,
            election,
            f"Elected broker {after.leader} as leader of {name} {source}, "
            f"epoch {after.leader_epoch}; ISR {list(after.isr)}, ELR {list(after.elr)}",
        )
    if change.election is ElectionKind.NO_LEADER:
        return ChangeSummary(
            topic.name,
            record.partition_id,
            "offline",
            f"Partition {name} has no leader (was {before.leader}), epoch {after.leader_epoch}; "
            f"ELR {list(after.elr)}, LastKnownLeader {after.last_known_leader}",
        )
    return ChangeSummary(
        topic.name,
        record.partition_id,
        "",
        f"Changed {name}: ISR {list(before.isr)} -> {list(after.isr)}, "
        f"ELR {list(before.elr)} -> {list(after.elr)}, partition epoch {after.partition_epoch}",
    )
