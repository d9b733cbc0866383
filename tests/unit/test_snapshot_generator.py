"""When a node snapshots its metadata image: Kafka's SnapshotGenerator triggers
(metadata.log.max.record.bytes.between.snapshots of committed batches, as the MetadataLoader
counts them, and metadata.log.max.snapshot.interval.ms at the next commit), their defaults and
limits (KRaftConfigs), and minikraft's extra record count."""

from __future__ import annotations

import uuid
from collections.abc import Generator, Sequence

import pytest

from kafkawire.config import ConfigError, NodeConfig
from metadata.image_records import encoded_image_records, image_records
from metadata.loader import MetadataLoader
from metadata.metadata_image import MetadataDelta
from metadata.records import (
    CONFIG_RESOURCE_TOPIC,
    BeginTransactionRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode_record,
)
from metadata.snapshot_generator import SnapshotGenerator, SnapshotTrigger
from storage.core.record_batch import RecordBatch, decode_batch, encode_batch

T = uuid.UUID(int=9)


class Emitter:
    def __init__(self) -> None:
        self.ends: list[int] = []

    def __call__(self, end_offset: int, records: Sequence[bytes]) -> Generator[None, None, bool]:
        self.ends.append(end_offset)
        yield
        return True


class Clock:
    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        return self.ms


def batch(base_offset: int, records: Sequence[MetadataRecord]) -> tuple[RecordBatch, int]:
    """One committed batch as the log hands it over, and its size in the log."""
    raw = encode_batch(base_offset, 1, 0, [encode_record(r) for r in records])
    decoded, size = decode_batch(raw)
    assert size == len(raw)
    return decoded, size


def control(base_offset: int) -> tuple[RecordBatch, int]:
    raw = encode_batch(base_offset, 1, 0, [b"\x00\x00\x00\x00"], is_control=True)
    return decode_batch(raw)


def topics(base_offset: int, count: int) -> list[TopicRecord]:
    return [TopicRecord(f"t{base_offset + i}", uuid.UUID(int=base_offset + i + 100))
            for i in range(count)]


def node(trigger: SnapshotTrigger, clock: Clock | None = None) -> tuple[
    MetadataLoader, SnapshotGenerator, Emitter
]:
    emit = Emitter()
    generator = SnapshotGenerator(trigger, emit, clock or Clock())
    loader = MetadataLoader()
    loader.install_publishers([generator])
    return loader, generator, emit


def test_a_batch_read_from_the_log_carries_its_size_and_compares_by_content() -> None:
    decoded, size = batch(0, topics(0, 3))
    assert decoded.size_in_bytes == size > 0
    built = RecordBatch(decoded.base_offset, decoded.leader_epoch, decoded.timestamp_ms,
                        decoded.records, decoded.attributes, decoded.last_offset_delta,
                        decoded.max_timestamp_ms)
    assert built.size_in_bytes == 0 and built == decoded


def test_the_loader_counts_every_committed_batch_control_batches_too() -> None:
    """Kafka's MetadataBatchLoader adds each batch's sizeInBytes to the manifest's numBytes,
    control batches included; a transaction's bytes come with its end; a loaded snapshot
    starts from zero (resetToImage)."""
    seen: list[int] = []

    class Recorder:
        name = "Recorder"

        def on_metadata_update(self, delta, image, manifest):  # type: ignore[no-untyped-def]
            seen.append(manifest.bytes)

    loader = MetadataLoader()
    loader.install_publishers([Recorder()])
    (first, a), (ctl, b), (second, c) = batch(0, topics(0, 2)), control(2), batch(3, topics(3, 1))
    loader.handle_commit([first, ctl, second])
    assert seen == [a + b + c]
    begin, d = batch(4, [BeginTransactionRecord("big"), *topics(5, 2)])
    end, e = batch(7, [*topics(7, 1), EndTransactionRecord()])
    loader.handle_commit([begin])
    assert seen == [a + b + c]  # nothing published inside the transaction
    loader.handle_commit([end])
    assert seen == [a + b + c, d + e]
    half, f = batch(9, topics(9, 1))
    loader.handle_commit([half])
    assert seen[-1] == f


def test_a_snapshot_is_due_once_the_committed_bytes_reach_the_limit() -> None:
    one, size = batch(0, topics(0, 1))
    loader, generator, emit = node(SnapshotTrigger(max_bytes=2 * size, max_interval_ms=0))
    loader.handle_commit([one])
    assert emit.ends == [] and generator.bytes_since_snapshot == size
    loader.handle_commit([batch(1, topics(1, 1))[0]])  # same size: the limit is reached
    assert emit.ends == [2] and generator.bytes_since_snapshot == 0
    assert generator.snapshots_taken == 1
    loader.handle_commit([batch(2, topics(2, 1))[0]])
    assert emit.ends == [2] and generator.bytes_since_snapshot == size
    # A snapshot loaded from the leader starts the count again.
    loader.handle_load_snapshot(3, [batch(0, topics(0, 3))[0]])
    assert generator.bytes_since_snapshot == 0


def test_no_snapshot_ends_inside_a_batch() -> None:
    """Kafka's maybeScheduleEmit skips an image that is not batch aligned (what came before a
    BeginTransactionRecord in the middle of a batch is published first) and the next aligned
    commit takes the snapshot."""
    loader, _, emit = node(SnapshotTrigger(max_bytes=1, max_interval_ms=0))
    records = [*topics(0, 3), BeginTransactionRecord("t"), *topics(4, 1), EndTransactionRecord()]
    loader.handle_commit([batch(0, records)[0]])
    assert emit.ends == [6]  # not 3, where the transaction began


