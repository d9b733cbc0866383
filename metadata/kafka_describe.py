"""The admin reads answered from a committed metadata image on Kafka's protocol, by brokers and
controllers alike (Kafka answers DescribeConfigs, DescribeTopicPartitions and DescribeCluster on
the node asked, never forwarded): kio request in, kio response of the same version out.

DescribeTopicPartitions pages as seed 001 says, capped by `max.request.partition.size.limit`,
here for both node kinds.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafkawire import topic as topic_names
from kafkawire.api_keys import ApiKey
from kafkawire.authorized_operations import CLUSTER_OPERATIONS, NOT_REQUESTED, TOPIC_OPERATIONS
from kafkawire.config import NodeConfig
from kafkawire.constants import ZERO_UUID
from kafkawire.entities import NO_THROTTLE, build, has_field, item_type
from kafkawire.errors import Errors
from kafkawire.messages import error_code, response_schema
from kafkawire.topic import invalid_topic_reason
from metadata.config_defs import (
    BrokerLevels,
    ConfigSource,
    ConfigType,
    ConfigValue,
    broker_config_values,
    topic_config_values,
)
from metadata.metadata_image import CLUSTER_DEFAULT_RESOURCE, MetadataImage, TopicImage
from metadata.partition_registration import PartitionRegistration
from metadata.records import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC

DESCRIBE_PARTITIONS_DEFAULT_LIMIT = 2000  # seed 001: max.request.partition.size.limit
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2  # KIP-919: DescribeCluster to controllers lists controllers


def live_brokers(
    image: MetadataImage, listener_name: str | None, *, include_fenced: bool = False
) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of unfenced brokers with an endpoint on the listener (None: their
    first endpoint): what Metadata and DescribeCluster list (Kafka lists alive brokers).
    `include_fenced`: registered fenced brokers too (DescribeCluster v2, KIP-1073)."""
    rows = []
    for reg in sorted(image.brokers.values(), key=lambda r: r.broker_id):
        if reg.fenced and not include_fenced:
            continue
        for endpoint in reg.endpoints:
            if listener_name is None or endpoint.name == listener_name:
                rows.append((reg.broker_id, endpoint.host, endpoint.port, reg.rack))
                break
    return rows


def fenced_broker_ids(image: MetadataImage) -> frozenset[int]:
    return frozenset(r.broker_id for r in image.brokers.values() if r.fenced)


def unfenced_broker_ids(image: MetadataImage) -> frozenset[int]:
    """The registered, unfenced brokers: any other replica is offline (image.is_fenced)."""
    return frozenset(r.broker_id for r in image.brokers.values() if not r.fenced)


def describe_cluster(
    version: int,
    cluster_id: str,
    controller_id: int,
    nodes: list[tuple[int, str, int, str | None]],
    endpoint_type: int = ENDPOINT_TYPE_BROKER,
    fenced: frozenset[int] = frozenset(),
    include_authorized_operations: bool = False,
) -> Any:
    """`fenced`: node ids listed as IsFenced (v2+; they are listed only when asked for).
    `include_authorized_operations`: the cluster's operations, every one (no authorizer)."""
    schema = response_schema(int(ApiKey.DESCRIBE_CLUSTER), version)
    broker_cls = item_type(schema, "brokers")
    return build(
        schema,
        throttle_time=NO_THROTTLE,
        error_code=error_code(Errors.NONE),
        error_message=None,
        endpoint_type=endpoint_type,
        cluster_id=cluster_id,
        controller_id=controller_id,
        cluster_authorized_operations=CLUSTER_OPERATIONS
        if include_authorized_operations
        else NOT_REQUESTED,
        brokers=tuple(
            build(broker_cls, broker_id=n, host=host, port=port, rack=rack, is_fenced=n in fenced)
            for n, host, port, rack in nodes
        ),
    )


