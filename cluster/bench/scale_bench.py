"""`minikraft bench scale`: many partitions on a 3 + 3 cluster (issue 35).

A cluster as `minikraft up` starts it (default settings), then, through the brokers with
confluent-kafka's AdminClient (librdkafka): `topics` topics of `partitions / topics` partitions,
RF 3, one after another. Kafka's controller refuses an operation of more than 10,000 records
(QuorumController.MAX_RECORDS_PER_USER_OP, POLICY_VIOLATION), and a topic of 10,000 partitions is
10,001 records, so each topic is created with at most 5,000 partitions and grown with
CreatePartitions, as one does against Kafka. Reported:

- every create answered without a timeout (any error is counted and named);
- quorum leader changes (epoch moves) during the creates and until every ISR is full;
- seconds from the last create until every partition has a full ISR (3 replicas);
- each node's event-loop lag (its /v1/status, max and p99 over the last minute) during the
  creates: the worst sample of each;
- kill -9 of the active controller, then CreateTopics through the brokers until one succeeds
  (`kills` times, median), the victim restarted between kills;
- kill -9 of a broker, restarted: seconds until it is back in every ISR it belongs to;
- RSS of every node at the full partition count; `minikraft down`: seconds, and what it had to
  SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cluster.bench.report import make_report, row
from cluster.launch.local_cluster import LocalCluster, NodeSpec, is_running
from cluster.launch.readiness import poll_until, wait_until_ready

T = TypeVar("T")

REPLICATION_FACTOR = 3
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP is 10,000: a request stays well below it.
PARTITIONS_PER_REQUEST = 5000
REQUEST_TIMEOUT_S = 60.0
ISR_DEADLINE_S = 300.0
FAILOVER_DEADLINE_S = 60.0
SAMPLE_INTERVAL_S = 1.0


def _rss_mib(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _gauges(spec: NodeSpec, names: dict[str, str], timeout_s: float = 2.0) -> dict[str, float] | None:
    """The gauges `names` (key: gauge name) the node's /metrics has; None if it did not answer."""
    url = f"http://{spec.host}:{spec.http_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            text = response.read().decode()
    except (OSError, ValueError):
        return None
    wanted = {f"{name} ": key for key, name in names.items()}
    found: dict[str, float] = {}
    for line in text.splitlines():
        for name, key in wanted.items():
            if line.startswith(name):
                found[key] = float(line.split()[1])
    return found


def _loop_lag(spec: NodeSpec, timeout_s: float = 2.0) -> dict[str, float] | None:
    """The node's event_loop_lag_{max,p99}_ms gauges from /metrics (a broker's /v1/status lists
    every partition: too big to ask once a second at 100,000 partitions)."""
    found = _gauges(spec, _GAUGES, timeout_s)
    return found if found and "max_ms" in found and "p99_ms" in found else None


def _isr_settled(cluster: LocalCluster) -> bool:
    """Every broker answers UnderReplicatedPartitions 0 (Kafka's gauge: partitions it leads
    whose ISR lacks a replica). The waits for a full ISR ask this first and Metadata only then:
    a Metadata of 100,000 partitions costs a Python broker seconds of CPU, and asked every
    half second it kept the broker that answered it from catching up (issue 35)."""
    for spec in cluster.brokers:
        found = _gauges(spec, {"n": "UnderReplicatedPartitions"})
        if not found or found.get("n") != 0:
            return False
    return True


# The lag gauges on /metrics, and the garbage collector's pauses (kafkawire.gc_tuning): a
# controller has them in its /v1/status too.
_GAUGES = {
    "max_ms": "event_loop_lag_max_ms",
    "p99_ms": "event_loop_lag_p99_ms",
    "gc_max_ms": "gc_pause_max_ms",
    "gc_gen2_max_ms": "gc_gen2_pause_max_ms",
}


def _status_lag(status: dict[str, Any] | None) -> dict[str, float] | None:
    if status is None or "event_loop_lag" not in status:
        return None
    gc_pause = status.get("gc_pause", {})
    return {**status["event_loop_lag"], "gc_max_ms": gc_pause.get("max_ms", 0.0),
            "gc_gen2_max_ms": gc_pause.get("gen2_max_ms", 0.0)}


