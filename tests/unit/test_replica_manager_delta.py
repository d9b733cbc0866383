"""The broker acts on the metadata delta (issue 18): committed records go through the shared
MetadataLoader, which hands BrokerMetadataPublisher (changes, image); the ReplicaManager touches
only the partitions the change names, plus every hosted partition's broker view when a broker
moved and a topic's partitions when its min.insync.replicas moved (rule 9). A second manager
fed whole images (the old rescan, still the snapshot path) must end in the same state."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from broker.core.messages import TopicIdPartition
from broker.runtime import replica_delta, replica_manager
from broker.runtime.metadata_publisher import (
    LEADERSHIP_SLICE_PARTITIONS,
    BrokerMetadataPublisher,
)
from broker.runtime.partition_log import read_partition_metadata
from broker.runtime.replica_manager import HostedPartition, ReplicaManager, ReplicaSettings
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.errors import Errors
from metadata.image_records import image_records
from metadata.loader import LoaderManifest, MetadataLoader, Provenance
from metadata.metadata_image import MIN_INSYNC_REPLICAS, MetadataDelta, MetadataImage
from metadata.records import (
    CONFIG_RESOURCE_TOPIC,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from raft.core.replica_key import uuid_to_str
from storage.core.record_batch import encode_batch
from tests.metadata_batches import batches

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)
LOCAL = 1


async def _refuse(request: lifecycle.AlterPartitionRequest) -> lifecycle.AlterPartitionResponse:
    return lifecycle.alter_partition_response(Errors.NOT_CONTROLLER)


def _manager(log_dir: Path) -> ReplicaManager:
    log_dir.mkdir()
    return ReplicaManager(
        ReplicaSettings(broker_id=LOCAL, log_dirs=[log_dir]), None, _refuse, lambda: 10
    )


class _WholeImage:
    """The pre-delta behaviour as a publisher: rescan the whole image after every commit.
    It keeps the last changes, for the tests to check what the loader noted."""

    name = "WholeImage"

    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas
        self.last_changes = MetadataDelta()

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        self.last_changes = delta
        self.replicas.apply_image(image)


class _Cluster:
    """One loader, a delta-fed and an image-fed ReplicaManager behind it."""

    def __init__(self, tmp_path: Path) -> None:
        self.loader = MetadataLoader()
        self.delta = _manager(tmp_path / "delta")
        self.whole = _manager(tmp_path / "whole")
        self.leadership_changes: list[tuple[str, int]] = []
        self.rescan = _WholeImage(self.whole)
        self.loader.install_publishers(
            [BrokerMetadataPublisher(self.delta, self._moved), self.rescan]
        )
        self.offset = 0

    @property
    def last_changes(self) -> MetadataDelta:
        return self.rescan.last_changes

    def _moved(self, hosted: HostedPartition) -> None:
        self.leadership_changes.append((hosted.topic, hosted.partition))

    def commit(self, records: Sequence[MetadataRecord]) -> None:
        self.loader.handle_commit(batches(self.offset, 1, records))
        self.offset += len(records)

    def states(self, replicas: ReplicaManager) -> dict[TopicIdPartition, tuple[object, ...]]:
        return {
            key: (
                h.state.role,
                h.state.leader_id,
                h.state.leader_epoch,
                h.state.partition_epoch,
                h.state.committed_isr,
                h.state.effective_min_isr,
                h.state.high_watermark,
                h.registration,
            )
            for key, h in replicas.partitions.items()
        }


def _brokers() -> list[MetadataRecord]:
    return [
        RegisterBrokerRecord(b, uuid.UUID(int=100 + b), broker_epoch=10 * b, fenced=False)
        for b in (1, 2, 3)
    ]


def _topics() -> list[MetadataRecord]:
    return [
        TopicRecord("a", A),
        PartitionRecord(0, A, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=1),
        PartitionRecord(1, A, replicas=(1, 2, 3), isr=(1, 2, 3), leader=2, leader_epoch=1),
        TopicRecord("b", B),
        PartitionRecord(0, B, replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=1),
    ]


def _count_calls(
    monkeypatch: pytest.MonkeyPatch, hosted: HostedPartition, calls: list[str]
) -> None:
    """Count what the manager asks of one partition's state (calling through)."""
    for method in ("apply_registration", "update_metadata"):
        real = getattr(hosted.state, method)

        def counted(*args: object, _real: object = real, _name: str = method) -> object:
            calls.append(_name)
            return _real(*args)  # type: ignore[operator]

        monkeypatch.setattr(hosted.state, method, counted)


