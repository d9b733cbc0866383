"""The shared MetadataLoader (metadata/loader.py): one replay for controllers and brokers, its
changes by key, and the SnapshotGenerator publisher (here by minikraft's record count, its
bytes and time triggers in tests/unit/test_snapshot_generator.py;
rule 7's voter set is the Raft core's part, tests/unit/test_raft_replica.py)."""

from __future__ import annotations

import uuid
from collections.abc import Generator, Sequence

import pytest

from metadata.image_records import image_records
from metadata.loader import REPLAY_SLICE_RECORDS, MetadataLoader, Provenance
from metadata.metadata_image import MetadataDelta
from metadata.records import (
    CONFIG_RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    decode_record,
    encode_record,
)
from metadata.snapshot_generator import SnapshotGenerator, SnapshotTrigger
from tests.metadata_batches import batches

T = uuid.UUID(int=9)
U = uuid.UUID(int=10)


class Emitter:
    def __init__(self, accept: bool = True) -> None:
        self.accept = accept
        self.snapshots: list[tuple[int, list[bytes]]] = []

    def __call__(self, end_offset: int, records: Sequence[bytes]) -> Generator[None, None, bool]:
        self.snapshots.append((end_offset, list(records)))
        yield  # a writer in slices (RaftManager.create_snapshot)
        return self.accept


def every(records: int, emit: Emitter) -> SnapshotGenerator:
    """A generator snapshotting by minikraft's record count only (Kafka's triggers far off)."""
    trigger = SnapshotTrigger(max_bytes=1 << 62, max_interval_ms=0, interval_records=records)
    return SnapshotGenerator(trigger, emit, lambda: 0)


def test_changes_name_what_each_commit_touched() -> None:
    loader = MetadataLoader()
    seen: list[tuple[MetadataDelta, Provenance, int]] = []

    class Recorder:
        name = "Recorder"

        def on_metadata_update(self, delta, image, manifest):  # type: ignore[no-untyped-def]
            seen.append((delta, manifest.provenance, manifest.end_offset))

    loader.install_publishers([Recorder()])
    loader.handle_commit(
        batches(
            0,
            1,
            [
                RegisterBrokerRecord(1, uuid.UUID(int=1), broker_epoch=0),
                TopicRecord("t", T),
                PartitionRecord(0, T, replicas=(1,), isr=(1,), leader=1),
                PartitionRecord(1, T, replicas=(1,), isr=(1,), leader=1),
            ],
        )
    )
    loader.handle_commit(
        batches(
            4,
            2,
            [
                UnfenceBrokerRecord(1, 0),
                PartitionChangeRecord(1, T, isr=(1,)),
                ConfigRecord(CONFIG_RESOURCE_TOPIC, "t", "min.insync.replicas", "1"),
            ],
        )
    )
    first, second = seen[0][0], seen[1][0]
    assert first.brokers == {1} and first.created_topics == {T}
    assert first.partitions == {(T, 0), (T, 1)} and first.records == 4
    assert second.partitions == {(T, 1)} and second.brokers == {1}
    assert second.configs == {(CONFIG_RESOURCE_TOPIC, "t")} and not second.created_topics
    assert [(p, end) for _, p, end in seen] == [(Provenance.LOG, 4), (Provenance.LOG, 7)]
    assert loader.committed_offset == 7 and loader.committed_epoch == 2
    assert not loader.image.is_fenced(1) and loader.image.offset == 6


def test_snapshot_generator_snapshots_every_interval_and_resets_on_load() -> None:
    emit = Emitter()
    loader = MetadataLoader()
    generator = every(3, emit)
    loader.install_publishers([generator])
    loader.handle_commit(batches(0, 1, [TopicRecord("t", T)]))
    loader.handle_commit(batches(1, 1, [PartitionRecord(0, T, replicas=(1,), isr=(1,))]))
    assert emit.snapshots == [] and generator.records_since_snapshot == 2
    loader.handle_commit(batches(2, 1, [PartitionChangeRecord(0, T, isr=(1,))]))
    assert [end for end, _ in emit.snapshots] == [3]
    assert generator.records_since_snapshot == 0
    # The snapshot's records rebuild the image it was taken of.
    rebuilt = MetadataDelta()
    for index, raw in enumerate(emit.snapshots[0][1]):
        rebuilt.replay(decode_record(raw), index)
    assert list(image_records(rebuilt.image())) == list(image_records(loader.image))
    # A snapshot loaded from the leader replaces the image and restarts the count.
    loader.handle_commit(batches(3, 1, [TopicRecord("u", uuid.UUID(int=10))]))
    assert generator.records_since_snapshot == 1
    loader.handle_load_snapshot(3, batches(0, 1, [TopicRecord("t", T)]))
    assert generator.records_since_snapshot == 0 and loader.committed_offset == 3
    assert set(loader.image.topics_by_name) == {"t"}


