"""DeleteRecords (KIP-107) through real clients: confluent-kafka's AdminClient.delete_records
(and kafka-python's) against `minikraft up` (3 controllers + 3 brokers, broker addresses only). The leader advances
the log start offset and answers the low watermark; beyond the high watermark is
OFFSET_OUT_OF_RANGE; consumers (librdkafka and `minikraft consume`) start at the new start; the
followers follow the leader's log start offset and keep it on disk; every advertised version
is answered on the wire."""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.produce.v11 import request as produce_v11
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from cluster.launch.local_cluster import LocalCluster
from cluster.launch.readiness import poll_until
from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import BROKER_API_VERSIONS
from kafkawire.client import KafkaClient
from kafkawire.entities import item_type
from kafkawire.errors import Errors
from kafkawire.messages import request_schema
from storage.core.record_batch import encode_batch
from tests.integration.conftest import detached_up, log_start_on_disk, minikraft

confluent_kafka = pytest.importorskip("confluent_kafka", reason="dev extra: confluent-kafka")
kafka = pytest.importorskip("kafka", reason="dev extra: kafka-python")

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import TopicPartition as KafkaTopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402

TOPIC = "trimmed"
RECORDS = 100


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str]]:
    with detached_up(tmp_path_factory.mktemp("delete-records") / "up") as up:
        yield up


def _delete(admin: AdminClient, offset: int) -> int:
    futures = admin.delete_records([TopicPartition(TOPIC, 0, offset)], request_timeout=20)
    (future,) = futures.values()
    low_watermark: int = future.result(timeout=30).low_watermark
    return low_watermark


def test_delete_records_moves_the_log_start_offset_on_every_replica(
    up: tuple[LocalCluster, str],
) -> None:
    cluster, bootstrap = up
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})], operation_timeout=20
    ).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: list[int] = []

    def on_delivery(err: object, msg: Any) -> None:
        if err is None:
            delivered.append(int(msg.offset()))

    for seq in range(RECORDS):
        producer.produce(TOPIC, f"v{seq}".encode(), partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert sorted(delivered) == list(range(RECORDS))

    assert _delete(admin, 40) == 40
    assert _delete(admin, 10) == 40  # the start never moves back
    with pytest.raises(KafkaException) as beyond:
        _delete(admin, RECORDS + 50)
    assert beyond.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10) == (40, RECORDS)
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        offsets: list[int | None] = []
        deadline = time.monotonic() + 30
        while len(offsets) < RECORDS - 40 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                offsets.append(message.offset())
        assert offsets == list(range(40, RECORDS))
    finally:
        consumer.close()

    consumed = minikraft("consume", "--bootstrap-server", bootstrap, "--topic", TOPIC,
                         "--from-beginning", "--output", "json")
    assert consumed.returncode == 0, consumed.stderr
    records = json.loads(consumed.stdout)["records"]
    assert [r["offset"] for r in records] == list(range(40, RECORDS))
    assert records[0]["value"] == "v40"

    # Followers take the leader's log start offset from their next Fetch and checkpoint it.
    poll_until(lambda: set(log_start_on_disk(cluster, TOPIC).values()) == {40}, 15,
               "the log start offset 40 checkpointed on every broker", poll_s=0.2)
    assert log_start_on_disk(cluster, TOPIC) == {b.node_id: 40 for b in cluster.brokers}

    # kafka-python's admin client (its own pick of version) moves it on.
    kafka_admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        answer = kafka_admin.delete_records({KafkaTopicPartition(TOPIC, 0): 60}, timeout_ms=20000)
        assert answer[KafkaTopicPartition(TOPIC, 0)]["low_watermark"] == 60
    finally:
        kafka_admin.close()

    # Every advertised version on the wire, at the leader: a no-op at the start answers it.
    leader = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].leader
    address = next(b.address for b in cluster.brokers if b.node_id == leader)
    for version in BROKER_API_VERSIONS[ApiKey.DELETE_RECORDS].versions():
        assert asyncio.run(_delete_at(address, version, 60)) == (Errors.NONE, 60), version
    assert asyncio.run(_delete_at(address, 0, RECORDS + 1))[0] is Errors.OFFSET_OUT_OF_RANGE

    assert _delete(admin, OFFSET_END) == RECORDS  # -1: everything below the high watermark
    assert asyncio.run(_produce_log_start(address)) == RECORDS  # Produce answers the new start


async def _ask(address: str, request: Any) -> Any:
    """One request on a connection of its own."""
    client = KafkaClient("delete-records-test")
    try:
        return await client.request(address, request)
    finally:
        await client.close()


async def _produce_log_start(address: str) -> int:
    """A Produce's answer carries the partition's log start offset."""
    request = produce_v11.ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(
            produce_v11.TopicProduceData(
                name=TopicName(TOPIC),
                partition_data=(
                    produce_v11.PartitionProduceData(
                        index=i32(0), records=Records(encode_batch(0, 0, 0, [b"after"]))
                    ),
                ),
            ),
        ),
    )
    answer = (await _ask(address, request)).responses[0].partition_responses[0]
    assert answer.error_code == 0, answer
    return int(answer.log_start_offset)


async def _delete_at(address: str, version: int, offset: int) -> tuple[Errors, int]:
    schema = request_schema(int(ApiKey.DELETE_RECORDS), version)
    topic_cls = item_type(schema, "topics")
    partition_cls = item_type(topic_cls, "partitions")
    request = schema(
        topics=(topic_cls(name=TOPIC, partitions=(partition_cls(partition_index=0, offset=offset),)),),
        timeout=datetime.timedelta(seconds=10),
    )
    answer = (await _ask(address, request)).topics[0].partitions[0]
    return Errors.of(answer.error_code), int(answer.low_watermark)
