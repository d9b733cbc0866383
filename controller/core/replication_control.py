"""Topics, partitions and elections on the active controller (Kafka's ReplicationControlManager).

Every function reads a committed MetadataImage and returns ControllerResult(records, response):
nothing changes until the records are committed and replayed (STYLE.md). Partition changes all go
through PartitionChangeBuilder, so rules 8-16 and 19 of INVARIANTS.md live in one place.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from controller.core import alter_partition as ap
from controller.core import messages as msg
from controller.core.controller_result import ControllerResult
from controller.core.metadata_image import (
    CLUSTER_DEFAULT_RESOURCE,
    MIN_INSYNC_REPLICAS,
    MetadataDelta,
    MetadataImage,
    TopicImage,
)
from controller.core.partition_change import (
    ElectionType,
    PartitionChangeBuilder,
    designated_election_error,
    designated_election_reason,
)
from controller.core.partition_registration import LeaderRecoveryState, PartitionRegistration
from controller.core.records import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    NO_LEADER,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from controller.core.unclean_recovery import Strategy, manual_election_required
from kafkawire.errors import Errors

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
ELR_FEATURE = "eligible.leader.replicas.version"
CLEANUP_POLICY = "cleanup.policy"
MAX_TOPIC_NAME_LENGTH = 249
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
METADATA_TOPIC = "__cluster_metadata"
# Rule 14: the controller sets this around each write while its recovery manager is enabled, so
# every builder leaves LastKnownLeader and unclean steps to the manager (one synchronous compute).
RECOVERY_MANAGER_ACTIVE: ContextVar[bool] = ContextVar("recovery_manager_active", default=False)


# -- configs ---------------------------------------------------------------------------------


def _int_at_least(minimum: int) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            number = int(value)
        except ValueError:
            return f"{value!r} is not an integer"
        return None if number >= minimum else f"{number} is below the minimum {minimum}"

    return check


def _boolean(value: str) -> str | None:
    return None if value in ("true", "false") else f"{value!r} is not true or false"


def _cleanup_policy(value: str) -> str | None:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if parts and all(p in ("delete", "compact") for p in parts):
        return None
    return f"{value!r} is not a list of delete, compact"


# The topic configs minikraft knows; anything else is INVALID_CONFIG (Kafka rejects unknown keys).
TOPIC_CONFIGS: dict[str, Callable[[str], str | None]] = {
    MIN_INSYNC_REPLICAS: _int_at_least(1),
    UNCLEAN_LEADER_ELECTION_ENABLE: _boolean,
    "retention.ms": _int_at_least(-1),
    "retention.bytes": _int_at_least(-1),
    "segment.bytes": _int_at_least(14),
    "max.message.bytes": _int_at_least(0),
    CLEANUP_POLICY: _cleanup_policy,
}
# Cluster-wide (resource name "") or per-broker dynamic configs the controller accepts.
BROKER_CONFIGS: dict[str, Callable[[str], str | None]] = {
    MIN_INSYNC_REPLICAS: _int_at_least(1),
    UNCLEAN_LEADER_ELECTION_ENABLE: _boolean,
}
_LIST_CONFIGS = frozenset({CLEANUP_POLICY})


def config_error(
    known: dict[str, Callable[[str], str | None]], name: str, value: str | None
) -> str | None:
    """Why a config value is rejected (INVALID_CONFIG), or None."""
    check = known.get(name)
    if check is None:
        return f"unknown config {name!r}"
    if value is None:
        return f"config {name!r} needs a value"
    reason = check(value)
    return None if reason is None else f"invalid value for {name}: {reason}"


def elr_enabled(image: MetadataImage, default: bool = True) -> bool:
    """The feature level when one was written (FeatureLevelRecord), else the node's default."""
    level = image.features.get(ELR_FEATURE)
    return default if level is None else level >= 1


