"""minikraft's own Kafka producer: one record batch v2 per Produce request to the partition's
leader, in order, retried on a retriable error (never on REQUEST_TIMED_OUT: it may have been
appended), values `<producer-id>-<seq>` the audit can check for loss and duplication, and the
msgpack ack journal (`minikraft produce`, chaos, the console, bench)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path
from typing import Any

import msgpack

from cluster.client.broker_client import (
    RETRIABLE_ERRORS,
    Leaders,
    ProduceAck,
    data_client,
    produce_batch,
)
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
