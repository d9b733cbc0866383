"""NATS JetStream as the produce peer: 3 nats-server processes clustered on 127.0.0.1, one R3
file-storage stream per minikraft partition, acks=all-equivalent publishes (a JetStream PubAck
comes once the stream's quorum has stored the message). JetStream does not fsync each message
(nats-server 2.9 syncs its files every 2 minutes), while minikraft's brokers fsync every batch
before acks=all returns: the figures say so beside them.

The load is the one `bench produce` ran (producers, records per request, record size), taken
from its report so both sides run the same shape: a "batch" here is that many publishes in
flight at once from one producer, and each record's latency is its batch's, as minikraft's.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.bench.librdkafka_producer import LIBRDKAFKA
from cluster.bench.peers.procs import PeerCluster, PeerMissing, free_ports, require_binary, spawn
from cluster.bench.phase_clock import CpuSince
from cluster.bench.raft_workload import percentile

NOTE = (
    "NATS JetStream R3 (file storage) does not fsync each message (2 min sync interval); "
    "minikraft fsyncs each batch before the acks=all ack, except the lines marked "
    "'flush relaxed' (flush.messages at its maximum: no fsync, like JetStream); both ack once a "
    "quorum stored the record; NATS has no batch publish, so its 'batch' is that many "
    "publishes in flight; server CPU is the user + system time of every server process during "
    "the load (minikraft: 3 brokers and 3 controllers; NATS: its 3 servers)"
)
RELAXED_FLUSH_MESSAGES = 2**63 - 1
STREAMS = 3  # as minikraft's bench topic has 3 partitions, each with its own leader


@dataclass
class NatsCluster(PeerCluster):
    ports: list[int] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="nats-bench-")))

    def start(self) -> None:
        binary = require_binary("nats-server", "nats-server")
        ports = free_ports(6)
        self.ports, route_ports = ports[:3], ports[3:]
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in route_ports)
        for i in range(3):
            config = self.workdir / f"n{i}.conf"
            config.write_text(
                f'server_name: "n{i}"\n'
                f"listen: 127.0.0.1:{self.ports[i]}\n"
                f'jetstream {{ store_dir: "{self.workdir / f"n{i}"}" }}\n'
                f'cluster {{ name: "bench", listen: 127.0.0.1:{route_ports[i]}, '
                f"routes: [{routes}] }}\n"
            )
            self.pids.append(spawn([binary, "-c", str(config)], self.workdir / f"n{i}.log"))

    @property
    def servers(self) -> list[str]:
        return [f"nats://127.0.0.1:{p}" for p in self.ports]


async def _connect(servers: list[str]) -> Any:
    try:
        import nats
    except ImportError as exc:
        raise PeerMissing("nats-py not installed: make bench-deps") from exc
    return await nats.connect(servers=servers, connect_timeout=2, max_reconnect_attempts=5)


async def _create_streams(servers: list[str], timeout_s: float = 60.0) -> None:
    """R3 file streams, retried until JetStream has its meta leader (cluster formed)."""
    from nats.js.api import StorageType, StreamConfig

    deadline = time.monotonic() + timeout_s
    connection = await _connect(servers)
    try:
        js = connection.jetstream(timeout=5)
        for index in range(STREAMS):
            while True:
                try:
                    await js.add_stream(StreamConfig(
                        name=f"bench{index}", subjects=[f"bench.{index}"],
                        storage=StorageType.FILE, num_replicas=3,
                    ))
                    break
                except Exception:  # no meta leader yet: every error means retry until the deadline
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)
    finally:
        await connection.close()


@dataclass
class _Result:
    acked: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    server_cpu_s: float | None = None


async def _producer(servers: list[str], index: int, load: dict[str, int], out: _Result) -> None:
    connection = await _connect(servers)
    try:
        js = connection.jetstream(timeout=30)
        per_batch = load["records_per_batch"]
        payload = b"x" * load["record_size"]
        for seq in range(load["records_per_producer"] // per_batch):
            subject = f"bench.{(index + seq) % STREAMS}"
            started = time.monotonic()
            await asyncio.gather(*(js.publish(subject, payload) for _ in range(per_batch)))
            latency_ms = (time.monotonic() - started) * 1000
            out.acked += per_batch
            out.latencies_ms.extend([latency_ms] * per_batch)
    finally:
        await connection.close()


async def _run_load(cluster: NatsCluster, load: dict[str, int]) -> _Result:
    out = _Result()
    cpu = CpuSince(cluster.pids)
    started = time.monotonic()
    await asyncio.gather(
        *(_producer(cluster.servers, i, load, out) for i in range(load["producers"]))
    )
    out.elapsed_s = time.monotonic() - started
    out.server_cpu_s = cpu.spent()
    out.latencies_ms.sort()
    return out


async def run_nats_loads(loads: dict[str, dict[str, int]]) -> dict[str, _Result]:
    with NatsCluster() as cluster:
        await _create_streams(cluster.servers)
        return {name: await _run_load(cluster, load) for name, load in loads.items()}


def _loads(quick: bool, report: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The shapes `bench produce` ran (cluster/bench/produce_bench.bench_loads)."""
    from cluster.bench.produce_bench import bench_loads

    return {
        name: {
            "producers": load.producers,
            "records_per_producer": load.records_per_producer,
            "records_per_batch": load.records_per_batch,
            "record_size": load.record_size,
        }
        for name, load in bench_loads(quick).items()
    }


