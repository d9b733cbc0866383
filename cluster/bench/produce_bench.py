"""`minikraft bench produce`: 3 controllers + 3 brokers (real processes, fsync on), a topic with
RF=3 and min.insync.replicas=2, several concurrent producers sending acks=all batches of 1 KiB
records over localhost. Reports records/s and p50/p99 ack latency (a record's latency is its
batch's), plus the same load at one record per request to show what batching buys.

The producers run in this process on their own connections; every ack is a real acks=all ack
(rule 20: on at least min ISR logs, fsync'd per batch). Without `--compare`, `peer` and `ratio`
are null (CLI.md `bench` JSON).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.bench.floor import measure_floor
from cluster.bench.librdkafka_producer import (
    LIBRDKAFKA,
    librdkafka_available,
    run_librdkafka_load,
)
from cluster.bench.load_result import LoadResult
from cluster.bench.phase_clock import CpuSince
from cluster.client.broker_client import Leaders, create_topic, data_client, metadata
from cluster.client.producer import percentile, send_batch
from cluster.launch.local_cluster import LocalCluster
from cluster.launch.readiness import wait_until_ready
from kafkawire.client import KafkaClient
from kafkawire.clock import now_ms
from kafkawire.constants import ACKS_ALL
from kafkawire.errors import Errors, KafkaError
from storage.core.record_batch import Record, encode_batch

BENCH_TOPIC = "bench-produce"
PRODUCE_TIMEOUT_MS = 30_000
BENCH_PROPS = {
    "metadata.log.max.record.bytes.between.snapshots": str(1 << 30),  # none in a run
    "log.level": "WARNING",
}


@dataclass(frozen=True, slots=True)
class ProduceLoad:
    producers: int
    records_per_producer: int
    records_per_batch: int
    record_size: int = 1024


def server_cpu_us_per_record(acked: int, server_cpu_s: float | None) -> float | None:
    """The servers' CPU per acked record: what a round of the data path costs, which a
    throughput figure hides while cores sit idle (BENCHMARKS.md, session 12)."""
    return None if server_cpu_s is None or not acked else server_cpu_s / acked * 1e6


async def _wait_full_isr(client: KafkaClient, brokers: list[str], timeout_s: float) -> None:
    """Every broker knows the topic with every partition led and all three replicas in the ISR,
    so no producer meets a leader that has not replayed the topic yet (a new topic is created
    with a full ISR, so one broker's view proves nothing about the others')."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all([await _full_isr_at(client, address) for address in brokers]):
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{BENCH_TOPIC}: not led with a full ISR on every broker within {timeout_s:.0f}s")


async def _full_isr_at(client: KafkaClient, address: str) -> bool:
    try:
        response = await metadata(client, address, [BENCH_TOPIC])
    except KafkaError:
        return False
    topic = response.topics[0] if response.topics else None
    return (
        topic is not None
        and topic.error_code == 0
        and bool(topic.partitions)
        and all(p.leader_id >= 0 and len(p.isr_nodes) == 3 for p in topic.partitions)
    )


async def _producer(
    producer_index: int, bootstrap: str, load: ProduceLoad, result: LoadResult
) -> None:
    client = data_client(f"bench-producer-{producer_index}")
    leaders = Leaders(client, bootstrap, BENCH_TOPIC)
    try:
        await leaders.wait_ready()
        partitions = sorted(leaders.partitions)
        batches = load.records_per_producer // load.records_per_batch
        for seq in range(batches):
            partition = partitions[(producer_index + seq) % len(partitions)]
            records = [
                Record(None, _value(producer_index, seq, i, load.record_size))
                for i in range(load.records_per_batch)
            ]
            batch = encode_batch(0, 0, now_ms(), records)
            sent_at = time.monotonic()
            # A real producer's path: a moved leader refreshes metadata and resends.
            error = (
                await send_batch(leaders, partition, batch, ACKS_ALL, PRODUCE_TIMEOUT_MS)
            ).error
            latency_ms = (time.monotonic() - sent_at) * 1000
            if error is Errors.NONE:
                result.ack(latency_ms, load.records_per_batch)
            else:
                result.fail(error.name, load.records_per_batch)
    finally:
        await client.close()


def _value(producer_index: int, seq: int, index: int, size: int) -> bytes:
    head = f"bench{producer_index}-{seq}-{index}:".encode()
    return head + b"x" * max(0, size - len(head))


async def run_load(
    bootstrap: str, load: ProduceLoad, server_pids: Sequence[int] = ()
) -> LoadResult:
    result = LoadResult()
    cpu = CpuSince(server_pids)
    started = time.monotonic()
    await asyncio.gather(*(_producer(i, bootstrap, load, result) for i in range(load.producers)))
    result.elapsed_s = time.monotonic() - started
    result.server_cpu_s = cpu.spent()
    result.latencies_ms.sort()
    return result


async def _bench(cluster: LocalCluster, loads: dict[str, ProduceLoad]) -> dict[str, LoadResult]:
    bootstrap = cluster.bootstrap_server
    client = data_client("bench-admin")
    try:
        await create_topic(client, bootstrap, BENCH_TOPIC, 3, 3, {"min.insync.replicas": "2"})
        await _wait_full_isr(client, [b.address for b in cluster.brokers], 60)
    finally:
        await client.close()
    # Every server process counts: the brokers and the controllers (NATS's meta layer runs
    # inside its servers).
    pids = [node.pid for node in cluster.brokers + cluster.controllers if node.pid is not None]
    results = {}
    for name, load in loads.items():
        results[name] = await run_load(bootstrap, load, pids)
    return results