def test_the_time_trigger_fires_at_the_first_commit_after_the_interval() -> None:
    """Kafka checks the time at each committed delta (publishLogDelta), not on a timer, and
    its clock starts when the generator starts, a snapshot is taken or one is loaded."""
    clock = Clock()
    loader, generator, emit = node(SnapshotTrigger(max_bytes=1 << 40, max_interval_ms=1000),
                                   clock)
    clock.ms = 999
    loader.handle_commit([batch(0, topics(0, 1))[0]])
    assert emit.ends == []
    clock.ms = 5000  # nothing committed meanwhile: nothing taken until the next commit
    assert emit.ends == []
    loader.handle_commit([batch(1, topics(1, 1))[0]])
    assert emit.ends == [2] and generator.last_snapshot_ms == 5000
    clock.ms = 5999
    loader.handle_commit([batch(2, topics(2, 1))[0]])
    assert emit.ends == [2]
    loader.handle_load_snapshot(3, [batch(0, topics(0, 3))[0]])
    clock.ms = 6500
    loader.handle_commit([batch(3, topics(3, 1))[0]])
    assert emit.ends == [2]  # the loaded snapshot restarted the clock at 5999
    clock.ms = 7000
    loader.handle_commit([batch(4, topics(4, 1))[0]])
    assert emit.ends == [2, 5]


def test_an_interval_of_zero_turns_the_time_trigger_off() -> None:
    clock = Clock()
    loader, _, emit = node(SnapshotTrigger(max_bytes=1 << 40, max_interval_ms=0), clock)
    clock.ms = 10 ** 12
    loader.handle_commit([batch(0, topics(0, 1))[0]])
    assert emit.ends == []


def test_minikrafts_record_count_is_an_extra_trigger_off_by_default() -> None:
    loader, _, emit = node(SnapshotTrigger(max_bytes=1 << 40, max_interval_ms=0))
    loader.handle_commit([batch(0, topics(0, 50))[0]])
    assert emit.ends == []
    loader, _, emit = node(SnapshotTrigger(max_bytes=1 << 40, max_interval_ms=0,
                                           interval_records=50))
    loader.handle_commit([batch(0, topics(0, 50))[0]])
    assert emit.ends == [50]


BASE = {"node.id": "1", "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:9092"}


def test_kafkas_keys_and_defaults_are_the_default_trigger() -> None:
    trigger = SnapshotTrigger.from_config(NodeConfig.from_props(BASE).get_int)
    assert trigger == SnapshotTrigger(max_bytes=20 * 1024 * 1024,
                                      max_interval_ms=60 * 60 * 1000, interval_records=0)
    given = NodeConfig.from_props({
        **BASE,
        "metadata.log.max.record.bytes.between.snapshots": "4096",
        "metadata.log.max.snapshot.interval.ms": "0",
        "metadata.log.snapshot.interval.records": "8",
    })
    assert SnapshotTrigger.from_config(given.get_int) == SnapshotTrigger(4096, 0, 8)


@pytest.mark.parametrize(
    ("key", "value", "least"),
    [
        ("metadata.log.max.record.bytes.between.snapshots", "0", 1),
        ("metadata.log.max.snapshot.interval.ms", "-1", 0),
        ("metadata.log.snapshot.interval.records", "-1", 0),
    ],
)
def test_values_below_kafkas_limits_are_refused_with_its_message(
    key: str, value: str, least: int
) -> None:
    with pytest.raises(ConfigError, match=f"Invalid value {value} for configuration {key}: "
                                          f"Value must be at least {least}"):
        NodeConfig.from_props({**BASE, key: value})


def test_a_snapshot_packs_partitions_into_the_bytes_their_records_encode_to() -> None:
    """encoded_image_records packs partitions straight from their registrations (issue 35):
    the bytes must be encode_record's, every field of PartitionRecord set away from its
    default, in image_records' order."""
    u = uuid.UUID(int=77)
    records: list[MetadataRecord] = [
        FeatureLevelRecord("metadata.version", 27),
        RegisterBrokerRecord(2, uuid.UUID(int=2), broker_epoch=5, rack="r1"),
        RegisterBrokerRecord(1, uuid.UUID(int=1), broker_epoch=4),
        TopicRecord("zz", u),
        TopicRecord("aa", T),
        ConfigRecord(CONFIG_RESOURCE_TOPIC, "aa", "min.insync.replicas", "2"),
        PartitionRecord(3, T, replicas=(1, 2, 3, 4), isr=(1,), removing_replicas=(4,),
                        adding_replicas=(3,), leader=1, leader_recovery_state=1,
                        leader_epoch=7, partition_epoch=9, eligible_leader_replicas=(2,),
                        last_known_elr=(3,), last_known_leader=1),
        PartitionRecord(0, T, replicas=(1, 2), isr=(1, 2), leader=2),
        PartitionRecord(0, u, replicas=(2,), isr=(2,), leader=2),
        PartitionChangeRecord(0, T, isr=(2,), leader=-1),
        ProducerIdsRecord(1, 4, 2000),
    ]
    delta = MetadataDelta()
    for offset, record in enumerate(records):
        delta.replay(record, offset)
    image = delta.image()
    expected = [encode_record(r) for r in image_records(image)]
    assert len(expected) == 10  # 2 topics of the 3 partitions, 2 brokers, 3 others
    assert list(encoded_image_records(image)) == expected
