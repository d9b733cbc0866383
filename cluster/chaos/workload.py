"""The chaos workload: acks=all producers writing unique, sequenced values, every send and ack
journaled, and a read-back at the end that counts what was lost and what was duplicated.

One producer per partition, so a partition that is unavailable stalls only its own producer and
its unavailability window is its own. A value is `<producer-id>-<seq>` (produce_cmd's format);
a send is retried only on errors that say the record was not appended (so a retry never writes
it twice); a timeout or a dropped connection ends that value's attempts, acked or not. Rule 23:
a value acked with acks=all must be read back, unless an unclean election happened.

The producers are minikraft's own Kafka client (Produce through cluster.client.broker_client) or,
with `--client confluent-kafka`, librdkafka's (cluster.chaos.librdkafka_producer), or with
`--client aiokafka`, aiokafka's (cluster.chaos.aiokafka_producer); all journal the same way, so
the audit judges any. Every send and ack entry says whether its producer is idempotent: the real
clients run with idempotence on unless `--no-idempotence`; minikraft's own producer never sends a
value twice (see _send), so a second copy can only come from the brokers and it is journaled as
idempotent too. The audit counts a duplicate of a non-idempotent producer's value and reports one
of an idempotent producer's as a violation (analytics.rules.replication.pure.classify_acked).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.chaos import aiokafka_producer
from cluster.chaos.librdkafka_producer import Delivery, produce_one_at_a_time
from cluster.chaos.send_target import SendTarget
from cluster.client.broker_client import (
    Leaders,
    ProduceAck,
    create_topic,
    data_client,
    produce_batch,
)
from cluster.client.consumer import consume_records
from cluster.client.producer import AckJournal, record_value
from kafkawire.clock import now_ms
from kafkawire.constants import ACKS_ALL
from kafkawire.errors import Errors, KafkaError
from storage.core.record_batch import Record, encode_batch

# --client: minikraft's own producer, or librdkafka's (confluent-kafka) or aiokafka's (the dev
# extra).
MINIKRAFT = "minikraft"
LIBRDKAFKA = "confluent-kafka"
AIOKAFKA = "aiokafka"
CLIENTS = (MINIKRAFT, LIBRDKAFKA, AIOKAFKA)
# Errors after which the leader did not append the record, so sending it again is safe.
NOT_APPENDED = frozenset(
    {Errors.NOT_LEADER_OR_FOLLOWER, Errors.LEADER_NOT_AVAILABLE, Errors.UNKNOWN_LEADER_EPOCH,
     Errors.FENCED_LEADER_EPOCH, Errors.NOT_ENOUGH_REPLICAS, Errors.UNKNOWN_TOPIC_OR_PARTITION}
)
# A produce response with this error may come after the append (a pending acks=all write
# failed by a leadership change): it is not retried. Before any request (no leader known) it is.
MAYBE_APPENDED = frozenset({Errors.NOT_LEADER_OR_FOLLOWER})
MAX_ATTEMPTS = 4
RECORD_SIZE = 24
# A send slower than this counts as the partition being unavailable for that long.
UNAVAILABLE_LATENCY_MS = 1000


def value_id(value: str | None) -> str | None:
    """`<producer-id>-<seq>[:padding]` -> `<producer-id>-<seq>`."""
    return None if value is None else value.split(":", 1)[0]


@dataclass
class ProducerStats:
    producer_id: str
    partition: int
    sent: int = 0
    last_ack_ms: int = 0
    acked: list[str] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    windows: list[dict[str, Any]] = field(default_factory=list)
    _down_since_ms: int | None = None
    _down_errors: Counter[str] = field(default_factory=Counter)

    def outcome(self, sent_ms: int, done_ms: int, error: Errors) -> None:
        slow = done_ms - sent_ms > UNAVAILABLE_LATENCY_MS
        if error is not Errors.NONE:
            self.errors[error.name] += 1
            self._down_errors[error.name] += 1
            if self._down_since_ms is None:
                self._down_since_ms = sent_ms
            return
        start = self._down_since_ms if self._down_since_ms is not None else sent_ms
        if self._down_since_ms is not None or slow:
            self._close(start, done_ms, recovered=True)

    def _close(self, start_ms: int, end_ms: int, recovered: bool) -> None:
        self.windows.append(
            {"partition": self.partition, "start_ms": start_ms, "end_ms": end_ms,
             "duration_ms": end_ms - start_ms, "errors": dict(self._down_errors),
             "recovered": recovered}
        )
        self._down_since_ms = None
        self._down_errors = Counter()

    def finish(self, end_ms: int) -> None:
        if self._down_since_ms is not None:
            self._close(self._down_since_ms, end_ms, recovered=False)


class ChaosWorkload:
    def __init__(
        self,
        *,
        bootstrap_server: str,
        bootstrap_controller: str,
        topic: str,
        journal_path: Path,
        run_id: str,
        partitions: int = 3,
        replication_factor: int = 3,
        min_insync_replicas: int = 2,
        request_timeout_ms: int = 3000,
        client: str = MINIKRAFT,
        idempotence: bool = True,
        acks: int = ACKS_ALL,
        records_per_s: float = 0.0,
    ) -> None:
        if client not in CLIENTS:
            raise ValueError(f"unknown client {client!r}; known: {', '.join(CLIENTS)}")
        self.bootstrap_server = bootstrap_server
        self.bootstrap_controller = bootstrap_controller
        self.topic = topic
        self.journal_path = journal_path
        self.run_id = run_id
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.min_insync_replicas = min_insync_replicas
        self.request_timeout_ms = request_timeout_ms
        self.client = client
        # Whether the brokers may see a value twice from this run's producers: minikraft's own
        # never resends (idempotent by construction); the real clients as asked.
        self.idempotent = idempotence or client == MINIKRAFT
        self.idempotence = idempotence
        # The console's workload (cluster/console) picks acks and a rate for minikraft's own
        # producer; chaos keeps acks=all as fast as acks come (records_per_s 0).
        self.acks = acks
        self.records_per_s = records_per_s
        self.producers: list[ProducerStats] = []

    async def create_topic(self, timeout_s: float = 30.0) -> None:
        """Create the run's topic (CreateTopics through a broker) and wait until every
        partition has a leader."""
        client = data_client(f"chaos-{self.run_id}-setup")
        leaders = Leaders(client, self.bootstrap_server, self.topic)
        deadline = time.monotonic() + timeout_s
        try:
            await create_topic(
                client, self.bootstrap_server, self.topic, self.partitions,
                self.replication_factor, {"min.insync.replicas": str(self.min_insync_replicas)},
            )
            while True:
                with contextlib.suppress(KafkaError):
                    await leaders.refresh()
                    if len(leaders.partitions) == self.partitions and all(
                        p.leader_id >= 0 for p in leaders.partitions.values()
                    ):
                        return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.topic}: partitions without a leader")
                await asyncio.sleep(0.2)
        finally:
            await client.close()

    async def run(self, stop: asyncio.Event) -> None:
        """One acks=all producer per partition until stop is set."""
        journal = AckJournal(self.journal_path)
        self.producers = [
            ProducerStats(f"{self.run_id}p{p}", p) for p in range(self.partitions)
        ]
        try:
            produce = {LIBRDKAFKA: self._produce_librdkafka,
                       AIOKAFKA: self._produce_aiokafka}.get(self.client, self._produce)
            await asyncio.gather(*(produce(s, stop, journal) for s in self.producers))
        finally:
            journal.close()
            for stats in self.producers:
                stats.finish(now_ms())

    async def _produce_librdkafka(
        self, stats: ProducerStats, stop: asyncio.Event, journal: AckJournal
    ) -> None:
        """`--client confluent-kafka`: the same loop and journal with librdkafka sending."""
        loop = _OneAtATime(self, stats, stop, journal)

        def outcome(_value: bytes, delivery: Delivery) -> None:
            if not loop.acked(delivery.error, delivery.offset, delivery.leader_epoch):
                time.sleep(0.1)

        await asyncio.to_thread(produce_one_at_a_time, self._target(stats), loop.next_value, outcome)

    async def _produce_aiokafka(
        self, stats: ProducerStats, stop: asyncio.Event, journal: AckJournal
    ) -> None:
        """`--client aiokafka`: the same loop and journal with aiokafka sending (it does not
        report an ack's leader epoch: journaled -1)."""
        loop = _OneAtATime(self, stats, stop, journal)

        async def outcome(error: Errors, offset: int) -> None:
            if not loop.acked(error, offset, -1):
                await asyncio.sleep(0.1)

        await aiokafka_producer.produce_one_at_a_time(
            self._target(stats), loop.next_value, outcome
        )

    def _target(self, stats: ProducerStats) -> SendTarget:
        return SendTarget(self.bootstrap_server, self.topic, stats.partition,
                          f"chaos-{stats.producer_id}", self.request_timeout_ms, self.idempotence)

    def _journal_send(
        self, journal: AckJournal, stats: ProducerStats, seq: int
    ) -> tuple[bytes, int]:
        """The value for `seq`, journaled as sent; (value, sent_ms)."""
        value = record_value(stats.producer_id, seq, RECORD_SIZE)
        sent_ms = now_ms()
        journal.write(
            {"event": "send", "run_id": self.run_id, "producer_id": stats.producer_id,
             "seq": seq, "topic": self.topic, "partition": stats.partition,
             "acks": self.acks, "value": value.decode(), "idempotent": self.idempotent,
             "ts": sent_ms}
        )
        stats.sent += 1
        return value, sent_ms

    def _journal_ack(
        self, journal: AckJournal, stats: ProducerStats, seq: int, error: Errors, offset: int,
        leader_epoch: int, sent_ms: int, done_ms: int,
    ) -> None:
        journal.write(
            {"event": "ack", "run_id": self.run_id, "producer_id": stats.producer_id,
             "seq": seq, "topic": self.topic, "partition": stats.partition,
             "acks": self.acks, "error": error.name, "offset": offset,
             "leader_epoch": leader_epoch, "idempotent": self.idempotent, "ts": done_ms}
        )
        stats.outcome(sent_ms, done_ms, error)
        if error is Errors.NONE:
            stats.acked.append(f"{stats.producer_id}-{seq}")
            stats.last_ack_ms = done_ms

    async def _produce(self, stats: ProducerStats, stop: asyncio.Event, journal: AckJournal) -> None:
        client = data_client(f"chaos-{stats.producer_id}")
        leaders = Leaders(client, self.bootstrap_server, self.topic)
        try:
            seq = 0
            while not stop.is_set():
                value, sent_ms = self._journal_send(journal, stats, seq)
                ack = await self._send(leaders, stats.partition, value)
                self._journal_ack(journal, stats, seq, ack.error, ack.base_offset,
                                  ack.leader_epoch, sent_ms, now_ms())
                if ack.error is not Errors.NONE:
                    await asyncio.sleep(0.1)
                elif self.records_per_s > 0:
                    await asyncio.sleep(self.partitions / self.records_per_s)
                seq += 1
        finally:
            await client.close()

    async def wait_writes_flow(self, since_ms: int, timeout_s: float) -> bool:
        """Until every producer has had a write acked after since_ms (bounded)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.producers and all(s.last_ack_ms > since_ms for s in self.producers):
                return True
            await asyncio.sleep(0.1)
        return False

    async def _send(self, leaders: Leaders, partition: int, value: bytes) -> ProduceAck:
        batch = encode_batch(0, 0, now_ms(), [Record(None, value)])
        ack = ProduceAck(Errors.UNKNOWN_SERVER_ERROR)
        for attempt in range(MAX_ATTEMPTS):
            if attempt or not leaders.partitions:
                await asyncio.sleep(0.1 * attempt)
                with contextlib.suppress(KafkaError):
                    await leaders.refresh()
            try:
                leaders.leader_address(partition)
            except KafkaError as exc:
                ack = ProduceAck(exc.error, message=exc.message)
                continue
            try:
                ack = await produce_batch(
                    leaders, partition, batch, self.acks, self.request_timeout_ms
                )
            except KafkaError as exc:
                # It may have been appended (a timeout, a connection lost mid-request): never
                # send it again, so the read-back can tell loss from duplication.
                return ProduceAck(exc.error, message=exc.message)
            if ack.error in MAYBE_APPENDED:
                # Also what a leader answers for an appended write still waiting for its ISR
                # when it loses leadership (the write may survive): never send it again, or the
                # log holds it twice (rule 23's "exactly once"); the next send looks the leader
                # up first.
                with contextlib.suppress(KafkaError):
                    await leaders.refresh()
                return ack
            if ack.error is Errors.NONE or ack.error not in NOT_APPENDED:
                return ack
        return ProduceAck(ack.error, message=ack.message)

    async def read_back(self, timeout_s: float = 30.0) -> Counter[str]:
        """Every value in the topic, from the beginning, counted (retried until timeout_s)."""
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                result = await consume_records(
                    self.bootstrap_server, self.topic, from_beginning=True, timeout_ms=1500
                )
                return Counter(
                    v for v in (value_id(r["value"]) for r in result["records"]) if v is not None
                )
            except KafkaError as exc:
                last = exc
                await asyncio.sleep(0.5)
        raise TimeoutError(f"read-back of {self.topic} failed: {last}")

    def verify(self, read: Counter[str]) -> dict[str, Any]:
        """Acked vs read back: lost (acked, not read), duplicated (read twice or more)."""
        acked = [v for s in self.producers for v in s.acked]
        lost = sorted(v for v in acked if read[v] == 0)
        lost_by_partition = {
            s.partition: [v for v in s.acked if read[v] == 0] for s in self.producers
        }
        duplicated = sorted(v for v, n in read.items() if n > 1)
        acked_set = set(acked)
        errors: Counter[str] = Counter()
        for stats in self.producers:
            errors.update(stats.errors)
        windows = sorted(
            (w for s in self.producers for w in s.windows), key=lambda w: w["start_ms"]
        )
        return {
            "sent": sum(s.sent for s in self.producers),
            "acked": len(acked),
            "read_back": sum(read.values()),
            "read_back_distinct": len(read),
            "lost": len(lost),
            "lost_values": lost[:100],
            "lost_by_partition": {p: v for p, v in lost_by_partition.items() if v},
            "duplicated": len(duplicated),
            "duplicated_values": duplicated[:100],
            "unacked_but_present": len(set(read) - acked_set),
            "idempotent": self.idempotent,
            "errors": dict(errors),
            "unavailability_windows": windows,
        }


class _OneAtATime:
    """A real client's producer loop on one partition, journaled: the value for the next seq
    (None once stop is set), and each outcome journaled as the ack of the value last sent."""

    def __init__(
        self, workload: ChaosWorkload, stats: ProducerStats, stop: asyncio.Event,
        journal: AckJournal,
    ) -> None:
        self._workload, self._stats, self._stop, self._journal = workload, stats, stop, journal
        self._seq = 0
        self._sent_ms = 0

    def next_value(self) -> bytes | None:
        if self._stop.is_set():
            return None
        value, self._sent_ms = self._workload._journal_send(self._journal, self._stats, self._seq)
        return value

    def acked(self, error: Errors, offset: int, leader_epoch: int) -> bool:
        """Journals the outcome; whether it was an ack (the caller backs off when not)."""
        self._workload._journal_ack(self._journal, self._stats, self._seq, error, offset,
                                    leader_epoch, self._sent_ms, now_ms())
        self._seq += 1
        return error is Errors.NONE
