"""Dynamic configs on the active controller (Kafka's ConfigurationControlManager).

Validates IncrementalAlterConfigs against the configs minikraft knows (INVALID_CONFIG otherwise),
refuses the min.insync.replicas changes ELR forbids (rule 15) and reads the configs elections
depend on (unclean.leader.election.enable, rule 13; the ELR feature level, rule 10). What a config
change does to partitions (rule 15's ELR clearing, elections once unclean is allowed) belongs to
replication_control; the caller hands it in as `partition_changes` (Kafka's
minIsrConfigUpdatePartitionHandler), so this module never imports replication_control.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from controller.core import messages as msg
from controller.core.controller_result import ControllerResult
from controller.core.election_policy import ElectionPolicy
from controller.core.metadata_image import (
    CLUSTER_DEFAULT_RESOURCE,
    MIN_INSYNC_REPLICAS,
    MetadataDelta,
    MetadataImage,
)
from controller.core.partition_change import PartitionChange, written_records
from controller.core.records import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
)
from kafkawire.errors import Errors
from kafkawire.topic import invalid_topic_reason

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
ELR_FEATURE = "eligible.leader.replicas.version"
CLEANUP_POLICY = "cleanup.policy"


# -- validation ---------------------------------------------------------------------------------


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


def election_policy(
    image: MetadataImage, elr_default: bool, recovery_manager: bool, controller_id: int = -1
) -> ElectionPolicy:
    """The cluster-wide ElectionPolicy the controller passes to every write (rules 10, 13-15):
    the image's ELR feature level (else the node's default), whether the recovery manager is
    on and the active controller's id; replication_control fills in each topic's unclean
    setting."""
    return ElectionPolicy(
        elr_enabled=elr_enabled(image, elr_default),
        recovery_manager=recovery_manager,
        controller_id=controller_id,
    )


def unclean_allowed(image: MetadataImage, topic_name: str, controller_id: int = -1) -> bool:
    """unclean.leader.election.enable, most specific first (rule 15): the topic, the node level
    of the active controller's own id (Kafka's currentControllerConfig), the cluster level;
    else false."""
    resources = [(CONFIG_RESOURCE_TOPIC, topic_name)]
    if controller_id >= 0:
        resources.append((CONFIG_RESOURCE_BROKER, str(controller_id)))
    resources.append((CONFIG_RESOURCE_BROKER, CLUSTER_DEFAULT_RESOURCE))
    for resource in resources:
        value = image.configs.get(resource, {}).get(UNCLEAN_LEADER_ELECTION_ENABLE)
        if value is not None:
            return value == "true"
    return False


# -- IncrementalAlterConfigs -----------------------------------------------------------------


# (image before, image with the config records replayed) -> the partition changes they cause.
PartitionChangesForConfigs = Callable[[MetadataImage, MetadataImage], Sequence[PartitionChange]]


def incremental_alter_configs(
    image: MetadataImage,
    request: msg.IncrementalAlterConfigsRequest,
    elr: bool = True,
    partition_changes: PartitionChangesForConfigs = lambda _before, _after: (),
    controller_id: int = -1,
) -> ControllerResult[msg.IncrementalAlterConfigsResponse]:
    """ConfigRecords for the accepted resources, then `partition_changes` of the image they make
    (rule 15), all in one batch so no reader sees the config without its ELR update.
    `controller_id` is the active controller's, whose node level takes
    unclean.leader.election.enable (rule 15)."""
    config_records: list[ConfigRecord] = []
    results = []
    for resource in request.resources:
        error, message, resource_records = _config_changes(image, resource, elr, controller_id)
        results.append(
            msg.AlterConfigsResourceResponse(
                resource.resource_type, resource.resource_name, error, message
            )
        )
        config_records.extend(resource_records)
    response = msg.IncrementalAlterConfigsResponse(responses=results)
    if request.validate_only or not config_records:
        return ControllerResult((), response)
    delta = MetadataDelta(image)
    for record in config_records:
        delta.replay(record, image.offset)  # a scratch image: what the configs will make it
    changes = tuple(partition_changes(image, delta.image()))
    records: list[MetadataRecord] = [*config_records, *written_records(changes)]
    return ControllerResult(tuple(records), response, changes)


def _config_changes(
    image: MetadataImage, resource: msg.AlterConfigsResource, elr: bool, controller_id: int
) -> tuple[int, str, list[ConfigRecord]]:
    if resource.resource_type == msg.RESOURCE_TYPE_TOPIC:
        # Kafka's ControllerConfigurationValidator, before the topic's existence.
        if not resource.resource_name:
            return Errors.INVALID_REQUEST, "Default topic resources are not allowed.", []
        invalid = invalid_topic_reason(resource.resource_name)
        if invalid is not None:
            return Errors.INVALID_TOPIC_EXCEPTION, invalid, []
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
        if name != CLUSTER_DEFAULT_RESOURCE and not (
            name.isdigit() and (int(name) in image.brokers or int(name) == controller_id)
        ):
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
            refusal = _broker_config_refusal(resource.resource_name, config, elr, controller_id)
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
    resource_name: str, config: msg.AlterableConfig, elr: bool, controller_id: int
) -> str | None:
    """Why a broker-resource change is refused (INVALID_CONFIG), or None.

    Rule 15: while ELR is enabled it relies on the cluster-level min.insync.replicas, so a
    broker-level set or delete and a cluster-level delete are refused (Kafka's messages). A key
    is accepted only at a level where it is honoured: the controller reads
    unclean.leader.election.enable from the topic, its own node level, then the cluster level,
    so that key is accepted at the active controller's id and refused at any other node's."""
    if config.name not in BROKER_CONFIGS:
        return None  # config_error names an unknown key
    own_node = controller_id >= 0 and resource_name == str(controller_id)
    if own_node and config.name == UNCLEAN_LEADER_ELECTION_ENABLE:
        return None
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
