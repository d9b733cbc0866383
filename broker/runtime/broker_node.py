"""One broker process (ARCHITECTURE.md "Processes"): a Raft observer of `__cluster_metadata`
replaying it into the MetadataImage, registration, heartbeats and AlterPartition with the active
controller (Kafka's BrokerRegistration/BrokerHeartbeat/AlterPartition,
kafkawire/broker_lifecycle.py), the partitions it hosts (ReplicaManager), replica
fetchers (Kafka's Fetch to the leader broker), the broker's listener (Kafka's protocol) and its
HTTP side.

A broker never votes: it is not in the voter set, so its RaftReplica is an observer that
fetches from the leader it finds through `controller.quorum.bootstrap.servers`.

Start: read PreviousBrokerEpoch from the clean-shutdown file, load the logs, remove the file
(rule 12), then serve. Stop (SIGTERM): controlled shutdown through the heartbeat, final flush,
checkpoints, then the clean-shutdown file with the broker epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from broker.runtime.clean_shutdown import (
    previous_broker_epoch,
    remove_clean_shutdown,
    write_clean_shutdown,
)
from broker.runtime.event_journal import EventJournal
from broker.runtime.kafka_apis import KafkaApis
from broker.runtime.log_manager import LogManager, cleaner_settings
from broker.runtime.metadata_publisher import BrokerMetadataPublisher
from broker.runtime.replica_fetcher import FetchSettings, ReplicaFetcher
from broker.runtime.replica_fetcher_manager import ReplicaFetcherManager
from broker.runtime.replica_manager import HostedPartition, ReplicaManager, ReplicaSettings
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.client import KafkaClient, client_id_for_node
from kafkawire.clock import monotonic_ms
from kafkawire.config import NodeConfig
from kafkawire.constants import NO_BROKER_EPOCH
from kafkawire.errors import Errors, KafkaError
from kafkawire.faults import FaultInjector
from kafkawire.gc_tuning import GcFreezer
from kafkawire.http_status import node_status_server
from kafkawire.loop import WALK_BUDGET_S, cancel_and_wait, serve_until_signalled
from kafkawire.server import KafkaServer
from metadata.config_defs import MINIKRAFT_BROKER_DEFAULTS, declared_defaults
from metadata.loader import MetadataLoader
from metadata.snapshot_generator import SnapshotGenerator, SnapshotTrigger
from raft.core.replica_key import uuid_to_str
from raft.runtime.meta_properties import ensure_storage_identity
from raft.runtime.raft_driver import run_steps
from raft.runtime.raft_manager import RaftManager

log = logging.getLogger("minikraft.broker")


# What the broker reads where its config file is silent: the table's defaults (Kafka's, and
# minikraft's log.preallocate and log.segment.bytes: metadata.config_defs says why) ...
BROKER_DEFAULTS = {
    **declared_defaults(
        "replica.lag.time.max.ms",
        "replica.fetch.max.bytes",
        "replica.fetch.response.max.bytes",
        "replica.fetch.wait.max.ms",
        "replica.fetch.min.bytes",
        "max.incremental.fetch.session.cache.slots",
        "min.incremental.fetch.session.eviction.ms",
        "message.max.bytes",
        *MINIKRAFT_BROKER_DEFAULTS,
        "log.retention.check.interval.ms",
        "log.cleaner.backoff.ms",
        "log.segment.delete.delay.ms",
    ),
    # ... and two of minikraft's own, not in the table (Kafka's replica.fetch.backoff.ms is 1 s).
    "replica.fetch.backoff.ms": "200",
    # The broker's stop waits this long for the controller's grant, then flushes, writes its
    # checkpoints and closes its logs (1.3-2.5 s at 100,000 partitions): within the 10 s that
    # `minikraft down` gives the brokers before it SIGKILLs them (issue 35).
    "controlled.shutdown.timeout.ms": "6000",
}
JOURNAL_DIR_KEY = "minikraft.journal.dir"
CONTROLLER_REQUEST_TIMEOUT_MS = 5000
# Kafka's replica.high.watermark.checkpoint.interval.ms default.
HWM_CHECKPOINT_INTERVAL_S = 5.0
# BrokerLifecycleManager: "Schedule the heartbeat after only 10 ms so that in the case where
# there is no recovery work to be done, we start up a bit quicker."
STARTING_HEARTBEAT_S = 0.01


SLOW_PHASE_S = 5.0

# Kafka's BrokerState (metadata/BrokerState.java), the value of its BrokerState gauge.
STARTING, RECOVERY, RUNNING, PENDING_CONTROLLED_SHUTDOWN, SHUTTING_DOWN = 1, 2, 3, 6, 7


class _Phases:
    """Where a shutdown's time went, for its one summary line."""

    def __init__(self) -> None:
        self._started = self._last = time.monotonic()
        self._spent: list[tuple[str, float]] = []
        self._broker_id: int | None = None
        self._watch: asyncio.TimerHandle | None = None

    def done(self, phase: str) -> None:
        now = time.monotonic()
        self._spent.append((phase, now - self._last))
        self._last = now
        self._rearm(phase)

    def start_watch(self, broker_id: int) -> None:
        """Warn when a phase runs past SLOW_PHASE_S: a stop that hangs (and is then SIGKILLed,
        leaving no clean-shutdown file) says after which phase it stalled."""
        self._broker_id = broker_id
        self._rearm("shutting down")

    def stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _rearm(self, after: str) -> None:
        if self._broker_id is None:
            return
        self.stop_watch()
        self._watch = asyncio.get_running_loop().call_later(
            SLOW_PHASE_S, log.warning, "Broker %s: shutdown still running %.0f s after %s",
            self._broker_id, SLOW_PHASE_S, after)

    def summary(self) -> str:
        parts = ", ".join(f"{phase} {seconds * 1000:.0f} ms" for phase, seconds in self._spent)
        return f"{(self._last - self._started) * 1000:.0f} ms ({parts})"