def _status(spec: NodeSpec, timeout_s: float = 2.0) -> dict[str, Any] | None:
    url = f"http://{spec.host}:{spec.http_port}/v1/status"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


@dataclass
class _Sampler:
    """Polls the nodes once a second on a thread: the controllers' quorum epochs (/v1/status)
    and, while `recording_lag`, every node's loop lag (/metrics)."""

    cluster: LocalCluster
    epochs: set[int] = field(default_factory=set)
    lag: dict[str, dict[str, float]] = field(default_factory=dict)
    recording_lag: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def sample(self) -> None:
        lags: dict[str, dict[str, float] | None] = {}
        for spec in self.cluster.controllers:
            status = _status(spec)
            if status is not None and status.get("leader_id") is not None:
                self.epochs.add(int(status["epoch"]))
            # A controller's /v1/status is small and has its lag; its /metrics lists KIP-966's
            # electable leaders per partition (100,000 lines a second would load the loop
            # being measured).
            lags[spec.name] = _status_lag(status)
        if not self.recording_lag:
            return
        for spec in self.cluster.brokers:
            lags[spec.name] = _loop_lag(spec)
        for name, lag in lags.items():
            if lag is not None:
                seen = self.lag.setdefault(name, {})
                for key, value in lag.items():
                    seen[key] = max(seen.get(key, 0.0), float(value))

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            self.sample()


class _Admin:
    """confluent-kafka's AdminClient on the brokers; every call bounded."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.client = AdminClient({"bootstrap.servers": bootstrap})

    def create_topic(self, name: str, partitions: int, timeout_s: float) -> str | None:
        """None when created, else the error's name."""
        from confluent_kafka.admin import NewTopic

        futures = self.client.create_topics(
            [NewTopic(name, partitions, REPLICATION_FACTOR)],
            request_timeout=timeout_s,
            operation_timeout=timeout_s,
        )
        return _outcome(futures[name], timeout_s)

    def grow(self, name: str, total: int, timeout_s: float) -> str | None:
        from confluent_kafka.admin import NewPartitions

        futures = self.client.create_partitions(
            [NewPartitions(name, total)], request_timeout=timeout_s, operation_timeout=timeout_s
        )
        return _outcome(futures[name], timeout_s)

    def isr_counts(self, prefix: str, broker_id: int | None = None) -> tuple[int, int]:
        """(partitions of the bench topics, those with a full ISR, or with `broker_id` in the
        ISR of each partition it replicates)."""
        metadata = self.client.list_topics(timeout=60)
        total = full = 0
        for name, topic in metadata.topics.items():
            if not name.startswith(prefix):
                continue
            for partition in topic.partitions.values():
                if broker_id is not None:
                    if broker_id not in partition.replicas:
                        continue
                    total += 1
                    full += broker_id in partition.isrs
                else:
                    total += 1
                    full += len(partition.isrs) == len(partition.replicas) == REPLICATION_FACTOR
        return total, full


def _outcome(future: Any, timeout_s: float) -> str | None:
    from confluent_kafka import KafkaException

    try:
        future.result(timeout=timeout_s + 5)
    except KafkaException as exc:
        return str(exc.args[0].name())
    except Exception as exc:  # a future that never completed: the client's own timeout
        return type(exc).__name__
    return None


def _active_controller(cluster: LocalCluster) -> NodeSpec | None:
    for spec in cluster.controllers:
        status = _status(spec)
        if status is not None and status.get("role") == "Leader":
            return spec
    return None


def _create_all(
    admin: _Admin, topics: int, per_topic: int, prefix: str
) -> tuple[list[dict[str, Any]], float]:
    """Every topic in requests of at most PARTITIONS_PER_REQUEST partitions; the log of each
    request and the time the last one was answered."""
    requests: list[dict[str, Any]] = []
    for index in range(topics):
        name = f"{prefix}{index}"
        have = min(per_topic, PARTITIONS_PER_REQUEST)
        started = time.monotonic()
        error = admin.create_topic(name, have, REQUEST_TIMEOUT_S)
        requests.append({"topic": name, "op": "create", "to": have, "error": error,
                         "s": round(time.monotonic() - started, 2)})
        while error is None and have < per_topic:
            have = min(per_topic, have + PARTITIONS_PER_REQUEST)
            started = time.monotonic()
            error = admin.grow(name, have, REQUEST_TIMEOUT_S)
            requests.append({"topic": name, "op": "grow", "to": have, "error": error,
                             "s": round(time.monotonic() - started, 2)})
    return requests, time.monotonic()


