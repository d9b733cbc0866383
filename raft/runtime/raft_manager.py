"""Builds a node's Raft replica for `__cluster_metadata` from its formatted directory (Kafka's
KafkaRaftManager): meta.properties -> directory id, quorum-state -> election state, segments ->
log, config -> timeouts and bootstrap servers. Controllers and brokers (observers) both use it."""

from __future__ import annotations

import logging
import random
from collections.abc import Generator, Sequence
from pathlib import Path

from kafkawire.client import KafkaClient, client_id_for_node
from kafkawire.clock import now_ms
from kafkawire.config import NodeConfig
from kafkawire.faults import FaultInjector
from raft.core.raft_replica import RaftConfig, RaftReplica
from raft.core.replica_key import uuid_to_str
from raft.runtime.meta_properties import MetaProperties, ensure_storage_identity
from raft.runtime.quorum_state_file import ElectionStateFile
from raft.runtime.raft_driver import STEP_BUDGET_S, RaftDriver, RaftListener
from storage.runtime.disk_log import DiskLog
from storage.runtime.fsutil import StorageError

log = logging.getLogger("minikraft.raft")

METADATA_PARTITION_DIR = "__cluster_metadata-0"
QUORUM_STATE_FILE = "quorum-state"

class RaftManager:
    def __init__(
        self,
        config: NodeConfig,
        *,
        faults: FaultInjector | None = None,
        listener: RaftListener | None = None,
        endpoint: str = "",
        seed: int | None = None,
        step_budget_s: float = STEP_BUDGET_S,
    ) -> None:
        self.config = config
        # Seed 003: the metadata directory and every log directory name this node and cluster.
        self.meta: MetaProperties = ensure_storage_identity(
            config.metadata_log_dir, config.log_dirs, config.node_id
        )[0]
        self.partition_dir: Path = config.metadata_log_dir / METADATA_PARTITION_DIR
        self.partition_dir.mkdir(parents=True, exist_ok=True)
        self.log = DiskLog(
            self.partition_dir, segment_bytes=config.get_int("metadata.log.segment.bytes")
        )
        self.state_file = ElectionStateFile(self.partition_dir / QUORUM_STATE_FILE)
        rng = random.Random(seed)
        # The listener a voter's endpoint is named for (VotersRecord, UpdateRaftVoter,
        # BeginQuorumEpoch's leader endpoint).
        listener_name = (config.get("controller.listener.names") or "CONTROLLER").split(",")[0]
        listener_name = listener_name.strip()
        # Kafka's wire protocol to the other replicas, with its own connections (as Kafka's
        # KafkaRaftManager has its own NetworkClient); client id node-<id> lets the peers' fault
        # layer know the caller, and `faults` is the node's, so chaos partitions apply to Raft.
        self.client = KafkaClient(
            client_id_for_node(config.node_id),
            request_timeout_ms=config.get_int("controller.quorum.request.timeout.ms"),
            faults=faults,
            max_frame_bytes=config.get_int("socket.request.max.bytes"),
        )
        self.replica = RaftReplica(
            node_id=config.node_id,
            directory_id=self.meta.directory_id,
            log=self.log,
            election_state=self.state_file.read(),
            config=RaftConfig(
                cluster_id=self.meta.cluster_id,
                election_timeout_ms=config.get_int("controller.quorum.election.timeout.ms"),
                fetch_timeout_ms=config.get_int("controller.quorum.fetch.timeout.ms"),
                election_backoff_max_ms=config.get_int(
                    "controller.quorum.election.backoff.max.ms"
                ),
                leader_lost_jitter_max_ms=config.get_int(
                    "minikraft.quorum.leader.lost.jitter.max.ms"
                ),
                bootstrap_servers=config.bootstrap_servers,
                default_listener_name=listener_name,
                followers_always_flush="controller" in config.roles,
            ),
            random_source=rng.random,
            now_ms=now_ms(),
            endpoint=endpoint,
        )
        self.driver = RaftDriver(
            self.replica,
            self.log,
            self.state_file,
            self.client,
            listener=listener,
            request_timeout_ms=config.get_int("controller.quorum.request.timeout.ms"),
            fsync=config.get("minikraft.raft.fsync", "true") != "false",
            step_budget_s=step_budget_s,
        )

    @property
    def cluster_id(self) -> str:
        return self.meta.cluster_id

    def create_snapshot(
        self, end_offset: int, records: Sequence[bytes]
    ) -> Generator[None, None, bool]:
        """Snapshot committed state below end_offset through the core (RaftReplica writes it
        with the voter set in force there, rule 7), then clean the segments it covers; in
        slices: the caller gives the loop back at every yield (issue 35). False when a snapshot
        already covers end_offset (one fetched from the leader, maybe while this one was being
        written)."""
        latest = self.log.latest_snapshot_id()
        if latest is not None and latest.end_offset >= end_offset:
            return False
        snapshot_id, chunks = self.replica.prepare_snapshot(end_offset, records, now_ms())
        yield from self.log.create_snapshot_steps(snapshot_id, chunks)
        if self.log.latest_snapshot_id() != snapshot_id:
            return False
        self.log.delete_before_snapshot()
        log.info(
            "Took snapshot %s-%s (%s records); cleaned the log below it",
            snapshot_id.end_offset,
            snapshot_id.epoch,
            len(records),
        )
        return True

    async def start(self) -> None:
        log.info(
            "Starting Raft node %s (directory id %s) at log end offset %s",
            self.config.node_id,
            uuid_to_str(self.meta.directory_id),
            self.log.end_offset(),
        )
        await self.driver.start()

    async def stop(self) -> None:
        await self.driver.stop()
        await self.client.close()
        # A broker's observer appends without an fsync (followers_always_flush): a clean stop
        # makes what it fetched durable, as Kafka's log close flushes its segments.
        try:
            self.log.flush(sync=self.driver.fsync)
        except StorageError as exc:  # an offline log stays as it is (rule 2 is the voters')
            log.warning("Metadata log not flushed at stop: %s", exc)
        self.log.close()
