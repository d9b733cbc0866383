"""The chaos workload's `--client confluent-kafka` producer: one librdkafka Producer per
partition (none of our code on the client side), in a worker thread, one record in flight at a
time, acks=all, journaled exactly as minikraft's own producer journals (send, then ack with
Kafka's error name, offset and leader epoch), so the audit's rule 23 judges a real client's acks.

librdkafka retries by itself until `message.timeout.ms`; a record is acked once, when its
delivery report says so. With `enable.idempotence=true` (the default here; InitProducerId and
the brokers' per-producer sequences) its retries cannot write a value twice, and the audit
counts a duplicate as a violation; without it, retries may duplicate and a duplicate is counted,
not a violation (analytics.rules.replication.pure.classify_acked).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from cluster.chaos.send_target import SendTarget
from kafkawire.errors import Errors

DELIVERY_TIMEOUT_MS = 10_000  # librdkafka's message.timeout.ms: its retries stop there
POLL_S = 0.05
# librdkafka's local error for a record whose retries ran out (rdkafka.h RD_KAFKA_RESP_ERR__MSG_TIMED_OUT).
_MSG_TIMED_OUT = -192


def librdkafka_error(code: int | None) -> Errors:
    """A delivery report's error as Kafka's: broker errors keep their code; librdkafka's local
    errors (negative, below -1) are a timeout or a transport failure."""
    if code is None:
        return Errors.NONE
    if code >= -1:
        return Errors.of(code)
    return Errors.REQUEST_TIMED_OUT if code == _MSG_TIMED_OUT else Errors.NETWORK_EXCEPTION


class Delivery:
    """One record's delivery report, handed from librdkafka's callback to the loop."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error = Errors.NONE
        self.offset = -1
        self.leader_epoch = -1

    def __call__(self, err: Any, message: Any) -> None:
        self.error = librdkafka_error(None if err is None else int(err.code()))
        if err is None:
            self.offset = int(message.offset())
            epoch = message.leader_epoch()
            self.leader_epoch = -1 if epoch is None else int(epoch)
        self.done.set()


def produce_one_at_a_time(
    target: SendTarget,
    values: Callable[[], bytes | None],
    on_outcome: Callable[[bytes, Delivery], None],
) -> None:
    """Send `values()` (None ends the loop) to the target's partition, each after the previous one's
    delivery report, and hand every report to `on_outcome`. Runs in a worker thread."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "client.id": target.client_id,
            "acks": "all",
            "request.timeout.ms": target.request_timeout_ms,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "linger.ms": 0,
            "enable.idempotence": target.idempotent,
        }
    )
    try:
        while (value := values()) is not None:
            delivery = Delivery()
            producer.produce(target.topic, value, partition=target.partition, on_delivery=delivery)
            deadline = time.monotonic() + 2 * DELIVERY_TIMEOUT_MS / 1000  # bounded wait
            while not delivery.done.is_set() and time.monotonic() < deadline:
                producer.poll(POLL_S)
            if not delivery.done.is_set():
                delivery.error = Errors.REQUEST_TIMED_OUT
            on_outcome(value, delivery)
    finally:
        producer.flush(DELIVERY_TIMEOUT_MS / 1000)