def test_a_refused_snapshot_starts_the_count_again() -> None:
    """Kafka's SnapshotGenerator resets its counters as the emit starts, whether or not the
    emitter writes one (SnapshotEmitter skips an offset a snapshot already covers)."""
    emit = Emitter(accept=False)  # one already covers the offset (fetched from the leader)
    loader = MetadataLoader()
    generator = every(1, emit)
    loader.install_publishers([generator])
    loader.handle_commit(batches(0, 1, [TopicRecord("t", T)]))
    loader.handle_commit(batches(1, 1, [TopicRecord("u", uuid.UUID(int=10))]))
    assert [end for end, _ in emit.snapshots] == [1, 2]
    assert generator.records_since_snapshot == 0 and generator.snapshots_taken == 0


def test_a_big_commit_replays_in_slices_and_is_published_whole() -> None:
    # Issue 35: the runtime gives its loop back at every yield; nothing sees a partial commit.
    loader = MetadataLoader()
    seen: list[int] = []

    class Recorder:
        name = "Recorder"

        def on_metadata_update(self, changes, image, manifest):  # type: ignore[no-untyped-def]
            seen.append(len(image.topics[T].partitions))

    loader.install_publishers([Recorder()])
    count = 3 * REPLAY_SLICE_RECORDS
    records: list[MetadataRecord] = [TopicRecord("t", T)]
    records += [PartitionRecord(p, T, replicas=(1,), isr=(1,), leader=1) for p in range(count)]
    steps = loader.commit_steps(batches(0, 1, records))
    yields = 0
    for _ in steps:
        yields += 1
        assert loader.image.topics == {} and seen == []  # the old image until the end
    assert yields == 3
    assert seen == [count] and loader.committed_offset == count + 1
    assert len(loader.image.topics_by_name["t"].partitions) == count


def test_an_image_is_not_changed_by_later_replays_on_its_delta() -> None:
    # The delta copies a topic's partitions once and freezes them in image(): a replay after
    # image() must copy again, never write into the image already handed out.
    delta = MetadataDelta()
    delta.replay(TopicRecord("t", T), 0)
    delta.replay(PartitionRecord(0, T, replicas=(1,), isr=(1,), leader=1), 1)
    first = delta.image()
    delta.replay(PartitionRecord(1, T, replicas=(1,), isr=(1,), leader=1), 2)
    delta.replay(PartitionChangeRecord(0, T, isr=()), 3)
    second = delta.image()
    assert sorted(first.topics[T].partitions) == [0] and first.topics[T].partitions[0].isr == (1,)
    assert sorted(second.topics[T].partitions) == [0, 1]
    assert second.topics[T].partitions[0].isr == () and second.topics_by_name["t"] is second.topics[T]


