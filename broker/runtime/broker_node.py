"""One broker process (ARCHITECTURE.md "Processes"): a Raft observer of `__cluster_metadata`
replaying it into the MetadataImage, the broker's RPC listener and its HTTP side.

A broker never votes: it is not in the voter set, so its RaftReplica is an observer that
fetches from the leader it finds through `controller.quorum.bootstrap.servers`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from cluster.config import NodeConfig
from cluster.net.client import RpcClient
from cluster.net.faults import FaultInjector
from cluster.net.http_server import HttpStatusServer
from cluster.net.server import RequestContext, RpcServer
from cluster.protocol.api_keys import ApiKey
from cluster.protocol.errors import Errors, KafkaError
from controller.runtime.metadata_state import MetadataState
from raft.core.replica_key import uuid_to_str
from raft.runtime.meta_properties import ensure_formatted
from raft.runtime.raft_manager import RaftManager

log = logging.getLogger("minikraft.broker")

BrokerHandler = Callable[[ApiKey, Any, RequestContext], Awaitable[Any]]


class BrokerNode:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        listener = config.broker_listener()
        if listener is None:
            raise ValueError("a broker needs a listener that is not a controller listener")
        self.listener = listener
        # Every data directory must be formatted for this cluster before the broker serves.
        self.log_dir_metas = [ensure_formatted(d) for d in config.log_dirs]
        self.faults = FaultInjector()
        self.metadata = MetadataState(
            snapshot_interval_records=config.get_int("metadata.log.snapshot.interval.records")
        )
        self.client = RpcClient(f"node-{config.node_id}", cluster_id=None, faults=self.faults)
        self.raft = RaftManager(config, self.client, listener=self.metadata)
        self.client.cluster_id = self.raft.cluster_id
        self.metadata.bind(self.raft)
        self.handlers: dict[ApiKey, BrokerHandler] = {}
        self.server = RpcServer(
            listener.host,
            listener.port,
            self._handle,
            cluster_id=self.raft.cluster_id,
            node_id=config.node_id,
            max_frame_bytes=config.get_int("socket.request.max.bytes"),
            faults=self.faults,
        )
        self.registry = CollectorRegistry()
        Gauge(
            "broker_metadata_offset", "applied metadata offset", registry=self.registry
        ).set_function(lambda: self.metadata.committed_offset)
        http = config.http_listener
        self.http = (
            HttpStatusServer(
                http[0],
                http[1],
                registry=self.registry,
                status=self.status,
                health=self.health,
                faults=self.faults,
            )
            if http
            else None
        )
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopped.set)
        await self.start()
        try:
            await self._stopped.wait()
        finally:
            await self.stop()

    async def start(self) -> None:
        await self.server.start()
        log.info(
            "Broker %s listening on %s (cluster %s)",
            self.config.node_id,
            self.listener.address,
            self.raft.cluster_id,
        )
        await self.raft.start()
        if self.http is not None:
            await self.http.start()

    async def stop(self) -> None:
        log.info("Broker %s shutting down", self.config.node_id)
        await self.raft.stop()
        await self.server.stop()
        if self.http is not None:
            await self.http.stop()
        await self.client.close()

    async def _handle(self, api_key: ApiKey, request: Any, ctx: RequestContext) -> Any:
        handler = self.handlers.get(api_key)
        if handler is None:
            raise KafkaError(Errors.UNSUPPORTED_VERSION, f"broker does not serve {api_key.name}")
        return await handler(api_key, request, ctx)

    def status(self) -> dict[str, Any]:
        replica = self.raft.replica
        return {
            "node_id": self.config.node_id,
            "role": "broker",
            "raft_role": replica.role,
            "metadata_leader_id": replica.leader_id,
            "metadata_epoch": replica.epoch,
            "metadata_high_watermark": replica.high_watermark,
            "metadata_applied_offset": self.metadata.committed_offset,
            "metadata_directory_id": uuid_to_str(self.raft.meta.directory_id),
            "cluster_id": self.raft.cluster_id,
        }

    def health(self) -> tuple[bool, dict[str, Any]]:
        status = self.status()
        return status["metadata_leader_id"] is not None, status
