"""Retention and the log cleaner (issue 34) through confluent-kafka against `minikraft up`
(3 controllers + 3 brokers, `log.retention.check.interval.ms=500`, `log.cleaner.backoff.ms=200`):

- a topic with retention.ms=2000 and small segments (segment.ms) loses its old segments within
  the check interval on every replica, ListOffsets EARLIEST moves, and a consumer group whose
  committed offset fell below the log start gets OFFSET_OUT_OF_RANGE and its reset policy puts
  it at the new start (rule 24);
- a compacted topic with tombstones ends with one record per key on every replica, the latest
  value of every live key (rule 25), read correctly by a consumer while the cleaner runs;
- `__consumer_offsets` (cleanup.policy=compact) shrinks once its segments roll;
- a dynamic `log.cleaner.dedupe.buffer.size` too small for the dirty keys makes the cleaner
  work in several rounds (Kafka's LogCleaner cleans as far as its offset map holds), and it still
  ends with one record per key.

The 100,000-record compaction and a 5-minute produce loop under retention are `slow`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analytics.rules.cleanup import pure as cl
from cluster.launch.local_cluster import LocalCluster
from cluster.launch.readiness import poll_until
from storage.core.record_batch import iter_segment_batches
from storage.runtime.segment import SEGMENT_SUFFIX, parse_segment_file_name
from tests.integration.conftest import detached_up, log_start_on_disk

confluent_kafka = pytest.importorskip("confluent_kafka", reason="dev extra: confluent-kafka")

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    Consumer,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

CHECK_INTERVAL_MS = 500


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str]]:
    with detached_up(
        tmp_path_factory.mktemp("log-cleaner") / "up",
        "--set", f"log.retention.check.interval.ms={CHECK_INTERVAL_MS}",
        "--set", "log.cleaner.backoff.ms=200",
    ) as up:
        yield up


def _create(admin: AdminClient, topic: NewTopic) -> None:
    for future in admin.create_topics([topic], operation_timeout=20).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        described = admin.list_topics(topic.topic, timeout=10).topics.get(topic.topic)
        if described is not None and not described.error and all(
            p.leader >= 0 for p in described.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic.topic} has no leaders")


def _produce(
    bootstrap: str | Producer,
    topic: str,
    records: list[tuple[bytes, bytes | None]],
    acked: list[tuple[bytes, int]] | None = None,
) -> list[int]:
    producer = (
        Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        if isinstance(bootstrap, str)
        else bootstrap
    )
    offsets: list[int] = []

    def on_delivery(err: object, msg: Any) -> None:
        assert err is None, err
        offsets.append(int(msg.offset()))
        if acked is not None:
            acked.append((msg.key(), int(msg.offset())))

    for key, value in records:
        producer.produce(topic, value, key, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert len(offsets) == len(records)
    return offsets


def _create_retained(admin: AdminClient, topic: str, *, retention_ms: int, segment_ms: int) -> None:
    """A one-partition topic on all three brokers (min ISR 2) whose segments roll every
    segment_ms and expire after retention_ms; an expired segment's files go 1 s after."""
    _create(admin, NewTopic(topic, 1, 3, config={
        "min.insync.replicas": "2", "retention.ms": str(retention_ms),
        "segment.ms": str(segment_ms), "file.delete.delay.ms": "1000",
    }))


def _partition_dirs(cluster: LocalCluster, topic: str, partition: int = 0) -> dict[int, Path]:
    found = {}
    for broker in cluster.brokers:
        for path in Path(broker.dir).rglob(f"{topic}-{partition}"):
            if path.is_dir():
                found[broker.node_id] = path
    return found


def _segment_bases(directory: Path) -> list[int]:
    return sorted(
        base for p in directory.iterdir()
        if (base := parse_segment_file_name(p.name)) is not None
    )