def describe_topic_partitions(image: MetadataImage, body: Any, server_limit: int) -> Any:
    """DescribeTopicPartitions v0 with minikraft's tagged additions (partition epoch,
    LastKnownLeader, LeaderRecoveryState, the topic's min.insync.replicas). Seed 001's
    pagination: topics by name, partitions by index, at most the smaller of the request's and
    the server's limit (`max.request.partition.size.limit`); the cursor names the first
    partition not sent. A read: both node kinds answer from their committed image."""
    schema = response_schema(int(ApiKey.DESCRIBE_TOPIC_PARTITIONS), 0)
    topic_cls = item_type(schema, "topics")
    partition_cls = item_type(topic_cls, "partitions")
    cursor_cls = item_type(schema, "next_cursor")
    limit = int(body.response_partition_limit)
    limit = server_limit if limit <= 0 else min(limit, server_limit)
    asked = [str(t.name) for t in body.topics]
    names = sorted(set(asked)) if asked else sorted(image.topics_by_name)
    cursor = body.cursor
    topics: list[Any] = []
    count = 0
    next_cursor: tuple[str, int] | None = None
    for name in names:
        if cursor is not None and name < cursor.topic_name:
            continue
        if count >= limit:
            next_cursor = (name, 0)
            break
        topic = image.topics_by_name.get(name)
        if topic is None:
            # Kafka's KRaftMetadataCache: a name no topic could have is INVALID_TOPIC_EXCEPTION.
            error = (
                Errors.UNKNOWN_TOPIC_OR_PARTITION
                if topic_names.is_valid(name)
                else Errors.INVALID_TOPIC_EXCEPTION
            )
            topics.append(_described_topic(topic_cls, name, error, ZERO_UUID, -1, ()))
            continue
        start = int(cursor.partition_index) if cursor is not None and name == cursor.topic_name else 0
        partitions = []
        for partition_id in sorted(p for p in topic.partitions if p >= start):
            if count >= limit:
                next_cursor = (name, partition_id)
                break
            partitions.append(
                described_partition(
                    partition_cls, image, partition_id, topic.partitions[partition_id]
                )
            )
            count += 1
        topics.append(
            _described_topic(
                topic_cls,
                name,
                Errors.NONE,
                topic.topic_id,
                image.topic_min_insync_replicas(name),
                tuple(partitions),
            )
        )
        if next_cursor is not None:
            break
    return build(
        schema,
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
        next_cursor=None
        if next_cursor is None
        else cursor_cls(topic_name=next_cursor[0], partition_index=next_cursor[1]),  # type: ignore[call-arg]
    )


def described_partition(
    partition_cls: type,
    image: MetadataImage,
    partition_id: int,
    reg: PartitionRegistration,
    error: Errors = Errors.NONE,
    unfenced: frozenset[int] | None = None,
) -> Any:
    """A partition as Metadata and DescribeTopicPartitions answer it, from its registration
    (what the response's version has of it: ELR and the rest are DescribeTopicPartitions').
    `unfenced`: unfenced_broker_ids(image), given by a caller answering many partitions."""
    return build(
        partition_cls,
        error_code=error_code(error),
        partition_index=partition_id,
        leader_id=reg.leader,
        leader_epoch=reg.leader_epoch,
        replica_nodes=reg.replicas,
        isr_nodes=reg.isr,
        eligible_leader_replicas=reg.elr,
        last_known_elr=reg.last_known_elr,
        offline_replicas=tuple(r for r in reg.replicas if image.is_fenced(r))
        if unfenced is None
        else tuple(r for r in reg.replicas if r not in unfenced),
        partition_epoch=reg.partition_epoch,
        last_known_leader=reg.last_known_leader,
        leader_recovery_state=int(reg.leader_recovery_state),
    )