async def test_a_commit_touching_one_partition_leaves_the_others_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    assert set(cluster.delta.partitions) == {(A, 0), (A, 1), (B, 0)}
    untouched: list[str] = []
    for key in ((A, 1), (B, 0)):
        _count_calls(monkeypatch, cluster.delta.partitions[TopicIdPartition(*key)], untouched)
    other_before = cluster.states(cluster.delta)[(B, 0)]
    # a-0's ISR shrinks: one partition in the delta.
    cluster.commit([PartitionChangeRecord(0, A, isr=(1, 2))])
    assert cluster.last_changes.partitions == {(A, 0)}
    assert untouched == []
    assert cluster.delta.hosted("a", 0).state.committed_isr == (1, 2)
    assert cluster.states(cluster.delta)[(B, 0)] == other_before
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    # A new leader for a-0 moves its leadership, and only its.
    cluster.leadership_changes.clear()
    cluster.commit([PartitionChangeRecord(0, A, leader=2)])
    assert cluster.leadership_changes == [("a", 0)]
    assert untouched == []
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    await cluster.delta.close()
    await cluster.whole.close()


async def test_broker_and_config_changes_reach_their_dependents_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    of_a: list[str] = []
    of_b: list[str] = []
    _count_calls(monkeypatch, cluster.delta.hosted("a", 0), of_a)
    _count_calls(monkeypatch, cluster.delta.hosted("b", 0), of_b)
    # Topic a's min.insync.replicas: a's partitions see it (rule 9), b's are not asked.
    cluster.commit([ConfigRecord(CONFIG_RESOURCE_TOPIC, "a", MIN_INSYNC_REPLICAS, "2")])
    assert of_a == ["update_metadata"] and of_b == []
    assert cluster.delta.hosted("a", 0).state.effective_min_isr == 2
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    # A fenced broker changes the broker view of every hosted partition (kept without a
    # call into the core by leaders with nothing refused: PartitionState.keep_brokers).
    cluster.commit([FenceBrokerRecord(3, 30)])
    assert cluster.last_changes.brokers == {3}
    assert of_a == ["update_metadata"] and of_b == []
    for topic in ("a", "b"):
        assert cluster.delta.hosted(topic, 0).state._brokers.is_fenced(3)
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    await cluster.delta.close()
    await cluster.whole.close()


async def test_a_change_of_the_brokers_alone_asks_only_the_leaders_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a restarted broker's unfencing walked its 100,000 partitions through their
    cores, though it led none of them. A partition this broker does not lead keeps the new
    broker view and nothing else (PartitionState.keep_brokers), and so does a leader with no
    refused proposal that is not RECOVERING (its followers' ISR eligibility is read from the
    view as they fetch; PartitionState's tests show the leaders that still go to their core);
    a config change still reaches followers."""
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    led: list[str] = []
    followed: list[str] = []
    _count_calls(monkeypatch, cluster.delta.hosted("a", 0), led)
    _count_calls(monkeypatch, cluster.delta.hosted("a", 1), followed)
    cluster.commit([FenceBrokerRecord(3, 30)])
    assert led == [] and followed == []
    assert cluster.delta.hosted("a", 0).state._brokers.is_fenced(3)
    assert cluster.delta.hosted("a", 1).state._brokers.is_fenced(3)
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    cluster.commit([ConfigRecord(CONFIG_RESOURCE_TOPIC, "a", MIN_INSYNC_REPLICAS, "2")])
    assert followed == ["update_metadata"]
    assert cluster.delta.hosted("a", 1).state.effective_min_isr == 2
    # The follower leads next: its core takes the views it kept.
    cluster.commit([PartitionChangeRecord(1, A, leader=1)])
    assert cluster.delta.hosted("a", 1).state.is_under_min_isr is False
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    await cluster.delta.close()
    await cluster.whole.close()


async def test_a_change_applies_its_partitions_by_topic_id_then_partition_without_uuid_compares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: sorting a fencing's 100,000 partitions with UUID's own comparisons (Python
    code) held the loop 0.3-0.5 s in one slice. The order stays `sorted`'s: by topic id, then
    partition."""
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers())

    def no_compare(self: uuid.UUID, other: object) -> bool:
        raise AssertionError("a UUID comparison")

    monkeypatch.setattr(uuid.UUID, "__lt__", no_compare)
    monkeypatch.setattr(uuid.UUID, "__gt__", no_compare)
    cluster.commit(
        [
            TopicRecord("b", B),
            *(PartitionRecord(p, B, replicas=(1, 2), isr=(1, 2), leader=1) for p in (2, 0, 1)),
            TopicRecord("a", A),
            *(PartitionRecord(p, A, replicas=(1, 2), isr=(1, 2), leader=1) for p in (1, 0)),
        ]
    )
    assert cluster.leadership_changes == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2)]
    await cluster.delta.close()
    await cluster.whole.close()


