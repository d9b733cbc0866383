"""`minikraft produce --bootstrap-server H:P --topic T` (CLI.md "Data, logs, health").

Values are `<producer-id>-<seq>` (padded to --record-size), unique and sequenced so the audit can
check loss and duplication; `--journal F` appends every send and its ack as msgpack lines.
Records go one per request (Kafka's Produce, one record batch v2 each), in order, round-robin
over the partitions (or to --partition).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path
from typing import Any

import click
import msgpack

from cluster.cli.broker_client import (
    RETRIABLE_ERRORS,
    Leaders,
    ProduceAck,
    data_client,
    produce_batch,
)
from cluster.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, output_option, stdout
from kafkawire.clock import now_ms
from kafkawire.errors import Errors, KafkaError
from storage.core.record_batch import Record, encode_batch

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
MAX_ATTEMPTS = 3


def record_value(producer_id: str, seq: int, record_size: int) -> bytes:
    value = f"{producer_id}-{seq}"
    if len(value) < record_size:
        value += ":" + "x" * (record_size - len(value) - 1)
    return value.encode()


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, round(fraction * (len(sorted_values) - 1)))
    return round(sorted_values[index], 3)


class AckJournal:
    def __init__(self, path: Path | None) -> None:
        self._handle = None if path is None else open(path, "ab")  # noqa: SIM115

    def write(self, entry: dict[str, Any]) -> None:
        if self._handle is not None:
            self._handle.write(msgpack.packb(entry, use_bin_type=True))
            self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


async def produce_records(
    bootstrap: str,
    topic: str,
    *,
    acks: int,
    num_records: int,
    record_size: int,
    partition: int | None = None,
    journal: Path | None = None,
    timeout_ms: int = 10_000,
    producer_id: str | None = None,
) -> dict[str, Any]:
    producer_id = producer_id or uuid.uuid4().hex[:8]
    client = data_client(f"producer-{producer_id}")
    leaders = Leaders(client, bootstrap, topic)
    ack_journal = AckJournal(journal)
    errors: dict[str, int] = {}
    latencies: list[float] = []
    acked = 0
    started = time.monotonic()
    try:
        await leaders.wait_ready()
        partitions = sorted(leaders.partitions) if partition is None else [partition]
        for seq in range(num_records):
            target = partitions[seq % len(partitions)]
            value = record_value(producer_id, seq, record_size)
            timestamp_ms = now_ms()
            batch = encode_batch(0, 0, timestamp_ms, [Record(None, value)])
            ack_journal.write(
                {"event": "send", "producer_id": producer_id, "seq": seq, "topic": topic,
                 "partition": target, "acks": acks, "value": value[:64].decode(), "ts": timestamp_ms}
            )
            sent_at = time.monotonic()
            ack = await send_batch(leaders, target, batch, acks, timeout_ms)
            error = ack.error
            latency_ms = (time.monotonic() - sent_at) * 1000
            if error is Errors.NONE:
                acked += 1
                latencies.append(latency_ms)
            else:
                errors[error.name] = errors.get(error.name, 0) + 1
            ack_journal.write(
                {"event": "ack", "producer_id": producer_id, "seq": seq, "topic": topic,
                 "partition": target, "acks": acks, "error": error.name,
                 "offset": ack.base_offset, "leader_epoch": ack.leader_epoch,
                 "ts": now_ms()}
            )
    finally:
        ack_journal.close()
        await client.close()
    elapsed = max(time.monotonic() - started, 1e-9)
    latencies.sort()
    return {
        "sent": num_records,
        "acked": acked,
        "errors": errors,
        "records_per_s": round(acked / elapsed, 1),
        "latency_ms": {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99)},
        "producer_id": producer_id,
    }


async def send_batch(
    leaders: Leaders, partition: int, batch: bytes, acks: int, timeout_ms: int
) -> ProduceAck:
    """One batch to the partition's leader: retriable errors refresh metadata and resend, up to
    MAX_ATTEMPTS; a REQUEST_TIMED_OUT is never resent (it may have been appended)."""
    ack = ProduceAck(Errors.UNKNOWN_SERVER_ERROR)
    for attempt in range(MAX_ATTEMPTS):
        try:
            ack = await produce_batch(leaders, partition, batch, acks, timeout_ms)
            if ack.error is Errors.NONE:
                return ack
        except KafkaError as exc:
            ack = ProduceAck(exc.error, message=exc.message)
            if exc.error is Errors.REQUEST_TIMED_OUT:
                return ack  # it may have been appended: never resend (no duplicates)
        if ack.error not in RETRIABLE_ERRORS or attempt == MAX_ATTEMPTS - 1:
            return ack
        await asyncio.sleep(0.2 * (attempt + 1))
        with contextlib.suppress(KafkaError):
            await leaders.refresh()
    return ack


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True)
@click.option("--topic", required=True)
@click.option("--acks", type=click.Choice(sorted(ACKS)), default="all", show_default=True)
@click.option("--num-records", type=click.IntRange(0), default=10, show_default=True)
@click.option("--record-size", type=click.IntRange(1), default=16, show_default=True)
@click.option("--partition", type=click.IntRange(0), default=None)
@click.option("--timeout-ms", type=click.IntRange(1), default=10_000, show_default=True)
@click.option("--journal", type=click.Path(dir_okay=False, path_type=Path), default=None)
@output_option
def produce(
    bootstrap: str, topic: str, acks: str, num_records: int, record_size: int,
    partition: int | None, timeout_ms: int, journal: Path | None, output: str,
) -> None:
    """Send sequenced records to a topic and report what was acknowledged."""
    try:
        summary = asyncio.run(
            produce_records(
                bootstrap, topic, acks=ACKS[acks], num_records=num_records,
                record_size=record_size, partition=partition, journal=journal,
                timeout_ms=timeout_ms,
            )
        )
    except KafkaError as exc:
        code = EXIT_USAGE if exc.error is Errors.NETWORK_EXCEPTION else EXIT_FAILED
        if output == "json":
            emit_json({"sent": 0, "acked": 0, "errors": {exc.error.name: 1},
                       "records_per_s": 0.0, "latency_ms": {"p50": 0.0, "p99": 0.0}})
        else:
            stdout.print(f"{exc.error.name}: {exc.message}")
        raise SystemExit(code) from None
    if output == "json":
        emit_json(summary)
    else:
        stdout.print(
            f"sent {summary['sent']}, acked {summary['acked']}, errors {summary['errors']}, "
            f"{summary['records_per_s']} records/s, p50 {summary['latency_ms']['p50']} ms, "
            f"p99 {summary['latency_ms']['p99']} ms"
        )
    raise SystemExit(EXIT_OK if summary["acked"] == summary["sent"] else EXIT_FAILED)
