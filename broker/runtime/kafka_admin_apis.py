"""The broker's admin APIs on Kafka's wire protocol: CreateTopics, DeleteTopics,
IncrementalAlterConfigs and ElectLeaders are forwarded to the active controller with the internal
admin requests, as Kafka brokers forward them (the client never sees a controller move:
NOT_CONTROLLER and an unreachable controller are retried here); DescribeConfigs, DescribeCluster
and DescribeTopicPartitions are answered from this broker's metadata image, as Kafka does.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any

from cluster.protocol import controller_messages as cm
from controller.core.metadata_image import MetadataImage
from controller.core.records import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from kafkawire.api_keys import ApiKey
from kafkawire.entities import NO_THROTTLE, build, has_field, item_type
from kafkawire.errors import Errors, KafkaError
from kafkawire.messages import error_code, response_schema

if TYPE_CHECKING:
    from broker.runtime.broker_node import BrokerNode

FORWARD_TIMEOUT_MS = 30_000
_FORWARD_RETRIABLE = frozenset(
    {Errors.NOT_CONTROLLER, Errors.NETWORK_EXCEPTION, Errors.REQUEST_TIMED_OUT}
)
CONFIG_SOURCE_DYNAMIC_TOPIC = 1
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER = 4
CONFIG_SOURCE_DEFAULT = 5
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


def _response(api_key: ApiKey, version: int) -> type:
    return response_schema(int(api_key), version)


def live_brokers(
    image: MetadataImage, listener_name: str
) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of unfenced brokers with an endpoint on the listener: what
    Metadata and DescribeCluster list (Kafka lists alive brokers)."""
    rows = []
    for reg in sorted(image.brokers.values(), key=lambda r: r.broker_id):
        if reg.fenced:
            continue
        for endpoint in reg.endpoints:
            if endpoint.name == listener_name:
                rows.append((reg.broker_id, endpoint.host, endpoint.port, reg.rack))
                break
    return rows