def test_a_snapshot_is_published_as_the_delta_against_the_image_it_replaces() -> None:
    """Kafka's MetadataLoader loads a snapshot as a delta over the current image (issue 35: a
    broker that fell behind the log start reloaded 100,000 partitions to apply a few): the
    publishers hear of the partitions, topics, brokers and configs that differ, and the image
    is the snapshot's."""
    u, gone = uuid.UUID(int=10), uuid.UUID(int=11)
    loader = MetadataLoader()
    seen: list[tuple[MetadataDelta, Provenance]] = []

    class Recorder:
        name = "Recorder"

        def on_metadata_update(self, delta, image, manifest):  # type: ignore[no-untyped-def]
            seen.append((delta, manifest.provenance))

    loader.install_publishers([Recorder()])
    common: list[MetadataRecord] = [
        RegisterBrokerRecord(1, uuid.UUID(int=1), broker_epoch=0),
        RegisterBrokerRecord(2, uuid.UUID(int=2), broker_epoch=1),
        TopicRecord("t", T),
        *(PartitionRecord(p, T, replicas=(1, 2), isr=(1, 2), leader=1) for p in range(300)),
    ]
    loader.handle_commit(batches(0, 1, [*common, TopicRecord("g", gone),
                                        PartitionRecord(0, gone, replicas=(1,), isr=(1,), leader=1)]))
    # The snapshot: partition 7's ISR shrank, broker 2 unfenced, topic g deleted, topic u new.
    later = MetadataLoader()
    later.handle_commit(batches(0, 1, [
        *common,
        PartitionChangeRecord(7, T, isr=(1,)),
        UnfenceBrokerRecord(2, 1),
        ConfigRecord(CONFIG_RESOURCE_TOPIC, "t", "min.insync.replicas", "2"),
        TopicRecord("u", u),
        PartitionRecord(0, u, replicas=(2,), isr=(2,), leader=2),
    ]))
    records = list(image_records(later.image))
    snapshot = batches(0, 3, records)
    loader.handle_load_snapshot(900, snapshot)
    delta, provenance = seen[-1]
    assert provenance is Provenance.SNAPSHOT and delta.records == len(records)
    assert delta.partitions == {(T, 7), (u, 0)}
    assert delta.created_topics == {u} and delta.removed_topics == {gone}
    assert delta.brokers == {2} and delta.configs == {(CONFIG_RESOURCE_TOPIC, "t")}
    assert loader.image.topics == later.image.topics and loader.committed_offset == 900
    # A node starting from its snapshot: everything is new.
    fresh = MetadataLoader()
    fresh.install_publishers([Recorder()])
    fresh.handle_load_snapshot(900, snapshot)
    assert len(seen[-1][0].partitions) == 301 and seen[-1][0].created_topics == {T, u}


def test_a_snapshot_is_taken_beside_the_commits_not_in_their_way() -> None:
    """Issue 35: commit_steps only notes the snapshot due; background_steps takes it of the
    image it noted, in slices, while later commits are applied in between."""
    emit = Emitter()
    loader = MetadataLoader()
    loader.install_publishers([every(2, emit)])
    for _ in loader.commit_steps(batches(0, 1, [TopicRecord("t", T), TopicRecord("u", U)])):
        pass
    assert emit.snapshots == []  # due, not taken on the publishing path
    background = loader.background_steps()
    next(background)  # the snapshot under way ...
    for _ in loader.commit_steps(batches(2, 1, [TopicRecord("v", uuid.UUID(int=11))])):
        pass  # ... and a commit applied meanwhile
    list(background)
    assert [end for end, _ in emit.snapshots] == [2]
    assert {decode_record(r).name for r in emit.snapshots[0][1]} == {"t", "u"}
    assert loader.committed_offset == 3


def test_commits_applied_while_a_snapshot_is_written_count_toward_the_next_one_only() -> None:
    """Kafka's SnapshotGenerator resets its count as it starts a snapshot and schedules none
    while one is being written (issue 35): a restarted broker at 100,000 partitions took a
    second 100,000-partition snapshot right after the first, 7,000 records later, because
    every commit applied during the first's write found the count still past the interval."""
    emit = Emitter()
    loader = MetadataLoader()
    generator = every(2, emit)
    loader.install_publishers([generator])
    for _ in loader.commit_steps(batches(0, 1, [TopicRecord("t", T), TopicRecord("u", U)])):
        pass
    background = loader.background_steps()
    next(background)  # the snapshot at 2 under way ...
    for offset in (2, 3):  # ... and two records applied meanwhile: an interval's worth
        record = TopicRecord(f"v{offset}", uuid.UUID(int=offset + 20))
        for _ in loader.commit_steps(batches(offset, 1, [record])):
            pass
    list(background)
    list(loader.background_steps())
    assert [end for end, _ in emit.snapshots] == [2]  # not a second one at 4 at once
    assert generator.records_since_snapshot == 2
    # The next commit finds the interval reached (and nothing being written): one more.
    loader.handle_commit(batches(4, 1, [TopicRecord("w", uuid.UUID(int=30))]))
    assert [end for end, _ in emit.snapshots] == [2, 5]
    assert generator.records_since_snapshot == 0


class _Recorder:
    name = "Recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[MetadataDelta, Provenance, int, int]] = []

    def on_metadata_update(self, delta, image, manifest):  # type: ignore[no-untyped-def]
        self.seen.append((delta, manifest.provenance, manifest.end_offset, len(image.topics)))