class DescribedTopics:
    """The topics of Metadata answers, each kept while its image is the same (issue 35).

    Kafka's broker builds every Metadata answer from its current immutable image
    (KRaftMetadataCache.getTopicMetadata). An entry here is what that build gives for one
    TopicImage, the unfenced brokers (any other replica is offline) and the response's
    version and operations: a new image shares every TopicImage a delta did not touch, so an
    answer for all topics rebuilds only the topics that changed, and is the answer Kafka
    would give. `bench scale` asks Metadata for all 100,000 partitions every half second
    while it waits for a full ISR: about 1.6 CPU-s a time on the broker asked, built anew
    from unchanged topics, while that broker was still applying the creates."""

    def __init__(self) -> None:
        # topic id -> (TopicImage, unfenced brokers, topic class, operations, answered topic)
        self._topics: dict[uuid.UUID, tuple[TopicImage, frozenset[int], type, int, Any]] = {}

    def topic(
        self,
        topic_cls: type,
        image: MetadataImage,
        topic: TopicImage,
        operations: int,
        unfenced: frozenset[int],
        is_internal: bool,
    ) -> Any:
        """The answer's entry for `topic` of `image` (`unfenced`: unfenced_broker_ids(image);
        `is_internal`: what the answer says of the topic's name)."""
        kept = self._topics.get(topic.topic_id)
        if (
            kept is not None
            and kept[0] is topic
            and kept[1] == unfenced
            and kept[2] is topic_cls
            and kept[3] == operations
        ):
            return kept[4]
        partition_cls = item_type(topic_cls, "partitions")
        answered = build(
            topic_cls,
            error_code=error_code(Errors.NONE),
            name=topic.name,
            topic_id=topic.topic_id,
            is_internal=is_internal,
            partitions=tuple(
                described_partition(
                    partition_cls,
                    image,
                    partition_id,
                    reg,
                    Errors.LEADER_NOT_AVAILABLE if reg.leader < 0 else Errors.NONE,
                    unfenced,
                )
                for partition_id, reg in sorted(topic.partitions.items())
            ),
            topic_authorized_operations=operations,
        )
        if len(self._topics) > 2 * len(image.topics) + 16:  # forget removed topics
            self._topics = {k: v for k, v in self._topics.items() if k in image.topics}
        self._topics[topic.topic_id] = (topic, unfenced, topic_cls, operations, answered)
        return answered


def _described_topic(
    topic_cls: type,
    name: str,
    error: Errors,
    topic_id: uuid.UUID,
    min_insync_replicas: int,
    partitions: tuple[Any, ...],
) -> Any:
    return build(
        topic_cls,
        error_code=error_code(error),
        name=name,
        topic_id=topic_id,
        is_internal=False,
        # Kafka fills it for every topic answered, unasked (no authorizer: all of them).
        topic_authorized_operations=TOPIC_OPERATIONS,
        min_insync_replicas=min_insync_replicas,
        partitions=partitions,
    )


def broker_levels(image: MetadataImage, node: NodeConfig) -> BrokerLevels:
    """What `node` sees of the broker-level configs: its own and the cluster's dynamic ones,
    its config file, and its defaults."""
    props = node.props
    return BrokerLevels(
        per_broker=image.configs.get((CONFIG_RESOURCE_BROKER, str(node.node_id)), {}),
        cluster=image.configs.get((CONFIG_RESOURCE_BROKER, CLUSTER_DEFAULT_RESOURCE), {}),
        static={k: props[k] for k in node.given if k in props},
        node_defaults={k: v for k, v in props.items() if k not in node.given},
    )


