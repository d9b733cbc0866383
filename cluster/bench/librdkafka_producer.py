"""`bench produce`'s librdkafka line: confluent-kafka's Producer (librdkafka, none of our code)
against the same brokers, acks=all, the batched load's record count and size, so the note can
quote a real Kafka client beside minikraft's own producer.

The shape matches minikraft's closed-loop producers: at most `producers * records_per_batch`
records are outstanding at a time, and a record's latency runs from `produce()` to its delivery
report (librdkafka's own batching: linger.ms and batch sizes at their defaults). Without the dev
extra (confluent-kafka) the line is left out with a note.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from cluster.bench.load_result import LoadResult

LIBRDKAFKA = "librdkafka producer"  # the suffix of its lines in the report
DELIVERY_TIMEOUT_S = 120.0
POLL_S = 0.001


def librdkafka_available() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def run_librdkafka_load(
    bootstrap: str, topic: str, *, records: int, record_size: int, in_flight: int
) -> LoadResult:
    """Produce `records` values of `record_size` bytes with acks=all, at most `in_flight`
    undelivered at once; bounded by DELIVERY_TIMEOUT_S overall."""
    from confluent_kafka import KafkaError as RdKafkaError
    from confluent_kafka import Producer, libversion

    result = LoadResult(version=libversion()[0])
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "client.id": "bench-librdkafka"}
    )
    outstanding = 0

    def delivered(error: RdKafkaError | None, _message: Any, *, sent_at: float) -> None:
        nonlocal outstanding
        outstanding -= 1
        if error is None:
            result.ack((time.monotonic() - sent_at) * 1000)
        else:
            result.fail(error.name())

    started = time.monotonic()
    deadline = started + DELIVERY_TIMEOUT_S
    for seq in range(records):
        while outstanding >= in_flight and time.monotonic() < deadline:
            producer.poll(POLL_S)
        if time.monotonic() >= deadline:
            break
        head = f"rdkafka-{seq}:".encode()
        value = head + b"x" * max(0, record_size - len(head))
        sent_at = time.monotonic()
        producer.produce(topic, value, on_delivery=functools.partial(delivered, sent_at=sent_at))
        outstanding += 1
        producer.poll(0)
    producer.flush(max(0.0, deadline - time.monotonic()))
    result.elapsed_s = time.monotonic() - started
    result.latencies_ms.sort()
    undelivered = records - result.acked - sum(result.errors.values())
    if undelivered:
        result.errors["UNDELIVERED"] = undelivered
    return result