def unclean_allowed(image: MetadataImage, topic_name: str) -> bool:
    """unclean.leader.election.enable: topic config, else the cluster default, else false."""
    for resource in (
        (CONFIG_RESOURCE_TOPIC, topic_name),
        (CONFIG_RESOURCE_BROKER, CLUSTER_DEFAULT_RESOURCE),
    ):
        value = image.configs.get(resource, {}).get(UNCLEAN_LEADER_ELECTION_ENABLE)
        if value is not None:
            return value == "true"
    return False


def builder_for(
    image: MetadataImage,
    topic: TopicImage,
    partition_id: int,
    elr: bool,
    unclean: bool | None = None,
) -> PartitionChangeBuilder:
    return PartitionChangeBuilder(
        topic.partitions[partition_id],
        topic.topic_id,
        partition_id,
        image,
        image.effective_min_isr(topic.topic_id, partition_id),  # rule 9
        elr_enabled=elr,
        unclean_allowed=unclean_allowed(image, topic.name) if unclean is None else unclean,
        recovery_manager=RECOVERY_MANAGER_ACTIVE.get(),
    )


def _partitions(image: MetadataImage) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    """Every partition in a stable order (topic name, partition id): records are deterministic."""
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        for partition_id in sorted(topic.partitions):
            yield topic, partition_id, topic.partitions[partition_id]


# -- CreateTopics ----------------------------------------------------------------------------


