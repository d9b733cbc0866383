"""The two clusters of `minikraft bench kafka`, planned alike, and what their processes cost.

Both are 3 controllers + 3 brokers on 127.0.0.1 from the same `LocalCluster.plan`, with the same
session and election timeouts (Kafka 4.4's defaults, written out so both read them from their
properties). Apache Kafka runs as its scripts ship it (bin/kafka-server-start.sh's
`-Xmx1G -Xms1G`, bin/kafka-run-class.sh's G1 options, the server's default thread pools), not
as the launcher's trimmed test JVMs: what a user would run instead of minikraft is what the
figures compare with. minikraft runs with `flush.messages` at Kafka's default (Long.MAX_VALUE:
no fsync per append, replication is the durability) for the like-for-like lines, and with its
own default (fsync every acks=all append) for the fsync lines shown beside them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from cluster.apache_kafka import tools
from cluster.apache_kafka.cluster import ApacheKafkaCluster
from cluster.bench.phase_clock import cpu_seconds
from cluster.launch.local_cluster import LocalCluster, NodeSpec

KAFKA = "kafka"
MINIKRAFT = "minikraft"

# Kafka 4.4's own defaults for what decides a failover, written out on both sides.
SHARED = {
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
}
FLUSH_RELAXED = {"flush.messages": str(2**63 - 1)}  # Kafka's default: Long.MAX_VALUE
MINIKRAFT_ONLY = {"log.level": "WARNING"}  # Kafka's servers log at WARN too (log4j2.xml)

# bin/kafka-server-start.sh (KAFKA_HEAP_OPTS) and bin/kafka-run-class.sh
# (KAFKA_JVM_PERFORMANCE_OPTS) of Apache Kafka 4.4, without JMX and the GC log file.
KAFKA_SERVER_JVM_OPTS = (
    "-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# The launcher's thread-pool trims (cluster/apache_kafka/cluster.py), back at Kafka's defaults.
_KAFKA_DEFAULT_POOLS = {
    "num.network.threads", "num.io.threads", "background.threads", "num.replica.fetchers",
    "log.cleaner.threads", "num.recovery.threads.per.data.dir",
}


class KafkaAsShipped(ApacheKafkaCluster):
    """Apache Kafka with its scripts' JVM options and its default thread pools."""

    def node_properties(self, spec: NodeSpec) -> dict[str, str]:
        props = super().node_properties(spec)
        for key in _KAFKA_DEFAULT_POOLS - set(spec.extra):
            props.pop(key, None)
        return props

    def command(self, spec: NodeSpec) -> list[str]:
        return tools.java_command(tools.KAFKA_SERVER, [spec.config], jvm_opts=KAFKA_SERVER_JVM_OPTS)


def plan(engine: str, directory: Path, *, fsync: bool = False) -> LocalCluster:
    """3 controllers + 3 brokers of `engine` under `directory`, on free ports."""
    if engine == KAFKA:
        return KafkaAsShipped.plan(directory, controllers=3, brokers=3, base_port=0,
                                   overrides=dict(SHARED))
    overrides = {**SHARED, **MINIKRAFT_ONLY, **({} if fsync else FLUSH_RELAXED)}
    return LocalCluster.plan(directory, controllers=3, brokers=3, base_port=0,
                             overrides=overrides)


def durability(engine: str, fsync: bool = False) -> str:
    if engine == KAFKA:
        return "no fsync per append (Kafka's default flush.messages)"
    if fsync:
        return "fsync every acks=all append (minikraft's default)"
    return "no fsync per append (flush.messages = Kafka's default)"


def node_pids(cluster: LocalCluster) -> list[int]:
    return [s.pid for s in cluster.all_nodes() if s.pid is not None]


def process_tree(pids: Iterable[int]) -> list[int]:
    """The pids and every descendant of theirs (a node that forks is counted whole)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(text[text.rindex(")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = list(pids)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def rss_mib(pids: Iterable[int]) -> float:
    """Resident memory of these processes and their descendants, MiB."""
    total_kib = 0
    for pid in process_tree(pids):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
                    break
        except OSError:
            continue
    return total_kib / 1024


def tree_cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds of these processes and their descendants so far."""
    return cpu_seconds(process_tree(pids)) or 0.0


def progress(line: str) -> None:
    """Each figure on stderr as it is taken: a run cut short still says what it measured."""
    print(f"bench kafka: {line}", file=sys.stderr, flush=True)


def load_average() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]
