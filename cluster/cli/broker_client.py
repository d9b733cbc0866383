"""What the data commands (`produce`, `consume`, `health`) share: a client on the brokers'
registry, METADATA from whichever bootstrap broker answers, and partition leader lookup."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from cluster.cli.admin_client import split_bootstrap
from cluster.net.client import RpcClient
from cluster.protocol import broker_messages as bm
from cluster.protocol.errors import Errors, KafkaError

REQUEST_TIMEOUT_MS = 10_000
# Errors a data client refreshes metadata on and retries, as Kafka's clients do: the leader
# moved, is being elected, or is RECOVERING (rule 21 answers NOT_LEADER_OR_FOLLOWER until the
# recovery commits), or the leader has not replayed a just-created topic yet.
RETRIABLE_ERRORS = frozenset(
    {Errors.NOT_LEADER_OR_FOLLOWER, Errors.LEADER_NOT_AVAILABLE, Errors.NETWORK_EXCEPTION,
     Errors.UNKNOWN_LEADER_EPOCH, Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION}
)


def new_client(client_id: str) -> RpcClient:
    return RpcClient(
        client_id, cluster_id=None, request_timeout_ms=REQUEST_TIMEOUT_MS, registry=bm.BROKER_REGISTRY
    )


async def fetch_metadata(
    client: RpcClient, bootstrap: str, topics: list[str] | None, timeout_ms: int = 3000
) -> bm.MetadataResponse:
    """METADATA from the first bootstrap broker that answers; NETWORK_EXCEPTION if none does."""
    last = KafkaError(Errors.NETWORK_EXCEPTION, f"no broker answered at {bootstrap}")
    for address in split_bootstrap(bootstrap):
        try:
            response: bm.MetadataResponse = await client.request(
                address, bm.MetadataRequest(topics=topics), timeout_ms=timeout_ms
            )
        except KafkaError as exc:
            last = exc
            continue
        if response.error_code == 0:
            return response
        last = KafkaError(Errors.of(response.error_code), response.error_message)
    raise last


class Leaders:
    """Partition -> leader address for one topic, refreshed on demand."""

    def __init__(self, client: RpcClient, bootstrap: str, topic: str) -> None:
        self.client = client
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions: dict[int, bm.MetadataPartition] = {}
        self.addresses: dict[int, str] = {}

    async def refresh(self) -> None:
        response = await fetch_metadata(self.client, self.bootstrap, [self.topic])
        self.addresses = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        topic = response.topics[0] if response.topics else None
        if topic is None or topic.error_code != 0:
            code = Errors.UNKNOWN_TOPIC_OR_PARTITION if topic is None else Errors.of(topic.error_code)
            raise KafkaError(code, f"topic {self.topic}: {code.name}")
        self.partitions = {p.partition_index: p for p in topic.partitions}

    async def wait_ready(self, timeout_ms: int = 3000) -> None:
        """Refresh until the topic is known with a leader per partition (a just-created topic
        reaches the brokers' metadata a moment later: Kafka's max.block.ms)."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            try:
                await self.refresh()
                if all(p.leader_id >= 0 for p in self.partitions.values()):
                    return
            except KafkaError as exc:
                if exc.error is not Errors.UNKNOWN_TOPIC_OR_PARTITION or time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                return
            await asyncio.sleep(0.1)

    def leader_address(self, partition: int) -> str:
        info = self.partitions.get(partition)
        if info is None:
            raise KafkaError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {self.topic}-{partition}"
            )
        address = self.addresses.get(info.leader_id)
        if address is None:
            raise KafkaError(
                Errors.LEADER_NOT_AVAILABLE, f"{self.topic}-{partition} has no leader"
            )
        return address


def error_name(response: Any) -> str:
    return Errors.of(response.error_code).name