def test_a_loader_given_a_high_watermark_publishes_nothing_until_it_has_caught_up() -> None:
    """Kafka's MetadataLoader.stillNeedToCatchUp (the broker's loader, issue 35): commits and
    snapshots are replayed but not published while the high watermark is unknown or above
    what was loaded; then the publishers get everything at once, as one change against the
    (empty) image they had, and the node's image and published offset move only then."""
    high_watermark: list[int | None] = [None]
    loader = MetadataLoader(high_watermark=lambda: high_watermark[0])
    recorder = _Recorder()
    loader.install_publishers([recorder])
    loader.handle_commit(batches(0, 1, [
        RegisterBrokerRecord(1, uuid.UUID(int=1), broker_epoch=0),
        TopicRecord("t", T),
        PartitionRecord(0, T, replicas=(1,), isr=(1,), leader=1),
    ]))
    assert recorder.seen == [] and loader.catching_up  # high watermark unknown
    assert loader.image.topics == {} and loader.published_offset == 0
    assert loader.committed_offset == 3  # replayed all the same
    high_watermark[0] = 5
    loader.handle_commit(batches(3, 1, [PartitionRecord(1, T, replicas=(1,), isr=(1,), leader=1)]))
    assert recorder.seen == [] and loader.catching_up  # loaded to 4, committed to 5
    loader.handle_commit(batches(4, 1, [TopicRecord("u", U)]))
    (delta, provenance, end_offset, topics), = recorder.seen
    assert provenance is Provenance.SNAPSHOT and end_offset == 5 and topics == 2
    assert delta.created_topics == {T, U} and delta.partitions == {(T, 0), (T, 1)}
    assert delta.brokers == {1}
    assert not loader.catching_up and loader.published_offset == 5
    assert set(loader.image.topics_by_name) == {"t", "u"}
    # From now on every commit is published as it comes.
    high_watermark[0] = 9
    loader.handle_commit(batches(5, 1, [PartitionChangeRecord(0, T, isr=())]))
    assert [(p, end) for _, p, end, _ in recorder.seen[1:]] == [(Provenance.LOG, 6)]
    assert loader.published_offset == 6


def test_a_restarted_broker_publishes_the_newer_snapshot_only_not_its_stale_one() -> None:
    """Issue 35: a restarted broker that loaded its own stale snapshot and then one fetched
    from the leader applied both (100,000 partitions each); holding until caught up, the
    publishers see one change: the newer snapshot against what they had."""
    high_watermark: list[int | None] = [None]
    loader = MetadataLoader(high_watermark=lambda: high_watermark[0])
    recorder = _Recorder()
    loader.install_publishers([recorder])
    stale = [TopicRecord("t", T), TopicRecord("gone", uuid.UUID(int=11))]
    loader.handle_load_snapshot(50, batches(0, 1, stale))
    assert recorder.seen == []
    high_watermark[0] = 90
    newer = [TopicRecord("t", T), TopicRecord("u", U)]
    loader.handle_load_snapshot(90, batches(0, 2, newer))
    (delta, provenance, end_offset, _), = recorder.seen
    assert provenance is Provenance.SNAPSHOT and end_offset == 90
    assert delta.created_topics == {T, U} and not delta.removed_topics
    assert set(loader.image.topics_by_name) == {"t", "u"}


def test_catching_up_ends_when_the_high_watermark_is_learned_with_nothing_new() -> None:
    """A broker whose log already holds everything committed gets no commit that would end
    the catch-up: the runtime asks again (catch_up_steps) when the high watermark moves."""
    high_watermark: list[int | None] = [None]
    loader = MetadataLoader(high_watermark=lambda: high_watermark[0])
    recorder = _Recorder()
    loader.install_publishers([recorder])
    loader.handle_commit(batches(0, 1, [TopicRecord("t", T)]))
    list(loader.catch_up_steps())
    assert recorder.seen == []
    high_watermark[0] = 1
    list(loader.catch_up_steps())
    assert [(p, end) for _, p, end, _ in recorder.seen] == [(Provenance.SNAPSHOT, 1)]


