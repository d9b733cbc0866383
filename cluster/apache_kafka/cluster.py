"""A real Apache Kafka cluster on 127.0.0.1, planned and run by minikraft's own launcher.

ApacheKafkaCluster is a LocalCluster: `LocalCluster.plan` lays out both (node ids 1.. for
controllers and 101.. for brokers, ports, data and config directories, `--set` overrides), so a
scenario written against one runs unchanged on the other. What differs is only what a node is:
its properties are the shared ones translated to Kafka's (minikraft-only keys dropped, Kafka's
listener map added), its directories are formatted by Kafka's StorageTool (a dynamic quorum,
`--initial-controllers`, or `--standalone` for the first controller), and it runs as a JVM of
the jars `make kafka-deps` fetched, with a heap small enough for six JVMs on two cores. Processes
are started in their own session and stopped by pid, as minikraft's nodes are.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

from cluster.apache_kafka import tools
from cluster.client.admin_client import describe_quorum
from cluster.launch.local_cluster import (
    LOOPBACK,
    LocalCluster,
    NodeSpec,
    is_running,
    process_start_time,
    terminate,
)
from kafkawire.config import render_properties
from kafkawire.errors import KafkaError
from kafkawire.uuids import random_directory_id
from raft.core.replica_key import uuid_to_str
from raft.runtime.meta_properties import read_meta_properties

# A server JVM: a small heap (Kafka's own default is -Xmx1G -Xms1G, too much for six JVMs beside
# minikraft's nodes), C1 only and the serial collector (fewer compiler and GC threads on two
# shared cores; throughput is not what these clusters are for).
CONTROLLER_JVM_OPTS = (
    "-Xmx256m", "-Xms64m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
    "-XX:MaxDirectMemorySize=64m", "-Djava.awt.headless=true",
)
BROKER_JVM_OPTS = (
    "-Xmx384m", "-Xms96m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
    "-XX:MaxDirectMemorySize=128m", "-Djava.awt.headless=true",
)

# A kafka-storage run is a JVM start: seconds alone, minutes on two cores shared with a busy
# test suite.
FORMAT_TIMEOUT_S = 600.0

# How long brokers wait for a new quorum's first commit before they are started anyway (a
# quorum that cannot elect a leader in this long is a failure the caller's own wait reports).
QUORUM_COMMIT_TIMEOUT_S = 300.0

# Keys of minikraft's node properties that Kafka has no use for.
_MINIKRAFT_ONLY_PREFIXES = ("minikraft.", "http.listener", "eligible.leader.replicas.enabled",
                            "unclean.recovery.manager.enabled")

# Thread pools trimmed for six JVMs on two cores; none changes what a client can observe.
_SMALL_SERVER = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.replica.fetchers": "1",
    "log.cleaner.threads": "1",
    "num.recovery.threads.per.data.dir": "1",
}


class ApacheKafkaCluster(LocalCluster):
    """The same plan as a LocalCluster, run as Apache Kafka (the pinned release)."""

    @classmethod
    def plan(  # type: ignore[override]
        cls, directory: Path, *, controllers: int = 3, brokers: int = 0, base_port: int = 19090,
        overrides: dict[str, str] | None = None, network: str = LOOPBACK,
    ) -> ApacheKafkaCluster:
        if network != LOOPBACK:
            raise ValueError("Apache Kafka beside minikraft runs on loopback only")
        cluster = super().plan(
            directory, controllers=controllers, brokers=brokers, base_port=base_port,
            overrides=overrides, network=network,
        )
        assert isinstance(cluster, ApacheKafkaCluster)
        return cluster

    # -- properties ------------------------------------------------------------------------

    def node_properties(self, spec: NodeSpec) -> dict[str, str]:
        shared = super().node_properties(spec)
        props = {
            k: v for k, v in shared.items() if not k.startswith(_MINIKRAFT_ONLY_PREFIXES)
        }
        props["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
        props.update(_SMALL_SERVER)
        if spec.role == "controller":
            # Kafka's controller keeps its metadata log in log.dirs when metadata.log.dir is
            # the same directory; say both so nothing lands in the default /tmp path.
            props["log.dirs"] = props["metadata.log.dir"]
        else:
            props["inter.broker.listener.name"] = "PLAINTEXT"
            # Kafka's broker exits when its first registration takes over a minute (default
            # 60 s); six JVMs starting at once on two busy cores can take longer than that.
            props["initial.broker.registration.timeout.ms"] = "300000"
            # Internal topics at most as replicated as there are brokers (minikraft caps the
            # same way when it creates __consumer_offsets).
            rf = str(max(1, min(3, len(self.brokers))))
            props["offsets.topic.replication.factor"] = rf
            props["transaction.state.log.replication.factor"] = rf
            props["transaction.state.log.min.isr"] = str(min(2, int(rf)))
            props["share.coordinator.state.topic.replication.factor"] = rf
            props["share.coordinator.state.topic.min.isr"] = str(min(2, int(rf)))
        # The plan's overrides win last, minus the keys only minikraft reads.
        props.update({
            k: v for k, v in spec.extra.items() if not k.startswith(_MINIKRAFT_ONLY_PREFIXES)
        })
        return props

    # -- format ----------------------------------------------------------------------------

    def initial_controllers(self, voters: list[NodeSpec], directory_ids: dict[int, str]) -> str:
        """Kafka's --initial-controllers value: id@host:port:directory-id,..."""
        return ",".join(f"{c.node_id}@{c.address}:{directory_ids[c.node_id]}" for c in voters)

    def storage_format_args(self, spec: NodeSpec, quorum_args: list[str]) -> list[str]:
        # minikraft's node switch for ELR is Kafka's feature level, fixed at format (KIP-966).
        elr_on = spec.extra.get("eligible.leader.replicas.enabled", "true").lower() == "true"
        return [
            "format", "--config", spec.config, "--cluster-id", self.cluster_id,
            "--feature", f"eligible.leader.replicas.version={1 if elr_on else 0}", *quorum_args,
        ]

    def format(self, standalone: bool = False) -> None:
        """Write configs and run Kafka's StorageTool on every node not formatted yet (in
        parallel: each is a JVM start). Controllers of a dynamic quorum: every one with
        `--initial-controllers`, or with standalone the first `--standalone` and the rest
        `--no-initial-controllers`; brokers `--no-initial-controllers`."""
        (self.dir / "config").mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        voters = self.bootstrap_voters(standalone)
        directory_ids = {c.node_id: uuid_to_str(random_directory_id()) for c in voters}
        initial = self.initial_controllers(voters, directory_ids)
        pending: list[tuple[NodeSpec, subprocess.Popen[str]]] = []
        for spec in self.all_nodes():
            props = self.node_properties(spec)
            Path(spec.config).write_text(render_properties(props))
            if self._read_directory_id(spec) is not None:
                continue
            if spec.role == "controller" and spec in voters:
                quorum = ["--standalone"] if standalone else ["--initial-controllers", initial]
            else:
                quorum = ["--no-initial-controllers"]
            pending.append((spec, self._storage_tool(spec, quorum)))
        failures = []
        for spec, proc in pending:
            out, err = proc.communicate(timeout=FORMAT_TIMEOUT_S)
            if proc.returncode != 0:
                failures.append(f"{spec.name}: {(out + err).strip()}")
            self._read_directory_id(spec)
        if failures:
            raise RuntimeError("kafka-storage format failed: " + "; ".join(failures))

    def format_node(self, spec: NodeSpec, quorum_args: list[str]) -> str:
        """Format one node (a new disk) with Kafka's StorageTool; its new directory id."""
        Path(spec.config).parent.mkdir(parents=True, exist_ok=True)
        Path(spec.config).write_text(render_properties(self.node_properties(spec)))
        proc = self._storage_tool(spec, quorum_args)
        out, err = proc.communicate(timeout=FORMAT_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"kafka-storage format {spec.name}: {(out + err).strip()}")
        directory_id = self._read_directory_id(spec)
        assert directory_id is not None
        return directory_id

    def _storage_tool(self, spec: NodeSpec, quorum_args: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            tools.java_command(tools.STORAGE_TOOL, self.storage_format_args(spec, quorum_args)),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    @staticmethod
    def _read_directory_id(spec: NodeSpec) -> str | None:
        metadata_dir = Path(spec.dir) / "metadata"
        meta = read_meta_properties(metadata_dir) if metadata_dir.exists() else None
        spec.directory_id = None if meta is None else uuid_to_str(meta.directory_id)
        return spec.directory_id

    # -- processes -------------------------------------------------------------------------

    def command(self, spec: NodeSpec) -> list[str]:
        opts = CONTROLLER_JVM_OPTS if spec.role == "controller" else BROKER_JVM_OPTS
        return tools.java_command(tools.KAFKA_SERVER, [spec.config], jvm_opts=opts)

    def start(self) -> None:
        """Controllers first; brokers once the quorum has committed its leader's first records.

        Why not all six at once: Apache Kafka 4.4's KRaft observer forgets a dynamic quorum's
        voters when its log is truncated below the VotersRecord it had read
        (raft/internals/KRaftControlRecordStateMachine.truncateNewEntries drops the voter sets
        past the truncation but keeps `nextOffset`, so the new leader's VotersRecord at the same
        offsets is never read again). A broker that fetched the first leader's uncommitted
        start-of-epoch records, and then follows a second leader elected before they committed
        (a split first election, common while six JVMs start on two busy cores), is left with
        no voter endpoints: RaftControllerNodeProvider finds no controller node, its
        registration times out every 4 s forever and BrokerServer.startup waits for "the
        controller to acknowledge that we are caught up". Once the high watermark has passed the
        VotersRecord it is committed and no truncation reaches it."""
        for spec in self.controllers:
            if not is_running(spec):
                self.start_node(spec)
        pending = [spec for spec in self.brokers if not is_running(spec)]
        if pending and self.controllers:
            wait_first_commit(self.bootstrap_controller, QUORUM_COMMIT_TIMEOUT_S)
        for spec in pending:
            self.start_node(spec)
        self.write_cluster_file()

    def start_node(self, spec: NodeSpec) -> int:
        """Exec the JVM in its own session (never minikraft's fork server), output to its log."""
        Path(spec.log_file).parent.mkdir(parents=True, exist_ok=True)
        with open(spec.log_file, "ab") as out:
            pid = subprocess.Popen(
                self.command(spec), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ),
            ).pid
        spec.pid, spec.start_time = pid, process_start_time(pid)
        return pid

    def stop(self, timeout_s: float = 20.0) -> list[str]:
        """Brokers first, waiting for their controlled shutdown (it needs the controllers),
        then the controllers; SIGKILL for what outlives its half of timeout_s."""
        return terminate(self.brokers, timeout_s / 2) + terminate(self.controllers, timeout_s / 2)


def wait_first_commit(bootstrap_controller: str, timeout_s: float) -> bool:
    """Until the quorum's leader reports a high watermark past 0 (its start-of-epoch records,
    the bootstrap VotersRecord among them, committed), asked every 100 ms; False if it did not
    in timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            status = asyncio.run(describe_quorum(bootstrap_controller, timeout_ms=1000))
            if status.leader_id is not None and status.high_watermark > 0:
                return True
        except KafkaError:
            pass  # not listening yet, or no leader: ask again
        time.sleep(0.1)
    return False