def _failovers(cluster: LocalCluster, admin: _Admin, kills: int) -> list[float]:
    times_s: list[float] = []
    for kill in range(kills):
        leader = _active_controller(cluster)
        if leader is None:
            poll_until(lambda: _active_controller(cluster) is not None, 60, "an active controller",
                       poll_s=0.5)
            leader = _active_controller(cluster)
        assert leader is not None
        cluster.kill(leader)
        started = time.monotonic()
        attempt = 0
        while time.monotonic() - started < FAILOVER_DEADLINE_S:
            attempt += 1
            if admin.create_topic(f"failover-{kill}-{attempt}", 1, 5.0) is None:
                break
        times_s.append(time.monotonic() - started)
        cluster.start_node(leader)
        cluster.write_cluster_file()  # `minikraft down` stops the pid it finds there
        # The victim back and caught up before the next kill, so every kill starts from a
        # full quorum.
        poll_until(lambda: _caught_up(cluster), 120, "the quorum caught up", poll_s=0.5)
    return times_s


def _caught_up(cluster: LocalCluster) -> bool:
    statuses = [_status(spec) for spec in cluster.controllers]
    if any(s is None for s in statuses):
        return False
    hwm = max(int(s["high_watermark"]) for s in statuses if s is not None)
    return all(int(s["applied_offset"]) >= hwm - 5 for s in statuses if s is not None)


# Kafka's BrokerState gauge value of a broker unfenced and serving.
BROKER_RUNNING = 3


def _broker_restart(cluster: LocalCluster, admin: _Admin, prefix: str) -> float:
    victim = cluster.brokers[-1]
    cluster.kill(victim)
    cluster.start_node(victim)
    cluster.write_cluster_file()
    started = time.monotonic()
    # Until the other brokers have applied the victim's fencing their Metadata still names it
    # in every ISR, and their UnderReplicatedPartitions is 0: the count starts once the victim
    # is RUNNING again (Kafka's BrokerState gauge) and asks only brokers that have applied the
    # metadata as far as the victim had then (its unfencing, and its fencing before it).
    unfenced_at: list[float] = []

    def running() -> bool:
        found = _gauges(victim, {"state": "BrokerState", "offset": "broker_metadata_offset"})
        if not found or found.get("state") != BROKER_RUNNING:
            return False
        unfenced_at.append(found["offset"])
        return True

    poll_until(running, ISR_DEADLINE_S, f"{victim.name} running", poll_s=0.2)

    def back() -> bool:
        for spec in cluster.brokers:
            found = _gauges(spec, {"offset": "broker_metadata_offset"})
            if not found or found.get("offset", -1) < unfenced_at[0]:
                return False
        if not _isr_settled(cluster):
            return False
        try:
            total, in_isr = admin.isr_counts(prefix, victim.node_id)
        except Exception:
            return False
        return total > 0 and in_isr == total

    poll_until(back, ISR_DEADLINE_S, f"{victim.name} back in every ISR", poll_s=0.5)
    return time.monotonic() - started