class KafkaAdminApis:
    def __init__(self, broker: BrokerNode) -> None:
        self.broker = broker

    @property
    def _image(self) -> MetadataImage:
        return self.broker.metadata.image

    async def forward(self, request: Any, timeout_ms: int | None = None) -> Any:
        """An internal admin request from the msgpack listener (the CLI), forwarded."""
        return await self._forward(request, timeout_ms or FORWARD_TIMEOUT_MS)

    async def _forward(self, request: Any, timeout_ms: int = FORWARD_TIMEOUT_MS) -> Any:
        """Send an internal admin request to the active controller; NOT_CONTROLLER and
        unreachable controllers are retried until the timeout, so a controller move is
        invisible to the client (Kafka's forwarding)."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            try:
                return await self.broker._controller_request(request, timeout_ms=timeout_ms)
            except KafkaError as exc:
                if exc.error not in _FORWARD_RETRIABLE or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(0.1)

    async def create_topics(self, body: Any, version: int) -> Any:
        schema = _response(ApiKey.CREATE_TOPICS, version)
        result_cls = item_type(schema, "topics")
        results: dict[str, Any] = {}
        creatable = []
        for topic in body.topics:
            configs = {c.name: c.value for c in topic.configs if c.value is not None}
            assignments = {
                int(a.partition_index): [int(b) for b in a.broker_ids] for a in topic.assignments
            }
            if assignments and (
                int(topic.num_partitions) not in (-1, len(assignments))
                or int(topic.replication_factor)
                not in (-1, *(len(r) for r in assignments.values()))
            ):
                results[topic.name] = (
                    Errors.INVALID_REQUEST,
                    "a replica assignment and different partitions/replication factor were given",
                    None,
                )
                continue
            num_partitions = int(topic.num_partitions)
            replication_factor = int(topic.replication_factor)
            replica_lists: list[list[int]] = []
            if assignments:
                if sorted(assignments) != list(range(len(assignments))):
                    results[topic.name] = (
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                        "partitions of a replica assignment must be 0..n-1",
                        None,
                    )
                    continue
                replica_lists = [assignments[p] for p in range(len(assignments))]
                num_partitions = len(replica_lists)
                replication_factor = len(replica_lists[0])
            if num_partitions == -1:
                num_partitions = self.broker.config.get_int("num.partitions")
            if replication_factor == -1:
                replication_factor = self.broker.config.get_int("default.replication.factor")
            creatable.append(
                cm.CreatableTopic(
                    topic.name, num_partitions, replication_factor, configs, replica_lists
                )
            )
        if creatable:
            try:
                response = await self._forward(
                    cm.CreateTopicsRequest(
                        creatable,
                        validate_only=bool(getattr(body, "validate_only", False)),
                        timeout_ms=int(body.timeout.total_seconds() * 1000),
                    )
                )
                for r in response.topics:
                    results[r.name] = (Errors.of(r.error_code), r.error_message, r)
            except KafkaError as exc:
                for t in creatable:
                    results[t.name] = (exc.error, exc.message, None)
        topics = []
        for topic in body.topics:
            error, message, r = results.get(topic.name, (Errors.UNKNOWN_SERVER_ERROR, "", None))
            topics.append(
                build(
                    result_cls,
                    name=topic.name,
                    topic_id=r.topic_id if r is not None else uuid.UUID(int=0),
                    error_code=error_code(error),
                    error_message=message or None,
                    num_partitions=r.num_partitions
                    if r is not None and error is Errors.NONE
                    else -1,
                    replication_factor=(
                        r.replication_factor if r is not None and error is Errors.NONE else -1
                    ),
                    configs=None,
                )
            )
        return build(schema, throttle_time=NO_THROTTLE, topics=tuple(topics))

    async def delete_topics(self, body: Any, version: int) -> Any:
        schema = _response(ApiKey.DELETE_TOPICS, version)
        result_cls = item_type(schema, "responses")
        names: list[str] = []
        if has_field(type(body), "topic_names"):
            names = [str(n) for n in body.topic_names]
        else:
            for t in body.topics:
                if t.name:
                    names.append(str(t.name))
                else:
                    found = self._image.topics.get(t.topic_id)
                    names.append(found.name if found is not None else f"<unknown id {t.topic_id}>")
        try:
            response = await self._forward(
                cm.DeleteTopicsRequest(names, int(body.timeout.total_seconds() * 1000))
            )
            rows = [
                (r.name, r.topic_id, Errors.of(r.error_code), r.error_message)
                for r in response.responses
            ]
        except KafkaError as exc:
            rows = [(n, uuid.UUID(int=0), exc.error, exc.message) for n in names]
        return build(
            schema,
            throttle_time=NO_THROTTLE,
            responses=tuple(
                build(
                    result_cls,
                    name=name,
                    topic_id=topic_id,
                    error_code=error_code(error),
                    error_message=message or None,
                )
                for name, topic_id, error, message in rows
            ),
        )

    async def incremental_alter_configs(self, body: Any, version: int) -> Any:
        schema = _response(ApiKey.INCREMENTAL_ALTER_CONFIGS, version)
        result_cls = item_type(schema, "responses")
        request = cm.IncrementalAlterConfigsRequest(
            [
                cm.AlterConfigsResource(
                    int(r.resource_type),
                    r.resource_name,
                    [
                        cm.AlterableConfig(c.name, int(c.config_operation), c.value)
                        for c in r.configs
                    ],
                )
                for r in body.resources
            ],
            validate_only=bool(body.validate_only),
        )
        try:
            response = await self._forward(request)
            rows = [
                (r.resource_type, r.resource_name, Errors.of(r.error_code), r.error_message)
                for r in response.responses
            ]
        except KafkaError as exc:
            rows = [
                (int(r.resource_type), r.resource_name, exc.error, exc.message)
                for r in body.resources
            ]
        return build(
            schema,
            throttle_time=NO_THROTTLE,
            responses=tuple(
                build(
                    result_cls,
                    error_code=error_code(error),
                    error_message=message or None,
                    resource_type=resource_type,
                    resource_name=name,
                )
                for resource_type, name, error, message in rows
            ),
        )

    async def elect_leaders(self, body: Any, version: int) -> Any:
        schema = _response(ApiKey.ELECT_LEADERS, version)
        topic_cls = item_type(schema, "replica_election_results")
        partition_cls = item_type(topic_cls, "partition_result")
        request = cm.ElectLeadersRequest(
            int(getattr(body, "election_type", cm.ELECTION_PREFERRED)),
            None
            if body.topic_partitions is None
            else [
                cm.ElectLeadersTopicPartitions(tp.topic, [int(p) for p in tp.partitions])
                for tp in body.topic_partitions
            ],
            int(body.timeout.total_seconds() * 1000),
        )
        top_error = Errors.NONE
        results: list[tuple[str, list[tuple[int, Errors, str]]]] = []
        try:
            response = await self._forward(request, timeout_ms=request.timeout_ms)
            results = [
                (
                    t.topic,
                    [
                        (p.partition_id, Errors.of(p.error_code), p.error_message)
                        for p in t.partition_result
                    ],
                )
                for t in response.replica_election_results
            ]
        except KafkaError as exc:
            top_error = exc.error
        return build(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=error_code(top_error),
            replica_election_results=tuple(
                topic_cls(
                    topic=topic,
                    partition_result=tuple(
                        partition_cls(
                            partition_id=p,  # type: ignore[arg-type]
                            error_code=error_code(error),
                            error_message=message or None,
                        )
                        for p, error, message in parts
                    ),
                )
                for topic, parts in results
            ),
        )

    async def describe_cluster(self, _body: Any, version: int) -> Any:
        schema = _response(ApiKey.DESCRIBE_CLUSTER, version)
        broker_cls = item_type(schema, "brokers")
        return build(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=error_code(Errors.NONE),
            error_message=None,
            endpoint_type=1,
            cluster_id=self.broker.raft.cluster_id,
            controller_id=self.broker.broker_id,
            brokers=tuple(
                build(broker_cls, broker_id=b, host=host, port=port, rack=rack)
                for b, host, port, rack in live_brokers(self._image, self.broker.listener.name)
            ),
        )

    async def describe_topic_partitions(self, body: Any, version: int) -> Any:
        schema = _response(ApiKey.DESCRIBE_TOPIC_PARTITIONS, version)
        topic_cls = item_type(schema, "topics")
        partition_cls = item_type(topic_cls, "partitions")
        image = self._image
        names = [str(t.name) for t in body.topics] or sorted(image.topics_by_name)
        cursor = body.cursor
        if cursor is not None:
            names = [n for n in names if n >= cursor.topic_name]
        limit = max(1, int(body.response_partition_limit))
        topics = []
        next_cursor = None
        count = 0
        for name in names:
            topic = image.topics_by_name.get(name)
            if topic is None:
                topics.append(
                    build(
                        topic_cls,
                        error_code=error_code(Errors.UNKNOWN_TOPIC_OR_PARTITION),
                        name=name,
                        topic_id=uuid.UUID(int=0),
                        partitions=(),
                    )
                )
                continue
            start = (
                cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            )
            partitions = []
            for partition_id, reg in sorted(topic.partitions.items()):
                if partition_id < start:
                    continue
                if count >= limit:
                    cursor_cls = item_type(schema, "next_cursor")
                    next_cursor = cursor_cls(topic_name=name, partition_index=partition_id)  # type: ignore[arg-type]
                    break
                count += 1
                partitions.append(
                    build(
                        partition_cls,
                        error_code=error_code(Errors.NONE),
                        partition_index=partition_id,
                        leader_id=reg.leader,
                        leader_epoch=reg.leader_epoch,
                        replica_nodes=tuple(reg.replicas),
                        isr_nodes=tuple(reg.isr),
                        eligible_leader_replicas=tuple(reg.elr),
                        last_known_elr=tuple(reg.last_known_elr),
                        offline_replicas=tuple(b for b in reg.replicas if image.is_fenced(b)),
                    )
                )
            topics.append(
                build(
                    topic_cls,
                    error_code=error_code(Errors.NONE),
                    name=name,
                    topic_id=topic.topic_id,
                    partitions=tuple(partitions),
                )
            )
            if next_cursor is not None:
                break
        return build(
            schema, throttle_time=NO_THROTTLE, topics=tuple(topics), next_cursor=next_cursor
        )

    # ---- DescribeConfigs (answered from this broker's metadata image, as Kafka does) ----

    async def describe_configs(self, body: Any, version: int) -> Any:
        schema = _response(ApiKey.DESCRIBE_CONFIGS, version)
        result_cls = item_type(schema, "results")
        entry_cls = item_type(result_cls, "configs")
        image = self._image
        results = []
        for resource in body.resources:
            resource_type = int(resource.resource_type)
            name = str(resource.resource_name)
            keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
            entries: list[tuple[str, str | None, int]] = []
            error, message = Errors.NONE, None
            if resource_type == CONFIG_RESOURCE_TOPIC:
                if name not in image.topics_by_name:
                    error, message = (
                        Errors.UNKNOWN_TOPIC_OR_PARTITION,
                        f"topic {name!r} does not exist",
                    )
                else:
                    set_on_topic = image.configs.get((CONFIG_RESOURCE_TOPIC, name), {})
                    cluster = image.configs.get((CONFIG_RESOURCE_BROKER, ""), {})
                    for key in sorted(set(TOPIC_CONFIG_DEFAULTS) | set(set_on_topic)):
                        if key in set_on_topic:
                            entries.append((key, set_on_topic[key], CONFIG_SOURCE_DYNAMIC_TOPIC))
                        elif key in cluster:
                            entries.append(
                                (key, cluster[key], CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER)
                            )
                        else:
                            entries.append((key, TOPIC_CONFIG_DEFAULTS[key], CONFIG_SOURCE_DEFAULT))
            elif resource_type == CONFIG_RESOURCE_BROKER:
                for key, value in sorted(
                    image.configs.get((CONFIG_RESOURCE_BROKER, name), {}).items()
                ):
                    entries.append((key, value, CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER))
            else:
                error, message = (
                    Errors.INVALID_REQUEST,
                    f"unsupported resource type {resource_type}",
                )
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
                if keys is None or not keys or key in keys
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
