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

from controller.core.controller_result import ControllerResult
from controller.core.election_policy import ElectionPolicy
from controller.core.partition_change import PartitionChange, written_records
from kafkawire import admin_messages as am
from kafkawire import constants
from kafkawire.errors import Errors
from kafkawire.topic import invalid_topic_reason
from metadata.config_defs import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    UNCLEAN_LEADER_ELECTION_ENABLE,
    ConfigType,
)
from metadata.features import ELR_VERSION
from metadata.metadata_image import (
    CLUSTER_DEFAULT_RESOURCE,
    MIN_INSYNC_REPLICAS,
    MetadataDelta,
    MetadataImage,
)
from metadata.records import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
)

# -- validation (the table: metadata.config_defs) -------------------------------------


def topic_config_error(name: str, value: str | None) -> str | None:
    """Why a topic config is refused (INVALID_CONFIG), or None: Kafka's message for an unknown
    name or a bad value, minikraft's for a value it cannot honour (config_defs.not_built)."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        return f"Unknown topic config name: {name}"
    return definition.value_error(value)


def broker_config_error(name: str, value: str | None) -> tuple[Errors, str] | None:
    """Why a dynamic broker config is refused, or None. A config Kafka knows but cannot change
    at runtime is INVALID_REQUEST with Kafka's message (ConfigAdminManager wraps
    DynamicBrokerConfig's ConfigException, KAFKA-13609); a key minikraft does not know is
    INVALID_CONFIG (Kafka would store it for plugins; here nothing would read it)."""
    definition = BROKER_CONFIGS.get(name)
    if definition is None:
        return Errors.INVALID_CONFIG, f"Unknown broker config name: {name}"
    if not definition.dynamic:
        return Errors.INVALID_REQUEST, f"Cannot update these configs dynamically: [{name}]"
    if value is None:
        return None  # a delete: back to the level below
    reason = definition.value_error(value)
    return None if reason is None else (Errors.INVALID_CONFIG, reason)


def elr_enabled(image: MetadataImage, default: bool = True) -> bool:
    """The feature level when one was written (FeatureLevelRecord), else the node's default."""
    level = image.features.get(ELR_VERSION)
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
    request: am.IncrementalAlterConfigsRequest,
    elr: bool = True,
    partition_changes: PartitionChangesForConfigs = lambda _before, _after: (),
    controller_id: int = -1,
) -> ControllerResult[am.IncrementalAlterConfigsResponse]:
    """ConfigRecords for the accepted resources, then `partition_changes` of the image they make
    (rule 15), all in one batch so no reader sees the config without its ELR update.
    `controller_id` is the active controller's, whose node level takes
    unclean.leader.election.enable (rule 15)."""
    return _alter_configs(
        image, request.resources, request.validate_only, elr, partition_changes, controller_id
    )


def legacy_alter_configs(
    image: MetadataImage,
    request: am.AlterConfigsRequest,
    elr: bool = True,
    partition_changes: PartitionChangesForConfigs = lambda _before, _after: (),
    controller_id: int = -1,
) -> ControllerResult[am.IncrementalAlterConfigsResponse]:
    """AlterConfigs (api 33, Kafka's legacyAlterConfigs): each resource's configs are replaced
    by the ones given, so a key left out is deleted; same validation and rule 15 as the
    incremental API (a cluster-level min.insync.replicas left out is a removal)."""
    return _alter_configs(
        image,
        request.resources,
        request.validate_only,
        elr,
        partition_changes,
        controller_id,
        legacy=True,
    )


def _alter_configs(
    image: MetadataImage,
    resources: Sequence[am.AlterConfigsResource | am.LegacyAlterConfigsResource],
    validate_only: bool,
    elr: bool,
    partition_changes: PartitionChangesForConfigs,
    controller_id: int,
    *,
    legacy: bool = False,
) -> ControllerResult[am.IncrementalAlterConfigsResponse]:
    config_records: list[ConfigRecord] = []
    results = []
    seen = [(r.resource_type, r.resource_name) for r in resources]
    for resource in resources:
        error: int
        resource_records: list[ConfigRecord]
        if seen.count((resource.resource_type, resource.resource_name)) > 1:
            error, message, resource_records = (
                Errors.INVALID_REQUEST, "Each resource must appear at most once.", []
            )
        else:
            error, message, resource_records = _config_changes(
                image, resource, elr, controller_id, legacy
            )
        results.append(
            am.config_resource_result(
                resource.resource_type, resource.resource_name, error, message
            )
        )
        config_records.extend(resource_records)
    response = am.incremental_alter_configs_response(results)
    if validate_only or not config_records:
        return ControllerResult((), response)
    delta = MetadataDelta(image)
    for record in config_records:
        delta.replay(record, image.offset)  # a scratch image: what the configs will make it
    changes = tuple(partition_changes(image, delta.image()))
    records: list[MetadataRecord] = [*config_records, *written_records(changes)]
    return ControllerResult(tuple(records), response, changes)


