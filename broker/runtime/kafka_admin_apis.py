"""The broker's admin APIs on Kafka's wire protocol, as a Kafka broker serves them.

Writes (CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs, AlterConfigs,
ElectLeaders, UpdateFeatures) and
the quorum APIs (DescribeQuorum, AddRaftVoter, RemoveRaftVoter) are FORWARDED: the client's kio
request body goes unchanged, same version, to the active controller (the Raft leader this broker
follows as an observer, else each bootstrap controller), whose answer is returned as is.
NOT_CONTROLLER and unreachable controllers are retried inside (kafkawire.forwarding) until the
request's timeout, so the client never sees a controller move. Forwarding has its own
KafkaClient (client id node-<id>, this broker's fault layer), so a slow admin call never queues
behind or ahead of heartbeats.

Reads (DescribeConfigs, DescribeCluster, DescribeTopicPartitions) are answered from this broker's
metadata image by metadata.kafka_describe, as Kafka answers them on the broker asked.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from broker.runtime.broker_context import BrokerContext
from kafkawire.api_keys import ApiKey
from kafkawire.client import KafkaClient, client_id_for_node
from kafkawire.create_topics import NewTopic, create_topics_request
from kafkawire.elect_leaders_error import elect_leaders_error
from kafkawire.entities import NO_THROTTLE, build, has_field, item_type
from kafkawire.errors import Errors, KafkaError
from kafkawire.forwarding import Candidate, request_active
from kafkawire.messages import error_code, response_schema
from metadata import kafka_describe
from metadata.kafka_describe import DESCRIBE_PARTITIONS_DEFAULT_LIMIT
from metadata.metadata_image import MetadataImage

FORWARD_TIMEOUT_MS = 30_000
DESCRIBE_PARTITIONS_LIMIT_KEY = "max.request.partition.size.limit"
FORWARDED_API_KEYS = frozenset(
    {
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_TOPICS,
        ApiKey.CREATE_PARTITIONS,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        ApiKey.ALTER_CONFIGS,
        ApiKey.ELECT_LEADERS,
        ApiKey.DESCRIBE_QUORUM,
        ApiKey.ADD_RAFT_VOTER,
        ApiKey.REMOVE_RAFT_VOTER,
        ApiKey.UPDATE_FEATURES,
    }
)

Handler = Callable[[Any, int], Awaitable[Any]]


def forward_timeout_ms(body: Any) -> int:
    """The request's own timeout where it has one (0 or less: "do not wait" for the change to
    reach the brokers, not "give up at once"), else FORWARD_TIMEOUT_MS."""
    timeout = getattr(body, "timeout", None)
    if isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0:
        return int(timeout.total_seconds() * 1000)
    return FORWARD_TIMEOUT_MS


def forward_error_response(body: Any, version: int, error: Errors, message: str) -> Any:
    """The answer to a forwarded request no controller answered: the error where Kafka's
    response for that API puts it (per topic, per resource, or top level)."""
    api_key = int(body.__api_key__)
    schema = response_schema(api_key, version)
    text = message or None
    if api_key == ApiKey.CREATE_TOPICS:
        cls = item_type(schema, "topics")
        items = tuple(
            build(
                cls,
                name=t.name,
                topic_id=None,
                error_code=error_code(error),
                error_message=text,
                configs=None,
            )
            for t in body.topics
        )
        return build(schema, throttle_time=NO_THROTTLE, topics=items)
    if api_key == ApiKey.DELETE_TOPICS:
        cls = item_type(schema, "responses")
        if has_field(type(body), "topic_names"):
            named = [(str(n), None) for n in body.topic_names]
        else:
            named = [(t.name, t.topic_id) for t in body.topics]
        items = tuple(
            build(cls, name=n, topic_id=tid, error_code=error_code(error), error_message=text)
            for n, tid in named
        )
        return build(schema, throttle_time=NO_THROTTLE, responses=items)
    if api_key == ApiKey.CREATE_PARTITIONS:
        cls = item_type(schema, "results")
        items = tuple(
            build(cls, name=t.name, error_code=error_code(error), error_message=text)
            for t in body.topics
        )
        return build(schema, throttle_time=NO_THROTTLE, results=items)
    if api_key in (ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CONFIGS):
        cls = item_type(schema, "responses")
        items = tuple(
            build(
                cls,
                error_code=error_code(error),
                error_message=text,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in body.resources
        )
        return build(schema, throttle_time=NO_THROTTLE, responses=items)
    if api_key == ApiKey.ELECT_LEADERS:
        return elect_leaders_error(body, version, error, message)
    if api_key == ApiKey.UPDATE_FEATURES and has_field(schema, "results"):
        cls = item_type(schema, "results")  # v0-v1: the error for every feature too
        items = tuple(
            build(cls, feature=u.feature, error_code=error_code(error), error_message=text)
            for u in body.feature_updates
        )
        return build(schema, throttle_time=NO_THROTTLE, error_code=error_code(error),
                     error_message=text, results=items)
    # DescribeQuorum, AddRaftVoter, RemoveRaftVoter: a top-level error code.
    return build(
        schema,
        throttle_time=NO_THROTTLE,
        error_code=error_code(error),
        error_message=text,
        topics=(),
        nodes=(),
    )



# MetadataResponse.NO_CONTROLLER_ID: what a KRaft broker answers while no broker is unfenced.
NO_CONTROLLER_ID = -1


def advertised_controller_id(image: MetadataImage) -> int:
    """The "controller" a KRaft broker names in Metadata and DescribeCluster: a random
    registered, unfenced broker (admin requests sent to it are forwarded to the active
    controller), or -1 while there is none, as Kafka's KRaftMetadataCache.getRandomAliveBroker.
    Never this broker while it is fenced: a client would wait for a controller it cannot find
    among the brokers listed (librdkafka's admin client until its request timeout)."""
    alive = [b.broker_id for b in image.brokers.values() if not b.fenced]
    return random.choice(alive) if alive else NO_CONTROLLER_ID

class KafkaAdminApis:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        # Its own connections: admin calls never share a connection with heartbeats.
        self.client = KafkaClient(
            client_id_for_node(broker.broker_id),
            request_timeout_ms=FORWARD_TIMEOUT_MS,
            faults=broker.faults,
        )

    def handlers(self) -> dict[ApiKey, Handler]:
        forwarded: dict[ApiKey, Handler] = {key: self.forward for key in FORWARDED_API_KEYS}
        return {
            **forwarded,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: self.describe_topic_partitions,
        }

    async def close(self) -> None:
        await self.client.close()

    # ---- forwarding -----------------------------------------------------------------------

    def _controllers(self) -> list[Candidate]:
        """The Raft leader this broker follows first, then every bootstrap controller."""
        replica = self.broker.raft.replica
        leader = replica.leader_endpoint
        candidates: list[Candidate] = [(leader, replica.leader_id)] if leader else []
        candidates += [(s, None) for s in self.broker.config.bootstrap_servers if s != leader]
        return candidates

    async def forward_body(self, body: Any, timeout_ms: int | None = None) -> Any:
        """The active controller's answer to `body`; KafkaError if none came in time."""
        return await request_active(
            self.client,
            self._controllers,
            body,
            timeout_ms=timeout_ms if timeout_ms is not None else forward_timeout_ms(body),
        )

    async def create_topics(self, topics: Sequence[NewTopic]) -> dict[str, Errors]:
        """Create topics on this broker's own behalf; each topic's outcome (KafkaError if no
        controller answered)."""
        response = await self.forward_body(create_topics_request(topics))
        return {str(t.name): Errors.of(t.error_code) for t in response.topics}

    async def forward(self, body: Any, version: int) -> Any:
        try:
            return await self.forward_body(body)
        except KafkaError as exc:
            return forward_error_response(body, version, exc.error, exc.message)

    # ---- reads from this broker's image ---------------------------------------------------

    async def describe_configs(self, body: Any, version: int) -> Any:
        return kafka_describe.describe_configs(
            self.broker.metadata.image, body, version, self.broker.config
        )

    async def describe_topic_partitions(self, body: Any, _version: int) -> Any:
        limit = int(
            self.broker.config.get(DESCRIBE_PARTITIONS_LIMIT_KEY)
            or DESCRIBE_PARTITIONS_DEFAULT_LIMIT
        )
        return kafka_describe.describe_topic_partitions(self.broker.metadata.image, body, limit)

    async def describe_cluster(self, body: Any, version: int, listener: str | None = None) -> Any:
        image = self.broker.metadata.image
        return kafka_describe.describe_cluster(
            version,
            self.broker.raft.cluster_id,
            advertised_controller_id(image),
            kafka_describe.live_brokers(
                image,
                listener or self.broker.listener.name,
                include_fenced=bool(getattr(body, "include_fenced_brokers", False)),
            ),
            fenced=kafka_describe.fenced_broker_ids(image),
            include_authorized_operations=bool(body.include_cluster_authorized_operations),
        )
