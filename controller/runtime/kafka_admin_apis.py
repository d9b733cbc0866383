"""The admin APIs on the controller listener, on Kafka's protocol (KIP-919's
`--bootstrap-controller`, and what brokers forward to the active controller unchanged):
CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs, AlterConfigs and
ElectLeaders (writes, through QuorumController's single writer, through the one write path), and
DescribeTopicPartitions, DescribeConfigs, DescribeCluster (reads of this controller's committed
image, metadata.kafka_describe, shared with brokers).

Each write lifts the request into the newest version's kio entity, the one shape its core takes
(kafkawire/admin_messages.py), calls the same controller code, and lowers the core's answer into
the version the client spoke. A standby answers the writes
NOT_CONTROLLER where Kafka puts errors (per topic, per resource, or top level), never by raising
out of the router (that would close the connection): a forwarding broker retries elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.core import replication_control
from controller.core.create_partitions import create_partitions_steps
from controller.runtime.quorum_controller import QuorumController
from kafkawire import admin_messages as am
from kafkawire.api_keys import ApiKey
from kafkawire.connection import KafkaRequestContext
from kafkawire.elect_leaders_error import elect_leaders_error
from kafkawire.errors import Errors, KafkaError
from kafkawire.router import KafkaRouter
from metadata import kafka_describe


class ControllerKafkaAdminApis:
    def __init__(self, controller: QuorumController) -> None:
        # The QuorumController carries the node's config and Raft: no back-reference to the
        # ControllerNode that builds this (no import cycle, issue 18).
        self.controller = controller
        # DescribeConfigs lists them too (Kafka's defaults).
        for key, value in replication_control.CREATE_TOPICS_DEFAULTS.items():
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
        for key, handler in handlers.items():
            router.route(key, handler)

    # ---- writes -------------------------------------------------------------------------

    async def _decide(
        self, api_key: ApiKey, body: Any, version: int, refused: Callable[[Any, KafkaError], Any]
    ) -> Any:
        """The request decided by the controller, answered in the version asked. Kafka's
        ControllerApis answers a failed decision with its error for every item:
        `refused(request, error)`."""
        request = am.lift(api_key, body)
        try:
            response = await self.controller.handle(api_key, request, None)
        except KafkaError as exc:
            response = refused(request, exc)
        return am.lower(api_key, response, version)

    async def create_topics(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        return await self._decide(
            ApiKey.CREATE_TOPICS, body, version,
            lambda request, exc: am.create_topics_response(
                am.creatable_topic_result(t.name, exc.error, exc.message) for t in request.topics
            ),
        )

    async def delete_topics(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        return await self._decide(
            ApiKey.DELETE_TOPICS, body, version,
            lambda request, exc: am.delete_topics_response(
                am.deletable_topic_result(name, error=exc.error, message=exc.message)
                for name in replication_control.deleted_names(self.controller.state.image, request)
            ),
        )

    async def create_partitions(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        request = am.lift(ApiKey.CREATE_PARTITIONS, body)
        try:
            response = await self.controller.write(
                lambda image: create_partitions_steps(image, request),
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
        return await self._decide(
            api_key, body, version,
            lambda request, exc: am.incremental_alter_configs_response(
                am.config_resource_result(r.resource_type, r.resource_name, exc.error, exc.message)
                for r in request.resources
            ),
        )

    async def elect_leaders(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        """v0-v2 kio's; v3 adds DesignatedLeaders (seed 004) and answers each partition's
        leader after the election in minikraft's tagged LeaderId."""
        request = am.lift(ApiKey.ELECT_LEADERS, body)
        try:
            response = await self.controller.handle(ApiKey.ELECT_LEADERS, request, None)
        except KafkaError as exc:
            return elect_leaders_error(body, version, exc.error, exc.message)
        if response.error_code != Errors.NONE:
            # v0 has no top-level error: each named partition carries it.
            return elect_leaders_error(body, version, Errors.of(response.error_code), "")
        return am.lower(ApiKey.ELECT_LEADERS, response, version)

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

