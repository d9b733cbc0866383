"""`minikraft consume --bootstrap-server H:P --topic T` (CLI.md "Data, logs, health"): reads
committed records (below each partition's high watermark, rule 20) from the partition leaders
until --max-messages or until nothing new arrived for --timeout-ms."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import click

from cluster.cli.broker_client import RETRIABLE_ERRORS, Leaders, new_client
from cluster.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, output_option, stdout
from cluster.protocol import broker_messages as bm
from cluster.protocol.errors import Errors, KafkaError
from raft.core.record_batch import Record, iter_batches

POLL_WAIT_MS = 200
RETRY_BACKOFF_S = 0.1
# Reads are idempotent, so a timed-out one is simply asked again.
_RETRY = RETRIABLE_ERRORS | {Errors.REQUEST_TIMED_OUT}


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="replace")


async def consume_records(
    bootstrap: str,
    topic: str,
    *,
    partition: int | None = None,
    from_beginning: bool = False,
    max_messages: int | None = None,
    timeout_ms: int = 2000,
) -> dict[str, Any]:
    """A partition whose leader moved, is being elected or is RECOVERING (rule 21) is retried
    after a metadata refresh until --timeout-ms passes without progress, as Kafka's consumer
    does; any other error fails the command."""
    client = new_client("consumer")
    leaders = Leaders(client, bootstrap, topic)
    records: list[dict[str, Any]] = []
    try:
        await leaders.wait_ready()
        partitions = sorted(leaders.partitions) if partition is None else [partition]
        positions: dict[int, int] = {}
        idle_deadline = time.monotonic() + timeout_ms / 1000
        while time.monotonic() < idle_deadline:
            if max_messages is not None and len(records) >= max_messages:
                break
            got = stale = False
            for p in partitions:
                try:
                    if p not in positions:
                        positions[p] = await _start_offset(leaders, topic, p, from_beginning)
                        got = True
                        continue
                    batch_records = await _fetch(leaders, topic, p, positions[p])
                except KafkaError as exc:
                    if exc.error not in _RETRY:
                        raise
                    stale = True
                    continue
                for offset, record in batch_records:
                    records.append(
                        {"partition": p, "offset": offset, "key": _text(record.key),
                         "value": _text(record.value)}
                    )
                    positions[p] = offset + 1
                    got = True
            if got:
                idle_deadline = time.monotonic() + timeout_ms / 1000
            if stale:
                await asyncio.sleep(RETRY_BACKOFF_S)
                with contextlib.suppress(KafkaError):
                    await leaders.refresh()
    finally:
        await client.close()
    if max_messages is not None:
        records = records[:max_messages]
    return {"count": len(records), "records": records}


async def _start_offset(leaders: Leaders, topic: str, partition: int, from_beginning: bool) -> int:
    response = await leaders.client.request(
        leaders.leader_address(partition),
        bm.ListOffsetsRequest(
            topic, partition,
            timestamp=bm.EARLIEST_TIMESTAMP if from_beginning else bm.LATEST_TIMESTAMP,
        ),
    )
    if response.error_code != 0:
        raise KafkaError(Errors.of(response.error_code), response.error_message)
    offset: int = response.offset
    return offset


async def _fetch(
    leaders: Leaders, topic: str, partition: int, position: int
) -> list[tuple[int, Record]]:
    """Committed records at or after `position` (a batch may start below it)."""
    response = await leaders.client.request(
        leaders.leader_address(partition),
        bm.FetchRequest(topic, partition, position, max_wait_ms=POLL_WAIT_MS),
    )
    if response.error_code != 0:
        raise KafkaError(Errors.of(response.error_code), response.error_message)
    out = []
    for batch, _size in iter_batches(response.records):
        for index, record in enumerate(batch.records):
            offset = batch.offset_of(index)
            if offset >= position:
                out.append((offset, record))
    return out


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True)
@click.option("--topic", required=True)
@click.option("--partition", type=click.IntRange(0), default=None)
@click.option("--from-beginning", is_flag=True, default=False)
@click.option("--max-messages", type=click.IntRange(1), default=None)
@click.option("--timeout-ms", type=click.IntRange(1), default=2000, show_default=True)
@output_option
def consume(
    bootstrap: str, topic: str, partition: int | None, from_beginning: bool,
    max_messages: int | None, timeout_ms: int, output: str,
) -> None:
    """Read committed records of a topic from its partition leaders."""
    try:
        result = asyncio.run(
            consume_records(
                bootstrap, topic, partition=partition, from_beginning=from_beginning,
                max_messages=max_messages, timeout_ms=timeout_ms,
            )
        )
    except KafkaError as exc:
        if output == "json":
            emit_json({"count": 0, "records": [], "error": exc.error.name})
        else:
            stdout.print(f"{exc.error.name}: {exc.message}")
        raise SystemExit(
            EXIT_USAGE if exc.error is Errors.NETWORK_EXCEPTION else EXIT_FAILED
        ) from None
    if output == "json":
        emit_json(result)
    else:
        for record in result["records"]:
            stdout.print(f"{record['partition']}:{record['offset']} {record['value']}")
    raise SystemExit(EXIT_OK)
