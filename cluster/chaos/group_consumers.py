"""The chaos workload's consumer group: `--consumers N [--group G]` members of one classic
consumer group, on the run's client library (librdkafka for `--client confluent-kafka`, aiokafka
for `--client aiokafka`), with the library's default settings apart from `group.id` and
`auto.offset.reset=earliest` (so auto-commit, every 5 s, as a Kafka user runs it), subscribed to
the run's topic. Every record a member reads is journaled; a watcher journals the group's
committed offsets as OffsetFetch answers them (what the coordinator acknowledged as committed,
acks=all), so the audit can check that committed offsets never move backwards and that no record
below a committed offset went unread by the group.

Journal entries (msgpack maps written back to back to `journal/chaos-consumers.journal`, as the
ack journal is; the audit reads them as analytics.read.broker_inputs.CONSUMER_COLUMNS):
- {"event": "read", "run_id", "group", "member", "topic", "partition", "offset", "value", "ts"}
  (`value` is the record's identity, `<producer-id>-<seq>`, as in the ack journal);
- {"event": "commit", "run_id", "group", "topic", "partition", "offset", "source", "ts"}
  (`source` "offset-fetch": one entry each time the watcher sees a partition's offset change).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cluster.client.bootstrap import new_client
from cluster.client.groups_admin import LATEST, GroupsAdmin
from cluster.client.producer import AckJournal
from kafkawire.clock import now_ms
from kafkawire.errors import KafkaError

log = logging.getLogger(__name__)

CONSUMER_JOURNAL_FILE = "chaos-consumers.journal"
READ, COMMIT = "read", "commit"
OFFSET_FETCH = "offset-fetch"
# librdkafka and aiokafka, the clients with a group consumer (minikraft's own client has none).
GROUP_CLIENTS = ("confluent-kafka", "aiokafka")
POLL_S = 0.2
WATCH_INTERVAL_S = 0.5
FINAL_FETCH_ATTEMPTS = 10


def group_client_problem(client: str, consumers: int) -> str | None:
    """Why `--consumers` cannot run with this `--client` (None when it can)."""
    if consumers and client not in GROUP_CLIENTS:
        return (f"--consumers needs --client {' or '.join(GROUP_CLIENTS)}: minikraft's own "
                f"client has no group consumer")
    return None


def value_id(value: bytes | None) -> str | None:
    """`<producer-id>-<seq>[:padding]` -> `<producer-id>-<seq>` (the ack journal's identity)."""
    if value is None:
        return None
    return value.split(b":", 1)[0].decode(errors="replace")


class GroupConsumers:
    def __init__(
        self,
        *,
        client: str,
        bootstrap_server: str,
        topic: str,
        group: str,
        members: int,
        journal: AckJournal,
        run_id: str,
    ) -> None:
        self.client = client
        self.bootstrap_server = bootstrap_server
        self.topic = topic
        self.group = group
        self.members = [f"{group}-m{i}" for i in range(members)]
        self.journal = journal
        self.run_id = run_id
        self.values: Counter[str] = Counter()
        self.read_ends: dict[int, int] = {}  # partition -> highest offset read + 1
        self.committed: dict[int, int] = {}  # partition -> last committed offset seen
        self.commits_observed = 0
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()  # librdkafka members read in worker threads

    # -- what the members read --------------------------------------------------------------

    def _read(self, member: str, partition: int, offset: int, value: bytes | None) -> None:
        key = value_id(value)
        with self._lock:
            self.journal.write(
                {"event": READ, "run_id": self.run_id, "group": self.group, "member": member,
                 "topic": self.topic, "partition": partition, "offset": offset, "value": key,
                 "ts": now_ms()}
            )
            if key is not None:
                self.values[key] += 1
            self.read_ends[partition] = max(self.read_ends.get(partition, 0), offset + 1)

    def _librdkafka_member(self, member: str, stop: threading.Event) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap_server, "group.id": self.group,
             "client.id": member, "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([self.topic])
        try:
            while not stop.is_set():
                for message in consumer.consume(500, timeout=POLL_S):
                    error, partition, offset = message.error(), message.partition(), message.offset()
                    if error is not None or partition is None or offset is None:
                        with self._lock:  # a consumer event (e.g. partition EOF), not a record
                            self.errors[str(error.name() if error else "no offset")] += 1
                        continue
                    self._read(member, partition, offset, message.value())
        finally:
            consumer.close()  # commits what was read (enable.auto.commit's close)

    async def _aiokafka_member(self, member: str, stop: asyncio.Event) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.errors import KafkaError as AioKafkaError

        consumer = AIOKafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap_server.split(","),
            group_id=self.group, client_id=member, auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            while not stop.is_set():
                try:
                    batches = await consumer.getmany(timeout_ms=int(POLL_S * 1000))
                except AioKafkaError as exc:
                    self.errors[type(exc).__name__] += 1
                    await asyncio.sleep(POLL_S)
                    continue
                for tp, records in batches.items():
                    for record in records:
                        self._read(member, tp.partition, record.offset, record.value)
        finally:
            await consumer.stop()  # commits what was read (enable_auto_commit's stop)

    # -- what the group committed -----------------------------------------------------------

    async def _observe(self, admin: GroupsAdmin) -> bool:
        """One OffsetFetch of the group; journal every partition whose offset changed."""
        try:
            committed = await admin.committed(self.group)
        except (KafkaError, OSError, TimeoutError) as exc:
            error = exc.error.name if isinstance(exc, KafkaError) else type(exc).__name__
            self.errors[f"OffsetFetch {error}"] += 1
            return False
        for (topic, partition), offset in sorted(committed.items()):
            if topic != self.topic or self.committed.get(partition) == offset:
                continue
            self.committed[partition] = offset
            self.commits_observed += 1
            with self._lock:
                self.journal.write(
                    {"event": COMMIT, "run_id": self.run_id, "group": self.group,
                     "topic": topic, "partition": partition, "offset": offset,
                     "source": OFFSET_FETCH, "ts": now_ms()}
                )
        return True

    async def _watch(self, done: asyncio.Event) -> None:
        client = new_client(f"chaos-{self.run_id}-group-watch", request_timeout_ms=3000)
        admin = GroupsAdmin(client, self.bootstrap_server)
        try:
            while not done.is_set():
                await self._observe(admin)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), WATCH_INTERVAL_S)
            # The members' final commits (on close) are acknowledged by now: see them.
            for _ in range(FINAL_FETCH_ATTEMPTS):
                if await self._observe(admin):
                    return
                await asyncio.sleep(WATCH_INTERVAL_S)
        finally:
            await client.close()

    # -- the run ----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """The members until stop is set (then each closes, committing), and the watcher until
        the members are gone plus one last OffsetFetch."""
        members_done = asyncio.Event()
        watching = asyncio.create_task(self._watch(members_done))
        try:
            if self.client == "aiokafka":
                await asyncio.gather(*(self._aiokafka_member(m, stop) for m in self.members))
            else:
                await self._run_threads(stop)
        finally:
            members_done.set()
            await watching

    async def _run_threads(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        halt = threading.Event()
        # Own threads: the default executor is small on a 2-core machine and the librdkafka
        # producers already hold some of it.
        with ThreadPoolExecutor(len(self.members), thread_name_prefix="chaos-consumer") as pool:
            running = [loop.run_in_executor(pool, self._librdkafka_member, m, halt)
                       for m in self.members]
            try:
                await stop.wait()
            finally:
                halt.set()
                await asyncio.gather(*running, return_exceptions=True)

    async def drain(self, timeout_s: float) -> bool:
        """Until the members have read every partition up to its log end (bounded)."""
        deadline = time.monotonic() + timeout_s
        client = new_client(f"chaos-{self.run_id}-group-drain", request_timeout_ms=3000)
        admin = GroupsAdmin(client, self.bootstrap_server)
        ends: dict[tuple[str, int], int] | None = None
        try:
            while time.monotonic() < deadline:
                if ends is None:
                    with contextlib.suppress(KafkaError, OSError, TimeoutError):
                        cluster = await admin.cluster([self.topic])
                        partitions = sorted(k for k in cluster.leaders if k[0] == self.topic)
                        ends = await admin.log_offsets(cluster, partitions, LATEST)
                if ends is not None and all(
                    self.read_ends.get(p, 0) >= end for (_t, p), end in ends.items()
                ):
                    return True
                await asyncio.sleep(0.2)
            return False
        finally:
            await client.close()

    def summary(self, acked: list[str], drained: bool) -> dict[str, Any]:
        unread = sorted(v for v in acked if self.values[v] == 0)
        return {
            "group": self.group,
            "client": self.client,
            "members": len(self.members),
            "read": sum(self.values.values()),
            "read_distinct": len(self.values),
            # At-least-once: a record read again after a rebalance, counted (not a fault).
            "read_again": sum(n - 1 for n in self.values.values() if n > 1),
            "acked_unread": len(unread),
            "acked_unread_values": unread[:100],
            "committed": {str(p): o for p, o in sorted(self.committed.items())},
            "commits_observed": self.commits_observed,
            "drained": drained,
            "errors": dict(self.errors),
        }


def group_name(run_id: str, group: str | None) -> str:
    return group or f"chaos-{run_id}"
