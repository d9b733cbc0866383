"""librdkafka (confluent-kafka) loads of `minikraft bench kafka`, the same on either cluster.

Every client here is confluent-kafka with its defaults but acks=all and what a line is about
(linger.ms for the batched line; the readiness probe's reconnect backoff, so that a cluster not
listening yet is asked again every 100 ms instead of after librdkafka's growing backoff).
Every loop is bounded by a deadline.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.client.producer import percentile

QUIET = {"log_level": 0}  # connection refused while a node starts or after a kill is expected
PROBE = {"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 100, **QUIET}


def wait_brokers(admin: AdminClient, brokers: int, deadline: float) -> None:
    """Until Metadata lists `brokers` live brokers and names a controller, asked every 100 ms
    (librdkafka's admin client otherwise waits out its request timeout for a controller a
    starting cluster does not name yet)."""
    last: Any = "no answer"
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=1.0)
            if len(md.brokers) >= brokers and md.controller_id >= 0:
                return
            last = f"{len(md.brokers)} brokers, controller {md.controller_id}"
        except KafkaException as exc:
            last = exc.args[0]
        time.sleep(0.1)
    raise TimeoutError(f"{brokers} brokers not listed: {last}")


def create_topic(bootstrap: str, topic: str, partitions: int, deadline: float,
                 configs: dict[str, str] | None = None) -> None:
    """RF 3, min.insync.replicas 2 (and `configs`), once 3 brokers are live, asked again
    until the cluster takes it."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **PROBE})
    last: Any = "no answer"
    while time.monotonic() < deadline:
        wait_brokers(admin, 3, deadline)
        new = NewTopic(topic, num_partitions=partitions, replication_factor=3,
                       config={"min.insync.replicas": "2", **(configs or {})})
        future = admin.create_topics([new], operation_timeout=10, request_timeout=10)[topic]
        try:
            future.result(timeout=max(0.1, min(15.0, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == RdKafkaError.TOPIC_ALREADY_EXISTS:
                return
            last = err
        except Exception as exc:  # the future's own timeout
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"create {topic}: {last}")


def _into(outcome: list[Any]) -> Callable[[Any, Any], None]:
    """A delivery callback that appends the record's error (None: acknowledged) to outcome."""
    def delivered(err: Any, _msg: Any) -> None:
        outcome.append(err)
    return delivered


def produce_one(bootstrap: str, topic: str, deadline: float) -> None:
    """One acks=all record, sent again until it is acknowledged (librdkafka itself retries
    what is retriable: an unknown topic, a leader not known yet, not enough replicas)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **PROBE})
    last: Any = "no answer"
    while time.monotonic() < deadline:
        outcome: list[Any] = []
        producer.produce(topic, b"ready", on_delivery=_into(outcome))
        while not outcome and time.monotonic() < deadline:
            producer.poll(0.01)
        if outcome and outcome[0] is None:
            return
        last = outcome[0] if outcome else "timed out"
    raise TimeoutError(f"first acks=all write on {topic}: {last}")


@dataclass
class OneRecordResult:
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    elapsed_s: float = 0.0

    @property
    def records_per_s(self) -> float:
        return len(self.latencies_ms) / max(self.elapsed_s, 1e-9)


def one_record_load(bootstrap: str, topic: str, producers: int, records_each: int,
                    timeout_s: float = 300.0) -> OneRecordResult:
    """`producers` librdkafka producers (a thread each), each sending its next record when the
    previous one is acknowledged: one record per Produce request, acks=all, 1 KiB values."""
    result = OneRecordResult()
    lock = threading.Lock()
    deadline = time.monotonic() + timeout_s

    def run(index: int) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        value = f"one-{index}:".encode().ljust(1024, b"x")
        mine: list[float] = []
        errors = 0
        for _ in range(records_each):
            outcome: list[Any] = []
            sent = time.monotonic()
            producer.produce(topic, value,
                             on_delivery=_into(outcome))
            while not outcome and time.monotonic() < deadline:
                producer.poll(0.001)
            if outcome and outcome[0] is None:
                mine.append((time.monotonic() - sent) * 1000)
            else:
                errors += 1
        with lock:
            result.latencies_ms.extend(mine)
            result.errors += errors

    # Every producer connected and knowing its leaders before the clock starts.
    warm = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    warm.produce(topic, b"warm")
    warm.flush(30)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(producers)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.elapsed_s = time.monotonic() - started
    result.latencies_ms.sort()
    return result


@dataclass
class BatchedResult:
    acked: int
    errors: int
    elapsed_s: float
    record_size: int

    @property
    def records_per_s(self) -> float:
        return self.acked / max(self.elapsed_s, 1e-9)

    @property
    def mb_per_s(self) -> float:
        return self.records_per_s * self.record_size / 1e6


def batched_load(bootstrap: str, topic: str, records: int, record_size: int,
                 linger_ms: int = 5, timeout_s: float = 600.0) -> BatchedResult:
    """One librdkafka producer sending `records` as fast as its queue takes them (linger.ms
    `linger_ms`, acks=all), until every one is acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": linger_ms})
    value = b"b" * record_size
    counts = {"acked": 0, "errors": 0}

    def delivered(err: Any, _msg: Any) -> None:
        counts["acked" if err is None else "errors"] += 1

    producer.produce(topic, value)  # metadata and connections before the clock starts
    producer.flush(30)
    deadline = time.monotonic() + timeout_s
    started = time.monotonic()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:  # the queue is full: serve delivery reports, then again
                producer.poll(0.005)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"batched load on {topic}: queue full") from None
        producer.poll(0)
    producer.flush(max(1.0, deadline - time.monotonic()))
    elapsed = time.monotonic() - started
    return BatchedResult(counts["acked"], records - counts["acked"], elapsed, record_size)


def consume_all(bootstrap: str, topic: str, partitions: int, records: int,
                timeout_s: float = 600.0) -> tuple[int, float]:
    """A consumer reading `topic` from the beginning until `records` have come: (records
    read, seconds from assignment to the last one)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-consume-{time.time_ns()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        started = time.monotonic()
        deadline = started + timeout_s
        read = 0
        while read < records and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                if msg.error() is None:
                    read += 1
        return read, time.monotonic() - started
    finally:
        consumer.close()


class SteadyProducer:
    """A librdkafka producer sending one acks=all record every `interval_s` in a thread, for
    the broker failover line: `first_ack_after(t)` is when the first record produced after t
    was acknowledged. Paused, it sends nothing (while the other cluster is measured) but keeps
    its connections and metadata."""

    def __init__(self, bootstrap: str, topic: str, interval_s: float = 0.002) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **QUIET})
        self.topic = topic
        self.interval_s = interval_s
        self.acks: list[tuple[float, float]] = []  # (produced at, acknowledged at)
        self.errors = 0
        self._stop = threading.Event()
        self._active = threading.Event()
        self._active.set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._active.set()
        self._thread.join(timeout=30)
        self.producer.flush(10)

    def pause(self) -> None:
        self._active.clear()

    def resume(self) -> None:
        self._active.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._active.is_set():
                self.producer.poll(0.05)  # delivery reports of what is in flight
                self._active.wait(0.05)
                continue
            sent = time.monotonic()

            def delivered(err: Any, _msg: Any, sent: float = sent) -> None:
                if err is None:
                    self.acks.append((sent, time.monotonic()))
                else:
                    self.errors += 1

            with contextlib.suppress(BufferError):  # queue full while no leader: next round
                self.producer.produce(self.topic, b"steady", on_delivery=delivered)
            self.producer.poll(self.interval_s)

    def mark(self) -> int:
        """Where the acknowledgements received from now on start (for first_ack_after)."""
        return len(self.acks)

    def first_ack_after(self, t: float, mark: int, deadline: float) -> float:
        """When the first record produced at or after t was acknowledged (acks arrive in
        order, so those before `mark` were all before t)."""
        seen = mark
        while time.monotonic() < deadline:
            acks = self.acks[seen:]
            for sent, acked in acks:
                if sent >= t:
                    return acked
            seen += len(acks)
            time.sleep(0.005)
        raise TimeoutError(f"no record acknowledged on {self.topic} after the kill")

    def acked_since(self, t: float) -> int:
        return sum(1 for sent, _ in self.acks[-500:] if sent >= t)


def percentiles_ms(latencies: list[float]) -> tuple[float, float]:
    return percentile(latencies, 0.5), percentile(latencies, 0.99)