def journal_path(config: NodeConfig) -> Path:
    """`minikraft.journal.dir`, else `journal/` next to the metadata dir (outside the data)."""
    text = config.get(JOURNAL_DIR_KEY)
    base = Path(text) if text else config.metadata_log_dir.parent.parent / "journal"
    return base / f"broker-{config.node_id}.journal"


class BrokerNode:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        for key, value in BROKER_DEFAULTS.items():
            config.props.setdefault(key, value)
        listener = config.broker_listener()
        if listener is None:
            raise ValueError("a broker needs a listener that is not a controller listener")
        # The inter-broker listener (replica fetchers use the leader's endpoint on it); clients
        # may come in on any of `listeners` (docker compose: INTERNAL and EXTERNAL).
        self.listener = listener
        self.listeners = config.broker_listeners()
        self.broker_id = config.node_id
        # Every data directory must be formatted for this cluster before the broker serves.
        # Seed 003: each names this node and the metadata directory's cluster, else no start.
        _, self.log_dir_metas = ensure_storage_identity(
            config.metadata_log_dir, config.log_dirs, config.node_id
        )
        self.faults = FaultInjector()
        self.broker_epoch = NO_BROKER_EPOCH
        self.fenced = True
        self.incarnation_id = uuid.uuid4()
        self.previous_broker_epoch = NO_BROKER_EPOCH
        self.started_after_clean_shutdown = False
        # The broker's view of `__cluster_metadata`: the shared loader, with the snapshot
        # generator and this broker's publisher registered once the replica manager exists.
        # It publishes nothing before it has caught up with the leader's high watermark
        # (Kafka's MetadataLoader with the Raft client's highWatermark()): a restarted broker
        # applies the cluster's current state once (issue 35).
        self.metadata = MetadataLoader(high_watermark=self._metadata_high_watermark)
        self.raft = RaftManager(
            config, faults=self.faults, listener=self.metadata, step_budget_s=WALK_BUDGET_S
        )
        # Broker lifecycle with the active controller on Kafka's protocol, on connections of
        # its own: a Kafka listener serves one request per connection at a time, so heartbeats
        # never queue behind another family's long-polling requests.
        self.controller_client = KafkaClient(client_id_for_node(config.node_id), faults=self.faults)
        # AlterPartition on a connection of its own too (Kafka's "alter-partition" channel
        # beside the lifecycle manager's): an AlterPartition waiting for the controller's writer
        # held the heartbeats queued behind it on one connection, they timed out (5 s) one
        # after another and the broker was fenced (issue 35's 100K run).
        self.alter_partition_client = KafkaClient(
            client_id_for_node(config.node_id), faults=self.faults
        )
        flush_text = config.get("flush.messages")
        self.journal = EventJournal(journal_path(config))
        self.replicas = ReplicaManager(
            ReplicaSettings(
                broker_id=self.broker_id,
                log_dirs=list(config.log_dirs),
                replica_lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
                flush_messages=int(flush_text) if flush_text else None,
                flush_in_thread=config.get_bool("minikraft.log.flush.in.thread"),
                preallocate=config.get_bool("log.preallocate"),
                static_configs={k: config.props[k] for k in config.given if k in config.props},
                node_defaults={
                    k: v for k, v in config.props.items() if k not in config.given
                },
                file_delete_delay_ms=config.get_int("log.segment.delete.delay.ms"),
            ),
            self.journal,
            self._send_alter_partition,
            lambda: self.broker_epoch,
        )
        self.log_manager = LogManager(
            self.replicas,
            cleaner_settings(
                config.get,
                retention_check_interval_ms=config.get_int("log.retention.check.interval.ms"),
                cleaner_enable=config.get_bool("log.cleaner.enable", True),
                cleaner_backoff_ms=config.get_int("log.cleaner.backoff.ms"),
            ),
        )
        freezer = GcFreezer().install()
        self.metadata.install_publishers(
            [
                SnapshotGenerator(
                    SnapshotTrigger.from_config(config.get_int),
                    self.raft.create_snapshot,
                    monotonic_ms,
                ),
                BrokerMetadataPublisher(self.replicas, self._update_fetcher, freezer.freeze),
                # Last: the heap is frozen after a big change once the replicas exist (issue 35).
                freezer,
            ]
        )
        self.fetch_settings = FetchSettings(
            max_bytes=config.get_int("replica.fetch.max.bytes"),
            response_max_bytes=config.get_int("replica.fetch.response.max.bytes"),
            max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
            min_bytes=config.get_int("replica.fetch.min.bytes"),
            backoff_ms=config.get_int("replica.fetch.backoff.ms"),
        )
        self.fetchers = ReplicaFetcherManager(self._make_fetcher)
        self._strays_checked = False
        # Kafka's BrokerLifecycleManager heartbeats every 10 ms while the broker starts (STARTING,
        # then RECOVERY until the controller unfences it), so a fresh broker is unfenced as soon
        # as it has caught up rather than at its next 2 s heartbeat; afterwards at the interval.
        self._started = False
        # The controller said this broker has caught up with the metadata log (its
        # registration), the BrokerLifecycleManager's STARTING -> RECOVERY.
        self.caught_up = False
        self._controlled_shutdown_done = False
        # Kafka's wire protocol on each broker listener (clients and the other brokers); a
        # request knows the listener it came in on (KafkaRequestContext.listener_name).
        self.kafka_apis = KafkaApis(self)
        self.servers = [
            KafkaServer(
                lst.host,
                lst.port,
                self.kafka_apis.service,
                max_frame_bytes=config.get_int("socket.request.max.bytes"),
                faults=self.faults,
                name=f"Broker {config.node_id} {lst.name}",
                listener_name=lst.name,
            )
            for lst in self.listeners
        ]
        self.server = next(s for s in self.servers if s.listener_name == listener.name)
        self.registry = CollectorRegistry()
        Gauge(
            "broker_metadata_offset", "applied metadata offset", registry=self.registry
        ).set_function(lambda: self.metadata.published_offset)
        # Kafka's ReplicaManager gauges, kept as partitions change (broker.runtime.isr_counts):
        # led partitions under min ISR, and whose ISR lacks a replica (bench scale waits for 0
        # of those on every broker before it asks Metadata).
        isr_counts = self.replicas.isr_counts
        Gauge(
            "UnderMinIsrPartitionCount", "led partitions under min ISR", registry=self.registry
        ).set_function(lambda: len(isr_counts.under_min_isr))
        # Kafka's KafkaBroker gauge: STARTING (1) until the controller says the broker caught
        # up, RECOVERY (2) until unfenced, RUNNING (3); `bench scale` waits for a restarted
        # broker to be RUNNING before it counts the ISRs.
        Gauge("BrokerState", "Kafka's BrokerState", registry=self.registry).set_function(
            self.broker_state
        )
        Gauge(
            "UnderReplicatedPartitions", "led partitions whose ISR lacks a replica",
            registry=self.registry,
        ).set_function(lambda: len(isr_counts.under_replicated))
        self.http = node_status_server(config.http_listener, self)
        self._stopped = asyncio.Event()
        self._shutting_down = False
        self._tasks: list[asyncio.Task[None]] = []

    def _metadata_high_watermark(self) -> int | None:
        replica = self.raft.replica
        return replica.high_watermark if replica.high_watermark_known else None

    # ---- lifecycle ----

    async def run(self) -> None:
        await serve_until_signalled(self.start, self.stop, self._stopped)

    async def start(self) -> None:
        # Rule 12: read the epoch, load the logs, then remove the file, so a crash from now on
        # counts as unclean.
        self.previous_broker_epoch = previous_broker_epoch(self.config.log_dirs)
        # What this start found (rule 12), for /v1/status: previous_broker_epoch is reset later.
        self.started_after_clean_shutdown = self.previous_broker_epoch != NO_BROKER_EPOCH
        loaded = self.replicas.load_logs()
        remove_clean_shutdown(self.config.log_dirs)
        log.info(
            "Broker %s loaded %d partition logs (previous broker epoch %d)",
            self.broker_id, loaded, self.previous_broker_epoch,
        )
        # Kafka's SocketServer opens a listener's port only in enableRequestProcessing, once
        # the broker is unfenced (BrokerServer.startup): "systems which assume that the socket
        # being open indicates readiness are not confused". A restarted broker catching up
        # with the metadata log was answering the other brokers' follower Fetches of the
        # partitions it had led (tens of thousands, with errors, every backoff): half its CPU
        # at 100,000 partitions (issue 35). A port 0 is bound at once, as Kafka's Acceptor
        # does, to know it.
        for server in self.servers:
            if server.port == 0:
                await server.start()
        log.info(
            "Broker %s starting (cluster %s): it listens on %s once unfenced",
            self.broker_id,
            self.raft.cluster_id,
            ", ".join(f"{lst.name}://{lst.address}" for lst in self.listeners),
        )
        await self.raft.start()
        if self.http is not None:
            await self.http.start()
        self._tasks = [
            asyncio.ensure_future(self._lifecycle_loop()),
            asyncio.ensure_future(self._tick_loop()),
        ]
        self.log_manager.start()

    async def stop(self) -> None:
        log.info("Broker %s shutting down", self.broker_id)
        self._shutting_down = True
        clean = False
        phases = _Phases()
        phases.start_watch(self.broker_id)
        try:
            await self._controlled_shutdown()
            clean = True
        except Exception:
            log.exception("Controlled shutdown failed")
        self._controlled_shutdown_done = True
        phases.done("controlled shutdown")
        await cancel_and_wait(*self._tasks)
        phases.done("tasks")
        await self.log_manager.close()
        phases.done("log manager")
        await self.fetchers.close()
        phases.done("fetchers")
        for server in self.servers:
            await server.stop()
        if self.http is not None:
            await self.http.stop()
        phases.done("listeners")
        # No more metadata once the leaderships are handed over: the applier would compete
        # with the final flush for the loop (Kafka closes its metadata publishers on shutdown;
        # issue 35: a broker still applying a 10,000-partition commit was SIGKILLed).
        await self.raft.stop()
        phases.done("metadata")
        await self.replicas.checkpoints.idle()  # a tick's write may still run in its thread
        self.replicas.flush_all()
        phases.done("flush")
        self.replicas.checkpoints.write_all(self.replicas.partitions.values())
        phases.done("checkpoints")
        await self.replicas.close()
        self.journal.close()
        phases.done("logs")
        if clean:
            # Written after the final flush (seed 001): the controller compares it at restart.
            write_clean_shutdown(self.config.log_dirs, self.broker_epoch)
        await self.controller_client.close()
        await self.alter_partition_client.close()
        await self.kafka_apis.admin.close()
        phases.stop_watch()
        log.info(
            "Broker %s stopped (%d partitions) in %s", self.broker_id,
            len(self.replicas.partitions), phases.summary(),
        )

    async def _controlled_shutdown(self) -> None:
        """Heartbeat want_shut_down until the controller grants the shutdown (its leaderships
        moved, it left the ISRs), as Kafka's BrokerLifecycleManager in PENDING_CONTROLLED_
        SHUTDOWN: until `controlled.shutdown.timeout.ms` (BrokerServer.shutdown's deadline),
        each heartbeat given broker.session.timeout.ms / 2 (KAFKA-14392), a slow answer being
        no reason to give up: the controller answers a shutdown heartbeat once its batch of
        partition changes is committed (issue 35: three 1 s heartbeats unanswered gave up
        every shutdown of three brokers stopping at once)."""
        if self.broker_epoch < 0:
            return
        deadline = time.monotonic() + self.config.get_int("controlled.shutdown.timeout.ms") / 1000
        rpc_timeout_ms = self.config.get_int("broker.session.timeout.ms") // 2
        unreachable = 0
        # Give up early when no controller can be reached at all (the whole cluster is
        # stopping): the connection is refused at once.
        while time.monotonic() < deadline and unreachable < 3:
            left_ms = int((deadline - time.monotonic()) * 1000)
            try:
                response = await self._send_heartbeat(
                    max(1, min(rpc_timeout_ms, left_ms)), want_shut_down=True
                )
                unreachable = 0
                if response.should_shut_down:
                    log.info("Broker %s: controlled shutdown complete", self.broker_id)
                    return
            except KafkaError as exc:
                log.info("Controlled shutdown heartbeat: %s", exc)
                if exc.error is Errors.NETWORK_EXCEPTION:
                    unreachable += 1
            await asyncio.sleep(0.1)
        log.warning("Broker %s: controlled shutdown timed out", self.broker_id)

    async def _lifecycle_loop(self) -> None:
        interval_s = self.config.get_int("broker.heartbeat.interval.ms") / 1000
        while not self._shutting_down:
            answered = False
            try:
                if self.broker_epoch < 0:
                    await self._register()
                else:
                    await self._heartbeat()
                    answered = True
            except KafkaError as exc:
                log.info("Broker %s: controller request failed: %s", self.broker_id, exc)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Broker lifecycle step failed")
            if self.broker_epoch < 0 or not (answered or self._started):
                await asyncio.sleep(0.2)
            else:
                await asyncio.sleep(interval_s if self._started else STARTING_HEARTBEAT_S)

    async def _register(self) -> None:
        if self.raft.replica.leader_id is None:
            return
        # Clients learn host and port from Metadata: every listener's endpoint, as
        # advertised.listeners gives it, else as listeners does (Kafka registers them all).
        advertised = [self.config.advertised(lst) for lst in self.listeners]
        response = await self._controller_request(
            lifecycle.registration_request(
                self.broker_id,
                self.raft.cluster_id,
                self.incarnation_id,
                [(a.name, a.host, a.port) for a in advertised],
                log_dirs=[m.directory_id for m in self.log_dir_metas if m.directory_id],
                previous_broker_epoch=self.previous_broker_epoch,
            )
        )
        self.broker_epoch = int(response.broker_epoch)
        log.info(
            "Broker %s registered with epoch %d (previous %d)",
            self.broker_id, self.broker_epoch, self.previous_broker_epoch,
        )

    async def _send_heartbeat(
        self, timeout_ms: int, *, want_fence: bool = False, want_shut_down: bool = False
    ) -> Any:
        """One BrokerHeartbeat carrying the offset every publisher has applied (Kafka's
        MetadataLoader.lastAppliedOffset, as BrokerLifecycleManager sends it)."""
        return await self._controller_request(
            lifecycle.heartbeat_request(
                self.broker_id,
                self.broker_epoch,
                self.metadata.published_offset,
                want_fence=want_fence,
                want_shut_down=want_shut_down,
            ),
            timeout_ms=timeout_ms,
        )

    async def _heartbeat(self) -> None:
        try:
            # Kafka's BrokerLifecycleManager: wantFence until the first metadata was
            # published (BrokerServer's setReadyToUnfence after firstPublishFuture).
            response = await self._send_heartbeat(
                CONTROLLER_REQUEST_TIMEOUT_MS, want_fence=self.metadata.published_offset == 0
            )
        except KafkaError as exc:
            if exc.error in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
                # Not a restart: the old epoch is gone, so the next registration is unclean.
                self.previous_broker_epoch = NO_BROKER_EPOCH
                self.broker_epoch = NO_BROKER_EPOCH
            raise
        if response.is_fenced != self.fenced:
            log.info("Broker %s is now %s", self.broker_id, "fenced" if response.is_fenced else "unfenced")
        self.fenced = response.is_fenced
        self._started = self._started or not response.is_fenced
        self.caught_up = self.caught_up or response.is_caught_up
        if not self.fenced:
            await self._enable_request_processing()
        if response.is_caught_up and not self._strays_checked:
            # Kafka looks for stray logs once the broker has caught up with the metadata log
            # (LogManager.startup with isStrayKraftReplica): only then does a topic id missing
            # from the image mean the topic is gone.
            self._strays_checked = True
            strays = self.replicas.remove_strays()
            if strays:
                log.warning("Broker %s moved %d stray logs aside", self.broker_id, strays)

    async def _enable_request_processing(self) -> None:
        """Kafka's SocketServer.enableRequestProcessing: the listeners open once unfenced."""
        waiting = [server for server in self.servers if not server.listening]
        if not waiting or self._shutting_down:
            return
        for server in waiting:
            await server.start()
        log.info(
            "Broker %s listening on %s",
            self.broker_id, ", ".join(f"{lst.name}://{lst.address}" for lst in self.listeners),
        )

    async def _controller_request(
        self, request: Any, timeout_ms: int = CONTROLLER_REQUEST_TIMEOUT_MS
    ) -> Any:
        """Send to the active controller (the metadata Raft leader), else a bootstrap server."""
        response = await self._to_active_controller(request, timeout_ms)
        error = Errors.of(response.error_code)
        if error is not Errors.NONE:
            raise KafkaError(error, "")  # Kafka's lifecycle responses carry no message
        return response

    async def _to_active_controller(
        self, request: Any, timeout_ms: int, client: KafkaClient | None = None
    ) -> Any:
        """The known active controller first; if its connection is reset or refused, or it
        answers NOT_CONTROLLER (it lost the leadership), the other bootstrap controllers at
        once, rather than waiting until our Raft observer learns the new leader (issue 19).
        Returns the first answer that is not NOT_CONTROLLER, else the first NOT_CONTROLLER
        answer, else raises the last failure."""
        leader = self.raft.replica.leader_endpoint
        candidates = ([leader] if leader else []) + [
            s for s in self.config.bootstrap_servers if s != leader
        ]
        send = self._send_to_controller(request, timeout_ms, client or self.controller_client)
        failure = KafkaError(Errors.NETWORK_EXCEPTION, "no controller known")
        not_controller: Any = None  # the first NOT_CONTROLLER answer
        for candidate in candidates:
            try:
                response = await send(candidate)
            except KafkaError as exc:
                if candidate == leader and exc.error != Errors.NETWORK_EXCEPTION:
                    raise  # a slow leader is not a gone one: do not multiply the timeout
                failure = exc
                continue
            if Errors.of(response.error_code) is not Errors.NOT_CONTROLLER:
                return response
            if not_controller is None:
                not_controller = response
        if not_controller is not None:
            return not_controller
        raise failure

    def _send_to_controller(
        self, request: Any, timeout_ms: int, client: KafkaClient
    ) -> Callable[[str], Awaitable[Any]]:
        """How a lifecycle request (kafkawire/broker_lifecycle.py: kio's, as it is) reaches one
        controller."""

        async def send(address: str) -> Any:
            return await client.request(address, request, timeout_ms=timeout_ms)

        return send

    async def _send_alter_partition(
        self, request: lifecycle.AlterPartitionRequest
    ) -> lifecycle.AlterPartitionResponse:
        response: lifecycle.AlterPartitionResponse = await self._to_active_controller(
            request, CONTROLLER_REQUEST_TIMEOUT_MS, self.alter_partition_client
        )
        return response

    async def _tick_loop(self) -> None:
        # Kafka's ReplicaManager schedules isr-expiration every replica.lag.time.max.ms / 2
        # and the HWM checkpoint every replica.high.watermark.checkpoint.interval.ms (5 s).
        # The shrink pass walks every led partition: every 2 s, as it ran before, it cost a
        # 100,000-partition broker a fifth of a core (issue 35).
        shrink_s = max(0.1, self.config.get_int("replica.lag.time.max.ms") / 2000)
        checkpoint_s = HWM_CHECKPOINT_INTERVAL_S
        next_shrink, next_checkpoint = time.monotonic() + shrink_s, time.monotonic() + checkpoint_s
        while True:
            await asyncio.sleep(max(0.0, min(next_shrink, next_checkpoint) - time.monotonic()))
            try:
                now = time.monotonic()
                if now >= next_shrink:
                    next_shrink = now + shrink_s
                    await run_steps(self.replicas.tick_steps(), WALK_BUDGET_S)
                if now >= next_checkpoint:
                    next_checkpoint = now + checkpoint_s
                    await self.replicas.write_checkpoints_off_loop()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Broker tick failed")

    # ---- metadata ----

    def _update_fetcher(self, hosted: HostedPartition) -> None:
        self.fetchers.update(hosted, follow=not self._shutting_down)

    def _make_fetcher(self, leader_id: int) -> ReplicaFetcher:
        return ReplicaFetcher(
            self.replicas,
            leader_id,
            KafkaClient(client_id_for_node(self.broker_id), faults=self.faults),
            self._broker_address,
            lambda: self.broker_epoch,
            self.fetch_settings,
            self.raft.cluster_id,
        )

    def _broker_address(self, broker_id: int) -> str | None:
        registration = self.metadata.image.brokers.get(broker_id)
        if registration is None:
            return None
        for endpoint in registration.endpoints:
            if endpoint.name == self.listener.name:
                return f"{endpoint.host}:{endpoint.port}"
        return None

    # ---- status ----

    def broker_state(self) -> int:
        if self._shutting_down:
            return SHUTTING_DOWN if self._controlled_shutdown_done else PENDING_CONTROLLED_SHUTDOWN
        if not self.fenced:
            return RUNNING
        return RECOVERY if self.caught_up else STARTING

    def status(self) -> dict[str, Any]:
        replica = self.raft.replica
        return {
            "node_id": self.broker_id,
            "role": "broker",
            "raft_role": replica.role,
            "metadata_leader_id": replica.leader_id,
            "metadata_epoch": replica.epoch,
            "metadata_high_watermark": replica.high_watermark,
            "metadata_applied_offset": self.metadata.published_offset,
            "metadata_directory_id": uuid_to_str(self.raft.meta.directory_id),
            "cluster_id": self.raft.cluster_id,
            "broker_epoch": self.broker_epoch,
            "fenced": self.fenced,
            "started_after_clean_shutdown": self.started_after_clean_shutdown,
            "replica_fetchers": self.fetchers.status(),
            "partitions": {
                f"{h.topic}-{h.partition}": {
                    "role": h.state.role.value,
                    "leader_epoch": h.state.leader_epoch,
                    "high_watermark": h.state.high_watermark,
                    "log_end_offset": h.log.log_end_offset,
                    "isr": list(h.state.committed_isr),
                }
                for h in self.replicas.partitions.values()
            },
        }

    def health(self) -> tuple[bool, dict[str, Any]]:
        status = self.status()
        healthy = status["metadata_leader_id"] is not None and not self.fenced
        with contextlib.suppress(Exception):
            status["under_min_isr"] = len(self.replicas.isr_counts.under_min_isr)
        return healthy, status
