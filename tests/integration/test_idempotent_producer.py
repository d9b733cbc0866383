"""The idempotent producer against `minikraft up` (3 controllers + 3 brokers), issue 16 part C:
librdkafka with enable.idempotence=true rides out kill -9 and restart of partition leaders with
every acked record exactly once; raw Produce requests get Kafka's answers to replays, sequence
gaps, epoch fencing and transactional ids, and nothing extra lands in the log."""

from __future__ import annotations

import datetime
import importlib
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import BROKER_API_VERSIONS
from kafkawire.entities import build
from kafkawire.errors import Errors
from kafkawire.messages import decode_response, encode_request
from storage.core.record_batch import Record, encode_batch
from tests.integration.conftest import Deliveries
from tests.integration.test_kafka_clients import (
    BASE_TS_MS,
    Up,
    _admin,
    _connect,
    _create,
    _log_end_offsets_of,
    _produce_request,
    _read_frame,
    _wait_leaders,
    leader_of_partition_0,
    start_up,
    wait_until_it_leads,
)

confluent_kafka = pytest.importorskip("confluent_kafka", reason="dev extra: confluent-kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

# Kafka's transactional APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers,
# TxnOffsetCommit, DescribeTransactions, ListTransactions.
TRANSACTIONAL_API_KEYS = (24, 25, 26, 27, 28, 65, 66)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    yield from start_up(tmp_path_factory)


def _request(address: str, body: Any, api_key: ApiKey, version: int) -> Any:
    with _connect(address) as sock:
        sock.sendall(encode_request(body, 21, "raw"))
        payload = _read_frame(sock)
    assert payload is not None
    _cid, response = decode_response(payload, int(api_key), version)
    return response


def _init_producer_id(
    address: str, transactional_id: str | None = None, version: int = 4
) -> Any:
    schema = importlib.import_module(
        f"kio.schema.init_producer_id.v{version}.request"
    ).InitProducerIdRequest
    request = build(
        schema,
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(seconds=60),
    )
    return _request(address, request, ApiKey.INIT_PRODUCER_ID, version)


def _produce(address: str, topic: str, records: bytes) -> tuple[Errors, int]:
    response = _request(address, _produce_request(topic, records, -1), ApiKey.PRODUCE, 9)
    partition = response.responses[0].partition_responses[0]
    return Errors.of(int(partition.error_code)), int(partition.base_offset)


def _batch(pid: int, epoch: int, seq: int, count: int) -> bytes:
    return encode_batch(
        0, 0, BASE_TS_MS, [Record(None, b"%d" % (seq + i)) for i in range(count)],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
    )


def test_api_versions_advertise_init_producer_id_and_no_transactional_api(up: Up) -> None:
    response = _request(
        up.cluster.brokers[0].address,
        ApiVersionsRequest(client_software_name="probe", client_software_version="1"),
        ApiKey.API_VERSIONS,
        3,
    )
    keys = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
    assert keys[int(ApiKey.INIT_PRODUCER_ID)] == (0, 5)
    assert not set(TRANSACTIONAL_API_KEYS) & set(keys)
    # Every advertised version is served: a fresh producer id at epoch 0 each time.
    ids = set()
    for version in BROKER_API_VERSIONS[ApiKey.INIT_PRODUCER_ID].versions():
        answer = _init_producer_id(up.cluster.brokers[0].address, version=version)
        assert (int(answer.error_code), int(answer.producer_epoch)) == (0, 0), version
        ids.add(int(answer.producer_id))
    assert len(ids) == 6 and min(ids) >= 0


def _find_coordinator(address: str, key: str, key_type: int, version: int) -> tuple[int, int]:
    """(error code, node id) of FindCoordinator at `version` (v4+: batched keys)."""
    schema = importlib.import_module(
        f"kio.schema.find_coordinator.v{version}.request"
    ).FindCoordinatorRequest
    keys = {"coordinator_keys": (key,)} if version >= 4 else {"key": key}
    response = _request(
        address, build(schema, key_type=key_type, **keys), ApiKey.FIND_COORDINATOR, version
    )
    answer = response.coordinators[0] if version >= 4 else response
    return int(answer.error_code), int(answer.node_id)


def test_a_transactional_producer_is_refused_at_once_with_kafkas_error(up: Up) -> None:
    """Issue 30 item 10: FindCoordinator for a transaction coordinator (key type 1) answers
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Kafka's answer for a transactional id the caller may
    not use, as InitProducerId does (README), so a transactional client fails at once with that
    error instead of "malformed request" (INVALID_REQUEST) or retrying for a coordinator."""
    address = up.cluster.brokers[0].address
    refused = int(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    for version in BROKER_API_VERSIONS[ApiKey.FIND_COORDINATOR].versions():
        if version >= 1:  # v0 has no key type: a group
            assert _find_coordinator(address, "txn", 1, version) == (refused, -1), version
    # Groups are still served (COORDINATOR_NOT_AVAILABLE while __consumer_offsets is created).
    deadline = time.monotonic() + 30
    while (group := _find_coordinator(address, "some-group", 0, 3))[0] != 0:
        assert group[0] == int(Errors.COORDINATOR_NOT_AVAILABLE), group
        assert time.monotonic() < deadline, "no group coordinator"
        time.sleep(0.2)
    assert int(_init_producer_id(address, transactional_id="txn").error_code) == refused

    producer = Producer({"bootstrap.servers": up.bootstrap, "transactional.id": "tx-1"})
    started = time.monotonic()
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        producer.init_transactions(20)
    error = raised.value.args[0]
    assert error.code() == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert error.fatal() and "no transaction coordinator" in error.str()
    assert time.monotonic() - started < 5  # not a retry loop up to the timeout

    kafka = pytest.importorskip("kafka", reason="dev extra: kafka-python")
    started = time.monotonic()
    other = kafka.KafkaProducer(bootstrap_servers=up.bootstrap, transactional_id="tx-2")
    try:
        with pytest.raises(kafka.errors.TransactionalIdAuthorizationFailedError):
            other.init_transactions()
    finally:
        other.close(5)
    assert time.monotonic() - started < 5


def test_replays_gaps_and_epochs_get_kafkas_answers_and_nothing_extra_is_written(up: Up) -> None:
    admin = _admin(up)
    _create(admin, NewTopic("idem-raw", 1, 3, config={"min.insync.replicas": "2"}))
    leader = leader_of_partition_0(up, admin, "idem-raw")

    refused = _init_producer_id(leader.address, transactional_id="txn")
    assert Errors.of(int(refused.error_code)) is Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    first, second = _init_producer_id(leader.address), _init_producer_id(leader.address)
    assert int(first.error_code) == 0 and int(first.producer_epoch) == 0
    pid = int(first.producer_id)
    assert pid >= 0 and int(second.producer_id) != pid  # ids from the controller's blocks

    assert _produce(leader.address, "idem-raw", _batch(pid, 0, 0, 3)) == (Errors.NONE, 0)
    assert _produce(leader.address, "idem-raw", _batch(pid, 0, 3, 2)) == (Errors.NONE, 3)
    # A replay of either batch: success with the ORIGINAL offset, no second copy.
    assert _produce(leader.address, "idem-raw", _batch(pid, 0, 0, 3)) == (Errors.NONE, 0)
    assert _produce(leader.address, "idem-raw", _batch(pid, 0, 3, 2)) == (Errors.NONE, 3)
    # A gap, a new epoch not starting at 0, an older epoch: refused, nothing written.
    gap = _produce(leader.address, "idem-raw", _batch(pid, 0, 7, 1))
    assert gap[0] is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    bumped = _produce(leader.address, "idem-raw", _batch(pid, 1, 5, 1))
    assert bumped[0] is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _produce(leader.address, "idem-raw", _batch(pid, 1, 0, 1)) == (Errors.NONE, 5)
    fenced = _produce(leader.address, "idem-raw", _batch(pid, 0, 5, 1))
    assert fenced[0] is Errors.INVALID_PRODUCER_EPOCH
    assert _log_end_offsets_of(up, "idem-raw", 1) == [6]

    consumer = Consumer(
        {"bootstrap.servers": up.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition("idem-raw", 0, confluent_kafka.OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while len(values) < 6 and time.monotonic() < deadline:
            for message in consumer.consume(100, timeout=1):
                assert message.error() is None, message.error()
                values.append(message.value())
    finally:
        consumer.close()
    assert values == [b"0", b"1", b"2", b"3", b"4", b"0"]


def test_a_new_leader_answers_a_retry_of_its_predecessors_batch_with_the_original_offset(
    up: Up,
) -> None:
    """Followers keep producer state from the batches they replicate (leader change)."""
    topic = "idem-leader-change"
    admin = _admin(up)
    _create(admin, NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"}))
    old_leader = _wait_leaders(admin, topic, 1).partitions[0].leader
    victim = next(b for b in up.cluster.brokers if b.node_id == old_leader)
    pid = int(_init_producer_id(victim.address).producer_id)
    for seq in (0, 2, 4):
        assert _produce(victim.address, topic, _batch(pid, 0, seq, 2)) == (Errors.NONE, seq)
    up.cluster.kill(victim)
    try:
        deadline = time.monotonic() + 30
        while True:
            leader = _wait_leaders(admin, topic, 1).partitions[0].leader
            if leader != old_leader:
                break
            assert time.monotonic() < deadline, "no new leader"
            time.sleep(0.2)
        new_leader = next(b for b in up.cluster.brokers if b.node_id == leader)
        wait_until_it_leads(new_leader, topic)
        # The retry of the last batch (its answer was "lost"): the original offset, no copy.
        assert _produce(new_leader.address, topic, _batch(pid, 0, 4, 2)) == (Errors.NONE, 4)
        assert _produce(new_leader.address, topic, _batch(pid, 0, 7, 1))[0] is (
            Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        )
        assert _produce(new_leader.address, topic, _batch(pid, 0, 6, 1)) == (Errors.NONE, 6)
        assert _log_end_offsets_of(up, topic, 1) == [7]
    finally:
        # Even when an assertion above failed: the next test in this module creates RF 3
        # topics and needs all three brokers registered and in sync again.
        up.cluster.start_node(victim)
        up.cluster.write_cluster_file()
        _wait_full_isr(admin, topic, 1)


def _wait_full_isr(admin: Any, topic: str, partitions: int) -> None:
    """Back to three in-sync brokers before the next test creates topics or kills leaders."""
    deadline = time.monotonic() + 60
    while any(
        len(p.isrs) < 3 for p in _wait_leaders(admin, topic, partitions).partitions.values()
    ):
        assert time.monotonic() < deadline, "a restarted broker did not rejoin the ISR"
        time.sleep(0.5)


def _leader_of(admin: Any, topic: str, partition: int) -> int:
    return int(_wait_leaders(admin, topic, 3, timeout_s=30).partitions[partition].leader)


def test_idempotent_librdkafka_producer_through_leader_kill_and_restart_exactly_once(
    up: Up,
) -> None:
    """20,000 records to 3 partitions (RF 3, min ISR 2); the leader of partition 0 is killed
    -9 and restarted mid-stream, then the leader of partition 1. Every record is acked and
    read back exactly once: retries after the failovers were deduplicated."""
    _produce_through_failovers(up, "idem-failover", 20_000, partitions=(0, 1))


@pytest.mark.slow
def test_idempotent_producer_through_six_leader_kills_exactly_once(up: Up) -> None:
    """The longer version: 100,000 records, the leader of each partition killed twice."""
    _produce_through_failovers(up, "idem-failover-long", 100_000, partitions=(0, 1, 2, 0, 1, 2))


def _produce_through_failovers(
    up: Up, topic: str, total: int, partitions: tuple[int, ...]
) -> None:
    admin = _admin(up)
    _create(admin, NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"}))
    _wait_leaders(admin, topic, 3)
    producer = Producer({"bootstrap.servers": up.bootstrap, "enable.idempotence": True})
    delivered = Deliveries()

    # (record index, action): kill the current leader of a partition, or restart the victim.
    step = total // (2 * len(partitions) + 1)
    plan: dict[int, tuple[str, int]] = {}
    for n, partition in enumerate(partitions):
        plan[step * (2 * n + 1)] = ("kill", partition)
        plan[step * (2 * n + 2)] = ("restart", partition)
    victims: dict[int, Any] = {}
    started = time.monotonic()
    for i in range(total):
        producer.produce(topic, str(i).encode(), partition=i % 3, on_delivery=delivered)
        producer.poll(0)
        action = plan.get(i)
        if action is not None:
            kind, partition = action
            if kind == "kill":
                leader = _leader_of(admin, topic, partition)
                victims[partition] = next(b for b in up.cluster.brokers if b.node_id == leader)
                up.cluster.kill(victims[partition])  # SIGKILL: in-flight batches are retried
            else:
                up.cluster.start_node(victims[partition])
        if i % 50 == 0:
            time.sleep(0.02)  # spread the stream over the failovers
    assert producer.flush(120) == 0
    produce_s = time.monotonic() - started
    up.cluster.write_cluster_file()
    assert delivered.failed == [], delivered.failed[:3]
    assert sorted(delivered.acked) == list(range(total))

    # Every partition's log holds exactly what was acked: no duplicate took an offset.
    deadline = time.monotonic() + 60
    while sum(_log_end_offsets_of(up, topic, 3)) < total and time.monotonic() < deadline:
        time.sleep(0.5)
    high_watermarks = _log_end_offsets_of(up, topic, 3)
    consumer = Consumer(
        {"bootstrap.servers": up.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    seen: Counter[int] = Counter()
    try:
        consumer.assign(
            [TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(3)]
        )
        deadline = time.monotonic() + 60
        while sum(seen.values()) < sum(high_watermarks) and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1):
                assert message.error() is None, message.error()
                value = int(message.value())
                assert value % 3 == message.partition()
                seen[value] += 1
    finally:
        consumer.close()
    duplicates = {v: n for v, n in seen.items() if n > 1}
    lost = set(range(total)) - set(seen)
    retried = sum(  # a measurement: how many retries the brokers recognised
        1
        for b in up.cluster.brokers
        for line in Path(b.log_file).read_text(errors="replace").splitlines()
        if f"Partition {topic}-" in line and "duplicate batch" in line
    )
    print(f"produced {total} in {produce_s:.1f} s; HWMs {high_watermarks}; "
          f"duplicate batches answered: {retried}")
    assert duplicates == {}, list(duplicates.items())[:10]
    assert lost == set(), sorted(lost)[:10]
    assert sum(high_watermarks) == total
    _wait_full_isr(admin, topic, 3)
