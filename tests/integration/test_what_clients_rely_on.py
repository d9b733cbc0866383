"""Issue 38, with clients nobody here wrote, against one module cluster (3 controllers + 3
brokers, real processes): a Fetch stays within the response's max_bytes (fetch.max.bytes) while
a consumer still progresses past batches larger than it; a compacted topic refuses keyless
records with Kafka's per-record errors.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.launch.local_cluster import LocalCluster
from cluster.launch.readiness import wait_until_ready
from kafkawire.errors import Errors
from storage.core.record_batch import iter_batches
from tests.integration.conftest import minikraft
from tests.integration.test_broker_processes import restart
from tests.integration.test_broker_recovery_processes import start
from tests.integration.test_kafka_clients import _produce_request
from tests.integration.test_kafka_clients_recovering import _ask, _fetch_request

confluent_kafka = pytest.importorskip("confluent_kafka", reason="dev extra: confluent-kafka")
kafka = pytest.importorskip("kafka", reason="dev extra: kafka-python")

from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

SETTINGS = {
    # A killed broker is fenced in 3 s rather than 9 s.
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
    # A deleted partition's `-delete` directory goes after 2 s rather than Kafka's 60.
    "log.segment.delete.delay.ms": "2000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start(tmp_path_factory.mktemp("clients-rely") / "c", SETTINGS)
    try:
        yield c
    finally:
        c.stop()
        assert not c.running(), "processes left behind"


def create(c: LocalCluster, topic: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap_server})
    for future in admin.create_topics([topic], operation_timeout=20).values():
        future.result(timeout=30)


def produce_all(c: LocalCluster, topic: str, per_partition: dict[int, list[bytes]],
                **config: Any) -> None:
    producer = Producer({"bootstrap.servers": c.bootstrap_server, "acks": "all", **config})
    failed: list[Any] = []
    for partition, values in per_partition.items():
        for value in values:
            producer.produce(topic, value, key=b"k", partition=partition,
                             on_delivery=lambda e, _m: failed.append(e) if e else None)
    assert producer.flush(60) == 0
    assert failed == []


# ---- item 2: Fetch honours max_bytes (Kafka's ReplicaManager.readFromLog) ----


def _fetch(topic: str, partitions: int, max_bytes: int, partition_max_bytes: int) -> Any:
    return _fetch_request(topic, partitions, max_bytes, partition_max_bytes, isolation_level=0)


def _batch_sizes(response: Any) -> list[list[int]]:
    """Per partition, the size of each record batch the Fetch answer holds."""
    out = []
    for partition in response.responses[0].partitions:
        assert partition.error_code == 0, partition
        out.append([size for _batch, size in iter_batches(bytes(partition.records or b""))])
    return out


def test_fetch_stays_within_max_bytes_and_a_consumer_still_progresses(
    cluster: LocalCluster,
) -> None:
    leader = cluster.brokers[0]
    # Every partition on one broker (RF 1), so one raw Fetch reaches them all.
    create(cluster, NewTopic("small-batches", 3, replica_assignment=[[leader.node_id]] * 3))
    create(cluster, NewTopic("big-batches", 3, replica_assignment=[[leader.node_id]] * 3))
    value = b"v" * 10_000
    # About 100 KB batches, 400 KB a partition.
    produce_all(cluster, "small-batches", {p: [value] * 40 for p in range(3)},
                **{"linger.ms": 100, "batch.size": 100_000})
    # One 300 KB batch a partition, larger than the Fetch limits below.
    produce_all(cluster, "big-batches", {p: [value] * 30 for p in range(3)},
                **{"linger.ms": 500, "batch.size": 1_000_000})

    small = _batch_sizes(_ask(leader.address, _fetch("small-batches", 3, 250_000, 1 << 20)))
    assert small[0], "the first partition's data comes first"
    assert 0 < sum(map(sum, small)) <= 250_000, small  # the first partition alone is 400 KB
    big = _batch_sizes(_ask(leader.address, _fetch("big-batches", 3, 50_000, 1 << 20)))
    # Only the first batch of the first partition with data may exceed the limit (minOneMessage).
    assert len(big[0]) == 1 and big[0][0] > 50_000, big
    assert big[1:] == [[], []], big
    # A partition limit below the request's is honoured too.
    small = _batch_sizes(_ask(leader.address, _fetch("small-batches", 3, 1 << 20, 150_000)))
    assert all(0 < sum(sizes) <= 150_000 for sizes in small), small

    # librdkafka refuses an answer larger than receive.message.max.bytes ("Invalid response
    # size"): with the Fetch over its limit it never got past the first one.
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_server, "group.id": "limits", "auto.offset.reset":
        "earliest", "fetch.max.bytes": 250_000, "message.max.bytes": 250_000,
        "receive.message.max.bytes": 250_512,
    })
    try:
        consumer.assign([TopicPartition("small-batches", p, 0) for p in range(3)])
        read = _drain(consumer, 120)
    finally:
        consumer.close()
    assert sorted(read) == [(p, o) for p in range(3) for o in range(40)]

    # kafka-python with fetch.max.bytes below each batch: one batch an answer, all of it read.
    reader = kafka.KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_server, fetch_max_bytes=50_000, auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=20_000,
    )
    try:
        reader.assign([kafka.TopicPartition("big-batches", p) for p in range(3)])
        got = []
        for message in reader:
            got.append((message.partition, message.offset))
            if len(got) == 90:
                break
    finally:
        reader.close()
    assert sorted(got) == [(p, o) for p in range(3) for o in range(30)]


def _drain(consumer: Consumer, expected: int) -> list[tuple[int, int]]:
    read: list[tuple[int, int]] = []
    errors: list[str] = []
    for _ in range(300):
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            errors.append(str(message.error()))
            continue
        read.append((message.partition(), message.offset()))
        if len(read) == expected:
            break
    assert len(read) == expected, (len(read), errors[:3])
    return read


# ---- item 7: record errors in Produce (Kafka's LogValidator) ----


def test_compacted_topic_refuses_keyless_records_with_record_errors(cluster: LocalCluster) -> None:
    from storage.core.record_batch import Record, encode_batch

    create(cluster, NewTopic("compacted", 1, 3, config={"cleanup.policy": "compact"}))
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_server, "acks": "all"})
    producer.produce("compacted", b"no key", on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0
    # A batch apart: Kafka refuses a whole batch when one of its records fails.
    producer.produce("compacted", b"keyed", key=b"k", on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0
    assert errors[0] is not None and errors[0].code() == confluent_kafka.KafkaError.INVALID_RECORD
    assert errors[0].retriable() is False
    assert errors[1] is None  # a keyed record is taken

    # On the wire: the whole batch refused, each keyless record named by its index.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_server, "group.id": "unused"})
    try:
        leader_id = consumer.list_topics("compacted", timeout=10).topics["compacted"] \
            .partitions[0].leader
        before = consumer.get_watermark_offsets(TopicPartition("compacted", 0), timeout=10)[1]
    finally:
        consumer.close()
    leader = next(b for b in cluster.brokers if b.node_id == leader_id)
    batch = encode_batch(0, 0, 1_700_000_000_000,
                         [Record(None, b"a"), Record(b"k", b"b"), Record(None, b"c")])
    body = _ask(leader.address, _produce_request("compacted", batch, -1))
    answer = body.responses[0].partition_responses[0]
    assert answer.error_code == Errors.INVALID_RECORD
    message = "Compacted topic cannot accept message without key in topic partition compacted-0"
    assert [(int(e.batch_index), e.batch_index_error_message) for e in answer.record_errors] == [
        (0, message), (2, message)]
    assert answer.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=0, message='{message}'),"
        f" RecordError(batchIndex=2, message='{message}')]")
    assert int(answer.base_offset) == -1 and int(answer.log_start_offset) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_server, "group.id": "unused"})
    try:
        after = consumer.get_watermark_offsets(TopicPartition("compacted", 0), timeout=10)[1]
    finally:
        consumer.close()
    assert after == before == 1  # nothing of the refused batches was written


# ---- item 1: a deleted topic's name can be used again (Kafka's TopicIdPartition) ----

RECORDS = 60


def _topic_id(c: LocalCluster, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": c.bootstrap_server})
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)
    # librdkafka prints it in standard base64; Kafka (and partition.metadata) in base64url.
    return str(described.topic_id).replace("+", "-").replace("/", "_")


def _delete(c: LocalCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap_server})
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(timeout=40)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "the deleted topic is still listed"
        time.sleep(0.2)


def _create_produce_consume(c: LocalCluster, topic: str, cycle: int) -> str:
    """Create the name (again), produce acks=all with librdkafka, read everything back: only
    this incarnation's records, from offset 0 of every partition. Returns the topic id."""
    create(c, NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"}))
    values = {p: [f"{cycle}-{p}-{i}".encode() for i in range(RECORDS)] for p in range(3)}
    producer = Producer({"bootstrap.servers": c.bootstrap_server, "acks": "all"})
    failed: list[Any] = []
    for partition, batch in values.items():
        for value in batch:
            producer.produce(topic, value, key=value, partition=partition,
                             on_delivery=lambda e, _m: failed.append(e) if e else None)
    assert producer.flush(60) == 0
    assert failed == [], failed[:3]
    consumer = Consumer({"bootstrap.servers": c.bootstrap_server, "group.id": f"{topic}-{cycle}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        read: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(3)}
        deadline = time.monotonic() + 60
        while sum(map(len, read.values())) < 3 * RECORDS:
            assert time.monotonic() < deadline, {p: len(r) for p, r in read.items()}
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            read[message.partition()].append((message.offset(), message.value()))
    finally:
        consumer.close()
    for partition, batch in values.items():
        assert read[partition] == list(enumerate(batch)), (cycle, partition)
    return _topic_id(c, topic)


def _partition_dirs(spec: Any, topic: str) -> dict[str, str | None]:
    """A broker's directories of `topic`'s partitions and the topic id each names."""
    from broker.runtime.partition_log import PARTITION_METADATA_FILE

    out: dict[str, str | None] = {}
    for directory in Path(spec.dir).rglob(f"{topic}-*"):
        if directory.is_dir():
            path = directory / PARTITION_METADATA_FILE
            out[directory.name] = (
                path.read_text().split("topic_id:")[1].strip() if path.exists() else None
            )
    return out


def delete_and_recreate_cycles(c: LocalCluster, topic: str) -> None:
    """delete -> create -> produce -> consume three times, then once with a broker killed -9
    while the topic is deleted and restarted afterwards: every incarnation a new topic, and
    every broker, the restarted one too, serves only the last one's logs. The restarted broker
    publishes its metadata once caught up (Kafka's MetadataLoader), so it never hears of the
    deletion: its logs of the deleted incarnation are strays, moved aside as
    `<topic>-<p>.<uuid>-stray` and kept (Kafka's LogManager.isStrayKraftReplica at the first
    publish, "Move aside stray partitions, don't delete them")."""
    ids = []
    for cycle in range(3):
        ids.append(_create_produce_consume(c, topic, cycle))
        _delete(c, topic)
    ids.append(_create_produce_consume(c, topic, 3))
    down = c.brokers[1]
    c.kill(down, signal.SIGKILL)
    # Until its session lapses the killed broker is alive in the metadata, and a broker names a
    # random alive one as "controller" (Kafka's getRandomAliveBrokerId): an admin client that
    # learns the dead one waits for it until its timeout, with Kafka as with minikraft. The
    # delete is meant to happen while the broker is down, so wait until it is fenced.
    admin = AdminClient({"bootstrap.servers": c.bootstrap_server})
    deadline = time.monotonic() + 30
    while down.node_id in admin.list_topics(timeout=10).brokers:
        assert time.monotonic() < deadline, f"{down.name} never fenced"
        time.sleep(0.2)
    _delete(c, topic)
    restart(c, down)
    asyncio.run(wait_until_ready(c, 60))
    ids.append(_create_produce_consume(c, topic, 4))
    assert len(set(ids)) == 5
    # The old logs go: renamed `-delete` and removed after log.segment.delete.delay.ms (2 s).
    deadline = time.monotonic() + 30
    while True:
        dirs = {spec.name: _partition_dirs(spec, topic) for spec in c.brokers}
        expected = {f"{topic}-{p}": ids[-1] for p in range(3)}
        live = {name: {d: i for d, i in found.items() if not d.endswith("-stray")}
                for name, found in dirs.items()}
        if all(found == expected for found in live.values()):
            break
        assert time.monotonic() < deadline, dirs
        time.sleep(0.5)
    strays = {name: sorted(i for d, i in found.items() if d.endswith("-stray"))
              for name, found in dirs.items()}
    assert strays == {
        spec.name: [ids[-2]] * 3 if spec is down else [] for spec in c.brokers
    }, dirs


def test_a_deleted_topics_name_is_a_new_topic_again_and_again_even_for_a_broker_down_meanwhile(
    cluster: LocalCluster,
) -> None:
    delete_and_recreate_cycles(cluster, "reborn")
    # The audit's rules (the single-process baseline; the Spark audit below, `make test-slow`)
    # over every log and journal: clean, each incarnation a partition of its own.
    done = subprocess.run([sys.executable, "-m", "analytics.baseline", "--dir", str(cluster.dir)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    check_audit(json.loads(done.stdout))


def check_audit(report: dict[str, Any]) -> None:
    assert report["verdict"] == "clean", [
        (r["rule"], r["violations"][:3]) for r in report["rules"] if r["violation_count"]]
    rule22 = next(r for r in report["rules"] if r["rule"] == 22)
    # 5 incarnations of 3 partitions, each its own partition to the audit, among the others.
    assert rule22["notes"]["partitions"] >= 15 and rule22["checked"] > 0


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_spark_audit_is_clean_after_delete_and_recreate_cycles_with_a_broker_killed(
    cluster: LocalCluster,
) -> None:
    delete_and_recreate_cycles(cluster, "reborn-spark")
    done = minikraft("audit", "--dir", str(cluster.dir), "--output", "json", timeout=1100)
    assert done.returncode == 0, done.stderr[-3000:]
    check_audit(json.loads(done.stdout))
