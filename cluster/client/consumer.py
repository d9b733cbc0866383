"""minikraft's own Kafka consumer: committed records (below each partition's high watermark, rule
20) from the partition leaders with Kafka's ListOffsets and Fetch (read committed, assigned
partitions, no group) (`minikraft consume`, the chaos workload)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from cluster.client.broker_client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    RETRIABLE_ERRORS,
    Leaders,
    data_client,
    fetch_records,
    list_offset,
)
from kafkawire.errors import Errors, KafkaError

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
    client = data_client("consumer")
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
                        positions[p] = await list_offset(
                            leaders, p, EARLIEST_TIMESTAMP if from_beginning else LATEST_TIMESTAMP
                        )
                        got = True
                        continue
                    fetched = await fetch_records(leaders, p, positions[p], max_wait_ms=POLL_WAIT_MS)
                except KafkaError as exc:
                    if exc.error not in _RETRY:
                        raise
                    stale = True
                    continue
                for offset, record in fetched.records:
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