def describe_configs(image: MetadataImage, body: Any, version: int, node: NodeConfig) -> Any:
    """Kafka's ConfigHelper.describeConfigs on the node asked: every config of a topic, or of
    this node (a broker id other than its own is INVALID_REQUEST, as in Kafka), or the
    cluster-level dynamic configs (resource name ""), with sources, synonyms when asked,
    documentation when asked, types and the read-only flag, all from metadata.config_defs."""
    schema = response_schema(int(ApiKey.DESCRIBE_CONFIGS), version)
    result_cls = item_type(schema, "results")
    entry_cls = item_type(result_cls, "configs")
    synonym_cls = item_type(entry_cls, "synonyms") if has_field(entry_cls, "synonyms") else None
    include_synonyms = bool(getattr(body, "include_synonyms", False))
    include_documentation = bool(getattr(body, "include_documentation", False))
    levels = broker_levels(image, node)
    results = []
    for resource in body.resources:
        resource_type = int(resource.resource_type)
        name = str(resource.resource_name)
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        rows, error, message = _config_rows(image, resource_type, name, levels, node.node_id)
        configs = tuple(
            build(
                entry_cls,
                name=row.name,
                value=None if row.definition is not None and row.definition.sensitive else row.value,
                read_only=_read_only(resource_type, row),
                is_default=row.source == ConfigSource.DEFAULT_CONFIG,
                config_source=int(row.source),
                is_sensitive=row.definition is not None and row.definition.sensitive,
                synonyms=tuple(
                    build(synonym_cls, name=n, value=v, source=int(src))
                    for n, v, src in row.synonyms
                )
                if include_synonyms and synonym_cls is not None
                else (),
                config_type=int(
                    row.definition.type if row.definition is not None else ConfigType.UNKNOWN
                ),
                documentation=row.definition.doc
                if include_documentation and row.definition is not None
                else None,
            )
            for row in rows
            if not keys or row.name in keys
        )
        results.append(
            build(
                result_cls,
                error_code=error_code(error),
                error_message=message,
                resource_type=resource_type,
                resource_name=name,
                configs=configs,
            )
        )
    return build(schema, throttle_time=NO_THROTTLE, results=tuple(results))


def created_topic_configs(
    configs_cls: type, image: MetadataImage, given: dict[str, str], node: NodeConfig
) -> tuple[Any, ...]:
    """CreateTopics v5+'s Configs of a created topic (KIP-525): every topic config with its
    value and source, the given ones as TOPIC_CONFIG (Kafka's answer; its Java admin client
    reads them)."""
    return tuple(
        build(
            configs_cls,
            name=row.name,
            value=row.value,
            read_only=False,
            config_source=int(row.source),
            is_sensitive=False,
        )
        for row in topic_config_values(given, broker_levels(image, node))
    )


def _read_only(resource_type: int, row: ConfigValue) -> bool:
    """Topic configs are alterable; a broker config only if it is dynamic (Kafka's
    DynamicBrokerConfig.AllDynamicConfigs)."""
    if resource_type == CONFIG_RESOURCE_TOPIC:
        return False
    return row.definition is None or not row.definition.dynamic


def _config_rows(
    image: MetadataImage, resource_type: int, name: str, levels: BrokerLevels, node_id: int
) -> tuple[list[ConfigValue], Errors, str | None]:
    """The rows of one resource, or its error (Kafka's messages)."""
    if resource_type == CONFIG_RESOURCE_TOPIC:
        invalid = invalid_topic_reason(name)  # Kafka's ConfigHelper: Topic.validate first
        if invalid is not None:
            return [], Errors.INVALID_TOPIC_EXCEPTION, invalid
        if name not in image.topics_by_name:
            return [], Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
        overrides = image.configs.get((CONFIG_RESOURCE_TOPIC, name), {})
        return topic_config_values(overrides, levels), Errors.NONE, None
    if resource_type == CONFIG_RESOURCE_BROKER:
        if name == CLUSTER_DEFAULT_RESOURCE:
            return broker_config_values(levels, cluster_default=True), Errors.NONE, None
        if not name.lstrip("-").isdigit():
            return [], Errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        if int(name) != node_id:
            return (
                [],
                Errors.INVALID_REQUEST,
                f"Unexpected broker id, expected {node_id} or empty string, but received {name}",
            )
        return broker_config_values(levels, cluster_default=False), Errors.NONE, None
    return [], Errors.INVALID_REQUEST, f"Unsupported resource type: {resource_type}"
