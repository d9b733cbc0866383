"""`minikraft bench kafka`: minikraft against Apache Kafka (the pinned release of `make
kafka-deps`) in one run, same topology (3 controllers + 3 brokers on 127.0.0.1), same clients
(librdkafka via confluent-kafka; Kafka's kafka-producer-perf-test and kafka-e2e-latency), same
topic settings (RF 3, min.insync.replicas 2, acks=all), same session and election timeouts.

The run: the Ready cold starts alternate between the two (Kafka, minikraft, Kafka, ...) so a
change in the machine's load falls on both; then each cluster in turn is started once and
measured: RSS after start, idle CPU over a window with no clients, the produce and consume
lines, RSS after that load, the controller and the broker failovers. minikraft runs flush
relaxed (Kafka's default flush policy: no fsync per append) for the like-for-like lines; a
third cluster, minikraft with its default fsync on every acks=all append, gives the produce
lines again beside them. Each line carries its durability on both sides, its goal (issue 36)
and the load average when each side was measured; ratio = minikraft / Kafka.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import median
from typing import Any

from cluster.apache_kafka import deps, tools
from cluster.bench import kafka_clients as clients
from cluster.bench import kafka_tool_lines as tool_lines
from cluster.bench.kafka_engines import (
    KAFKA,
    KAFKA_SERVER_JVM_OPTS,
    MINIKRAFT,
    SHARED,
    durability,
    load_average,
    node_pids,
    plan,
    progress,
    rss_mib,
    tree_cpu_seconds,
)
from cluster.bench.kafka_failover import broker_failovers, controller_failovers
from cluster.bench.kafka_ready import (
    START_TIMEOUT_S,
    cold_start,
    cold_start_seconds,
    fixture_seconds,
    hung_starts,
)
from cluster.bench.peers.procs import PeerMissing
from cluster.bench.report import make_report, row
from cluster.client.producer import percentile

PRODUCE_TOPIC = "bench-produce"
E2E_TOPIC = "bench-e2e"
CONSUME_TOPIC = "bench-consume"
PARTITIONS = 3
RECORD_SIZE = 1024
CONSUME_RECORD_SIZE = 100

# Issue 36's goals, ratio = minikraft / Kafka: (comparison, bound).
GOALS: dict[str, tuple[str, float]] = {
    "ready": ("<=", 0.25),
    "ready, pytest fixture": ("<=", 0.25),
    "RSS of the six nodes after start": ("<=", 0.2),
    "RSS of the six nodes after the load": ("<=", 0.2),
    "idle CPU of the six nodes": ("<=", 0.5),
    "controller failover median": ("<=", 0.25),
    "broker failover median": ("<=", 0.5),
    "produce p50, 1 record per request": ("<=", 1.0),
    "produce throughput, batched": (">=", 0.5),
    "produce MB/s, batched": (">=", 0.5),
    "consume throughput from the beginning": (">=", 0.5),
}


@dataclass(frozen=True)
class Sizes:
    """How much each line does (`--quick`: a smoke run, not for quoting)."""

    cold_starts: int
    fixture_starts: int
    idle_s: float
    one_record_each: int  # per producer, 8 producers
    batched: int
    perf_test: int
    e2e: int
    consume: int
    controller_kills: int
    broker_kills: int

    @classmethod
    def of(cls, quick: bool) -> Sizes:
        if quick:
            return cls(1, 1, 5.0, 10, 2000, 2000, 20, 20_000, 1, 1)
        return cls(5, 3, 60.0, 250, 200_000, 200_000, 1000, 1_000_000, 20, 10)


@dataclass
class Figures:
    """One engine's figures (the fsync run fills only the produce lines), each with the load
    average when it was taken."""

    engine: str
    values: dict[str, float] = field(default_factory=dict)
    load: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, figures: dict[str, float]) -> None:
        now = load_average()
        for metric, value in figures.items():
            self.values[metric] = value
            self.load[metric] = now
            progress(f"{self.engine}: {metric} = {value:.4g} (load {now})")


def _bootstrap(cluster: Any) -> str:
    return ",".join(b.address for b in cluster.brokers)


def _measure_produce(bootstrap: str, sizes: Sizes, figures: Figures) -> None:
    deadline = time.monotonic() + 300
    clients.create_topic(bootstrap, PRODUCE_TOPIC, PARTITIONS, deadline)
    clients.create_topic(bootstrap, E2E_TOPIC, 1, deadline)
    # Not measured: connections, page cache and a JVM's JIT warm before the first figure.
    clients.batched_load(bootstrap, PRODUCE_TOPIC, sizes.batched // 10, RECORD_SIZE)
    clients.one_record_load(bootstrap, PRODUCE_TOPIC, 8, max(2, sizes.one_record_each // 5))
    one = clients.one_record_load(bootstrap, PRODUCE_TOPIC, 8, sizes.one_record_each)
    if one.errors:
        raise RuntimeError(f"1 record per request: {one.errors} records not acknowledged")
    p50, p99 = clients.percentiles_ms(one.latencies_ms)
    figures.add({"produce p50, 1 record per request": p50,
                 "produce p99, 1 record per request": p99,
                 "produce throughput, 1 record per request": one.records_per_s})
    batched = clients.batched_load(bootstrap, PRODUCE_TOPIC, sizes.batched, RECORD_SIZE)
    if batched.errors:
        raise RuntimeError(f"batched: {batched.errors} records not acknowledged")
    figures.add({"produce throughput, batched": batched.records_per_s,
                 "produce MB/s, batched": batched.mb_per_s})
    perf = tool_lines.perf_test(bootstrap, PRODUCE_TOPIC, sizes.perf_test, RECORD_SIZE)
    figures.add({"kafka-producer-perf-test throughput, batched": perf.records_per_s,
                 "kafka-producer-perf-test avg latency, batched": perf.avg_ms})
    e2e = tool_lines.e2e_latency(bootstrap, E2E_TOPIC, sizes.e2e, RECORD_SIZE)
    figures.add({"end-to-end latency avg (kafka-e2e-latency)": e2e.avg_ms,
                 "end-to-end latency p50 (kafka-e2e-latency)": e2e.p50_ms,
                 "end-to-end latency p99 (kafka-e2e-latency)": e2e.p99_ms})


def _measure_engine(engine: str, sizes: Sizes, root: Path) -> Figures:
    """Start once, then footprint, produce, consume, footprint again, failovers."""
    figures = Figures(engine)
    _seconds, cluster = cold_start(engine, root / engine)
    try:
        bootstrap = _bootstrap(cluster)
        pids = node_pids(cluster)
        time.sleep(2.0)  # start-up's last writes and GCs settle
        figures.add({"RSS of the six nodes after start": rss_mib(pids)})
        cpu0, t0 = tree_cpu_seconds(pids), time.monotonic()
        time.sleep(sizes.idle_s)
        cpu = tree_cpu_seconds(pids) - cpu0
        figures.add({"idle CPU of the six nodes": 100 * cpu / (time.monotonic() - t0)})

        load_started = time.monotonic()
        _measure_produce(bootstrap, sizes, figures)
        clients.create_topic(bootstrap, CONSUME_TOPIC, PARTITIONS, time.monotonic() + 300)
        filled = clients.batched_load(bootstrap, CONSUME_TOPIC, sizes.consume,
                                      CONSUME_RECORD_SIZE)
        if filled.errors:
            raise RuntimeError(f"consume topic: {filled.errors} records not acknowledged")
        read, seconds = clients.consume_all(bootstrap, CONSUME_TOPIC, PARTITIONS, sizes.consume)
        if read < sizes.consume:
            raise RuntimeError(f"consumer read {read} of {sizes.consume} records")
        figures.add({"consume throughput from the beginning": read / seconds})
        load_s = time.monotonic() - load_started
        figures.add({"RSS of the six nodes after the load": rss_mib(pids)})
        figures.notes.append(f"{engine}: the load before the second RSS ran {load_s:.0f} s")

        ms = sorted(controller_failovers(cluster, sizes.controller_kills))
        figures.add({"controller failover median": median(ms),
                     "controller failover p99": percentile(ms, 0.99)})
        figures.notes.append(f"{engine}: controller failover samples (ms) {[round(m) for m in ms]}")
        ms = sorted(broker_failovers(cluster, sizes.broker_kills))
        figures.add({"broker failover median": median(ms),
                     "broker failover p99": percentile(ms, 0.99)})
        figures.notes.append(f"{engine}: broker failover samples (ms) {[round(m) for m in ms]}")
    finally:
        cluster.stop()
    return figures


def _measure_fsync(sizes: Sizes, root: Path) -> Figures:
    """minikraft with fsync on every acks=all append: the produce lines only."""
    cluster = plan(MINIKRAFT, root / "minikraft-fsync", fsync=True)
    figures = Figures("minikraft fsync")
    try:
        cluster.format()
        cluster.start()
        _measure_produce(_bootstrap(cluster), sizes, figures)
    finally:
        cluster.stop()
    return figures


def _alternating(reps: int, measure: Callable[[str], float],
                 ) -> tuple[dict[str, list[float]], dict[str, list[list[float]]]]:
    samples: dict[str, list[float]] = {KAFKA: [], MINIKRAFT: []}
    loads: dict[str, list[list[float]]] = {KAFKA: [], MINIKRAFT: []}
    for i in range(reps):
        for engine in (KAFKA, MINIKRAFT) if i % 2 == 0 else (MINIKRAFT, KAFKA):
            samples[engine].append(measure(engine))
            loads[engine].append(load_average())
            progress(f"{engine}: {measure.__name__} {samples[engine][-1]:.2f} s "
                     f"(load {loads[engine][-1]})")
    return samples, loads


UNITS: dict[str, tuple[str, str]] = {
    "ready": ("s", "lower"),
    "ready, nodes forked": ("s", "lower"),
    "ready, pytest fixture": ("s", "lower"),
    "RSS of the six nodes after start": ("MiB", "lower"),
    "RSS of the six nodes after the load": ("MiB", "lower"),
    "idle CPU of the six nodes": ("% of a core", "lower"),
    "controller failover median": ("ms", "lower"),
    "controller failover p99": ("ms", "lower"),
    "broker failover median": ("ms", "lower"),
    "broker failover p99": ("ms", "lower"),
    "produce p50, 1 record per request": ("ms", "lower"),
    "produce p99, 1 record per request": ("ms", "lower"),
    "produce throughput, 1 record per request": ("records/s", "higher"),
    "produce throughput, batched": ("records/s", "higher"),
    "produce MB/s, batched": ("MB/s", "higher"),
    "kafka-producer-perf-test throughput, batched": ("records/s", "higher"),
    "kafka-producer-perf-test avg latency, batched": ("ms", "lower"),
    "end-to-end latency avg (kafka-e2e-latency)": ("ms", "lower"),
    "end-to-end latency p50 (kafka-e2e-latency)": ("ms", "lower"),
    "end-to-end latency p99 (kafka-e2e-latency)": ("ms", "lower"),
    "consume throughput from the beginning": ("records/s", "higher"),
}
PRODUCE_LINES = [m for m in UNITS if m.startswith(("produce ", "kafka-producer", "end-to-end"))]
FSYNC_SUFFIX = ", minikraft fsync"


def goal_met(metric: str, ratio: float | None) -> bool | None:
    goal = GOALS.get(metric.removesuffix(FSYNC_SUFFIX)) if not metric.endswith(
        FSYNC_SUFFIX) else None
    if goal is None or ratio is None:
        return None
    op, bound = goal
    return ratio <= bound if op == "<=" else ratio >= bound


def kafka_row(metric: str, ours: float | None, theirs: float | None, *, fsync: bool = False,
              load: dict[str, list[float] | None] | None = None) -> dict[str, Any]:
    """One line: both figures, the ratio, the durability on both sides, the goal and whether
    it is met, and the load average when each side was measured."""
    unit, better = UNITS[metric]
    name = metric + (FSYNC_SUFFIX if fsync else "")
    line = row(name, unit, better, ours, theirs)
    goal = None if fsync else GOALS.get(metric)
    line["durability"] = f"{durability(MINIKRAFT, fsync)} / {durability(KAFKA)}"
    line["goal"] = None if goal is None else f"{goal[0]} {goal[1]}"
    line["goal_met"] = goal_met(name, line["ratio"])
    line["load_average"] = load or {}
    return line


def build_results(ready: dict[str, list[float]], fixture: dict[str, list[float]],
                  ready_load: dict[str, list[list[float]]],
                  fixture_load: dict[str, list[list[float]]], kafka: Figures, ours: Figures,
                  fsync: Figures | None) -> list[dict[str, Any]]:
    results = [
        kafka_row("ready", median(ready[MINIKRAFT]), median(ready[KAFKA]),
                  load={MINIKRAFT: ready_load[MINIKRAFT][-1], KAFKA: ready_load[KAFKA][-1]}),
        kafka_row("ready, pytest fixture", median(fixture[MINIKRAFT]), median(fixture[KAFKA]),
                  load={MINIKRAFT: fixture_load[MINIKRAFT][-1],
                        KAFKA: fixture_load[KAFKA][-1]}),
    ]
    for metric in UNITS:
        if metric in ours.values or metric in kafka.values:
            results.append(kafka_row(
                metric, ours.values.get(metric), kafka.values.get(metric),
                load={MINIKRAFT: ours.load.get(metric), KAFKA: kafka.load.get(metric)}))
    if fsync is not None:
        for metric in PRODUCE_LINES:
            if metric in fsync.values:
                results.append(kafka_row(
                    metric, fsync.values[metric], kafka.values.get(metric), fsync=True,
                    load={MINIKRAFT: fsync.load.get(metric), KAFKA: kafka.load.get(metric)}))
    return results


def run_kafka_bench(*, quick: bool = False, fsync_lines: bool = True,
                    kills: tuple[int, int] | None = None,
                    cold_starts: int | None = None) -> dict[str, Any]:
    """`kills`: (controller kills, broker kills) instead of the issue's 20 and 10;
    `cold_starts`: Ready's cold starts instead of 5 (the fixture's: at most 3). For a run that
    must end in time on a busy machine; the report's notes say how many were made."""
    reason = tools.skip_reason()
    if reason is not None:
        raise PeerMissing(reason)
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise PeerMissing("confluent-kafka is not installed (the dev extra)") from None
    sizes = Sizes.of(quick)
    if kills is not None:
        sizes = replace(sizes, controller_kills=kills[0], broker_kills=kills[1])
    if cold_starts is not None:
        sizes = replace(sizes, cold_starts=cold_starts, fixture_starts=min(3, cold_starts))
    load_before = load_average()
    ready, ready_load = _alternating(sizes.cold_starts, cold_start_seconds)
    forked = [cold_start_seconds(MINIKRAFT, forked=True) for _ in range(sizes.cold_starts)]
    forked_load = load_average()
    progress(f"minikraft: ready, nodes forked {[round(s, 2) for s in forked]} (load {forked_load})")
    fixture, fixture_load = _alternating(sizes.fixture_starts, fixture_seconds)
    root = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    try:
        kafka = _measure_engine(KAFKA, sizes, root)
        ours = _measure_engine(MINIKRAFT, sizes, root)
        fsync = _measure_fsync(sizes, root) if fsync_lines else None
    except BaseException:
        progress(f"failed: the clusters' directories and logs are kept in {root}")
        raise
    shutil.rmtree(root, ignore_errors=True)
    results = build_results(ready, fixture, ready_load, fixture_load, kafka, ours, fsync)
    results.insert(1, kafka_row("ready, nodes forked", median(forked), median(ready[KAFKA]),
                                load={MINIKRAFT: forked_load, KAFKA: ready_load[KAFKA][-1]}))
    notes = [
        f"Apache Kafka {deps.kafka_version()}, JVM {' '.join(KAFKA_SERVER_JVM_OPTS)} (its "
        "scripts' defaults), default thread pools; minikraft 3 + 3 Python processes",
        "same on both: " + ", ".join(f"{k}={v}" for k, v in SHARED.items())
        + "; topics RF 3, min.insync.replicas 2, acks=all; clients librdkafka (confluent-kafka) "
        "and Kafka's own kafka-producer-perf-test / kafka-e2e-latency",
        "metadata log: fsync on every append on both (KRaft flushes before it acknowledges)",
        f"ready: median of {sizes.cold_starts} cold starts alternating Kafka / minikraft "
        "(format + start + create topic + first acks=all record); pytest fixture: median of "
        f"{sizes.fixture_starts}; 'nodes forked': minikraft's nodes forked from one warm "
        "interpreter (the pytest plugin's launch) instead of `minikraft up`'s six execs, "
        f"median of {sizes.cold_starts}, beside Kafka's same cold starts",
        f"idle CPU over {sizes.idle_s:.0f} s with no clients, % of one core, all six nodes",
        "produce: after an unmeasured warm-up (a tenth of the batched load, a fifth of the "
        "one-record one); 8 librdkafka producers x {sizes.one_record_each} records of {RECORD_SIZE} B "
        f"one at a time; batched: one producer, {sizes.batched} records, linger.ms 5; "
        f"perf-test {sizes.perf_test} records; e2e {sizes.e2e} records; consume "
        f"{sizes.consume} records of {CONSUME_RECORD_SIZE} B from the beginning, 3 partitions",
        f"controller failover: {sizes.controller_kills} kills; broker failover: "
        f"{sizes.broker_kills} kills",
        *kafka.notes, *ours.notes,
        f"ready samples (s): kafka {[round(s, 1) for s in ready[KAFKA]]}, minikraft "
        f"{[round(s, 2) for s in ready[MINIKRAFT]]}; fixture: kafka "
        f"{[round(s, 1) for s in fixture[KAFKA]]}, minikraft "
        f"{[round(s, 2) for s in fixture[MINIKRAFT]]}; forked: "
        f"{[round(s, 2) for s in forked]}",
        f"starts that never became ready in {START_TIMEOUT_S:.0f} s, stopped and made again "
        f"(not in the figures): {dict(hung_starts) or 'none'}",
    ]
    return make_report("kafka", "kafka", results, notes, quick=quick,
                       load_average_before=load_before,
                       kafka_version=deps.kafka_version(),
                       kafka_jvm_opts=list(KAFKA_SERVER_JVM_OPTS))