def bench_loads(quick: bool) -> dict[str, ProduceLoad]:
    if quick:
        return {
            "warmup": ProduceLoad(producers=2, records_per_producer=20, records_per_batch=10),
            "batched": ProduceLoad(producers=2, records_per_producer=100, records_per_batch=10),
            "single": ProduceLoad(producers=2, records_per_producer=20, records_per_batch=1),
        }
    return {
        "warmup": ProduceLoad(producers=4, records_per_producer=2000, records_per_batch=100),
        "batched": ProduceLoad(producers=8, records_per_producer=20_000, records_per_batch=100),
        "single": ProduceLoad(producers=8, records_per_producer=250, records_per_batch=1),
    }


def run_produce_bench(*, quick: bool = False, workdir: Path | None = None) -> dict[str, Any]:
    loads = bench_loads(quick)
    own_dir = workdir is None
    directory = workdir or Path(tempfile.mkdtemp(prefix="minikraft-bench-produce-"))
    cluster = LocalCluster.plan(
        directory, controllers=3, brokers=3, base_port=0, overrides=dict(BENCH_PROPS)
    )
    cluster.format()
    floor = measure_floor(directory)  # before the cluster loads the disk and the cores
    cluster.start()
    rdkafka: LoadResult | None = None
    try:
        asyncio.run(wait_until_ready(cluster, 90))
        runs = asyncio.run(_bench(cluster, loads))
        if librdkafka_available():
            batched_load = loads["batched"]
            rdkafka = run_librdkafka_load(
                cluster.bootstrap_server,
                BENCH_TOPIC,
                records=batched_load.producers * batched_load.records_per_producer,
                record_size=batched_load.record_size,
                in_flight=batched_load.producers * batched_load.records_per_batch,
            )
    finally:
        cluster.stop()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)
    batched, single = runs["batched"], runs["single"]
    failed = {k: v for run in runs.values() for k, v in run.errors.items()}
    if rdkafka is not None:
        failed.update({f"librdkafka {k}": v for k, v in rdkafka.errors.items()})
    if failed:
        raise RuntimeError(f"bench produce: acks=all errors {failed}")
    load = loads["batched"]
    results = [
        _row("throughput, batched", "records/s", "higher", batched.records_per_s),
        _row("ack latency p50, batched", "ms", "lower", percentile(batched.latencies_ms, 0.5)),
        _row("ack latency p99, batched", "ms", "lower", percentile(batched.latencies_ms, 0.99)),
        _row("throughput, 1 record per request", "records/s", "higher", single.records_per_s),
        _row("ack latency p50, 1 record per request", "ms", "lower",
             percentile(single.latencies_ms, 0.5)),
        _row("ack latency p99, 1 record per request", "ms", "lower",
             percentile(single.latencies_ms, 0.99)),
    ]
    for label, run in (("batched", batched), ("1 record per request", single)):
        cpu = server_cpu_us_per_record(run.acked, run.server_cpu_s)
        if cpu is not None:
            results.append(_row(f"server CPU per record, {label}", "us", "lower", cpu))
    notes = [
        f"floor on this machine: fsync p50 {floor.fsync_p50_ms:.3f} ms "
        f"(p99 {floor.fsync_p99_ms:.3f}), loopback RTT p50 {floor.rtt_p50_ms * 1000:.0f} us; "
        f"one acks=all record needs at least 2 fsyncs + 2 round trips = "
        f"{floor.one_record_ack_ms:.3f} ms",
        "server CPU per record: user + system time of the 3 brokers and 3 controllers during "
        "the load, per acked record",
    ]
    if rdkafka is not None:
        results += [
            _row(f"throughput, batched, {LIBRDKAFKA}", "records/s", "higher", rdkafka.records_per_s),
            _row(f"ack latency p50, batched, {LIBRDKAFKA}", "ms", "lower",
                 percentile(rdkafka.latencies_ms, 0.5)),
            _row(f"ack latency p99, batched, {LIBRDKAFKA}", "ms", "lower",
                 percentile(rdkafka.latencies_ms, 0.99)),
        ]
        notes.append(
            f"{LIBRDKAFKA}: confluent-kafka's Producer (librdkafka {rdkafka.version}, default "
            f"settings but acks=all) against the same brokers, {rdkafka.acked} records of "
            f"{load.record_size} B, at most {load.producers * load.records_per_batch} in flight"
        )
    else:
        notes.append(f"{LIBRDKAFKA} line left out: confluent-kafka is not installed (dev extra)")
    return {
        "bench": "produce",
        "peer": None,
        "notes": notes,
        "workload": {
            "brokers": 3,
            "replication_factor": 3,
            "min_insync_replicas": 2,
            "partitions": 3,
            "acks": "all",
            "record_size": load.record_size,
            "producers": load.producers,
            "records_per_batch": load.records_per_batch,
            "records": batched.acked,
        },
        "results": results,
        "floor": floor.as_json(),
    }


def _row(metric: str, unit: str, better: str, value: float) -> dict[str, Any]:
    return {
        "metric": metric,
        "unit": unit,
        "better": better,
        "minikraft": round(value, 3),
        "peer": None,
        "ratio": None,
    }
