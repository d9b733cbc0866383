"""The chaos workload's `--client aiokafka` producer: one AIOKafkaProducer per partition (none of
our code on the client side), acks=all, `enable_idempotence=True` unless the run turns it off,
one record in flight at a time, journaled exactly as the other producers journal (send, then ack
with Kafka's error name and offset), so the audit's rule 23 judges its acks too.

aiokafka retries retriable errors by itself within `request_timeout_ms`; with idempotence on the
brokers deduplicate those retries by producer id and sequence, so a value it saw acked must be in
the log exactly once. aiokafka does not report the leader epoch of an ack: it is journaled -1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from cluster.chaos.send_target import SendTarget
from kafkawire.errors import Errors

# How long one send may take before the loop gives up on it (aiokafka's own retries stop at
# request_timeout_ms; this bounds a send stuck behind a metadata refresh too).
SEND_TIMEOUT_S = 20.0


def aiokafka_error(exc: BaseException) -> Errors:
    """An aiokafka exception as Kafka's error: broker errors carry their code (`errno`); a
    timeout is REQUEST_TIMED_OUT; anything else (connection, client state) NETWORK_EXCEPTION."""
    from aiokafka.errors import KafkaTimeoutError, RequestTimedOutError

    if isinstance(exc, (KafkaTimeoutError, RequestTimedOutError, TimeoutError)):
        return Errors.REQUEST_TIMED_OUT
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code > 0:
        return Errors.of(code)
    return Errors.NETWORK_EXCEPTION


async def produce_one_at_a_time(
    target: SendTarget,
    values: Callable[[], bytes | None],
    on_outcome: Callable[[Errors, int], Awaitable[None]],
) -> None:
    """Send `values()` (None ends the loop) to the target's partition, each after the previous one's
    outcome, and hand (error, offset) of each to `on_outcome`."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioKafkaError

    producer = AIOKafkaProducer(
        bootstrap_servers=target.bootstrap.split(","),
        client_id=target.client_id,
        acks="all",
        enable_idempotence=target.idempotent,
        request_timeout_ms=target.request_timeout_ms,
        linger_ms=0,
    )
    await producer.start()
    try:
        while (value := values()) is not None:
            try:
                metadata = await asyncio.wait_for(
                    producer.send_and_wait(target.topic, value, partition=target.partition),
                    SEND_TIMEOUT_S,
                )
            except (TimeoutError, AioKafkaError, OSError) as exc:
                await on_outcome(aiokafka_error(exc), -1)
                continue
            await on_outcome(Errors.NONE, int(metadata.offset))
    finally:
        await producer.stop()