async def test_new_partitions_read_their_topics_min_isr_once_and_no_session_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a restarted broker's first publish opens 100,000 partitions. Each read its
    topic's min.insync.replicas from the image's configs (5% of it), and compared its session
    view before and after, though a partition just opened had no role, leader or session
    before: its leadership moved, always. Per image, each topic's is read once (rule 9 still
    caps it at the replication factor); the new partitions reach the fetchers as before."""
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers())
    reads: list[str] = []
    real_min_isr = MetadataImage.topic_min_insync_replicas

    def counted(image: MetadataImage, name: str) -> int:
        reads.append(name)
        return real_min_isr(image, name)

    views: list[HostedPartition] = []
    real_view = replica_delta._session_view

    def counted_view(hosted: HostedPartition) -> tuple[object, ...]:
        views.append(hosted)
        return real_view(hosted)

    monkeypatch.setattr(MetadataImage, "topic_min_insync_replicas", counted)
    monkeypatch.setattr(replica_delta, "_session_view", counted_view)
    cluster.commit(
        [
            ConfigRecord(CONFIG_RESOURCE_TOPIC, "a", MIN_INSYNC_REPLICAS, "3"),
            TopicRecord("a", A),
            *(PartitionRecord(p, A, replicas=(1, 2), isr=(1, 2), leader=1 + p % 2) for p in range(6)),
        ]
    )
    assert reads == ["a", "a"]  # the delta-fed manager once, the whole-image rescan once
    assert views == []
    assert cluster.leadership_changes == [("a", p) for p in range(6)]
    assert {h.state.effective_min_isr for h in cluster.delta.partitions.values()} == {2}
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    # A hosted one whose leadership moves: compared (its ISR alone is kept: lead_on).
    cluster.commit([PartitionChangeRecord(0, A, leader=2)])
    assert len(views) == 4 and reads == ["a"] * 4  # before and after, in each manager
    await cluster.delta.close()
    await cluster.whole.close()


async def test_a_followers_isr_change_is_kept_without_its_core_and_a_new_leader_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a fencing at 100,000 partitions shrinks the ISR of every partition a broker
    follows, and its return expands them again: a follower that keeps its leader, leader
    epoch and recovery state only records the new ISR (PartitionState.follow_on; Kafka's
    makeFollower), without apply_registration, a PartitionReady or the gauges. The state
    ends as the whole-image rescan's; a leadership change still goes through the core."""
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    calls: list[str] = []
    _count_calls(monkeypatch, cluster.delta.hosted("a", 1), calls)  # led by broker 2
    cluster.commit([PartitionChangeRecord(1, A, isr=(1, 2))])
    cluster.commit([PartitionChangeRecord(1, A, isr=(1, 2, 3))])
    assert calls == []
    state = cluster.delta.hosted("a", 1).state
    assert (state.committed_isr, state.partition_epoch) == ((1, 2, 3), 2)
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    cluster.leadership_changes.clear()
    cluster.commit([PartitionChangeRecord(1, A, leader=3)])
    assert calls == ["apply_registration"] and cluster.leadership_changes == [("a", 1)]
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    await cluster.delta.close()
    await cluster.whole.close()


