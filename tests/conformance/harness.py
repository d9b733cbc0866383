"""Two clusters planned alike, Apache Kafka and minikraft, and what a scenario does to either.

A scenario is a function of one Target returning what a user observed, observable -> value (a
short string); run_beside runs it on both clusters at once (two threads: most of a scenario is
waiting) and table.check compares the two with docs/CONFORMANCE.md's rows. Everything here goes
through the clusters' public surface: Kafka's wire protocol (confluent-kafka, Kafka's own tools,
and for polling minikraft's protocol client, asked of either cluster alike), processes by pid.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.apache_kafka import tools
from cluster.apache_kafka.cluster import ApacheKafkaCluster
from cluster.client.bootstrap import new_client
from cluster.client.broker_client import metadata
from cluster.client.topics import describe_all, partition_rows
from cluster.launch.local_cluster import LocalCluster, NodeSpec, is_running, wait_exit
from cluster.launch.readiness import wait_until_ready
from kafkawire.errors import KafkaError as WireError

KAFKA = "kafka"
MINIKRAFT = "minikraft"
ENGINES = (KAFKA, MINIKRAFT)
WAIT_S = 180.0  # generous: two shared cores, six JVMs and six minikraft nodes, a busy suite
# The same knobs on both clusters (the shared plan's overrides): a killed broker is fenced after
# 6 s instead of 9 (Kafka's and minikraft's default), the only change, for the suite's time.
SHARED_OVERRIDES = {"broker.session.timeout.ms": "6000"}

Observed = dict[str, str]
T = TypeVar("T")
# ListOffsets answers a client asks again (a leader moving or catching up its HWM).
_RETRY = (KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
          KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TIMED_OUT)


@dataclass
class Target:
    """One cluster under test, as a scenario sees it."""

    engine: str
    cluster: LocalCluster
    stopped: set[int] = field(default_factory=set)

    # -- addresses -------------------------------------------------------------------------

    @property
    def bootstrap_server(self) -> str:
        """The brokers that run now (a stopped one would only slow every client down)."""
        live = [b.address for b in self.cluster.brokers if is_running(b)]
        return ",".join(live or [b.address for b in self.cluster.brokers])

    @property
    def bootstrap_controller(self) -> str:
        return ",".join(c.address for c in self.cluster.controllers if is_running(c))

    def broker(self, node_id: int) -> NodeSpec:
        return self.cluster.node(str(node_id))

    # -- clients ---------------------------------------------------------------------------

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap_server})

    def tool(self, main_class: str, *args: str, timeout: float = 90.0) -> tools.ToolResult:
        """One of Kafka's tools; `{bs}` / `{bc}` in args become this cluster's addresses."""
        filled = [a.replace("{bs}", self.bootstrap_server)
                  .replace("{bc}", self.bootstrap_controller) for a in args]
        return tools.run_tool(main_class, filled, timeout=timeout)

    def create_topic(self, topic: str, assignment: list[list[int]],
                     configs: dict[str, str] | None = None) -> None:
        admin = self.admin()  # kept referenced until the result: a collected client aborts it
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment,
                      config=configs or {})],
            operation_timeout=30, request_timeout=60,
        )
        futures[topic].result(timeout=60)
        self.wait_partition(topic, 0, lambda r: r["leader"] >= 0, "a leader")

    def describe(self, topic: str) -> list[dict[str, Any]]:
        """DescribeTopicPartitions rows (leader, epoch, ISR, ELR, LastKnownELR), asked of a
        running broker."""
        topics = asyncio.run(describe_all(self.bootstrap_server, [topic]))
        return partition_rows(topics)

    def wait_partition(self, topic: str, partition: int,
                       predicate: Callable[[dict[str, Any]], bool], what: str,
                       timeout_s: float = WAIT_S) -> dict[str, Any]:
        def row() -> dict[str, Any] | None:
            rows = [r for r in self.describe(topic) if r["partition"] == partition]
            return rows[0] if rows else None

        return wait_for(f"{self.engine}: {topic}-{partition}", row, predicate, what, timeout_s)

    def produce(self, topic: str, count: int, acks: str = "all", prefix: str = "m",
                timeout_s: float = 30.0, extra: dict[str, Any] | None = None,
                ) -> tuple[list[str], dict[str, int]]:
        """count records (values prefix-i) through confluent-kafka: (values acked, error
        names of those that failed -> how many)."""
        acked: list[str] = []
        errors: dict[str, int] = {}

        def report(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                acked.append(msg.value().decode())
            else:
                errors[err.name()] = errors.get(err.name(), 0) + 1

        producer = Producer({
            "bootstrap.servers": self.bootstrap_server, "acks": acks,
            "message.timeout.ms": int(timeout_s * 1000), **(extra or {}),
        })
        for i in range(count):
            producer.produce(topic, f"{prefix}-{i}".encode(), on_delivery=report)
            producer.poll(0)
        producer.flush(timeout_s + 30)
        return acked, errors

    def consume_all(self, topic: str, partition: int = 0, timeout_s: float = 30.0) -> list[str]:
        """Every record a consumer can read now (up to the high watermark), in order."""
        low, high = self.watermarks(topic, partition)
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap_server, "group.id": f"conformance-{topic}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
        })
        values: list[str] = []
        try:
            consumer.assign([TopicPartition(topic, partition, low)])
            deadline = time.monotonic() + timeout_s
            offset = low
            while offset < high and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is None or msg.error():
                    continue
                values.append(msg.value().decode())
                offset = msg.offset() + 1
        finally:
            consumer.close()
        return values

    def high_watermark(self, topic: str, partition: int = 0) -> str:
        """The high watermark by ListOffsets as a user sees it once: the number, or the error
        (a new leader whose HWM has not reached its epoch's start answers OFFSET_NOT_AVAILABLE,
        KIP-207, and it cannot while its ISR is below min ISR, KIP-966)."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap_server,
                             "group.id": f"conformance-wm-{topic}"})
        try:
            return str(consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                      timeout=30)[1])
        except KafkaException as exc:
            return str(exc.args[0].name())
        finally:
            consumer.close()

    def watermarks(self, topic: str, partition: int = 0) -> tuple[int, int]:
        """(log start, high watermark) by ListOffsets, asked again while the answer is one a
        client retries (OFFSET_NOT_AVAILABLE from a leader catching up its HWM, KIP-207)."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap_server,
                             "group.id": f"conformance-wm-{topic}"})
        deadline = time.monotonic() + WAIT_S
        try:
            while True:
                try:
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=30)
                    return int(low), int(high)
                except KafkaException as exc:
                    if not exc.args[0].retriable() and exc.args[0].code() not in _RETRY:
                        raise
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.3)
        finally:
            consumer.close()

    def log_dirs(self, topic: str) -> dict[int, int]:
        """kafka-log-dirs --describe: broker id -> the partition's size on it in bytes."""
        result = self.tool(tools.LOG_DIRS, "--bootstrap-server", "{bs}", "--describe",
                           "--topic-list", topic)
        assert result.rc == 0, f"{self.engine}: {result.stderr}"
        line = next(x for x in result.stdout.splitlines() if x.startswith("{"))
        sizes: dict[int, int] = {}
        for broker in json.loads(line)["brokers"]:
            for log_dir in broker["logDirs"]:
                for p in log_dir["partitions"]:
                    sizes[int(broker["broker"])] = int(p["size"])
        return sizes

    # -- processes -------------------------------------------------------------------------

    def stop_broker(self, node_id: int) -> None:
        """A clean shutdown: SIGTERM, and wait until the process is gone."""
        spec = self.broker(node_id)
        self.cluster.kill(spec, signal.SIGTERM)
        assert spec.pid is not None and wait_exit(spec.pid, 60), f"{spec.name} did not stop"
        self.stopped.add(node_id)

    def kill_broker(self, node_id: int) -> None:
        self.cluster.kill(self.broker(node_id), signal.SIGKILL)
        self.stopped.add(node_id)

    def start_broker(self, node_id: int) -> None:
        self.cluster.start_node(self.broker(node_id))
        self.cluster.write_cluster_file()
        self.stopped.discard(node_id)

    def wait_brokers_registered(self, timeout_s: float = WAIT_S) -> None:
        """Every running broker listed by Metadata (registered and unfenced)."""
        wanted = {b.node_id for b in self.cluster.brokers if is_running(b)}
        deadline = time.monotonic() + timeout_s
        seen: set[int] = set()
        while time.monotonic() < deadline:
            seen = asyncio.run(_live_brokers(self.bootstrap_server))
            if wanted <= seen:
                return
            time.sleep(0.3)
        raise AssertionError(f"{self.engine}: brokers {sorted(wanted - seen)} not registered")

    def restore(self) -> None:
        """Start every broker a scenario left stopped, and wait until all are registered."""
        for node_id in sorted(self.stopped):
            self.start_broker(node_id)
        self.wait_brokers_registered()


