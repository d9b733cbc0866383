"""The admin APIs on the controller listener, on Kafka's protocol (KIP-919's
`--bootstrap-controller`, and what brokers forward to the active controller unchanged):
CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs, AlterConfigs and
ElectLeaders (writes, through QuorumController's single writer, through the one write path), and
DescribeTopicPartitions, DescribeConfigs, DescribeCluster (reads of this controller's committed
image, metadata.kafka_describe, shared with brokers).

Each handler decodes the kio request into the core's input, calls the same controller code, and
encodes the result into the kio response of the request's version. A standby answers the writes
NOT_CONTROLLER where Kafka puts errors (per topic, per resource, or top level), never by raising
out of the router (that would close the connection): a forwarding broker retries elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.core import messages as cm
from controller.core import replication_control
from controller.core.create_partitions import create_partitions
from controller.runtime.quorum_controller import QuorumController
from kafkawire import admin_messages as am
from kafkawire import constants
from kafkawire.api_keys import ApiKey
from kafkawire.connection import KafkaRequestContext
from kafkawire.constants import ZERO_UUID
from kafkawire.elect_leaders_error import elect_leaders_error
from kafkawire.entities import NO_THROTTLE, build, has_field, item_type
from kafkawire.errors import Errors, KafkaError
from kafkawire.messages import error_code, error_message, response_schema
from kafkawire.router import KafkaRouter
from metadata import kafka_describe

# Kafka's defaults for a CreateTopics that leaves partitions / replication factor to the
# controller (-1): the controller's `num.partitions` and `default.replication.factor`.
CREATE_TOPICS_DEFAULTS = {"num.partitions": "1", "default.replication.factor": "1"}
ADMIN_API_KEYS = (
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.ALTER_CONFIGS,
    ApiKey.ELECT_LEADERS,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.DESCRIBE_CLUSTER,
)


def _timeout_ms(body: Any) -> int:
    return int(body.timeout.total_seconds() * 1000)


class ControllerKafkaAdminApis:
    def __init__(self, controller: QuorumController) -> None:
        # The QuorumController carries the node's config and Raft: no back-reference to the
        # ControllerNode that builds this (no import cycle, issue 18).
        self.controller = controller
        for key, value in CREATE_TOPICS_DEFAULTS.items():
            controller.config.props.setdefault(key, value)

    def route(self, router: KafkaRouter) -> None:
        handlers: dict[ApiKey, Callable[[Any, int, KafkaRequestContext], Any]] = {
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
            ApiKey.ALTER_CONFIGS: self.alter_configs,
            ApiKey.ELECT_LEADERS: self.elect_leaders,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: self.describe_topic_partitions,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
        }
        for key in ADMIN_API_KEYS:
            router.route(key, handlers[key])

    # ---- writes -------------------------------------------------------------------------

    async def create_topics(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.CREATE_TOPICS), version)
        result_cls = item_type(schema, "topics")
        results: dict[str, tuple[Errors, str, Any]] = {}
        creatable = []
        for topic in body.topics:
            parsed = self._creatable(topic)
            if isinstance(parsed, tuple):
                results[topic.name] = (*parsed, None)
            else:
                creatable.append(parsed)
        if creatable:
            request = cm.CreateTopicsRequest(
                creatable,
                validate_only=bool(getattr(body, "validate_only", False)),
                timeout_ms=_timeout_ms(body),
            )
            try:
                response = await self.controller.handle(ApiKey.CREATE_TOPICS, request, None)
                for r in response.topics:
                    results[r.name] = (Errors.of(r.error_code), r.error_message, r)
            except KafkaError as exc:
                for t in creatable:
                    results[t.name] = (exc.error, exc.message, None)
        topics = []
        configs_cls = item_type(result_cls, "configs") if has_field(result_cls, "configs") else None
        for topic in body.topics:
            error, message, r = results.get(topic.name, (Errors.UNKNOWN_SERVER_ERROR, "", None))
            ok = r is not None and error is Errors.NONE
            given = {c.name: c.value for c in topic.configs if c.value is not None}
            topics.append(
                build(
                    result_cls,
                    name=topic.name,
                    topic_id=r.topic_id if r is not None else ZERO_UUID,
                    error_code=error_code(error),
                    error_message=message or None,
                    num_partitions=r.num_partitions if ok else -1,
                    replication_factor=r.replication_factor if ok else -1,
                    # v5+ (KIP-525): the new topic's every config, as DescribeConfigs lists it.
                    configs=kafka_describe.created_topic_configs(
                        configs_cls, self.controller.state.image, given, self.controller.config
                    )
                    if ok and configs_cls is not None
                    else None,
                )
            )
        return build(schema, throttle_time=NO_THROTTLE, topics=tuple(topics))

    def _creatable(self, topic: Any) -> cm.CreatableTopic | tuple[Errors, str]:
        """Kafka's CreatableTopic -> the core's; a manual assignment fixes the counts, -1 takes
        this controller's defaults."""
        nulls = [c.name for c in topic.configs if c.value is None]
        if nulls:  # Kafka's ControllerConfigurationValidator
            return Errors.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}"
        configs = {c.name: c.value for c in topic.configs}
        assignments = {
            int(a.partition_index): [int(b) for b in a.broker_ids] for a in topic.assignments
        }
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
        config = self.controller.config
        if num_partitions == -1:
            num_partitions = config.get_int("num.partitions")
        if replication_factor == -1:
            replication_factor = config.get_int("default.replication.factor")
        return cm.CreatableTopic(
            topic.name, num_partitions, replication_factor, configs, replica_lists
        )

    async def delete_topics(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        request = am.lift(ApiKey.DELETE_TOPICS, body)
        try:
            response = await self.controller.handle(ApiKey.DELETE_TOPICS, request, None)
        except KafkaError as exc:
            response = am.delete_topics_response(
                am.deletable_topic_result(name, error=exc.error, message=exc.message)
                for name in replication_control.deleted_names(self.controller.state.image, request)
            )
        return am.lower(ApiKey.DELETE_TOPICS, response, version)

    async def create_partitions(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        request = am.lift(ApiKey.CREATE_PARTITIONS, body)
        try:
            response = await self.controller.write(
                lambda image: create_partitions(image, request),
                "CreatePartitions",
                user_op=True,
            )
        except KafkaError as exc:
            response = am.create_partitions_response(
                am.create_partitions_result(t.name, exc.error, exc.message) for t in request.topics
            )
        return am.lower(ApiKey.CREATE_PARTITIONS, response, version)

    async def incremental_alter_configs(
        self, body: Any, version: int, _ctx: KafkaRequestContext
    ) -> Any:
        return await self._alter_configs(ApiKey.INCREMENTAL_ALTER_CONFIGS, body, version)

    async def alter_configs(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        """AlterConfigs (33): the legacy API, each resource's configs replaced as a whole."""
        return await self._alter_configs(ApiKey.ALTER_CONFIGS, body, version)

    async def _alter_configs(self, api_key: ApiKey, body: Any, version: int) -> Any:
        request = am.lift(api_key, body)
        try:
            response = await self.controller.handle(api_key, request, None)
        except KafkaError as exc:
            response = am.incremental_alter_configs_response(
                am.config_resource_result(r.resource_type, r.resource_name, exc.error, exc.message)
                for r in request.resources
            )
        return am.lower(api_key, response, version)

    async def elect_leaders(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        """v0-v2 kio's; v3 adds DesignatedLeaders (seed 004) and answers each partition's
        leader after the election in minikraft's tagged LeaderId."""
        schema = response_schema(int(ApiKey.ELECT_LEADERS), version)
        topic_cls = item_type(schema, "replica_election_results")
        partition_cls = item_type(topic_cls, "partition_result")
        request = cm.ElectLeadersRequest(
            int(getattr(body, "election_type", constants.ELECTION_PREFERRED)),  # v0: PREFERRED only
            None
            if body.topic_partitions is None
            else [
                cm.ElectLeadersTopicPartitions(
                    str(tp.topic),
                    [int(p) for p in tp.partitions],
                    None
                    if getattr(tp, "designated_leaders", None) is None
                    else [int(b) for b in tp.designated_leaders],
                )
                for tp in body.topic_partitions
            ],
            _timeout_ms(body),
        )
        top_error, top_message = Errors.NONE, ""
        results: list[cm.ElectLeadersTopicResult] = []
        try:
            response = await self.controller.handle(ApiKey.ELECT_LEADERS, request, None)
            top_error, top_message = Errors.of(response.error_code), response.error_message
            results = response.replica_election_results
        except KafkaError as exc:
            top_error, top_message = exc.error, exc.message
        if top_error is not Errors.NONE:
            return elect_leaders_error(body, version, top_error, top_message)
        return build(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=error_code(top_error),
            replica_election_results=tuple(
                topic_cls(
                    topic=t.topic,
                    partition_result=tuple(
                        build(
                            partition_cls,
                            partition_id=p.partition_id,
                            error_code=error_code(p.error_code),
                            error_message=error_message(p.error_code, p.error_message),
                            leader_id=p.leader_id,
                        )
                        for p in t.partition_result
                    ),
                )
                for t in results
            ),
        )

    # ---- reads of this controller's committed image ------------------------------------

    async def describe_topic_partitions(
        self, body: Any, _version: int, _ctx: KafkaRequestContext
    ) -> Any:
        return kafka_describe.describe_topic_partitions(
            self.controller.state.image, body, self.controller.describe_limit
        )

    async def describe_configs(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        return kafka_describe.describe_configs(
            self.controller.state.image, body, version, self.controller.config
        )

    async def describe_cluster(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        """KIP-919: asked for controllers (EndpointType 2), the voters and the active one;
        asked for brokers, the live brokers (an admin client bootstrapped on controllers)."""
        replica = self.controller.raft.replica
        leader = replica.leader_id if replica.leader_id is not None else -1
        endpoint_type = int(getattr(body, "endpoint_type", kafka_describe.ENDPOINT_TYPE_BROKER))
        nodes: list[tuple[int, str, int, str | None]] = []
        if endpoint_type == kafka_describe.ENDPOINT_TYPE_CONTROLLER:
            for voter_id in sorted(replica.voters.ids()):
                address = replica.voters.endpoint(voter_id)
                if address:
                    host, _, port = address.rpartition(":")
                    nodes.append((voter_id, host.strip("[]"), int(port), None))
        else:
            nodes = kafka_describe.live_brokers(
                self.controller.state.image,
                None,
                include_fenced=bool(getattr(body, "include_fenced_brokers", False)),
            )
        return kafka_describe.describe_cluster(
            version,
            self.controller.raft.cluster_id,
            leader,
            nodes,
            endpoint_type,
            kafka_describe.fenced_broker_ids(self.controller.state.image),
            include_authorized_operations=bool(body.include_cluster_authorized_operations),
        )