def _config_changes(
    image: MetadataImage,
    resource: am.AlterConfigsResource | am.LegacyAlterConfigsResource,
    elr: bool,
    controller_id: int,
    legacy: bool = False,
) -> tuple[int, str, list[ConfigRecord]]:
    if resource.resource_type == constants.CONFIG_RESOURCE_TOPIC:
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
        resource_type = CONFIG_RESOURCE_TOPIC
    elif resource.resource_type == constants.CONFIG_RESOURCE_BROKER:
        name = resource.resource_name
        if name != CLUSTER_DEFAULT_RESOURCE and not (
            name.isdigit() and (int(name) in image.brokers or int(name) == controller_id)
        ):
            return Errors.INVALID_REQUEST, f"broker {name!r} is not registered", []
        resource_type = CONFIG_RESOURCE_BROKER
    else:
        return (
            Errors.INVALID_REQUEST,
            f"resource type {resource.resource_type} is not alterable",
            [],
        )
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        return Errors.INVALID_REQUEST, "Error due to duplicate config keys", []
    nulls = [
        c.name
        for c in resource.configs
        if c.value is None and _operation(c) != constants.OP_DELETE
    ]
    if nulls:
        return Errors.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}", []
    current = dict(image.configs.get((resource_type, resource.resource_name), {}))
    updated = {} if legacy else dict(current)
    for config in resource.configs:
        operation = _operation(config)
        if operation in (constants.OP_SET, constants.OP_DELETE):
            value = config.value if operation == constants.OP_SET else None
        elif operation in (constants.OP_APPEND, constants.OP_SUBTRACT):
            definition = (
                TOPIC_CONFIGS if resource_type == CONFIG_RESOURCE_TOPIC else BROKER_CONFIGS
            ).get(config.name)
            if definition is None or definition.type is not ConfigType.LIST:
                verb = "APPEND" if operation == constants.OP_APPEND else "SUBTRACT"
                return (
                    Errors.INVALID_CONFIG,
                    f"Can't {verb} to key {config.name} because its type is not LIST.",
                    [],
                )
            value = _list_op(updated.get(config.name, definition.default or ""), operation, config.value)
        else:
            return Errors.INVALID_REQUEST, f"Unknown operations type {operation}", []
        if value is None:
            updated.pop(config.name, None)
        else:
            updated[config.name] = value
    changed = {k for k in set(current) | set(updated) if current.get(k) != updated.get(k)}
    if resource_type == CONFIG_RESOURCE_BROKER:
        # Kafka writes a broker key named in the request even when unchanged (KAFKA-14136),
        # and judges it like any other: a delete of an unset broker-level min ISR is refused.
        changed |= set(names)
    for key in sorted(changed):
        refusal = _refusal(
            resource_type, resource.resource_name, key, updated.get(key), elr, controller_id
        )
        if refusal is not None:
            return (*refusal, [])
    records = [
        ConfigRecord(resource_type, resource.resource_name, key, updated.get(key))
        for key in sorted(changed)
    ]
    return Errors.NONE, "", records


def _refusal(
    resource_type: int,
    resource_name: str,
    key: str,
    value: str | None,
    elr: bool,
    controller_id: int,
) -> tuple[Errors, str] | None:
    """Why setting (value) or removing (None) one key of the resource is refused, or None."""
    if resource_type == CONFIG_RESOURCE_TOPIC:
        if value is None:
            return None  # Kafka deletes any key, known or not: the default applies again
        reason = topic_config_error(key, value)
        return None if reason is None else (Errors.INVALID_CONFIG, reason)
    controller_read = _controller_broker_config_refusal(
        resource_name, key, value, elr, controller_id
    )
    if controller_read is not None:
        return Errors.INVALID_CONFIG, controller_read
    return broker_config_error(key, value)


# Broker-level configs the active controller reads (rules 13-15); the others are read by each
# broker for its own id and the cluster default (config_defs.BrokerLevels).
_CONTROLLER_READ = frozenset({MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION_ENABLE})


def _controller_broker_config_refusal(
    resource_name: str, key: str, value: str | None, elr: bool, controller_id: int
) -> str | None:
    """Why a broker-resource change is refused (INVALID_CONFIG), or None.

    Rule 15: while ELR is enabled it relies on the cluster-level min.insync.replicas, so a
    broker-level set or delete and a cluster-level delete are refused (Kafka's messages). A key
    is accepted only at a level where it is honoured: the controller reads
    unclean.leader.election.enable from the topic, its own node level, then the cluster level,
    so that key is accepted at the active controller's id and refused at any other node's."""
    if key not in _CONTROLLER_READ:
        return None
    own_node = controller_id >= 0 and resource_name == str(controller_id)
    if own_node and key == UNCLEAN_LEADER_ELECTION_ENABLE:
        return None
    if resource_name != CLUSTER_DEFAULT_RESOURCE:
        if key == MIN_INSYNC_REPLICAS and elr:
            return f"Broker-level {MIN_INSYNC_REPLICAS} cannot be altered while ELR is enabled."
        return (
            f"Broker-level {key} is not supported: it is honoured per topic or "
            f"cluster-wide (the cluster-level broker resource)."
        )
    if key == MIN_INSYNC_REPLICAS and elr and value is None:
        return f"Cluster-level {MIN_INSYNC_REPLICAS} cannot be removed while ELR is enabled."
    return None


def _operation(config: am.AlterableConfig | am.LegacyAlterableConfig) -> int:
    """AlterConfigs (33) has no operation: each config given is SET."""
    if isinstance(config, am.AlterableConfig):
        return int(config.config_operation)
    return constants.OP_SET


def _list_op(current: str, operation: int, value: str | None) -> str | None:
    items = [p.strip() for p in current.split(",") if p.strip()]
    given = [p.strip() for p in (value or "").split(",") if p.strip()]
    if operation == constants.OP_APPEND:
        items += [g for g in given if g not in items]
    else:
        items = [i for i in items if i not in given]
    return ",".join(items)