def _records_on_disk(directory: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in the replica's segment files, in order."""
    rows = []
    for base in _segment_bases(directory):
        data = (directory / f"{base:020d}{SEGMENT_SUFFIX}").read_bytes()
        for _position, batch, _size in iter_segment_batches(data):
            for index, record in enumerate(batch.records):
                rows.append((batch.offset_of(index), record.key, record.value))
    return rows


def _alter_topic(admin: AdminClient, topic: str, configs: dict[str, str]) -> None:
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


# ---- retention ----


def test_retention_ms_deletes_old_segments_on_every_replica_and_consumers_reset(
    up: tuple[LocalCluster, str],
) -> None:
    cluster, bootstrap = up
    topic = "retained"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create_retained(admin, topic, retention_ms=2000, segment_ms=200)
    # Four waves 250 ms apart: segment.ms=200 rolls a segment for each.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    _produce(producer, topic, [(b"warm-up", b"")])  # metadata and connections
    for wave in range(4):
        _produce(producer, topic, [(b"k%d" % i, b"old-%d-%d" % (wave, i)) for i in range(20)])
        time.sleep(0.25)
    dirs = _partition_dirs(cluster, topic)
    assert len(dirs) == 3
    assert all(len(_segment_bases(d)) >= 4 for d in dirs.values()), {
        n: _segment_bases(d) for n, d in dirs.items()
    }
    group = "below-the-start"
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)
        committed = committer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == 10
    finally:
        committer.close()
    time.sleep(2.2)  # every old wave is now more than retention.ms old
    fresh = _produce(producer, topic, [(b"k%d" % i, b"new-%d" % i) for i in range(20)])
    assert fresh[0] == 81

    # Within a check interval or two, every replica's log starts at the fresh wave.
    waited = poll_until(
        lambda: all(_segment_bases(d) and _segment_bases(d)[0] >= 81 for d in dirs.values())
        and set(log_start_on_disk(cluster, topic).values()) == {81},
        10, "old segments deleted on every replica",
    )
    assert waited < 10
    # More fresh records, so the member below has something to read even if the first fresh
    # wave expires meanwhile (retention.ms is 2 s).
    _produce(producer, topic, [(b"k%d" % i, b"newer-%d" % i) for i in range(20)])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert low >= 81 and high == 121, (low, high)
        # The group's committed offset 10 is below the log start: the Fetch at 10 answers
        # OFFSET_OUT_OF_RANGE, and the reset policy (earliest) starts at the log start.
        consumer.assign([TopicPartition(topic, 0)])  # at the committed offset
        first = None
        errors = []
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                first = message
            elif message is not None:
                errors.append(message.error())
        assert first is not None, errors
        assert first.offset() >= 81 and first.offset() in (low, 101), (first.offset(), low)
        assert first.value() in (b"new-0", b"newer-0")
    finally:
        consumer.close()
    # file.delete.delay.ms later the renamed files are gone too.
    poll_until(lambda: not any(p.name.endswith(".deleted") for d in dirs.values() for p in d.iterdir()),
          10, ".deleted files unlinked")


# ---- compaction ----


def _expected_latest(records: list[tuple[bytes, bytes | None]]) -> dict[bytes, bytes | None]:
    latest: dict[bytes, bytes | None] = {}
    for key, value in records:
        latest[key] = value
    return latest