async def test_a_leaders_isr_change_is_kept_without_its_core_with_its_gauges_and_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a fencing at 100,000 partitions shrinks the ISR of every partition each
    leader leads (33,000-66,000 on one broker): a leader that keeps its leader epoch and
    replicas, with nothing in flight and its HWM at its log end, only records the new ISR
    (PartitionState.lead_on; Kafka's makeLeader with the same leader epoch), without
    apply_registration or a PartitionReady; its ISR gauges follow. The session of the
    follower that left reads it again; the other follower's, still in the ISR, goes on
    skipping it (it read all 33,000 again at every fencing). The state ends as the
    whole-image rescan's."""
    from types import SimpleNamespace

    from broker.core.fetch_session import CachedPartition, FetchSession

    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    hosted = cluster.delta.hosted("a", 0)  # led by broker 1, this one
    calls: list[str] = []
    _count_calls(monkeypatch, hosted, calls)

    def skipping(replica: int) -> FetchSession:
        session = FetchSession(session_id=replica, privileged=True, epoch=1, last_used_ms=0,
                               replica_id=replica)
        cached = CachedPartition(SimpleNamespace(topic_id=A), SimpleNamespace(partition=0))
        session.partitions[hosted.key] = cached
        session.skip(hosted.key, cached)
        hosted.skipped_by(session)
        return session

    stays, leaves = skipping(2), skipping(3)
    counts = cluster.delta.isr_counts
    cluster.leadership_changes.clear()
    cluster.commit([PartitionChangeRecord(0, A, isr=(1, 2))])
    assert calls == [] and cluster.leadership_changes == []
    assert (hosted.state.committed_isr, hosted.state.partition_epoch) == ((1, 2), 1)
    assert hosted.key in counts.under_replicated
    assert hosted.key in leaves.busy and hosted.key not in stays.busy
    assert hosted.idle_in == {2: stays}
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    cluster.commit([PartitionChangeRecord(0, A, isr=(1, 2, 3))])
    assert calls == [] and hosted.key not in counts.under_replicated
    assert hosted.key not in stays.busy
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    cluster.commit([PartitionChangeRecord(0, A, leader=2)])
    assert calls == ["apply_registration"] and cluster.leadership_changes == [("a", 0)]
    assert hosted.key in stays.busy and not hosted.idle_in
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    await cluster.delta.close()
    await cluster.whole.close()


async def test_a_registration_change_syncs_the_log_into_the_core_only_when_it_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fencing at 100,000 partitions changes every registration a broker hosts (issue 35):
    an ISR change of a log the core already knows asks the core nothing about the log; a
    log that moved meanwhile is synced first, so a new leader starts its epoch at its end."""
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    hosted = cluster.delta.hosted("a", 1)  # followed (leader 2)
    synced: list[int] = []
    real = hosted.state.update_local_log

    def counted(log_end_offset: int, *args: object, **kwargs: object) -> object:
        synced.append(log_end_offset)
        return real(log_end_offset, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hosted.state, "update_local_log", counted)
    cluster.commit([PartitionChangeRecord(1, A, isr=(1, 2))])
    assert hosted.state.committed_isr == (1, 2)
    assert synced == []
    hosted.log.append_as_follower(encode_batch(0, 1, 0, [b"x", b"y"]))
    hosted.log.flush()
    cluster.commit([PartitionChangeRecord(1, A, leader=1)])
    assert synced == [2]
    assert hosted.state.leader_epoch_start_offset == 2
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    await cluster.delta.close()
    await cluster.whole.close()


async def test_removed_and_recreated_topics_match_the_whole_image_rescan(tmp_path: Path) -> None:
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    cluster.delta.hosted("a", 0).log.append_as_follower(encode_batch(0, 1, 0, [b"x", b"y"]))
    cluster.leadership_changes.clear()
    cluster.commit([RemoveTopicRecord(B)])
    assert cluster.leadership_changes == [("b", 0)]
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    assert set(cluster.delta.partitions) == {(A, 0), (A, 1)}
    # Removed and re-created under the same name in one commit: a new partition (issue 38),
    # with a new, empty log; the old one's directory waits as `-delete`.
    c = uuid.UUID(int=3)
    cluster.commit(
        [
            RemoveTopicRecord(A),
            TopicRecord("a", c),
            PartitionRecord(0, c, replicas=(1, 3), isr=(1, 3), leader=3, leader_epoch=7),
        ]
    )
    assert cluster.last_changes.removed_topics == {A}
    assert cluster.last_changes.partitions == {(c, 0)}
    recreated = cluster.delta.hosted("a", 0)
    assert recreated.state.leader_id == 3 and recreated.topic_id == c
    assert recreated.log.log_end_offset == 0
    assert set(cluster.delta.partitions) == {(c, 0)}
    # Only a-0 had data: the logs never written had no directory to move aside (issue 35),
    # and the new a-0 gets its directory and partition.metadata with its first append.
    names = sorted(p.name for p in (tmp_path / "delta").iterdir() if p.is_dir())
    assert len(names) == 1 and names[0].startswith("a-0.") and names[0].endswith("-delete"), names
    recreated.log.append_as_follower(encode_batch(0, 7, 0, [b"z"]))
    assert read_partition_metadata(recreated.log.directory) == c
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    await cluster.delta.close()
    await cluster.whole.close()


async def test_a_loaded_snapshot_touches_only_what_changed_and_a_deletion_logs_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 35: a broker that fell behind the log start loads a snapshot; the loader hands
    it as the delta against the broker's image, so a partition the snapshot leaves as it was
    is not touched (session 16's 100,000-partition run spent 58% of a broker's samples
    re-applying every partition). Topic b's deletion stops its partitions with one INFO line
    for the change, each partition's own at DEBUG."""
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    untouched: list[str] = []
    _count_calls(monkeypatch, cluster.delta.hosted("a", 1), untouched)
    later = MetadataLoader()
    later.handle_commit(batches(0, 1, (
        *_brokers(), *_topics(), PartitionChangeRecord(0, A, isr=(1, 2)), RemoveTopicRecord(B),
    )))
    snapshot = batches(0, 1, image_records(later.image))
    cluster.leadership_changes.clear()
    with caplog.at_level(logging.INFO, logger="minikraft.broker"):
        cluster.loader.handle_load_snapshot(100, snapshot)
    assert cluster.last_changes.partitions == {(A, 0)}
    assert cluster.last_changes.removed_topics == {B}
    assert untouched == []
    assert cluster.delta.hosted("a", 0).state.committed_isr == (1, 2)
    assert cluster.leadership_changes == [("b", 0)]
    assert cluster.states(cluster.delta) == cluster.states(cluster.whole)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert sum("Stopped 1 partitions of 1 deleted topics" in line for line in lines) == 1
    assert not any("Partition b-0" in line for line in lines), lines
    await cluster.delta.close()
    await cluster.whole.close()


async def test_a_big_create_hands_its_leadership_changes_to_the_fetchers_in_slices(
    tmp_path: Path,
) -> None:
    # Issue 35: a 5,000-partition create moves 5,000 partitions into the fetchers; the
    # publisher gives the loop back between slices of them as it does while applying.
    replicas, handed, publisher, delta, _ = _big_topic(tmp_path, 1200)
    image = delta.image()
    manifest = LoaderManifest(Provenance.LOG, 1201, 1, 1204)
    most_between_yields = 0
    before = 0
    for _ in publisher.publish_steps(delta, image, manifest):
        most_between_yields = max(most_between_yields, len(handed) - before)
        before = len(handed)
    most_between_yields = max(most_between_yields, len(handed) - before)  # after the last
    assert sorted(handed) == list(range(1200))
    assert most_between_yields <= LEADERSHIP_SLICE_PARTITIONS
    await replicas.close()


def _big_topic(
    tmp_path: Path, count: int
) -> tuple[ReplicaManager, list[int], BrokerMetadataPublisher, MetadataDelta, uuid.UUID]:
    """A broker's manager and publisher (whose fetchers' hand-over lists the partitions in
    `handed`), and a delta creating topic "big" of `count` partitions led by broker 2."""
    replicas = _manager(tmp_path / "logs")
    handed: list[int] = []
    publisher = BrokerMetadataPublisher(replicas, lambda hosted: handed.append(hosted.partition))
    delta = MetadataDelta()
    topic = uuid.UUID(int=3)
    for offset, record in enumerate([
        *_brokers(),
        TopicRecord("big", topic),
        *(
            PartitionRecord(p, topic, replicas=(1, 2, 3), isr=(1, 2, 3), leader=2, leader_epoch=1)
            for p in range(count)
        ),
    ]):
        delta.replay(record, offset)
    return replicas, handed, publisher, delta, topic


def _walked(replicas: ReplicaManager) -> tuple[set[TopicIdPartition], set[TopicIdPartition]]:
    """The ISR gauges' partitions as a walk of every hosted partition finds them."""
    hosted = replicas.partitions
    return (
        {key for key, h in hosted.items() if h.state.is_under_min_isr},
        {key for key, h in hosted.items() if h.state.is_under_replicated},
    )


async def test_the_isr_gauges_are_kept_as_partitions_change(tmp_path: Path) -> None:
    # Issue 35: the gauges read two kept sets instead of walking 100,000 partitions at each
    # scrape; after every kind of change they equal the walk (broker 1 leads a-0 and b-0).
    cluster = _Cluster(tmp_path)
    replicas = cluster.delta
    cluster.commit(_brokers() + _topics())
    assert _walked(replicas) == (set(), set())
    counts = replicas.isr_counts
    steps: list[list[MetadataRecord]] = [
        [PartitionChangeRecord(0, A, isr=(1, 2))],  # a-0 under-replicated
        [ConfigRecord(CONFIG_RESOURCE_TOPIC, "a", MIN_INSYNC_REPLICAS, "3")],  # and under min
        [PartitionChangeRecord(0, A, isr=(1, 2, 3))],  # whole again
        [PartitionChangeRecord(0, B, isr=(1,))],  # b-0 under both
        [PartitionChangeRecord(0, B, leader=2, isr=(2,))],  # no longer led here
        [RemoveTopicRecord(A)],
    ]
    seen: set[TopicIdPartition] = set()
    for records in steps:
        cluster.commit(records)
        assert (counts.under_min_isr, counts.under_replicated) == _walked(replicas)
        seen |= counts.under_replicated
    assert seen == {TopicIdPartition(A, 0), TopicIdPartition(B, 0)}
    await cluster.delta.close()
    await cluster.whole.close()


async def test_partition_states_keep_the_brokers_not_the_images(tmp_path: Path) -> None:
    # Issue 35: each partition state held the image of its last change; an AlterPartition
    # storm kept hundreds of images (their copied topic maps) alive, about a gigabyte a broker
    # at 100,000 partitions. They keep one view of the brokers, a new one when brokers move.
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    for isr in ((1, 2), (1, 2, 3), (1, 3)):
        cluster.commit([PartitionChangeRecord(0, A, isr=isr)])
        cluster.commit([PartitionChangeRecord(1, A, isr=isr)])
    views = {id(h.state._brokers) for h in cluster.delta.partitions.values()}
    assert len(views) == 1
    view = cluster.delta.hosted("a", 0).state._brokers
    assert not isinstance(view, MetadataImage) and view.broker_epoch(3) == 30
    cluster.commit([FenceBrokerRecord(3, 30)])  # the brokers moved: every state sees it
    assert all(h.state._brokers.is_fenced(3) for h in cluster.delta.partitions.values())
    await cluster.delta.close()
    await cluster.whole.close()


class _CountingWalks(dict[TopicIdPartition, HostedPartition]):
    """The hosted map, counting every walk of all its partitions."""

    walks = 0

    def values(self):  # type: ignore[no-untyped-def, override]
        self.walks += 1
        return super().values()

    def items(self):  # type: ignore[no-untyped-def, override]
        self.walks += 1
        return super().items()

    def __iter__(self):  # type: ignore[no-untyped-def, override]
        self.walks += 1
        return super().__iter__()


async def test_new_partitions_find_a_same_name_log_without_walking_the_hosted_ones(
    tmp_path: Path,
) -> None:
    """Issue 35: a change with new partitions built an index of every hosted partition by
    name (66,000 at 100,000, in one slice) to find a log of another topic id holding the new
    one's directory. ReplicaManager keeps that index as partitions come and go: a create
    walks no hosted partition, and a name's new topic id still moves the old log aside."""
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    rm = cluster.delta
    rm.partitions = counting = _CountingWalks(rm.partitions)
    c = uuid.UUID(int=3)
    cluster.commit([
        TopicRecord("c", c),
        PartitionRecord(0, c, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=1),
    ])
    assert counting.walks == 0 and rm.hosted("c", 0).topic_id == c
    # "a" under another id while the old log is still hosted (as after a restart, before the
    # image had caught up): the old a-0 is a stray, moved aside, and the index follows.
    old = rm.hosted("a", 0)
    old.log.append_as_follower(encode_batch(0, 1, 0, [b"x"]))
    d = uuid.UUID(int=4)
    cluster.loader.image = MetadataImage(brokers=cluster.loader.image.brokers)
    cluster.commit([
        TopicRecord("a", d),
        PartitionRecord(0, d, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=1),
    ])
    assert counting.walks == 0
    assert rm.hosted("a", 0).topic_id == d and old.key not in rm.partitions
    assert rm.by_dir_name[("a", 0)] is rm.hosted("a", 0)
    names = sorted(p.name for p in (tmp_path / "delta").iterdir() if p.is_dir())
    assert len(names) == 1 and names[0].startswith("a-0.") and names[0].endswith("-stray")
    await cluster.delta.close()
    await cluster.whole.close()


async def test_a_create_journals_each_slice_of_the_applier_in_one_write(
    tmp_path: Path, journal_writes: list[int]
) -> None:
    """Issue 35: every new partition's RoleChanged was a write of its own (5,000 for a create
    of 5,000). The events of one slice of the applier go out together as it ends, all of
    them, in order."""
    from broker.runtime.event_journal import EventJournal, read_journal
    from broker.runtime.replica_delta import APPLY_SLICE_PARTITIONS

    writes = journal_writes
    (tmp_path / "logs").mkdir()
    journal = EventJournal(tmp_path / "broker.journal")
    rm = ReplicaManager(
        ReplicaSettings(broker_id=LOCAL, log_dirs=[tmp_path / "logs"]), journal, _refuse,
        lambda: 10,
    )
    loader = MetadataLoader()
    loader.install_publishers([BrokerMetadataPublisher(rm, lambda _: None)])
    count = 10 * APPLY_SLICE_PARTITIONS
    records: list[MetadataRecord] = [*_brokers(), TopicRecord("a", A)]
    records += [
        PartitionRecord(p, A, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1 + p % 3, leader_epoch=0)
        for p in range(count)
    ]
    steps = 0
    for _ in loader.commit_steps(batches(0, 1, records)):
        steps += 1
    assert len(rm.partitions) == count
    assert 0 < len(writes) <= count // APPLY_SLICE_PARTITIONS + 1 and len(writes) <= steps
    roles = [e for e in read_journal(journal.path) if type(e).__name__ == "RoleChanged"]
    assert [(e.partition, e.role) for e in roles] == [
        (p, "leader" if p % 3 == 0 else "follower") for p in range(count)
    ]
    await rm.close()
    journal.close()


async def test_a_big_change_hands_each_slices_leadership_changes_as_it_applies_it(
    tmp_path: Path,
) -> None:
    """Issue 35: a follower whose applier took 30 s over the fencing's 100,000 changes added
    the moved partitions to its fetchers only at the end, and the new leaders, which became
    leaders early in their own applier, shrank it for not fetching within
    replica.lag.time.max.ms. The first slice's partitions reach the fetchers before the last
    slice is applied."""
    replicas, handed, publisher, delta, topic = _big_topic(tmp_path, 300)
    steps = publisher.publish_steps(
        delta, delta.image(), LoaderManifest(Provenance.LOG, 301, 1, 304)
    )
    next(steps)
    assert handed and all(replicas.partitions[TopicIdPartition(topic, p)] for p in handed)
    assert len(handed) < 300
    for _ in steps:
        pass
    assert sorted(handed) == list(range(300))
    await replicas.close()


async def test_a_loaded_image_hands_its_leadership_changes_once_applied(
    tmp_path: Path,
) -> None:
    """Issue 35: a restarted broker's first publish (a loaded image, provenance SNAPSHOT) handed
    each slice's new partitions to the fetchers as it applied it, and the fetchers woke at
    each of its 20,000 slices, before it was even registered. As Kafka's
    applyLocalFollowersDelta adds its followers once made, none is handed before the last
    partition is applied; then all, in slices between yields."""
    replicas, handed, publisher, delta, _ = _big_topic(tmp_path, 300)
    steps = publisher.publish_steps(
        delta, delta.image(), LoaderManifest(Provenance.SNAPSHOT, 301, 1, 304)
    )
    most_between_yields = before = 0
    for _ in steps:
        if len(replicas.partitions) < 300:
            assert handed == []
        most_between_yields = max(most_between_yields, len(handed) - before)
        before = len(handed)
    most_between_yields = max(most_between_yields, len(handed) - before)
    assert sorted(handed) == list(range(300))
    assert 0 < most_between_yields <= LEADERSHIP_SLICE_PARTITIONS
    await replicas.close()


async def test_isr_changes_kept_without_the_core_take_a_tenth_of_a_slice_each(
    tmp_path: Path,
) -> None:
    """Issue 35: a fencing at 100,000 partitions changes every one a broker hosts, most of
    them kept without their core (follow_on, lead_on); a yield, a journal write and a clock
    read every APPLY_SLICE_PARTITIONS of them were a tenth of the apply. A kept one counts a
    tenth of one through the core: 300 ISR shrinks are 6 slices, not 60; 300 leadership
    changes still 60."""
    from broker.runtime.replica_delta import APPLY_SLICE_PARTITIONS

    count = 300
    replicas, _, publisher, delta, topic = _big_topic(tmp_path, count)
    for _ in publisher.publish_steps(
        delta, delta.image(), LoaderManifest(Provenance.LOG, count + 4, 1, count + 4)
    ):
        pass
    image = delta.image()

    def slices(records: list[MetadataRecord]) -> int:
        nonlocal image
        change = MetadataDelta(image)
        for offset, record in enumerate(records, image.offset + 1):
            change.replay(record, offset)
        image = change.image()
        manifest = LoaderManifest(Provenance.LOG, image.offset + 1, 1, len(records))
        return sum(1 for _ in publisher.publish_steps(change, image, manifest))

    shrunk = slices([PartitionChangeRecord(p, topic, isr=(1, 2)) for p in range(count)])
    assert shrunk <= count // (10 * APPLY_SLICE_PARTITIONS) + 1
    moved = slices([PartitionChangeRecord(p, topic, leader=1) for p in range(count)])
    assert moved >= count // APPLY_SLICE_PARTITIONS
    assert all(h.state.leader_id == 1 and h.state.committed_isr == (1, 2)
               for h in replicas.partitions.values())
    await replicas.close()


async def test_a_broker_applier_step_holds_the_loop_for_its_budget_and_a_few_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: the brokers' loop-lag p99 was 87-92 ms at 100,000 partitions. A step of the
    applier ran 10 ms of slices and looked at its clock every 50 new partitions (about 6 ms
    of CPU), and other walks ran their own steps in the same loop turn. On a clock of the
    test's own, where opening a partition takes 1 ms, the broker's applier now gives the
    loop back after its 3 ms budget and at most a slice of 5 more: never 10 ms in a row."""
    import asyncio
    import itertools
    from types import SimpleNamespace

    from kafkawire.loop import WALK_BUDGET_S
    from raft.runtime import raft_driver
    from tests.loop_turns import TURN, LoopTurns

    clock = [0.0]
    monkeypatch.setattr(raft_driver, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    rm = _manager(tmp_path / "logs")
    marks: list[str] = []
    real_open = rm.open_partition

    def open_in_1_ms(topic: str, partition: int, topic_id: uuid.UUID) -> HostedPartition:
        clock[0] += 0.001
        marks.append("open")
        return real_open(topic, partition, topic_id)

    monkeypatch.setattr(rm, "open_partition", open_in_1_ms)
    loader = MetadataLoader()
    loader.install_publishers([BrokerMetadataPublisher(rm, lambda _: None)])
    count = 200
    records: list[MetadataRecord] = [*_brokers(), TopicRecord("a", A)]
    records += [
        PartitionRecord(p, A, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1 + p % 3, leader_epoch=0)
        for p in range(count)
    ]
    async with LoopTurns(marks):
        await asyncio.sleep(0)
        await raft_driver.run_steps(loader.commit_steps(batches(0, 1, records)), WALK_BUDGET_S)
    assert len(rm.partitions) == count
    held_ms = max(len(list(run)) for is_open, run in itertools.groupby(marks, lambda m: m != TURN)
                  if is_open)
    assert held_ms <= 8, held_ms
    await rm.close()


async def test_new_partitions_journal_their_topic_id_text_built_once_per_topic(
    tmp_path: Path,
) -> None:
    """Issue 35: every journal event of a partition names its topic id as Kafka prints it,
    and a restarted broker built that text for each of the 100,000 partitions it opened. It
    is built once per topic; each partition's RoleChanged still names its own topic's."""
    replica_manager._topic_id_text.cache_clear()
    cluster = _Cluster(tmp_path)
    cluster.commit(_brokers() + _topics())
    assert replica_manager._topic_id_text.cache_info().misses == 2  # topics a and b
    for key, hosted in cluster.delta.partitions.items():
        assert hosted.state.topic_id == uuid_to_str(key.topic_id)
    await cluster.delta.close()
    await cluster.whole.close()