def test_a_loader_without_a_high_watermark_publishes_every_commit_at_once() -> None:
    """The controllers' loader: its image must be current the moment it wins an election."""
    loader = MetadataLoader()
    recorder = _Recorder()
    loader.install_publishers([recorder])
    assert not loader.catching_up
    loader.handle_commit(batches(0, 1, [TopicRecord("t", T)]))
    assert [(p, end) for _, p, end, _ in recorder.seen] == [(Provenance.LOG, 1)]
    assert loader.published_offset == 1


def test_the_active_controllers_own_records_are_replayed_without_decoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka's active controller replays the records it generates, never reading them back:
    what QuorumController wrote is replayed from its objects when it commits, a record it did
    not write (another leader's) is decoded, and the memo empties as its records commit."""
    import metadata.loader as loader_module

    mine = TopicRecord("t", T)
    theirs = PartitionRecord(0, T, replicas=(1,), isr=(1,))
    loader = MetadataLoader()
    loader.written([(encode_record(mine), mine)])
    decoded: list[bytes] = []

    def counting_decode(raw: bytes) -> MetadataRecord:
        decoded.append(bytes(raw))
        return decode_record(raw)

    monkeypatch.setattr(loader_module, "decode_record", counting_decode)
    loader.handle_commit(batches(0, 1, [mine, theirs]))
    assert decoded == [encode_record(theirs)]
    assert loader.image.topics[T].name == "t" and 0 in loader.image.topics[T].partitions
    assert loader._written == {}


def test_a_prepared_write_is_taken_as_replayed_when_its_batches_commit_else_replayed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The active controller replays its write when it writes it (issue 35, Kafka's active
    controller never replays its committed records): when that write's batches commit, the
    loader takes its image without decoding or replaying a record, across as many commits as
    the write's transaction takes; batches that are not the write's (another leader's epoch
    at those offsets) are replayed as any others."""
    import metadata.loader as loader_module
    from metadata.loader import PreparedWrite
    from metadata.records import BeginTransactionRecord, EndTransactionRecord

    base_records = [TopicRecord("t", T), PartitionRecord(0, T, replicas=(1, 2), isr=(1, 2))]
    write = [BeginTransactionRecord(name="w"), PartitionChangeRecord(0, T, isr=(1,)),
             PartitionChangeRecord(0, T, leader=2), EndTransactionRecord()]
    decoded: list[bytes] = []

    def counting_decode(raw: bytes) -> MetadataRecord:
        decoded.append(bytes(raw))
        return decode_record(raw)

    monkeypatch.setattr(loader_module, "decode_record", counting_decode)

    def prepared(loader: MetadataLoader) -> PreparedWrite:
        delta = MetadataDelta(loader.image)
        for offset, record in enumerate(write, 2):
            if not isinstance(record, BeginTransactionRecord | EndTransactionRecord):
                delta.replay(record, offset)
        image = delta.image()
        return PreparedWrite(2, 6, 1, 4, loader.image, delta, image)

    loader = MetadataLoader()
    loader.handle_commit(batches(0, 1, base_records))
    decoded.clear()
    mine = prepared(loader)
    loader.prepared(mine)
    loader.handle_commit(batches(2, 1, write[:2]))  # the first half commits: nothing yet
    assert loader.committed_offset == 2 and loader.image.topics[T].partitions[0].isr == (1, 2)
    loader.handle_commit(batches(4, 1, write[2:]))
    assert (loader.adopted_writes, loader.replayed_prepared_writes) == (1, 0)
    assert loader.image is mine.image and loader.committed_offset == 6 and decoded == []

    replayed = MetadataLoader()
    replayed.handle_commit(batches(0, 1, base_records))
    replayed.prepared(prepared(replayed))
    decoded.clear()
    theirs = [PartitionChangeRecord(0, T, isr=(2,)), PartitionChangeRecord(0, T, leader=1),
              PartitionChangeRecord(0, T, isr=(1, 2)), PartitionChangeRecord(0, T, isr=(1,))]
    replayed.handle_commit(batches(2, 2, theirs))  # epoch 2 wrote these offsets
    assert (replayed.adopted_writes, replayed.replayed_prepared_writes) == (0, 1)
    assert len(decoded) == 4 and replayed.committed_offset == 6
    registration = replayed.image.topics[T].partitions[0]
    assert (registration.isr, registration.leader, registration.partition_epoch) == ((1,), 1, 4)