def _compact_and_check(
    cluster: LocalCluster,
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes, bytes | None]],
    timeout_s: float,
    producer_config: dict[str, Any] | None = None,
) -> float:
    """Produce `records` to a fresh compacted topic in waves, roll with a sentinel, then wait
    until every replica holds one record per key (tombstones at most once) with the latest
    value; a consumer reads the topic from the beginning meanwhile. Seconds the cleaner took."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, NewTopic(topic, 1, 3, config={
        "cleanup.policy": "compact", "min.insync.replicas": "2", "segment.ms": "200",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
        "file.delete.delay.ms": "500",
    }))
    waves = 5
    size = (len(records) + waves - 1) // waves
    acked: list[tuple[bytes, int]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         **(producer_config or {})})
    for start in range(0, len(records), size):
        _produce(producer, topic, records[start : start + size], acked)
        time.sleep(0.25)
    # A last record past segment.ms rolls the segment: everything before it is cleanable.
    _produce(bootstrap, topic, [(b"sentinel", b"end")])
    expected = _expected_latest(records)
    expected[b"sentinel"] = b"end"
    dirs = _partition_dirs(cluster, topic)
    started = time.monotonic()

    # Reads stay correct while the cleaner runs: every pass from the beginning sees, per key,
    # the latest value last (a key's records keep their order and offsets).
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False})
    passes = 0

    def compacted_everywhere() -> bool:
        nonlocal passes
        passes += 1
        seen = _read_all(consumer, topic, len(records) + 1)
        assert {k: v for k, v in seen.items() if k in expected} == {
            k: v for k, v in expected.items() if k in seen
        }, "a consumer read a value that is not its key's latest"
        assert set(expected) - set(seen) <= {k for k, v in expected.items() if v is None}
        for directory in dirs.values():
            rows = _records_on_disk(directory)
            # Rule 25 as the audit states it: every acked key's latest write is still held.
            held = [(key, offset) for offset, key, _value in rows if key is not None]
            deleted = [(k, o) for k, o in acked if expected.get(k) is None]
            assert cl.compaction_violations(acked, held, tombstones=deleted) == [], directory
            keys = [key for _offset, key, _value in rows]
            if len(keys) != len(set(keys)):
                return False
            on_disk = {key: value for _offset, key, value in rows}
            live = {k: v for k, v in expected.items() if v is not None}
            if {k: on_disk.get(k) for k in live} != live:
                return False
            if set(on_disk) - set(expected):
                return False
        return True

    try:
        took = poll_until(compacted_everywhere, timeout_s, f"{topic} compacted on every replica")
    finally:
        consumer.close()
    assert passes >= 1
    return took + (time.monotonic() - started) * 0


def _read_all(consumer: Consumer, topic: str, at_most: int) -> dict[bytes, bytes | None]:
    """Key -> last value read from the beginning to the high watermark."""
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    latest: dict[bytes, bytes | None] = {}
    position = low
    deadline = time.monotonic() + 30
    while position < high and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                latest[message.key()] = message.value()
                position = message.offset() + 1
    consumer.unassign()
    assert position >= high, f"read to {position} of {high}"
    del at_most
    return latest


def _keyed(count: int, keys: int, tombstones: int) -> list[tuple[bytes, bytes | None]]:
    records: list[tuple[bytes, bytes | None]] = [
        (b"key-%d" % (i % keys), b"value-%d" % i) for i in range(count)
    ]
    # The first `tombstones` keys are deleted at the end.
    records.extend((b"key-%d" % k, None) for k in range(tombstones))
    return records


def test_compaction_keeps_the_latest_value_of_every_key_on_every_replica(
    up: tuple[LocalCluster, str],
) -> None:
    cluster, bootstrap = up
    took = _compact_and_check(cluster, bootstrap, "compacted", _keyed(5_000, 100, 10), 60)
    print(f"5,000 records over 100 keys compacted on every replica in {took:.1f}s")


def test_a_small_dedupe_buffer_compacts_in_several_rounds_to_one_record_per_key(
    up: tuple[LocalCluster, str],
) -> None:
    """log.cleaner.dedupe.buffer.size as a per-broker dynamic config (Kafka's LogCleaner
    reconfigures it): 24 bytes a key at 0.9 load, 6,000 bytes map 225 of the 300 keys, so each
    round cleans only up to where the map filled and the next one goes on."""
    cluster, bootstrap = up
    admin = AdminClient({"bootstrap.servers": bootstrap})
    key = "log.cleaner.dedupe.buffer.size"

    def alter(broker_id: int, op: Any, value: str) -> None:
        resource = ConfigResource(ResourceType.BROKER, str(broker_id), incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)

    # A map that cannot hold one key is refused with the reason Kafka's cleaner fails with.
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        alter(cluster.brokers[0].node_id, AlterConfigOpType.SET, "47")
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "offset map is too small" in refused.value.args[0].str()
    topic = "compacted-small-map"
    logs = {b.node_id: Path(b.log_file) for b in cluster.brokers}
    already = {i: path.read_text().count(f"Partition {topic}-0: cleaned") for i, path in logs.items()}
    for broker in cluster.brokers:
        alter(broker.node_id, AlterConfigOpType.SET, "6000")
    try:
        described = admin.describe_configs(
            [ConfigResource(ResourceType.BROKER, str(cluster.brokers[0].node_id))]
        )
        entry = next(iter(described.values())).result(timeout=30)[key]
        assert (entry.value, entry.source) == ("6000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        # Batches of at most 50 records: a round always maps whole batches (the map is
        # checked before every key), so each fits.
        took = _compact_and_check(cluster, bootstrap, topic, _keyed(3_000, 300, 10), 90,
                                  producer_config={"batch.num.messages": 50})
        rounds = {i: path.read_text().count(f"Partition {topic}-0: cleaned") - already[i]
                  for i, path in logs.items()}
        print(f"3,000 records over 300 keys, a 225-key map: {rounds} rounds, {took:.1f}s")
        assert all(count >= 2 for count in rounds.values()), rounds
    finally:
        for broker in cluster.brokers:
            alter(broker.node_id, AlterConfigOpType.DELETE, "")


@pytest.mark.slow
def test_compaction_of_100000_records_over_1000_keys(up: tuple[LocalCluster, str]) -> None:
    cluster, bootstrap = up
    started = time.monotonic()
    took = _compact_and_check(
        cluster, bootstrap, "compacted-100k", _keyed(100_000, 1_000, 100), 300
    )
    print(f"100,000 records over 1,000 keys: produced and compacted in "
          f"{time.monotonic() - started:.1f}s (cleaner wait {took:.1f}s)")


def test_consumer_offsets_shrinks_once_compacted(up: tuple[LocalCluster, str]) -> None:
    cluster, bootstrap = up
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "offsets-source"
    _create(admin, NewTopic(topic, 1, 3))
    _produce(bootstrap, topic, [(b"k", b"v")])
    group = "many-commits"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        for offset in range(150):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()

    def records_of_group() -> dict[int, int]:
        counts = {}
        for broker in cluster.brokers:
            total = 0
            for directory in Path(broker.dir).rglob("__consumer_offsets-*"):
                if directory.is_dir():
                    total += sum(
                        1 for _o, key, _v in _records_on_disk(directory)
                        if key is not None and group.encode() in key
                    )
            counts[broker.node_id] = total
        return counts

    before = records_of_group()
    assert min(before.values()) >= 150, before  # the active segment: never cleaned
    _alter_topic(admin, "__consumer_offsets", {
        "segment.ms": "200", "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "500",
    })
    # A commit after segment.ms rolls the segment, so the commits above become cleanable.
    time.sleep(0.5)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        poll_until(lambda: max(records_of_group().values()) <= 5, 60, "__consumer_offsets compacted")
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == 1
    finally:
        consumer.close()


def _disk_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.is_file())


@pytest.mark.slow
@pytest.mark.timeout(480)  # the loop runs 300 s, after a cluster start
def test_disk_stays_bounded_in_a_five_minute_produce_loop(up: tuple[LocalCluster, str]) -> None:
    """retention.ms=5000 with 1 s segments: whatever is produced for 5 minutes, each replica
    holds about retention.ms + a check interval + file.delete.delay.ms of data."""
    cluster, bootstrap = up
    topic = "bounded"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create_retained(admin, topic, retention_ms=5000, segment_ms=1000)
    dirs = _partition_dirs(cluster, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    value = b"x" * 1000
    duration_s = 300.0
    started = time.monotonic()
    produced_bytes = 0
    peak: dict[int, int] = dict.fromkeys(dirs, 0)
    next_sample = started + 10  # after the first retention window fills
    window_bytes = 0.0
    while time.monotonic() - started < duration_s:
        for _ in range(200):  # about 200 KB per round, bounded by the flush below
            producer.produce(topic, value, b"k", partition=0)
        assert producer.flush(30) == 0
        produced_bytes += 200 * len(value)
        time.sleep(0.1)
        now = time.monotonic()
        if now >= next_sample:
            rate = produced_bytes / (now - started)
            window_bytes = rate * (5.0 + CHECK_INTERVAL_MS / 1000 + 1.0 + 1.0)
            for node, directory in dirs.items():
                peak[node] = max(peak[node], _disk_bytes(directory))
            next_sample = now + 2
    elapsed = time.monotonic() - started
    print(f"produced {produced_bytes / 1e6:.0f} MB in {elapsed:.0f}s; peak per replica "
          f"{ {n: round(b / 1e6, 1) for n, b in peak.items()} } MB; window {window_bytes / 1e6:.1f} MB")
    assert produced_bytes > 10 * window_bytes  # the loop wrote far more than is kept
    for node, most in peak.items():
        # Batches carry overhead beyond the values; twice the window is the bound.
        assert most < 2 * window_bytes + (2 << 20), (node, most, window_bytes)
