"""The admin reads answered from a committed metadata image on Kafka's protocol, by brokers and
controllers alike (Kafka answers DescribeConfigs, DescribeTopicPartitions and DescribeCluster on
the node asked, never forwarded): kio request in, kio response of the same version out.

DescribeTopicPartitions goes through replication_control.describe_topic_partitions (seed 001's
paging, capped by `max.request.partition.size.limit`), so both node kinds page the same way.
"""

from __future__ import annotations

import uuid
from typing import Any

from controller.core import messages as msg
from controller.core import replication_control
from controller.core.metadata_image import MetadataImage
from controller.core.records import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from kafkawire.api_keys import ApiKey
from kafkawire.authorized_operations import CLUSTER_OPERATIONS, NOT_REQUESTED, TOPIC_OPERATIONS
from kafkawire.entities import NO_THROTTLE, build, item_type
from kafkawire.errors import Errors
from kafkawire.messages import error_code, response_schema
from kafkawire.topic import invalid_topic_reason

CONFIG_SOURCE_DYNAMIC_TOPIC = 1
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER = 4
CONFIG_SOURCE_DEFAULT = 5
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2  # KIP-919: DescribeCluster to controllers lists controllers
# Topic configs DescribeConfigs lists, with Kafka's defaults where no record sets them.
TOPIC_CONFIG_DEFAULTS = {
    "cleanup.policy": "delete",
    "max.message.bytes": "1048588",
    "min.insync.replicas": "1",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "unclean.leader.election.enable": "false",
}


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
    LastKnownLeader, LeaderRecoveryState, the topic's min.insync.replicas)."""
    cursor = body.cursor
    result = replication_control.describe_topic_partitions(
        image,
        msg.DescribeTopicPartitionsRequest(
            [str(t.name) for t in body.topics],
            int(body.response_partition_limit),
            None
            if cursor is None
            else msg.Cursor(str(cursor.topic_name), int(cursor.partition_index)),
        ),
        server_limit,
    ).response
    schema = response_schema(int(ApiKey.DESCRIBE_TOPIC_PARTITIONS), 0)
    topic_cls = item_type(schema, "topics")
    partition_cls = item_type(topic_cls, "partitions")
    cursor_cls = item_type(schema, "next_cursor")
    topics = tuple(
        build(
            topic_cls,
            error_code=error_code(t.error_code),
            name=t.name,
            topic_id=t.topic_id if t.error_code == 0 else uuid.UUID(int=0),
            is_internal=t.is_internal,
            # Kafka fills it for every topic answered, unasked (no authorizer: all of them).
            topic_authorized_operations=TOPIC_OPERATIONS,
            min_insync_replicas=t.min_insync_replicas,
            partitions=tuple(
                build(
                    partition_cls,
                    error_code=error_code(p.error_code),
                    partition_index=p.partition_index,
                    leader_id=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=tuple(p.replica_nodes),
                    isr_nodes=tuple(p.isr_nodes),
                    eligible_leader_replicas=tuple(p.eligible_leader_replicas or ()),
                    last_known_elr=tuple(p.last_known_elr or ()),
                    offline_replicas=tuple(p.offline_replicas),
                    partition_epoch=p.partition_epoch,
                    last_known_leader=p.last_known_leader,
                    leader_recovery_state=p.leader_recovery_state,
                )
                for p in t.partitions
            ),
        )
        for t in result.topics
    )
    next_cursor = result.next_cursor
    return build(
        schema,
        throttle_time=NO_THROTTLE,
        topics=topics,
        next_cursor=None
        if next_cursor is None
        else cursor_cls(
            topic_name=next_cursor.topic_name, partition_index=next_cursor.partition_index
        ),  # type: ignore[call-arg]
    )


def describe_configs(image: MetadataImage, body: Any, version: int) -> Any:
    schema = response_schema(int(ApiKey.DESCRIBE_CONFIGS), version)
    result_cls = item_type(schema, "results")
    entry_cls = item_type(result_cls, "configs")
    results = []
    for resource in body.resources:
        resource_type = int(resource.resource_type)
        name = str(resource.resource_name)
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        entries, error, message = _config_entries(image, resource_type, name)
        configs = tuple(
            build(
                entry_cls,
                name=key,
                value=value,
                read_only=False,
                is_default=source == CONFIG_SOURCE_DEFAULT,
                config_source=source,
                is_sensitive=False,
                synonyms=(),
                config_type=0,
                documentation=None,
            )
            for key, value, source in entries
            if not keys or key in keys
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


def _config_entries(
    image: MetadataImage, resource_type: int, name: str
) -> tuple[list[tuple[str, str | None, int]], Errors, str | None]:
    """(key, value, Kafka's config source) rows of one resource, or its error."""
    entries: list[tuple[str, str | None, int]] = []
    if resource_type == CONFIG_RESOURCE_TOPIC:
        invalid = invalid_topic_reason(name)  # Kafka's ConfigHelper: Topic.validate first
        if invalid is not None:
            return [], Errors.INVALID_TOPIC_EXCEPTION, invalid
        if name not in image.topics_by_name:
            return [], Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
        set_on_topic = image.configs.get((CONFIG_RESOURCE_TOPIC, name), {})
        cluster = image.configs.get((CONFIG_RESOURCE_BROKER, ""), {})
        for key in sorted(set(TOPIC_CONFIG_DEFAULTS) | set(set_on_topic)):
            if key in set_on_topic:
                entries.append((key, set_on_topic[key], CONFIG_SOURCE_DYNAMIC_TOPIC))
            elif key in cluster:
                entries.append((key, cluster[key], CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER))
            else:
                entries.append((key, TOPIC_CONFIG_DEFAULTS[key], CONFIG_SOURCE_DEFAULT))
        return entries, Errors.NONE, None
    if resource_type == CONFIG_RESOURCE_BROKER:
        for key, value in sorted(image.configs.get((CONFIG_RESOURCE_BROKER, name), {}).items()):
            entries.append((key, value, CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER))
        return entries, Errors.NONE, None
    return [], Errors.INVALID_REQUEST, f"unsupported resource type {resource_type}"