def run_minikraft_relaxed(quick: bool) -> dict[str, Any]:
    """`bench produce`'s loads on a cluster whose brokers never fsync on produce or fetch
    (`flush.messages` at its maximum, Kafka's default policy), to pair with JetStream."""
    from cluster.bench.produce_bench import BENCH_PROPS, _bench, bench_loads
    from cluster.launch.local_cluster import LocalCluster
    from cluster.launch.readiness import wait_until_ready

    workdir = Path(tempfile.mkdtemp(prefix="minikraft-bench-produce-relaxed-"))
    props = {**BENCH_PROPS, "flush.messages": str(RELAXED_FLUSH_MESSAGES)}
    cluster = LocalCluster.plan(workdir, controllers=3, brokers=3, base_port=0, overrides=props)
    try:
        cluster.format()
        cluster.start()
        asyncio.run(wait_until_ready(cluster, 90))
        runs: dict[str, Any] = asyncio.run(_bench(cluster, bench_loads(quick)))
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    failed = {k: v for run in runs.values() for k, v in run.errors.items()}
    if failed:
        raise RuntimeError(f"bench produce (flush relaxed): acks=all errors {failed}")
    return runs


def _figures(runs: dict[str, Any]) -> dict[str, float]:
    from cluster.bench.produce_bench import server_cpu_us_per_record

    figures: dict[str, float] = {}
    for name, label in (("batched", "batched"), ("single", "1 record per request")):
        run = runs[name]
        figures[f"throughput, {label}"] = run.acked / max(run.elapsed_s, 1e-9)
        figures[f"ack latency p50, {label}"] = percentile(run.latencies_ms, 0.5)
        figures[f"ack latency p99, {label}"] = percentile(run.latencies_ms, 0.99)
        cpu = server_cpu_us_per_record(run.acked, run.server_cpu_s)
        if cpu is not None:
            figures[f"server CPU per record, {label}"] = cpu
    return figures


def compare_produce_with_nats(report: dict[str, Any], *, quick: bool) -> dict[str, Any]:
    """Fill `peer` and `ratio` of a `bench produce` report (minikraft fsyncs per batch) with
    NATS JetStream's figures, and add the same lines for minikraft with the flush relaxed."""
    from cluster.bench.report import make_report, row

    nats = _figures(asyncio.run(run_nats_loads(_loads(quick, report))))
    relaxed = _figures(run_minikraft_relaxed(quick))
    # The librdkafka producer's lines (same load, minikraft's brokers) pair with NATS's too.
    results = [
        row(r["metric"], r["unit"], r["better"], r["minikraft"],
            nats.get(r["metric"].removesuffix(f", {LIBRDKAFKA}")))
        for r in report["results"]
    ] + [
        row(f"{r['metric']}, flush relaxed", r["unit"], r["better"], relaxed.get(r["metric"]),
            nats.get(r["metric"]))
        for r in report["results"]
        if r["metric"] in relaxed
    ]
    extra = {k: v for k, v in report.items() if k not in ("bench", "peer", "results", "notes")}
    return make_report("produce", "nats", results, [*report.get("notes", []), NOTE], **extra)
