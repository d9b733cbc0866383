"""Issue 38, with clients nobody here wrote, against one module cluster (3 controllers + 3
brokers, real processes): a Fetch stays within the response's max_bytes (fetch.max.bytes) while
a consumer still progresses past batches larger than it; a compacted topic refuses keyless
records with Kafka's per-record errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cluster.launch.local_cluster import LocalCluster
from kafkawire.errors import Errors
from raft.core.record_batch import iter_batches
from tests.integration.test_broker_processes import bootstrap
from tests.integration.test_broker_recovery_processes import start
from tests.integration.test_kafka_clients import _produce_request
from tests.integration.test_kafka_clients_recovering import _ask, _fetch_request

confluent_kafka = pytest.importorskip("confluent_kafka", reason="dev extra: confluent-kafka")
kafka = pytest.importorskip("kafka", reason="dev extra: kafka-python")

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

SETTINGS = {
    # A killed broker is fenced in 3 s rather than 9 s.
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
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
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    for future in admin.create_topics([topic], operation_timeout=20).values():
        future.result(timeout=30)


def produce_all(c: LocalCluster, topic: str, per_partition: dict[int, list[bytes]],
                **config: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap(c), "acks": "all", **config})
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
        "bootstrap.servers": bootstrap(cluster), "group.id": "limits", "auto.offset.reset":
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
        bootstrap_servers=bootstrap(cluster), fetch_max_bytes=50_000, auto_offset_reset="earliest",
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
    from raft.core.record_batch import Record, encode_batch

    create(cluster, NewTopic("compacted", 1, 3, config={"cleanup.policy": "compact"}))
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    producer.produce("compacted", b"no key", on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0
    # A batch apart: Kafka refuses a whole batch when one of its records fails.
    producer.produce("compacted", b"keyed", key=b"k", on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0
    assert errors[0] is not None and errors[0].code() == confluent_kafka.KafkaError.INVALID_RECORD
    assert errors[0].retriable() is False
    assert errors[1] is None  # a keyed record is taken

    # On the wire: the whole batch refused, each keyless record named by its index.
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "unused"})
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
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "unused"})
    try:
        after = consumer.get_watermark_offsets(TopicPartition("compacted", 0), timeout=10)[1]
    finally:
        consumer.close()
    assert after == before == 1  # nothing of the refused batches was written
