"""One controller process: the Raft voter for `__cluster_metadata`, and while it leads, the
active controller (ARCHITECTURE.md "Processes").

The active controller writes Kafka's NoOpRecord every `metadata.max.idle.interval.ms`, so the
log and the high watermark keep moving and a stuck quorum is visible at once. Standbys replay
committed records. Snapshots are taken as Kafka's SnapshotGenerator takes them
(`metadata.log.max.record.bytes.between.snapshots` of committed batches, or the first commit
`metadata.log.max.snapshot.interval.ms` after the last one), after which whole segments below the snapshot are cleaned (rule 7: the
voter set is in each snapshot).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.core.controller_result import ControllerResult
from controller.runtime.kafka_admin_apis import ControllerKafkaAdminApis
from controller.runtime.kafka_broker_lifecycle import route_broker_lifecycle
from controller.runtime.kafka_feature_apis import route_feature_apis
from controller.runtime.kafka_producer_id_apis import route_producer_id_apis
from controller.runtime.quorum_controller import QuorumController
from kafkawire.api_versions import CONTROLLER_API_VERSIONS
from kafkawire.clock import monotonic_ms
from kafkawire.config import NodeConfig
from kafkawire.errors import KafkaError
from kafkawire.faults import FaultInjector
from kafkawire.gc_tuning import GcFreezer
from kafkawire.http_status import node_status_server
from kafkawire.loop import cancel_and_wait, serve_until_signalled
from kafkawire.router import KafkaRouter
from kafkawire.server import KafkaServer
from metadata import features
from metadata.loader import MetadataLoader
from metadata.records import NoOpRecord
from metadata.snapshot_generator import SnapshotGenerator, SnapshotTrigger
from raft.core.membership_metrics import membership_metrics
from raft.core.replica_key import uuid_to_str
from raft.runtime.kafka_raft_apis import KafkaRaftApis
from raft.runtime.raft_manager import RaftManager

log = logging.getLogger("minikraft.controller")


class _ControllerCollector(Collector):
    """KIP-966's controller metrics, read from the committed image at scrape time. Only the
    active controller reports them, as in Kafka (standbys report 0)."""

    NAMES = {
        "offline_partitions": ("kafka_controller_offline_partitions_count", "OfflinePartitionsCount"),
        "under_min_isr_partitions": (
            "kafka_controller_global_under_min_isr_partition_count",
            "global_under_min_isr_partition_count",
        ),
        "fenced_broker_count": ("kafka_controller_fenced_broker_count", "FencedBrokerCount"),
        "active_broker_count": ("kafka_controller_active_broker_count", "ActiveBrokerCount"),
        "election_from_eligible_leader_replicas_total": (
            "kafka_controller_election_from_eligible_leader_replicas_total",
            "ElectionFromEligibleLeaderReplicasPerSec (as a counter)",
        ),
        "unclean_recovery_partitions_count": (
            "kafka_controller_unclean_recovery_partitions_count",
            "unclean_recovery_partitions_count (KIP-966 recovery manager)",
        ),
        "unclean_leader_elections_total": (
            "kafka_controller_unclean_leader_elections_total",
            "UncleanLeaderElectionsPerSec (as a counter)",
        ),
        "manual_leader_election_required_partitions": (
            "kafka_controller_manual_leader_election_required_partition_count",
            "manual_leader_election_required_partition_count (KIP-966)",
        ),
        "unclean_recovery_finished_count": (
            "kafka_controller_unclean_recovery_finished_count",
            "unclean_recovery_finished_count (KIP-966, a counter reset by a restart)",
        ),
    }

    def __init__(self, node: ControllerNode) -> None:
        self.node = node

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active = self.node.raft.replica.role == "Leader"
        values = self.node.quorum_controller.metrics() if active else {}
        yield GaugeMetricFamily("kafka_controller_active_controller_count", "ActiveControllerCount",
                                value=1 if active else 0)
        for key, (name, help_text) in self.NAMES.items():
            yield GaugeMetricFamily(name, help_text, value=values.get(key, 0))
        electable = GaugeMetricFamily(
            "kafka_controller_electable_leaders",
            "Electable leaders (ISR + ELR) per partition (KIP-966)",
            labels=["topic", "partition"],
        )
        if active:
            for topic, partition_id, count in self.node.quorum_controller.partition_metrics.electable_leaders(
                self.node.state.image
            ):
                electable.add_metric([topic, str(partition_id)], count)
        yield electable
        membership = membership_metrics(self.node.raft.replica)  # seed 003's raft-metrics
        for name, help_text, value in (
            (
                "raft_number_of_possible_voters",
                "number-of-possible-voters (Raft): observers that could be added",
                membership.number_of_possible_voters,
            ),
            (
                "raft_pending_add_voter",
                "pending-add-voter (Raft): 1 while an added voter is not committed",
                membership.pending_add_voter,
            ),
            (
                "raft_pending_remove_voter",
                "pending-remove-voter (Raft): 1 while a removal is not committed",
                membership.pending_remove_voter,
            ),
        ):
            yield GaugeMetricFamily(name, help_text, value=value)


# Extra HTTP routes a launcher installs on the node's HTTP port (the raft bench, from cluster/).
HttpRoutes = Callable[["ControllerNode"], list[tuple[str, str, Any]]]


class ControllerNode:
    def __init__(self, config: NodeConfig, http_routes: HttpRoutes | None = None) -> None:
        self.config = config
        listener = config.controller_listener()
        if listener is None:
            raise ValueError("controller listener missing")
        self.listener = listener
        self.faults = FaultInjector()
        # The controller's view of `__cluster_metadata` (the shared loader); its publishers are
        # the snapshot generator, every voter snapshotting its own committed state (rule 7),
        # and the quorum controller.
        self.state = MetadataLoader()
        # Voters learn this controller's endpoint from Raft (BeginQuorumEpoch, DescribeQuorum):
        # its advertised.listeners entry when given (a controller bound to 0.0.0.0 in a
        # container advertises its service name), else its listener (KIP-853).
        self.raft = RaftManager(
            config, faults=self.faults, listener=self.state,
            endpoint=config.advertised(listener).address,
        )
        self.state.install_publishers(
            [
                SnapshotGenerator(
                    SnapshotTrigger.from_config(config.get_int),
                    self.raft.create_snapshot,
                    monotonic_ms,
                )
            ]
        )
        self.quorum_controller = QuorumController(self.raft, self.state, config)
        # The active controller's writes wait for their offset in the image (no polling); the
        # heap is frozen after a big change, last, once every publisher has seen it (issue 35).
        self.state.install_publishers([self.quorum_controller, GcFreezer().install()])
        # Kafka's protocol on the controller listener: each family routes its APIs here.
        self.kafka_router = KafkaRouter(
            CONTROLLER_API_VERSIONS, lambda: features.api_features(self.state.image)
        )
        KafkaRaftApis(self.raft.driver.handle_request).route(self.kafka_router)
        ControllerKafkaAdminApis(self.quorum_controller).route(self.kafka_router)
        route_producer_id_apis(self.kafka_router, self.quorum_controller)
        route_feature_apis(self.kafka_router, self.quorum_controller)
        route_broker_lifecycle(self.kafka_router, self.quorum_controller)
        self.max_frame_bytes = config.get_int("socket.request.max.bytes")
        self.server: KafkaServer | None = None  # built at start, once every family routed
        self.registry = CollectorRegistry()
        self._metrics()
        self.http = node_status_server(
            config.http_listener, self, http_routes(self) if http_routes is not None else None
        )
        self._stopped = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []

    def _metrics(self) -> None:
        self.registry.register(_ControllerCollector(self))
        replica = self.raft.replica

        Gauge("raft_current_leader", "current-leader (Raft)", registry=self.registry).set_function(
            lambda: -1 if replica.leader_id is None else replica.leader_id
        )
        Gauge("raft_current_epoch", "current-epoch (Raft)", registry=self.registry).set_function(
            lambda: replica.epoch
        )
        Gauge("raft_high_watermark", "high-watermark (Raft)", registry=self.registry).set_function(
            lambda: replica.high_watermark
        )
        Gauge("raft_log_end_offset", "log end offset", registry=self.registry).set_function(
            lambda: self.raft.log.end_offset()
        )
        Gauge("raft_number_of_voters", "number-of-voters (Raft)", registry=self.registry).set_function(
            lambda: len(replica.voters)
        )
        Gauge("raft_commit_latency_avg", "commit-latency-avg (ms, last)", registry=self.registry).set_function(
            lambda: self.raft.driver.last_commit_latency_ms
        )

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        await serve_until_signalled(self.start, self.stop, self._stopped)

    async def start(self) -> None:
        self.server = KafkaServer(
            self.listener.host,
            self.listener.port,
            self.kafka_router.service(),
            max_frame_bytes=self.max_frame_bytes,
            faults=self.faults,
            name=f"Controller {self.config.node_id}",
        )
        port = await self.server.start()
        log.info(
            "Controller %s listening on %s:%s (cluster %s, directory id %s)",
            self.config.node_id,
            self.listener.host,
            port,
            self.raft.cluster_id,
            uuid_to_str(self.raft.meta.directory_id),
        )
        await self.raft.start()
        await self.quorum_controller.start()
        if self.http is not None:
            await self.http.start()
        self._tasks.append(asyncio.ensure_future(self._noop_loop()))

    async def stop(self) -> None:
        log.info("Controller %s shutting down", self.config.node_id)
        await cancel_and_wait(*self._tasks)
        await self.quorum_controller.stop()
        await self.raft.stop()
        if self.server is not None:
            await self.server.stop()
        if self.http is not None:
            await self.http.stop()

    async def _noop_loop(self) -> None:
        """Kafka's maybeScheduleNextWriteNoOpRecord: a NoOpRecord every
        metadata.max.idle.interval.ms, written through the controller's single writer like
        every other record (the writer decides each write on an image that has every record
        appended before it, and knows where its records go)."""
        interval_s = self.config.get_int("metadata.max.idle.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval_s)
            if self.raft.replica.role != "Leader":
                continue
            try:
                await self.quorum_controller.write(
                    lambda image: ControllerResult((NoOpRecord(),), None), "idle NoOpRecord"
                )
            except KafkaError as exc:
                log.debug("NoOpRecord not written: %s", exc)

    # -- requests ---------------------------------------------------------------------------

    # -- status -----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        replica = self.raft.replica
        return {
            "node_id": self.config.node_id,
            "role": replica.role,
            "leader_id": replica.leader_id,
            "epoch": replica.epoch,
            "high_watermark": replica.high_watermark,
            "log_end_offset": self.raft.log.end_offset(),
            "log_start_offset": self.raft.log.start_offset(),
            "directory_id": uuid_to_str(self.raft.meta.directory_id),
            "cluster_id": self.raft.cluster_id,
            "applied_offset": self.raft.driver.applied_offset,
        }

    def health(self) -> tuple[bool, dict[str, Any]]:
        status = self.status()
        return status["leader_id"] is not None, status