def wait_for(name: str, fetch: Callable[[], T | None], predicate: Callable[[T], bool],
             what: str, timeout_s: float = WAIT_S) -> T:
    """Poll fetch() until predicate holds of its answer; a Kafka protocol error is an answer
    to ask again. AssertionError naming the last answer when it never does."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = fetch()
            last = value
            if value is not None and predicate(value):
                return value
        except WireError as exc:
            last = exc
        time.sleep(0.3)
    raise AssertionError(f"{name} never had {what}: {last}")


async def _live_brokers(bootstrap: str) -> set[int]:
    client = new_client("conformance-readiness", request_timeout_ms=3000)
    try:
        response = await metadata(client, bootstrap.split(","), [], 3000)
        return {int(b.node_id) for b in response.brokers}
    except WireError:
        return set()
    finally:
        await client.close()


def plan_pair(root: Path, *, controllers: int = 3, brokers: int = 3,
              overrides: dict[str, str] | None = None) -> tuple[LocalCluster, LocalCluster]:
    """The same plan for both: node ids, directories, overrides (ports picked apart)."""
    settings = {**SHARED_OVERRIDES, **(overrides or {})}
    kafka = ApacheKafkaCluster.plan(root / KAFKA, controllers=controllers, brokers=brokers,
                                    base_port=0, overrides=settings)
    mk = LocalCluster.plan(root / MINIKRAFT, controllers=controllers, brokers=brokers,
                           base_port=0, overrides=settings)
    return kafka, mk


def start_pair(kafka: LocalCluster, mk: LocalCluster, standalone: bool = False,
               ready: Callable[[Target], None] | None = None) -> Pair:
    """Format and start both, and wait until both are ready, the minikraft one while Kafka's
    JVMs start: by default until their quorum has a leader every voter follows and every
    broker is registered (the launcher's readiness, the same for both); `ready` instead for a
    quorum that starts smaller than its controllers (standalone)."""
    with ThreadPoolExecutor(2) as pool:
        formatted = [pool.submit(c.format, standalone) for c in (kafka, mk)]
        for f in formatted:
            f.result()
    kafka.start()
    mk.start()
    pair = Pair(Target(KAFKA, kafka), Target(MINIKRAFT, mk))
    if ready is None:

        async def both() -> None:
            await asyncio.gather(wait_until_ready(kafka, 240), wait_until_ready(mk, 120))

        asyncio.run(both())
    else:
        with ThreadPoolExecutor(2) as pool:
            for f in [pool.submit(ready, t) for t in pair]:
                f.result()
    return pair


@dataclass
class Pair:
    kafka: Target
    minikraft: Target

    def __iter__(self) -> Iterator[Target]:
        return iter((self.kafka, self.minikraft))


def cluster_pair(root: Path, *, standalone: bool = False,
                 ready: Callable[[Target], None] | None = None, **plan: Any) -> Iterator[Pair]:
    """A fixture body: both clusters up, stopped by pid afterwards whatever happened (their
    directories are kept under pytest's tmp for a failure's logs)."""
    kafka, mk = plan_pair(root, **plan)
    try:
        yield start_pair(kafka, mk, standalone, ready)
    finally:
        kafka.stop()
        mk.stop()


def run_beside(pair: Pair, scenario: Callable[[Target], Observed]) -> dict[str, Observed]:
    """The scenario on both clusters at once; a scenario that fails on either fails the test
    (with the engine named), after both have finished."""
    with ThreadPoolExecutor(2) as pool:
        futures = {t.engine: pool.submit(scenario, t) for t in pair}
        return {engine: f.result() for engine, f in futures.items()}


def ids(values: list[int]) -> str:
    """A replica set as the tools print it: 101,102 (sorted), or - when empty."""
    return ",".join(str(v) for v in sorted(values)) or "-"


def wipe(path: str | Path) -> None:
    shutil.rmtree(path, ignore_errors=True)

