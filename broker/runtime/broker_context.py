"""BrokerContext: what the broker's request handlers (KafkaApis, KafkaAdminApis,
KafkaGroupApis, GroupCoordinator) use of the broker they serve, as a Protocol. BrokerNode
satisfies it; the handlers name it rather than BrokerNode, which builds them, so no module
imports the one that imports it (issue 18: no import cycles)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from broker.runtime.replica_manager import ReplicaManager
from kafkawire.config import Listener, NodeConfig
from kafkawire.connection import KafkaRequestContext
from kafkawire.create_topics import NewTopic
from kafkawire.errors import Errors
from kafkawire.faults import FaultInjector
from metadata.loader import MetadataLoader
from raft.runtime.raft_manager import RaftManager


class TopicCreator(Protocol):
    async def create_topics(self, topics: Sequence[NewTopic]) -> dict[str, Errors]: ...


class AdminApis(Protocol):
    @property
    def admin(self) -> TopicCreator: ...


class BrokerContext(Protocol):
    @property
    def broker_id(self) -> int: ...

    @property
    def broker_epoch(self) -> int: ...

    @property
    def config(self) -> NodeConfig: ...

    @property
    def listener(self) -> Listener: ...

    @property
    def faults(self) -> FaultInjector: ...

    @property
    def metadata(self) -> MetadataLoader: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def raft(self) -> RaftManager: ...

    @property
    def kafka_apis(self) -> AdminApis: ...


def listener_name(ctx: KafkaRequestContext, broker: BrokerContext) -> str:
    """The listener a request came in on (Kafka's request.context.listenerName): Metadata,
    DescribeCluster and FindCoordinator name brokers by their endpoints on it, so a client on
    an EXTERNAL listener is sent to EXTERNAL addresses. A request with no listener (an
    in-process call) gets the inter-broker listener."""
    return ctx.listener_name or broker.listener.name