def run_scale_bench(
    *,
    partitions: int = 100_000,
    topics: int = 10,
    kills: int = 5,
    quick: bool = False,
    settle_s: float = 60.0,
) -> dict[str, Any]:
    """`settle_s`: idle time between start-up and the creates, so the nodes' one-minute lag
    windows hold the creates only (start-up's own stalls age out)."""
    if quick:
        partitions, topics, kills, settle_s = 3000, 3, 1, 0.0
    if partitions < topics or topics < 1:
        raise ValueError("bench scale needs at least one partition per topic")
    per_topic = partitions // topics
    prefix = "scale-"
    workdir = Path(tempfile.mkdtemp(prefix="minikraft-scale-"))
    cluster = LocalCluster.plan(workdir, controllers=3, brokers=3, base_port=0)
    sampler = _Sampler(cluster)
    load_before = os.getloadavg()
    down: dict[str, Any] = {}
    failures: list[str] = []
    try:
        cluster.format()
        cluster.start()
        asyncio.run(wait_until_ready(cluster, 120))
        admin = _Admin(cluster.bootstrap_server)
        time.sleep(settle_s)
        sampler.sample()
        sampler.start()
        epochs_before = set(sampler.epochs)
        sampler.recording_lag = True
        creates_started = time.monotonic()
        requests, last_answered = _create_all(admin, topics, per_topic, prefix)
        creates_s = last_answered - creates_started
        sampler.sample()
        sampler.recording_lag = False
        lag = {name: dict(values) for name, values in sampler.lag.items()}
        epochs_after_creates = set(sampler.epochs)

        def full_isr() -> bool:
            if not _isr_settled(cluster):
                return False
            total, full = admin.isr_counts(prefix)
            return total == per_topic * topics and full == total

        isr_s = _timed(
            lambda: poll_until(full_isr, ISR_DEADLINE_S, "a full ISR", poll_s=0.5), failures)
        sampler.sample()
        leader_changes = len(sampler.epochs - epochs_before)
        rss = {spec.name: _rss_mib(spec.pid) for spec in cluster.controllers + cluster.brokers}
        failovers = _timed(lambda: _failovers(cluster, admin, kills), failures) or []
        broker_back_s = _timed(lambda: _broker_restart(cluster, admin, prefix), failures)
    finally:
        sampler.stop()
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "cluster.cli.main", "down", "--dir", str(workdir),
             "--output", "json"],
            capture_output=True, text=True, timeout=120, check=False,
        )
        down = {"s": round(time.monotonic() - started, 2), "exit": done.returncode,
                **(json.loads(done.stdout) if done.stdout.strip().startswith("{") else {})}
        left = [s.name for s in cluster.controllers + cluster.brokers if is_running(s)]
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    errors = [r for r in requests if r["error"] is not None]
    timeouts = [r for r in errors if "TIMED_OUT" in str(r["error"]) or "Timeout" in str(r["error"])]
    worst_max = max((v["max_ms"] for v in lag.values()), default=0.0)
    worst_p99 = max((v["p99_ms"] for v in lag.values()), default=0.0)
    results = [
        row("partitions created", "count", "higher", _created(requests)),
        row("create requests failed", "count", "lower", len(errors)),
        row("create requests timed out", "count", "lower", len(timeouts)),
        row("creates (all requests)", "s", "lower", creates_s),
        row("quorum leader changes during creates and ISR", "count", "lower", leader_changes),
        row("full ISR after last create", "s", "lower", isr_s),
        row("loop lag p99 (worst node)", "ms", "lower", worst_p99),
        row("loop lag max (worst node)", "ms", "lower", worst_max),
        row("controller kill -9 -> create ok (median)", "s", "lower",
            statistics.median(failovers) if failovers else None),
        row("restarted broker in every ISR", "s", "lower", broker_back_s),
        row("minikraft down", "s", "lower", down["s"]),
    ]
    return make_report(
        "scale", None, results,
        [f"{partitions:,} partitions in {topics} topics, RF {REPLICATION_FACTOR}, on 3 "
         f"controllers + 3 brokers (default settings), created through the brokers with "
         f"confluent-kafka in requests of at most {PARTITIONS_PER_REQUEST:,} partitions"],
        partitions=partitions, topics=topics, requests=requests,
        leader_epochs={"before": sorted(epochs_before), "after_creates":
                       sorted(epochs_after_creates)},
        loop_lag_ms=lag, failover_s=[round(t, 2) for t in failovers], rss_mib=rss,
        down=down, still_running_after_down=left, failures=failures,
        load_average_before=[round(v, 2) for v in load_before],
        load_average_end=[round(v, 2) for v in os.getloadavg()],
    )


def _timed(phase: Callable[[], T], failures: list[str]) -> T | None:
    """A phase's result, or None with its error noted: one phase that does not finish within
    its deadline still leaves the others' figures."""
    try:
        return phase()
    except (TimeoutError, AssertionError) as exc:
        failures.append(str(exc))
        return None


def _created(requests: list[dict[str, Any]]) -> int:
    """Partitions the answered requests created: each topic's size after its last success."""
    sizes: dict[str, int] = {}
    for request in requests:
        if request["error"] is None:
            sizes[request["topic"]] = max(sizes.get(request["topic"], 0), request["to"])
    return sum(sizes.values())