def topic_name_error(name: str) -> str | None:
    if not name or name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _TOPIC_NAME.fullmatch(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_', '-'"
    if name == METADATA_TOPIC:
        return f"{METADATA_TOPIC} is the metadata log"
    return None


def usable_brokers(image: MetadataImage) -> list[int]:
    """Brokers a new replica may be placed on: registered, unfenced, not shutting down."""
    return sorted(
        b.broker_id for b in image.brokers.values() if not b.fenced and not b.in_controlled_shutdown
    )


def place_replicas(
    brokers: list[int], num_partitions: int, replication_factor: int, start_index: int
) -> list[tuple[int, ...]]:
    """Round-robin placement: partition p starts at broker (start + p), then the next RF - 1, so
    leaders (first replicas) spread evenly and no broker holds two replicas of one partition."""
    count = len(brokers)
    return [
        tuple(brokers[(start_index + p + i) % count] for i in range(replication_factor))
        for p in range(num_partitions)
    ]


def create_topics(
    image: MetadataImage,
    request: msg.CreateTopicsRequest,
    new_topic_id: Callable[[], uuid.UUID],
) -> ControllerResult[msg.CreateTopicsResponse]:
    records: list[MetadataRecord] = []
    results: list[msg.CreatableTopicResult] = []
    brokers = usable_brokers(image)
    names = [t.name for t in request.topics]
    duplicates = {n for n in names if names.count(n) > 1}
    # Start where the last topic left off, so successive topics do not all lead on one broker.
    placed = sum(len(t.partitions) for t in image.topics.values())
    for topic in request.topics:
        error, message = _create_topic_error(image, topic, duplicates, brokers)
        if error is not None:
            results.append(
                msg.CreatableTopicResult(topic.name, error_code=error, error_message=message)
            )
            continue
        topic_id = new_topic_id()
        assignment = (
            [tuple(replicas) for replicas in topic.assignments]
            if topic.assignments
            else place_replicas(brokers, topic.num_partitions, topic.replication_factor, placed)
        )
        placed += topic.num_partitions
        results.append(
            msg.CreatableTopicResult(
                topic.name,
                topic_id=topic_id,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
            )
        )
        if request.validate_only:
            continue
        records.append(TopicRecord(topic.name, topic_id))
        for key in sorted(topic.configs):
            records.append(ConfigRecord(CONFIG_RESOURCE_TOPIC, topic.name, key, topic.configs[key]))
        for partition_id, replicas in enumerate(assignment):
            # Every replica is unfenced: the first leads, all are in the ISR (leader epoch 0).
            records.append(
                PartitionRecord(partition_id, topic_id, replicas, replicas, leader=replicas[0])
            )
    return ControllerResult(tuple(records), msg.CreateTopicsResponse(topics=results))


def _create_topic_error(
    image: MetadataImage,
    topic: msg.CreatableTopic,
    duplicates: set[str],
    brokers: list[int],
) -> tuple[int | None, str]:
    """Kafka's checks in Kafka's order; (error code, why) or (None, "")."""
    if topic.name in duplicates:
        return Errors.INVALID_REQUEST, f"topic {topic.name!r} appears more than once"
    reason = topic_name_error(topic.name)
    if reason is not None:
        return Errors.INVALID_TOPIC_EXCEPTION, reason
    if topic.name in image.topics_by_name:
        return Errors.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists"
    if topic.num_partitions <= 0:
        return Errors.INVALID_PARTITIONS, f"number of partitions {topic.num_partitions} is not > 0"
    if topic.replication_factor <= 0:
        return (
            Errors.INVALID_REPLICATION_FACTOR,
            f"replication factor {topic.replication_factor} is not > 0",
        )
    if topic.replication_factor > len(brokers):
        return (
            Errors.INVALID_REPLICATION_FACTOR,
            f"replication factor {topic.replication_factor} is larger than the "
            f"{len(brokers)} available broker(s)",
        )
    for partition_id, replicas in enumerate(topic.assignments):
        # Kafka's checks of a manual assignment: one replica set per partition, same size,
        # no broker twice, every broker registered.
        if len(replicas) != topic.replication_factor or len(set(replicas)) != len(replicas):
            return (
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"partition {partition_id}: replicas {replicas} are not "
                f"{topic.replication_factor} distinct brokers",
            )
        unknown = [b for b in replicas if b not in image.brokers]
        if unknown:
            return (
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"partition {partition_id}: brokers {unknown} are not registered",
            )
    if topic.assignments and len(topic.assignments) != topic.num_partitions:
        return Errors.INVALID_REPLICA_ASSIGNMENT, "one replica set per partition is needed"
    for key, value in sorted(topic.configs.items()):
        reason = config_error(TOPIC_CONFIGS, key, value)
        if reason is not None:
            return Errors.INVALID_CONFIG, reason
    return None, ""


# -- DeleteTopics ----------------------------------------------------------------------------


def delete_topics(
    image: MetadataImage, request: msg.DeleteTopicsRequest
) -> ControllerResult[msg.DeleteTopicsResponse]:
    records: list[MetadataRecord] = []
    results = []
    seen: set[str] = set()
    for name in request.topic_names:
        topic = image.topics_by_name.get(name)
        if name in seen:
            results.append(
                msg.DeletableTopicResult(
                    name, error_code=Errors.INVALID_REQUEST, error_message="named twice"
                )
            )
            continue
        seen.add(name)
        if topic is None:
            results.append(
                msg.DeletableTopicResult(
                    name,
                    error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"topic {name!r} does not exist",
                )
            )
            continue
        records.append(RemoveTopicRecord(topic.topic_id))  # replay drops its configs too
        results.append(msg.DeletableTopicResult(name, topic_id=topic.topic_id))
    return ControllerResult(tuple(records), msg.DeleteTopicsResponse(responses=results))


# -- IncrementalAlterConfigs -----------------------------------------------------------------


def incremental_alter_configs(
    image: MetadataImage, request: msg.IncrementalAlterConfigsRequest, elr: bool = True
) -> ControllerResult[msg.IncrementalAlterConfigsResponse]:
    config_records: list[ConfigRecord] = []
    results = []
    for resource in request.resources:
        error, message, changes = _config_changes(image, resource, elr)
        results.append(
            msg.AlterConfigsResourceResponse(
                resource.resource_type, resource.resource_name, error, message
            )
        )
        config_records.extend(changes)
    response = msg.IncrementalAlterConfigsResponse(responses=results)
    if request.validate_only or not config_records:
        return ControllerResult((), response)
    records: list[MetadataRecord] = list(config_records)
    records.extend(_partition_changes_after_configs(image, config_records, elr))
    return ControllerResult(tuple(records), response)


def _config_changes(
    image: MetadataImage, resource: msg.AlterConfigsResource, elr: bool = True
) -> tuple[int, str, list[ConfigRecord]]:
    if resource.resource_type == msg.RESOURCE_TYPE_TOPIC:
        if resource.resource_name not in image.topics_by_name:
            return (
                Errors.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {resource.resource_name!r} does not exist",
                [],
            )
        known = TOPIC_CONFIGS
        resource_type = CONFIG_RESOURCE_TOPIC
    elif resource.resource_type == msg.RESOURCE_TYPE_BROKER:
        name = resource.resource_name
        if name != CLUSTER_DEFAULT_RESOURCE and not (name.isdigit() and int(name) in image.brokers):
            return Errors.INVALID_REQUEST, f"broker {name!r} is not registered", []
        known = BROKER_CONFIGS
        resource_type = CONFIG_RESOURCE_BROKER
    else:
        return (
            Errors.INVALID_REQUEST,
            f"resource type {resource.resource_type} is not alterable",
            [],
        )
    current = dict(image.configs.get((resource_type, resource.resource_name), {}))
    updated = dict(current)
    for config in resource.configs:
        if resource_type == CONFIG_RESOURCE_BROKER:
            refusal = _broker_config_refusal(resource.resource_name, config, elr)
            if refusal is not None:
                return Errors.INVALID_CONFIG, refusal, []
        if config.config_operation == msg.OP_DELETE:
            if config.name not in known:
                return Errors.INVALID_CONFIG, f"unknown config {config.name!r}", []
            updated.pop(config.name, None)
            continue
        if config.config_operation == msg.OP_SET:
            value = config.value
        elif config.config_operation in (msg.OP_APPEND, msg.OP_SUBTRACT):
            if config.name not in _LIST_CONFIGS:
                return (
                    Errors.INVALID_CONFIG,
                    f"{config.name} is not a list config: APPEND/SUBTRACT do not apply",
                    [],
                )
            value = _list_op(updated.get(config.name, ""), config)
        else:
            return Errors.INVALID_REQUEST, f"unknown config operation {config.config_operation}", []
        reason = config_error(known, config.name, value)
        if reason is not None:
            return Errors.INVALID_CONFIG, reason, []
        assert value is not None  # config_error rejects a missing value
        updated[config.name] = value
    records = [
        ConfigRecord(resource_type, resource.resource_name, key, updated.get(key))
        for key in sorted(set(current) | set(updated))
        if current.get(key) != updated.get(key)
    ]
    return Errors.NONE, "", records


def _broker_config_refusal(
    resource_name: str, config: msg.AlterableConfig, elr: bool
) -> str | None:
    """Why a broker-resource change is refused (INVALID_CONFIG), or None.

    Rule 15: while ELR is enabled it relies on the cluster-level min.insync.replicas, so a
    broker-level set or delete and a cluster-level delete are refused (Kafka's messages). A key
    is accepted only at a level where it is honoured: the controller reads the topic, then the
    cluster-level value, never a single broker's, so broker-level keys are refused too."""
    if config.name not in BROKER_CONFIGS:
        return None  # config_error names an unknown key
    if resource_name != CLUSTER_DEFAULT_RESOURCE:
        if config.name == MIN_INSYNC_REPLICAS and elr:
            return f"Broker-level {MIN_INSYNC_REPLICAS} cannot be altered while ELR is enabled."
        return (
            f"Broker-level {config.name} is not supported: it is honoured per topic or "
            f"cluster-wide (the cluster-level broker resource)."
        )
    if config.name == MIN_INSYNC_REPLICAS and elr and config.config_operation == msg.OP_DELETE:
        return f"Cluster-level {MIN_INSYNC_REPLICAS} cannot be removed while ELR is enabled."
    return None


def _list_op(current: str, config: msg.AlterableConfig) -> str | None:
    items = [p.strip() for p in current.split(",") if p.strip()]
    given = [p.strip() for p in (config.value or "").split(",") if p.strip()]
    if config.config_operation == msg.OP_APPEND:
        items += [g for g in given if g not in items]
    else:
        items = [i for i in items if i not in given]
    return ",".join(items) if items else None


def _partition_changes_after_configs(
    image: MetadataImage, config_records: list[ConfigRecord], elr: bool
) -> list[PartitionChangeRecord]:
    """Rule 15 (a min ISR change clears ELR/LastKnownELR once ISR >= the new effective min ISR)
    and, when unclean election becomes allowed, elections for leaderless partitions."""
    delta = MetadataDelta(image)
    for record in config_records:
        delta.replay(record, image.offset)  # a scratch image: what the configs will make it
    after = delta.image()
    changes = []
    for topic, partition_id, _ in _partitions(after):
        if after.topic_min_insync_replicas(topic.name) == image.topic_min_insync_replicas(
            topic.name
        ) and unclean_allowed(after, topic.name) == unclean_allowed(image, topic.name):
            continue
        # A plain build re-derives ELR for the new min ISR and re-runs a leaderless election.
        change = builder_for(after, topic, partition_id, elr).build()
        if change is not None:
            changes.append(change)
    return changes


# -- broker lifecycle effects on partitions (rules 10-13, 16) --------------------------------


def broker_fenced_changes(
    image: MetadataImage, broker_id: int, elr: bool = True
) -> list[PartitionChangeRecord]:
    """Rule 12: the fenced broker leaves every ISR (ELR on), keeps its ELR membership, and its
    partitions elect another leader per rule 13."""
    return _broker_changes(
        image,
        elr,
        lambda reg: broker_id in reg.isr or reg.leader == broker_id,
        lambda builder: builder.fence_broker(broker_id),
    )


def broker_unfenced_changes(
    image: MetadataImage, broker_id: int, elr: bool = True
) -> list[PartitionChangeRecord]:
    """Rule 16: unfencing re-runs the election of every leaderless partition it hosts."""
    return _broker_changes(
        image,
        elr,
        lambda reg: broker_id in reg.replicas and reg.leader == NO_LEADER,
        lambda builder: builder.unfence_broker(broker_id),
    )


def broker_restart_changes(
    image: MetadataImage, broker_id: int, clean: bool, elr: bool = True
) -> list[PartitionChangeRecord]:
    """Rule 12: a clean restart keeps ELR membership; an unclean one leaves ISR and ELR (an ELR
    member moves to LastKnownELR, rule 11)."""

    def apply(builder: PartitionChangeBuilder) -> PartitionChangeBuilder:
        if clean:
            return builder.clean_restart(broker_id)
        return builder.unclean_restart(broker_id)

    return _broker_changes(
        image,
        elr,
        lambda reg: broker_id in reg.isr or broker_id in reg.elr or reg.leader == broker_id,
        apply,
    )


def broker_controlled_shutdown_changes(
    image: MetadataImage, broker_id: int, elr: bool = True
) -> list[PartitionChangeRecord]:
    """Controlled shutdown: leadership moves away first and the broker leaves the ISRs."""
    return _broker_changes(
        image,
        elr,
        lambda reg: broker_id in reg.isr or reg.leader == broker_id,
        lambda builder: builder.controlled_shutdown(broker_id),
    )


def partition_counts(
    image: MetadataImage, strategy_for: Callable[[str], Strategy | None] = lambda _: None
) -> dict[str, int]:
    """OfflinePartitionsCount, global_under_min_isr_partition_count (rule 9's min ISR) and
    manual_leader_election_required_partition_count (KIP-966); `strategy_for(topic)` is the
    recovery manager's strategy, None while the manager is off."""
    offline = under_min_isr = manual = 0
    for topic, partition_id, reg in _partitions(image):
        if reg.leader == NO_LEADER:
            offline += 1
            if manual_election_required(
                reg, unclean_allowed(image, topic.name), strategy_for(topic.name)
            ):
                manual += 1
        if len(reg.isr) < image.effective_min_isr(topic.topic_id, partition_id):
            under_min_isr += 1
    return {
        "offline_partitions": offline,
        "under_min_isr_partitions": under_min_isr,
        "manual_leader_election_required_partitions": manual,
    }


def electable_leaders(image: MetadataImage) -> list[tuple[str, int, int]]:
    """KIP-966's electable leaders metric: (topic, partition, size of ISR + ELR) per partition."""
    return [
        (topic.name, partition_id, len(reg.isr) + len(reg.elr))
        for topic, partition_id, reg in _partitions(image)
    ]


def leaderships(image: MetadataImage, broker_id: int) -> int:
    return sum(1 for _, _, reg in _partitions(image) if reg.leader == broker_id)


def _broker_changes(
    image: MetadataImage,
    elr: bool,
    affected: Callable[[PartitionRegistration], bool],
    operation: Callable[[PartitionChangeBuilder], PartitionChangeBuilder],
) -> list[PartitionChangeRecord]:
    changes = []
    for topic, partition_id, registration in _partitions(image):
        if not affected(registration):
            continue
        change = operation(builder_for(image, topic, partition_id, elr)).build()
        if change is not None:
            changes.append(change)
    return changes


# -- AlterPartition --------------------------------------------------------------------------


def alter_partition(
    image: MetadataImage, request: msg.AlterPartitionRequest, elr: bool = True
) -> ControllerResult[msg.AlterPartitionResponse]:
    """The wire request through controller.core.alter_partition (rule 18's order)."""
    core_request = ap.AlterPartitionRequest(
        request.broker_id,
        request.broker_epoch,
        tuple(
            ap.AlterPartitionTopic(
                t.topic_id,
                tuple(
                    ap.AlterPartitionPartition(
                        p.partition_index,
                        p.leader_epoch,
                        tuple(
                            ap.BrokerState(b.broker_id, b.broker_epoch)
                            for b in p.new_isr_with_epochs
                        ),
                        p.leader_recovery_state,
                        p.partition_epoch,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )
    result = ap.alter_partition(
        image, core_request, elr_enabled=elr, unclean_allowed=lambda n: unclean_allowed(image, n)
    )
    core = result.response
    if core.error != Errors.NONE:
        return ControllerResult(
            result.records,
            msg.AlterPartitionResponse(
                error_code=core.error, error_message=_alter_partition_message(image, request)
            ),
        )
    response = msg.AlterPartitionResponse(
        topics=[
            msg.AlterPartitionTopicResult(
                t.topic_id,
                [
                    msg.AlterPartitionPartitionResult(
                        p.partition_index,
                        error_code=p.error,
                        leader_id=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        isr=list(p.isr),
                        leader_recovery_state=p.leader_recovery_state,
                        partition_epoch=p.partition_epoch,
                    )
                    for p in t.partitions
                ],
            )
            for t in core.topics
        ]
    )
    return ControllerResult(result.records, response)


def _alter_partition_message(image: MetadataImage, request: msg.AlterPartitionRequest) -> str:
    registered = image.broker_epoch(request.broker_id)
    return (
        f"broker {request.broker_id} sent epoch {request.broker_epoch}, "
        f"registered epoch is {registered if registered is not None else 'none'}"
    )


# -- ElectLeaders ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ElectionTarget:
    topic: str
    partition_id: int
    designated_leader: int = NO_LEADER
    error: Errors = Errors.NONE
    message: str = ""


def elect_leaders(
    image: MetadataImage, request: msg.ElectLeadersRequest, elr: bool = True
) -> ControllerResult[msg.ElectLeadersResponse]:
    try:
        election_type = ElectionType(request.election_type)
    except ValueError:
        election_type = ElectionType.ONLINE
    if election_type == ElectionType.ONLINE:
        return ControllerResult(
            (),
            msg.ElectLeadersResponse(
                error_code=Errors.INVALID_REQUEST,
                error_message=f"unknown election type {request.election_type}",
            ),
        )
    if request.topic_partitions is None and election_type == ElectionType.DESIGNATED:
        return ControllerResult(
            (),
            msg.ElectLeadersResponse(
                error_code=Errors.INVALID_REQUEST,
                error_message="a DESIGNATED election names its partitions and leaders",
            ),
        )
    records: list[MetadataRecord] = []
    by_topic: dict[str, list[msg.ElectLeadersPartitionResult]] = {}
    served = 0
    every_partition = request.topic_partitions is None
    for target in _election_targets(image, request):
        results = by_topic.setdefault(target.topic, [])
        if target.error != Errors.NONE:
            results.append(_election_result(target.partition_id, target.error, target.message))
            continue
        if served >= msg.ELECT_LEADERS_MAX_PARTITIONS:
            results.append(
                _election_result(
                    target.partition_id,
                    Errors.REQUEST_LIMIT_REACHED,
                    f"at most {msg.ELECT_LEADERS_MAX_PARTITIONS} partitions per request",
                )
            )
            continue
        served += 1
        topic = image.topics_by_name[target.topic]
        change, result = _elect_one(image, topic, target, election_type, elr)
        if change is not None:
            records.append(change)
        if every_partition and result.error_code == Errors.ELECTION_NOT_NEEDED:
            continue  # Kafka leaves partitions that already have their leader out of "all"
        results.append(result)
    response = msg.ElectLeadersResponse(
        replica_election_results=[
            msg.ElectLeadersTopicResult(topic, results)
            for topic, results in by_topic.items()
            if results
        ]
    )
    return ControllerResult(tuple(records), response)


def _election_targets(
    image: MetadataImage, request: msg.ElectLeadersRequest
) -> Iterable[_ElectionTarget]:
    if request.topic_partitions is None:
        for every_topic, partition_id, _ in _partitions(image):
            yield _ElectionTarget(every_topic.name, partition_id)
        return
    seen: set[tuple[str, int]] = set()
    for entry in request.topic_partitions:
        topic = image.topics_by_name.get(entry.topic)
        designated = entry.designated_leaders
        for index, partition_id in enumerate(entry.partitions):
            key = (entry.topic, partition_id)
            if key in seen:
                yield _ElectionTarget(
                    entry.topic, partition_id, error=Errors.INVALID_REQUEST, message="named twice"
                )
                continue
            seen.add(key)
            if topic is None or partition_id not in topic.partitions:
                yield _ElectionTarget(
                    entry.topic,
                    partition_id,
                    error=Errors.UNKNOWN_TOPIC_OR_PARTITION,
                    message=f"{entry.topic}-{partition_id} does not exist",
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
            leader = designated[index] if designated is not None else NO_LEADER
            yield _ElectionTarget(entry.topic, partition_id, designated_leader=leader)


def _election_result(
    partition_id: int, error: Errors, message: str = "", leader: int = NO_LEADER
) -> msg.ElectLeadersPartitionResult:
    return msg.ElectLeadersPartitionResult(partition_id, int(error), message, leader)


def _elect_one(
    image: MetadataImage,
    topic: TopicImage,
    target: _ElectionTarget,
    election_type: ElectionType,
    elr: bool,
) -> tuple[PartitionChangeRecord | None, msg.ElectLeadersPartitionResult]:
    registration = topic.partitions[target.partition_id]
    pid = target.partition_id
    builder = builder_for(image, topic, pid, elr)
    if election_type == ElectionType.PREFERRED:
        preferred = registration.replicas[0] if registration.replicas else NO_LEADER
        if registration.leader == preferred:
            return None, _election_result(pid, Errors.ELECTION_NOT_NEEDED, "", preferred)
        change = builder.set_election_type(ElectionType.PREFERRED).build()
        if change is None or registration.merge(change).leader != preferred:
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
    after = registration if change is None else registration.merge(change)
    if after.leader == NO_LEADER:
        return None, _election_result(
            pid, Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no unfenced replica to elect"
        )
    return change, _election_result(pid, Errors.NONE, "", after.leader)


# -- DescribeTopicPartitions -----------------------------------------------------------------


def describe_topic_partitions(
    image: MetadataImage,
    request: msg.DescribeTopicPartitionsRequest,
    server_limit: int = msg.DESCRIBE_PARTITIONS_DEFAULT_LIMIT,
) -> ControllerResult[msg.DescribeTopicPartitionsResponse]:
    """Seed 001's pagination: topics by name, partitions by index, at most the smaller of the
    request's and the server's limit; the cursor names the first partition not sent."""
    limit = request.response_partition_limit
    limit = server_limit if limit <= 0 else min(limit, server_limit)
    names = sorted(set(request.topics)) if request.topics else sorted(image.topics_by_name)
    cursor = request.cursor
    topics: list[msg.DescribeTopicPartitionsTopic] = []
    count = 0
    next_cursor: msg.Cursor | None = None
    for name in names:
        if cursor is not None and name < cursor.topic_name:
            continue
        if count >= limit:
            next_cursor = msg.Cursor(name, 0)
            break
        topic = image.topics_by_name.get(name)
        if topic is None:
            topics.append(
                msg.DescribeTopicPartitionsTopic(name, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION)
            )
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        partitions = []
        for partition_id in sorted(p for p in topic.partitions if p >= start):
            if count >= limit:
                next_cursor = msg.Cursor(name, partition_id)
                break
            partitions.append(
                _describe_partition(image, partition_id, topic.partitions[partition_id])
            )
            count += 1
        topics.append(
            msg.DescribeTopicPartitionsTopic(
                name,
                topic_id=topic.topic_id,
                partitions=partitions,
                min_insync_replicas=image.topic_min_insync_replicas(name),
            )
        )
        if next_cursor is not None:
            break
    response = msg.DescribeTopicPartitionsResponse(topics=topics, next_cursor=next_cursor)
    return ControllerResult((), response)  # a read: nothing to write


def _describe_partition(
    image: MetadataImage, partition_id: int, reg: PartitionRegistration
) -> msg.DescribeTopicPartitionsPartition:
    return msg.DescribeTopicPartitionsPartition(
        partition_id,
        leader_id=reg.leader,
        leader_epoch=reg.leader_epoch,
        replica_nodes=list(reg.replicas),
        isr_nodes=list(reg.isr),
        eligible_leader_replicas=list(reg.elr),
        last_known_elr=list(reg.last_known_elr),
        offline_replicas=[r for r in reg.replicas if image.is_fenced(r)],
        partition_epoch=reg.partition_epoch,
        last_known_leader=reg.last_known_leader,
        leader_recovery_state=int(reg.leader_recovery_state),
    )


# -- what a written change did, in a sentence (logs and metrics) -----------------------------


@dataclass(frozen=True, slots=True)
class ChangeSummary:
    topic: str
    partition_id: int
    election: str  # "", "ISR", "ELR", "unclean", "offline"
    message: str


def summarize_change(image: MetadataImage, change: PartitionChangeRecord) -> ChangeSummary | None:
    """Describe `change` against the image it was computed from (None for an unknown partition)."""
    topic = image.topics.get(change.topic_id)
    if topic is None or change.partition_id not in topic.partitions:
        return None
    before = topic.partitions[change.partition_id]
    after = before.merge(change)
    name = f"{topic.name}-{change.partition_id}"
    if after.leader != before.leader and after.leader != NO_LEADER:
        if (
            after.leader_recovery_state == LeaderRecoveryState.RECOVERING
            and after.leader not in before.isr
        ):
            election, source = "unclean", "uncleanly (RECOVERING)"
        elif after.leader in before.isr:
            election, source = "ISR", "from ISR"
        elif after.leader in before.elr:
            election, source = "ELR", "from ELR"
        else:
            election, source = "unclean", "uncleanly"
        return ChangeSummary(
            topic.name,
            change.partition_id,
            election,
            f"Elected broker {after.leader} as leader of {name} {source}, "
            f"epoch {after.leader_epoch}; ISR {list(after.isr)}, ELR {list(after.elr)}",
        )
    if after.leader == NO_LEADER and before.leader != NO_LEADER:
        return ChangeSummary(
            topic.name,
            change.partition_id,
            "offline",
            f"Partition {name} has no leader (was {before.leader}), epoch {after.leader_epoch}; "
            f"ELR {list(after.elr)}, LastKnownLeader {after.last_known_leader}",
        )
    return ChangeSummary(
        topic.name,
        change.partition_id,
        "",
        f"Changed {name}: ISR {list(before.isr)} -> {list(after.isr)}, "
        f"ELR {list(before.elr)} -> {list(after.elr)}, partition epoch {after.partition_epoch}",
    )
