"""`minikraft bench kafka`: minikraft against Apache Kafka (the pinned release of `make
kafka-deps`) in one run, same topology (3 controllers + 3 brokers on 127.0.0.1), same clients
(librdkafka via confluent-kafka; Kafka's kafka-producer-perf-test and kafka-e2e-latency), same
topic settings (RF 3, min.insync.replicas 2, acks=all), same session and election timeouts.

Both sides see the same machine: every line is measured on each cluster in turn, the order
reversed on each repetition (kafka_interleave: Kafka, minikraft, minikraft, Kafka, ...), and
the load average is taken at every measurement. The Ready cold starts alternate that way with
nothing else running; then the clusters are started side by side (Kafka; minikraft flush relaxed,
Kafka's default flush policy: no fsync per append, for the like-for-like lines; minikraft with
its default fsync on every acks=all append for the produce lines shown beside them) and
measured: RSS after start, idle CPU of both over the same window with no clients, each produce
and the consume line in two halves A B B A, RSS after that load, then the controller and the
broker failovers kill by kill A B B A (each victim restarted and caught up before the other
side's turn; each broker kill decomposed, kafka_decompose). Each line carries its durability on
both sides, its goal (issue 36) and the load averages when each side was measured; ratio =
minikraft / Kafka. With a time budget, repetitions and kills that would not fit are not begun
(at least one of each is made) and the report says how many were.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import mean, median
from typing import Any

from cluster.apache_kafka import deps, tools
from cluster.bench import kafka_clients as clients
from cluster.bench import kafka_tool_lines as tool_lines
from cluster.bench.kafka_decompose import BrokerKill
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
from cluster.bench.kafka_failover import BrokerFailovers, controller_failover
from cluster.bench.kafka_interleave import Interleaved, interleave, mean_load
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
from cluster.launch.local_cluster import LocalCluster

PRODUCE_TOPIC = "bench-produce"
E2E_TOPIC = "bench-e2e"
CONSUME_TOPIC = "bench-consume"
PARTITIONS = 3
RECORD_SIZE = 1024
CONSUME_RECORD_SIZE = 100
FSYNC = "minikraft fsync"
ENGINES = (KAFKA, MINIKRAFT)
PRODUCE_ENGINES = (KAFKA, MINIKRAFT, FSYNC)

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
    """How much each line does (`--quick`: a smoke run, not for quoting). The produce lines are
    each made in `reps` parts (A B B A), together the sizes given; the consume line reads the
    whole topic `reps` times."""

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
    reps: int = 2

    @classmethod
    def of(cls, quick: bool) -> Sizes:
        if quick:
            return cls(1, 1, 5.0, 10, 2000, 2000, 20, 20_000, 1, 1)
        return cls(5, 3, 60.0, 250, 200_000, 200_000, 1000, 1_000_000, 20, 10)


@dataclass
class Figures:
    """One engine's figures (the fsync run fills only the produce lines), each with the load
    averages of the measurements it was made of and their mean."""

    engine: str
    values: dict[str, float] = field(default_factory=dict)
    load: dict[str, list[float]] = field(default_factory=dict)
    load_samples: dict[str, list[list[float]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, figures: dict[str, float], loads: list[list[float]] | None = None) -> None:
        samples = loads or [load_average()]
        for metric, value in figures.items():
            self.values[metric] = value
            self.load_samples[metric] = samples
            self.load[metric] = mean_load(samples)
            progress(f"{self.engine}: {metric} = {value:.4g} (load {self.load[metric]})")


def _bootstrap(cluster: Any) -> str:
    return cluster.bootstrap_server


class Run:
    """The clusters measured side by side, their figures, and the run's time budget."""

    def __init__(self, sizes: Sizes, deadline: float | None) -> None:
        self.sizes, self.deadline = sizes, deadline
        self.clusters: dict[str, LocalCluster] = {}
        self.figures = {e: Figures(e) for e in PRODUCE_ENGINES}
        self.made: dict[str, int] = {}  # repetitions or kills made, per line

    def bootstrap(self, engine: str) -> str:
        return _bootstrap(self.clusters[engine])

    def phase_end(self, share: float, reserve_s: float = 60.0) -> float | None:
        """`share` of the time left before the deadline (less `reserve_s` for stopping and the
        report), from now."""
        if self.deadline is None:
            return None
        left = self.deadline - reserve_s - time.monotonic()
        return time.monotonic() + max(0.0, left) * share

    def put(self, line: Interleaved[Any], combine: Any, engines: tuple[str, ...]) -> None:
        """Each engine's figures of one line: `combine(values) -> {metric: value}`."""
        for engine in engines:
            if line.count(engine):
                self.figures[engine].add(combine(line.values(engine)), line.loads(engine))

    # -- the lines --------------------------------------------------------------------------

    def footprint_and_idle(self) -> None:
        time.sleep(2.0)  # start-up's last writes and GCs settle
        pids = {e: node_pids(self.clusters[e]) for e in ENGINES}
        for engine in ENGINES:
            self.figures[engine].add({"RSS of the six nodes after start": rss_mib(pids[engine])})
        # Both clusters' idle CPU over the same window: the same load on both.
        cpu0 = {e: tree_cpu_seconds(pids[e]) for e in ENGINES}
        t0 = time.monotonic()
        time.sleep(self.sizes.idle_s)
        elapsed = time.monotonic() - t0
        for engine in ENGINES:
            cpu = tree_cpu_seconds(pids[engine]) - cpu0[engine]
            self.figures[engine].add({"idle CPU of the six nodes": 100 * cpu / elapsed})

    def produce(self) -> None:
        sizes, reps = self.sizes, self.sizes.reps
        for engine in PRODUCE_ENGINES:
            bootstrap, deadline = self.bootstrap(engine), time.monotonic() + 300
            clients.create_topic(bootstrap, PRODUCE_TOPIC, PARTITIONS, deadline)
            clients.create_topic(bootstrap, E2E_TOPIC, 1, deadline)
            # Not measured: connections, page cache and a JVM's JIT warm before the first figure.
            clients.batched_load(bootstrap, PRODUCE_TOPIC, sizes.batched // 10, RECORD_SIZE)
            clients.one_record_load(bootstrap, PRODUCE_TOPIC, 8, max(2, sizes.one_record_each // 5))

        def one(engine: str, _rep: int) -> clients.OneRecordResult:
            result = clients.one_record_load(self.bootstrap(engine), PRODUCE_TOPIC, 8,
                                             max(1, sizes.one_record_each // reps))
            if result.errors:
                raise RuntimeError(f"{engine}, 1 record per request: {result.errors} records "
                                   "not acknowledged")
            return result

        def one_figures(parts: list[clients.OneRecordResult]) -> dict[str, float]:
            pooled = sorted(ms for part in parts for ms in part.latencies_ms)
            p50, p99 = clients.percentiles_ms(pooled)
            return {"produce p50, 1 record per request": p50,
                    "produce p99, 1 record per request": p99,
                    "produce throughput, 1 record per request":
                        len(pooled) / sum(part.elapsed_s for part in parts)}

        self.put(interleave(PRODUCE_ENGINES, reps, one, "1 record per request"), one_figures,
                 PRODUCE_ENGINES)

        def batched(engine: str, _rep: int) -> clients.BatchedResult:
            result = clients.batched_load(self.bootstrap(engine), PRODUCE_TOPIC,
                                          sizes.batched // reps, RECORD_SIZE)
            if result.errors:
                raise RuntimeError(f"{engine}, batched: {result.errors} records not acknowledged")
            return result

        def batched_figures(parts: list[clients.BatchedResult]) -> dict[str, float]:
            rate = sum(p.acked for p in parts) / sum(p.elapsed_s for p in parts)
            return {"produce throughput, batched": rate,
                    "produce MB/s, batched": rate * RECORD_SIZE / 1e6}

        self.put(interleave(PRODUCE_ENGINES, reps, batched, "batched"), batched_figures,
                 PRODUCE_ENGINES)

        def perf(engine: str, _rep: int) -> tool_lines.PerfTest:
            return tool_lines.perf_test(self.bootstrap(engine), PRODUCE_TOPIC,
                                        sizes.perf_test // reps, RECORD_SIZE)

        self.put(interleave(PRODUCE_ENGINES, reps, perf, "kafka-producer-perf-test"),
                 lambda parts: {
                     "kafka-producer-perf-test throughput, batched":
                         mean(p.records_per_s for p in parts),
                     "kafka-producer-perf-test avg latency, batched": mean(p.avg_ms for p in parts)},
                 PRODUCE_ENGINES)

        def e2e(engine: str, _rep: int) -> tool_lines.EndToEnd:
            return tool_lines.e2e_latency(self.bootstrap(engine), E2E_TOPIC,
                                          max(1, sizes.e2e // reps), RECORD_SIZE)

        self.put(interleave(PRODUCE_ENGINES, reps, e2e, "kafka-e2e-latency"),
                 lambda parts: {
                     "end-to-end latency avg (kafka-e2e-latency)": mean(p.avg_ms for p in parts),
                     "end-to-end latency p50 (kafka-e2e-latency)": mean(p.p50_ms for p in parts),
                     "end-to-end latency p99 (kafka-e2e-latency)": mean(p.p99_ms for p in parts)},
                 PRODUCE_ENGINES)

    def consume(self) -> None:
        sizes = self.sizes
        for engine in ENGINES:
            bootstrap = self.bootstrap(engine)
            clients.create_topic(bootstrap, CONSUME_TOPIC, PARTITIONS, time.monotonic() + 300)
            filled = clients.batched_load(bootstrap, CONSUME_TOPIC, sizes.consume,
                                          CONSUME_RECORD_SIZE)
            if filled.errors:
                raise RuntimeError(f"{engine}, consume topic: {filled.errors} records not "
                                   "acknowledged")

        def read(engine: str, _rep: int) -> tuple[int, float]:
            got, seconds = clients.consume_all(self.bootstrap(engine), CONSUME_TOPIC, PARTITIONS,
                                               sizes.consume)
            if got < sizes.consume:
                raise RuntimeError(f"{engine}: consumer read {got} of {sizes.consume} records")
            return got, seconds

        self.put(interleave(ENGINES, sizes.reps, read, "consume from the beginning"),
                 lambda parts: {"consume throughput from the beginning":
                                sum(n for n, _ in parts) / sum(s for _, s in parts)},
                 ENGINES)
        for engine in ENGINES:
            self.figures[engine].add(
                {"RSS of the six nodes after the load": rss_mib(node_pids(self.clusters[engine]))})

    def failovers(self) -> dict[str, list[BrokerKill]]:
        sizes = self.sizes
        line = interleave(ENGINES, sizes.controller_kills,
                          lambda e, k: controller_failover(self.clusters[e], k),
                          "controller failover", phase_end=self.phase_end(0.5))
        self.made["controller kills"] = line.count(KAFKA)
        for engine in ENGINES:
            ms = sorted(line.values(engine))
            self.figures[engine].add({"controller failover median": median(ms),
                                      "controller failover p99": percentile(ms, 0.99)},
                                     line.loads(engine))
            self.figures[engine].notes.append(
                f"{engine}: controller failover samples (ms) {[round(m) for m in ms]}")
        lines = {KAFKA: BrokerFailovers(self.clusters[KAFKA], kafka=True),
                 MINIKRAFT: BrokerFailovers(self.clusters[MINIKRAFT], kafka=False)}
        with lines[KAFKA], lines[MINIKRAFT]:
            for each in lines.values():
                each.producer.pause()
            kills = interleave(ENGINES, sizes.broker_kills, lambda e, k: lines[e].kill(k),
                               "broker failover", phase_end=self.phase_end(1.0))
        self.made["broker kills"] = kills.count(KAFKA)
        decomposed = {e: lines[e].decompose() for e in ENGINES}
        for engine in ENGINES:
            ms = sorted(k.acked_ms for k in decomposed[engine])
            self.figures[engine].add({"broker failover median": median(ms),
                                      "broker failover p99": percentile(ms, 0.99)},
                                     kills.loads(engine))
            self.figures[engine].notes.append(
                f"{engine}: broker failover samples (ms) {[round(m) for m in ms]}")
        return decomposed


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
READY_LINES = ("ready", "ready, nodes forked", "ready, pytest fixture")
FSYNC_SUFFIX = ", minikraft fsync"


def goal_met(metric: str, ratio: float | None) -> bool | None:
    goal = GOALS.get(metric.removesuffix(FSYNC_SUFFIX)) if not metric.endswith(
        FSYNC_SUFFIX) else None
    if goal is None or ratio is None:
        return None
    op, bound = goal
    return ratio <= bound if op == "<=" else ratio >= bound


def kafka_row(metric: str, ours: float | None, theirs: float | None, *, fsync: bool = False,
              load: dict[str, list[float] | None] | None = None,
              load_samples: dict[str, list[list[float]]] | None = None) -> dict[str, Any]:
    """One line: both figures, the ratio, the durability on both sides, the goal and whether
    it is met, and the load average when each side was measured (the mean of the line's
    measurements; `load_samples` each one, in the order taken)."""
    unit, better = UNITS[metric]
    name = metric + (FSYNC_SUFFIX if fsync else "")
    line = row(name, unit, better, ours, theirs)
    goal = None if fsync else GOALS.get(metric)
    line["durability"] = f"{durability(MINIKRAFT, fsync)} / {durability(KAFKA)}"
    line["goal"] = None if goal is None else f"{goal[0]} {goal[1]}"
    line["goal_met"] = goal_met(name, line["ratio"])
    line["load_average"] = load or {}
    if load_samples is not None:
        line["load_samples"] = load_samples
    return line


def ready_figures(ready: Interleaved[float], forked: Interleaved[float],
                  fixture: Interleaved[float], kafka: Figures, ours: Figures) -> None:
    """The Ready lines' medians into the two engines' figures ('nodes forked' is minikraft's
    alone, beside Kafka's cold starts)."""
    for metric, line, engines in (("ready", ready, ENGINES),
                                  ("ready, pytest fixture", fixture, ENGINES),
                                  ("ready, nodes forked", forked, (MINIKRAFT,))):
        for engine in engines:
            figures = kafka if engine == KAFKA else ours
            if line.count(engine):
                figures.add({metric: median(line.values(engine))}, line.loads(engine))
    if ready.count(KAFKA):
        kafka.add({"ready, nodes forked": median(ready.values(KAFKA))}, ready.loads(KAFKA))


def build_results(kafka: Figures, ours: Figures, fsync: Figures | None) -> list[dict[str, Any]]:
    results = []
    for metric in UNITS:
        if metric in ours.values or metric in kafka.values:
            results.append(kafka_row(
                metric, ours.values.get(metric), kafka.values.get(metric),
                load={MINIKRAFT: ours.load.get(metric), KAFKA: kafka.load.get(metric)},
                load_samples={MINIKRAFT: ours.load_samples.get(metric, []),
                              KAFKA: kafka.load_samples.get(metric, [])}))
    if fsync is not None:
        for metric in PRODUCE_LINES:
            if metric in fsync.values:
                results.append(kafka_row(
                    metric, fsync.values[metric], kafka.values.get(metric), fsync=True,
                    load={MINIKRAFT: fsync.load.get(metric), KAFKA: kafka.load.get(metric)},
                    load_samples={MINIKRAFT: fsync.load_samples.get(metric, []),
                                  KAFKA: kafka.load_samples.get(metric, [])}))
    return results


def decomposition(kills: dict[str, list[BrokerKill]]) -> dict[str, Any]:
    """Each side's broker kills split into kill -> fenced -> metadata -> acked (ms), and the
    medians of each part."""
    out: dict[str, Any] = {}
    for engine, each in kills.items():
        parts = [k.parts() for k in each]
        medians = {}
        for name in ("kill->fenced", "fenced->metadata", "metadata->acked", "total"):
            known = [v for p in parts if (v := p[name]) is not None]
            medians[name] = None if not known else round(median(known), 1)
        out[engine] = {"kills": [{k: None if v is None else round(v, 1) for k, v in p.items()}
                                 for p in parts],
                       "median": medians}
    return out


def _start_side_by_side(run: Run, root: Path) -> None:
    for engine in ENGINES:
        _seconds, run.clusters[engine] = cold_start(engine, root / engine)
    fsync = plan(MINIKRAFT, root / "minikraft-fsync", fsync=True)
    run.clusters[FSYNC] = fsync
    fsync.format()
    fsync.start()


def run_kafka_bench(*, quick: bool = False, fsync_lines: bool = True,
                    kills: tuple[int, int] | None = None,
                    cold_starts: int | None = None,
                    budget_s: float | None = None) -> dict[str, Any]:
    """`kills`: (controller kills, broker kills) instead of the issue's 20 and 10;
    `cold_starts`: Ready's cold starts instead of 5 (the fixture's: at most 3); `budget_s`: the
    run ends within this many seconds (repetitions and kills that would not fit are not begun;
    the report's notes say how many were made)."""
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
    started = time.monotonic()
    run = Run(sizes, None if budget_s is None else started + budget_s)
    load_before = load_average()
    # Ready: nothing else running; Kafka and minikraft cold starts alternate A B B A.
    ready = interleave(ENGINES, sizes.cold_starts, lambda e, _r: cold_start_seconds(e),
                       "ready", phase_end=run.phase_end(0.25))
    forked = interleave((MINIKRAFT,), sizes.cold_starts,
                        lambda e, _r: cold_start_seconds(e, forked=True), "ready, nodes forked",
                        phase_end=run.phase_end(0.05))
    fixture = interleave(ENGINES, sizes.fixture_starts, lambda e, _r: fixture_seconds(e),
                         "ready, pytest fixture", phase_end=run.phase_end(0.15))
    run.made.update({"cold starts": ready.count(KAFKA), "fixture starts": fixture.count(KAFKA)})
    root = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    try:
        _start_side_by_side(run, root)
        run.footprint_and_idle()
        run.produce()
        run.consume()
        run.clusters.pop(FSYNC).stop()  # the produce lines are all it is for
        decomposed = run.failovers()
    except BaseException:
        progress(f"failed: the clusters' directories and logs are kept in {root}")
        raise
    finally:
        for cluster in run.clusters.values():
            cluster.stop()
    shutil.rmtree(root, ignore_errors=True)
    kafka, ours = run.figures[KAFKA], run.figures[MINIKRAFT]
    ready_figures(ready, forked, fixture, kafka, ours)
    results = build_results(kafka, ours, run.figures[FSYNC] if fsync_lines else None)
    parts = decomposition(decomposed)
    notes = [
        f"Apache Kafka {deps.kafka_version()}, JVM {' '.join(KAFKA_SERVER_JVM_OPTS)} (its "
        "scripts' defaults), default thread pools; minikraft 3 + 3 Python processes",
        "same on both: " + ", ".join(f"{k}={v}" for k, v in SHARED.items())
        + "; topics RF 3, min.insync.replicas 2, acks=all; clients librdkafka (confluent-kafka) "
        "and Kafka's own kafka-producer-perf-test / kafka-e2e-latency",
        "metadata log: fsync on every append on both (KRaft flushes before it acknowledges)",
        "order: every line measured on each side in turn, reversed each repetition (A B B A), "
        "the load average taken at each measurement (load_samples; load_average is their mean)",
        f"ready: median of {ready.count(KAFKA)} cold starts each, Kafka and minikraft alternating "
        "(format + start + create topic + first acks=all record), nothing else running; Kafka's "
        "brokers start once its controllers' quorum has committed (cluster/apache_kafka: Kafka "
        "4.4 observers lose a dynamic quorum's voters when truncated below its VotersRecord); "
        f"pytest fixture: median of {fixture.count(KAFKA)} each; 'nodes forked': minikraft's "
        "nodes forked from one warm interpreter (the pytest plugin's launch) instead of "
        f"`minikraft up`'s six execs, median of {forked.count(MINIKRAFT)}, beside Kafka's cold "
        "starts",
        "side by side: Kafka, minikraft and minikraft fsync running together from RSS to the "
        "consume line (each measured while the others idle), the fsync cluster then stopped",
        f"idle CPU of both over the same {sizes.idle_s:.0f} s with no clients, % of one core, all "
        "six nodes",
        f"produce: after an unmeasured warm-up; each line in {sizes.reps} halves A B B A over "
        f"Kafka, minikraft, minikraft fsync: 8 librdkafka producers x {sizes.one_record_each} "
        f"records of {RECORD_SIZE} B one at a time (p50/p99 of all); batched: one producer, "
        f"{sizes.batched} records, linger.ms 5; perf-test {sizes.perf_test} records; e2e "
        f"{sizes.e2e} records; consume {sizes.consume} records of {CONSUME_RECORD_SIZE} B from "
        f"the beginning, 3 partitions, read {sizes.reps} times A B B A",
        f"controller failover: {run.made['controller kills']} kills each of "
        f"{sizes.controller_kills} asked; broker failover: {run.made['broker kills']} of "
        f"{sizes.broker_kills}; alternating kill by kill, each victim restarted and caught up "
        "before the other side's turn"
        + ("" if budget_s is None else f"; run bounded to {budget_s / 60:.0f} min"),
        "broker failover parts, median ms (kill->fenced: the controller's fencing batch; "
        "->metadata: a surviving broker's Metadata names the new leader; ->acked: librdkafka's "
        "ack): " + "; ".join(f"{e} {parts[e]['median']}" for e in ENGINES),
        *kafka.notes, *ours.notes,
        f"ready samples (s, in order): kafka {[round(s, 1) for s in ready.values(KAFKA)]}, "
        f"minikraft {[round(s, 2) for s in ready.values(MINIKRAFT)]}; fixture: kafka "
        f"{[round(s, 1) for s in fixture.values(KAFKA)]}, minikraft "
        f"{[round(s, 2) for s in fixture.values(MINIKRAFT)]}; forked: "
        f"{[round(s, 2) for s in forked.values(MINIKRAFT)]}",
        f"starts that never became ready in {START_TIMEOUT_S:.0f} s, stopped and made again "
        f"(not in the figures): {dict(hung_starts) or 'none'}",
    ]
    return make_report("kafka", "kafka", results, notes, quick=quick,
                       load_average_before=load_before,
                       kafka_version=deps.kafka_version(),
                       kafka_jvm_opts=list(KAFKA_SERVER_JVM_OPTS),
                       made=dict(run.made),
                       minutes=round((time.monotonic() - started) / 60, 1),
                       broker_failover_parts=parts)
