"""The partitions a broker hosts: their logs, their PartitionState, and the data-path handlers
(Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, GetReplicaLogInfo). After Kafka's
ReplicaManager. Every PartitionReady from the core is acted on in order (`_apply`): persist the
leader epoch entry, flush, journal, send AlterPartition, complete acks=all waiters.

Rules: 17 (fetch carries the broker epoch), 18 (revert handled by the core), 20 (acks=all waits
for the HWM; consumers read below it), 21 (RECOVERING refuses), 22 (diverging epoch answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from broker.core import messages as bm
from broker.core.leader_epoch_cache import diverging_epoch
from broker.core.log_retention import RetentionConfig
from broker.core.messages import TopicIdPartition
from broker.core.partition_state import (
    ACKS_ALL,
    IsrProposal,
    PartitionReady,
    PartitionState,
    Role,
)
from broker.core.record_validation import RecordValidationError
from broker.core.topic_write_configs import TopicWriteConfig
from broker.runtime.alter_partition_manager import AlterPartitionManager, AlterPartitionSender
from broker.runtime.event_journal import EventJournal
from broker.runtime.group_commit import GroupCommit
from broker.runtime.partition_log import (
    DELETE_DIR_SUFFIX,
    LogDirCheckpoints,
    PartitionLog,
    delete_dir_name,
    parse_partition_dir_name,
    read_partition_metadata,
    stray_dir_name,
)
from kafkawire.errors import Errors, KafkaError
from metadata.config_defs import (
    PREALLOCATE,
    SEGMENT_BYTES,
    BrokerLevels,
    effective_topic_configs,
)
from metadata.metadata_image import (
    CLUSTER_DEFAULT_RESOURCE,
    MetadataDelta,
    MetadataImage,
    TopicImage,
)
from metadata.partition_registration import PartitionRegistration
from metadata.records import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from raft.core.replica_key import uuid_to_str
from raft.runtime.parked_fetches import ParkedFetches, park
from storage.runtime.disk_log import DEFAULT_SEGMENT_BYTES

log = logging.getLogger("minikraft.broker")

# DeleteRecords' offset -1: delete up to the high watermark (Kafka's DeleteRecordsRequest).
DELETE_TO_HIGH_WATERMARK = -1
# Partitions a metadata change applies between two yields of the *_steps generators (issue 35).
APPLY_SLICE_PARTITIONS = 50

def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class HostedPartition:
    topic: str
    partition: int
    log: PartitionLog
    state: PartitionState
    topic_id: uuid.UUID
    registration: PartitionRegistration | None = None
    # Long-polling fetches parked on this partition (wait_for_change): consumers', and
    # followers' (a follower reads to the log end, a consumer to the HWM).
    waiters: ParkedFetches = field(default_factory=ParkedFetches)
    follower_waiters: ParkedFetches = field(default_factory=ParkedFetches)
    flush_in_thread: bool = False
    commit: GroupCommit = field(init=False)

    def __post_init__(self) -> None:
        self.commit = GroupCommit(self.log, in_thread=self.flush_in_thread)

    @property
    def key(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)

    def notify(self) -> None:
        """Wake every long-polling fetch: new data, a truncation, a new leader or log start."""
        self.waiters.wake_all()
        self.follower_waiters.wake_all()

    def notify_appended(self) -> None:
        """A leader's append: news for followers only, as consumers read to the HWM."""
        self.follower_waiters.wake_all()

    def notify_high_watermark(self) -> None:
        """A new HWM: news for consumers only (PartitionReady.news_for_followers)."""
        self.waiters.wake_all()

    def parked(self, follower: bool) -> ParkedFetches:
        return self.follower_waiters if follower else self.waiters


# Loop turns a woken fetch lets pass before it reads the log: produces already read from their
# sockets in this turn append first, so one answer carries them all. Batching only: what counts
# toward the HWM is the core's (broker.core.high_watermark), whenever the follower reads. Measured (BENCHMARKS.md,
# session 5): reading at once made followers fetch smaller batches more often than the msgpack
# tree did (strace: 2.3x its log reads, 1.4x its fsyncs per record); two turns took back about
# 15% of the brokers' CPU per one-record acks=all produce. A leader's grouped fsync runs one
# turn after its appends (group_commit), so the read comes after it too: reading before or
# beside it cost about 40-60% more CPU per record (session 12).
_TURNS_BEFORE_READ = 2


async def wait_for_change(
    partitions: Iterable[HostedPartition], timeout_s: float, *, follower: bool
) -> None:
    """Park until one of the partitions has news for this fetch (a follower's or a consumer's)
    or the timeout passes (one future and one timer however many partitions:
    raft.runtime.parked_fetches), then let _TURNS_BEFORE_READ loop turns pass."""
    await park((hosted.parked(follower) for hosted in partitions), timeout_s)
    for _ in range(_TURNS_BEFORE_READ):
        await asyncio.sleep(0)


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    broker_id: int
    log_dirs: list[Path]
    replica_lag_time_max_ms: int = 30_000
    flush_messages: int | None = None
    alter_partition_backoff_ms: int = 100
    # minikraft.log.flush.in.thread: fsync in a worker thread instead of on the loop (group_commit)
    flush_in_thread: bool = False
    # log.preallocate: extend segments ahead of the appends (storage.runtime.segment)
    preallocate: bool = False
    # The node's config file (STATIC_BROKER_CONFIG) and its other, default, properties: the
    # broker levels below a topic's own configs (metadata.config_defs.BrokerLevels).
    static_configs: Mapping[str, str] = field(default_factory=dict)
    node_defaults: Mapping[str, str] = field(default_factory=dict)
    # log.segment.delete.delay.ms (the broker default of file.delete.delay.ms): how long a
    # deleted partition's `-delete` directory stays before it is removed
    file_delete_delay_ms: int = 60_000


class ReplicaManager:
    def __init__(
        self,
        settings: ReplicaSettings,
        journal: EventJournal | None,
        send_alter_partition: AlterPartitionSender,
        broker_epoch: Callable[[], int],
    ) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.journal = journal
        self._broker_epoch = broker_epoch
        self.alter_partitions = AlterPartitionManager(
            settings.broker_id, broker_epoch, send_alter_partition
        )
        # Kafka's TopicIdPartition: a topic deleted and created again under its name is
        # another partition, with another log (issue 38).
        self.partitions: dict[TopicIdPartition, HostedPartition] = {}
        self.image = MetadataImage()
        self._acks: dict[int, asyncio.Future[Errors]] = {}
        self._ack_ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._checkpoints = [LogDirCheckpoints(d) for d in settings.log_dirs]
        self._checkpoint_write: asyncio.Future[None] | None = None
        self._written_log_starts: dict[Path, dict[tuple[str, int], int]] = {}
        self._write_configs: dict[str, TopicWriteConfig] = {}
        self._write_configs_image: MetadataImage | None = None
        self._topic_configs: dict[str, dict[str, str | None]] = {}
        self._topic_configs_image: MetadataImage | None = None

    # ---- loading and closing ----

    def load_logs(self) -> int:
        """Open every partition directory found in the log dirs (recovery cuts torn tails).
        A deleted partition's `-delete` directory is removed after file.delete.delay.ms, as
        Kafka's LogManager does at start-up; a `-stray` one is left for an operator; a log
        without a topic id (partition.metadata) is moved aside as stray (Kafka's
        isStrayKraftReplica: no data was appended to it)."""
        count = 0
        for log_dir, checkpoints in zip(self.settings.log_dirs, self._checkpoints, strict=True):
            recovery_points = checkpoints.read_recovery_points()
            high_watermarks = checkpoints.read_high_watermarks()
            log_start_offsets = checkpoints.read_log_start_offsets()
            if not log_dir.exists():
                continue
            for child in sorted(log_dir.iterdir()):
                if child.is_dir() and child.name.endswith(DELETE_DIR_SUFFIX):
                    self._spawn(self._remove_later(child))
                    continue
                parsed = parse_partition_dir_name(child.name) if child.is_dir() else None
                if parsed is None:
                    continue
                topic, partition = parsed
                topic_id = read_partition_metadata(child)
                if topic_id is None:
                    target = child.parent / stray_dir_name(topic, partition)
                    child.rename(target)
                    log.warning(
                        "Log %s has no topic id (partition.metadata): moved aside as stray to %s",
                        child, target.name,
                    )
                    continue
                hosted = self._open(
                    log_dir,
                    topic,
                    partition,
                    topic_id,
                    recovery_points.get(parsed),
                    high_watermarks.get(parsed, 0),
                    log_start_offsets.get(parsed),
                )
                self.partitions[hosted.key] = hosted
                count += 1
        return count

    def _open(
        self,
        log_dir: Path,
        topic: str,
        partition: int,
        topic_id: uuid.UUID,
        recovery_point: int | None,
        high_watermark: int,
        log_start_offset: int | None = None,
    ) -> HostedPartition:
        configs = self.topic_configs(topic)
        plog = PartitionLog(
            log_dir,
            topic,
            partition,
            segment_bytes=int(configs[SEGMENT_BYTES] or DEFAULT_SEGMENT_BYTES),
            flush_messages=self.settings.flush_messages,
            preallocate=configs[PREALLOCATE] == "true",
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            topic_id=topic_id,
            lazy=True,  # issue 35: no file, fsync or descriptor until the first append
        )
        plog.retention = RetentionConfig.from_configs(configs)
        state = PartitionState(
            topic,
            partition,
            self.broker_id,
            replica_lag_time_max_ms=self.settings.replica_lag_time_max_ms,
            log_end_offset=plog.log_end_offset,
            flushed_offset=plog.flushed_offset,
            high_watermark=high_watermark,
            topic_id=uuid_to_str(topic_id),
        )
        return HostedPartition(
            topic, partition, plog, state, topic_id, flush_in_thread=self.settings.flush_in_thread
        )

    def write_checkpoints(self) -> None:
        """Every checkpoint now, on the caller's thread (shutdown: after checkpoints_idle)."""
        self._offset_checkpoints()()
        for log_dir, checkpoints in zip(self.settings.log_dirs, self._checkpoints, strict=True):
            mine = [h for h in self.partitions.values() if h.log.directory.parent == log_dir]
            self._write_log_start_offsets(checkpoints, mine)

    async def write_checkpoints_off_loop(self) -> None:
        """The periodic checkpoint (Kafka's replica.high.watermark.checkpoint.interval.ms): the
        offsets are read here, on the loop, and the files (two fsyncs and a directory fsync
        each) are written in a worker thread, so produce and fetch keep being served
        (issue 17). Log start offsets are written on the loop, and only when they moved: they
        change on DeleteRecords, which writes them itself, so no thread races that write."""
        await self.checkpoints_idle()
        write = self._offset_checkpoints()
        self._checkpoint_write = asyncio.get_running_loop().run_in_executor(None, write)
        await asyncio.shield(self._checkpoint_write)
        for log_dir, checkpoints in zip(self.settings.log_dirs, self._checkpoints, strict=True):
            mine = [h for h in self.partitions.values() if h.log.directory.parent == log_dir]
            starts = {(h.topic, h.partition): h.log.log_start_offset for h in mine}
            if starts != self._written_log_starts.get(checkpoints.log_dir):
                self._write_log_start_offsets(checkpoints, mine)

    async def checkpoints_idle(self) -> None:
        """Wait for a checkpoint write in a worker thread, if one runs (its errors were logged
        by the tick that started it)."""
        pending = self._checkpoint_write
        if pending is not None and not pending.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(pending)

    def _offset_checkpoints(self) -> Callable[[], None]:
        """The recovery points and HWMs as of now, and the function that writes them."""
        snapshot = []
        for log_dir, checkpoints in zip(self.settings.log_dirs, self._checkpoints, strict=True):
            mine = [h for h in self.partitions.values() if h.log.directory.parent == log_dir]
            recovery = {(h.topic, h.partition): h.log.flushed_offset for h in mine}
            watermarks = {(h.topic, h.partition): h.state.high_watermark for h in mine}
            snapshot.append((checkpoints, recovery, watermarks))

        def write() -> None:
            for checkpoints, recovery, watermarks in snapshot:
                checkpoints.write_recovery_points(recovery)
                checkpoints.write_high_watermarks(watermarks)

        return write

    def _write_log_start_offsets(
        self, checkpoints: LogDirCheckpoints, hosted: list[HostedPartition]
    ) -> None:
        starts = {(h.topic, h.partition): h.log.log_start_offset for h in hosted}
        checkpoints.write_log_start_offsets(starts)
        self._written_log_starts[checkpoints.log_dir] = starts

    def checkpoint_log_start(self, hosted: HostedPartition) -> None:
        """Write the log start offsets of hosted's log dir now (DeleteRecords answers after)."""
        log_dir = hosted.log.directory.parent
        for directory, checkpoints in zip(self.settings.log_dirs, self._checkpoints, strict=True):
            if directory == log_dir:
                mine = [h for h in self.partitions.values() if h.log.directory.parent == log_dir]
                self._write_log_start_offsets(checkpoints, mine)

    def flush_all(self) -> None:
        for hosted in self.partitions.values():
            hosted.log.flush()

    async def close(self) -> None:
        await self.alter_partitions.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for future in self._acks.values():
            if not future.done():
                future.set_result(Errors.NOT_LEADER_OR_FOLLOWER)
        for hosted in self.partitions.values():
            hosted.log.close()

    # ---- metadata ----

    def apply_image(self, image: MetadataImage) -> list[HostedPartition]:
        """Act on a whole new image (a loaded snapshot). A topic the previous image had and
        this one lacks was deleted (Kafka's TopicsDelta.finishSnapshot): its partitions are
        deleted. A hosted log of a topic id neither image has only stops being served: the
        image may be older than the log, as after a restart from a local snapshot, and
        remove_strays decides once caught up. Then every partition of the image. Returns
        partitions whose leadership changed."""
        changed: list[HostedPartition] = []
        for _ in self.apply_image_steps(image, changed):
            pass
        return changed

    def apply_image_steps(
        self, image: MetadataImage, changed: list[HostedPartition]
    ) -> Iterator[None]:
        """apply_image, yielding every APPLY_SLICE_PARTITIONS partitions (issue 35)."""
        previous, self.image = self.image, image
        ts = now_ms()
        for count, (key, hosted) in enumerate(list(self.partitions.items()), 1):
            if count % APPLY_SLICE_PARTITIONS == 0:
                yield
                ts = now_ms()
            if key.topic_id in image.topics and key.partition in image.topics[key.topic_id].partitions:
                continue
            if key.topic_id in previous.topics and key.topic_id not in image.topics:
                self._delete_partition(hosted, image, ts, changed)
            else:
                self._stop_if_serving(hosted, image, ts, changed)
        count = 0
        for topic in image.topics.values():
            for partition_id, registration in topic.partitions.items():
                if self._apply_partition(image, topic, partition_id, registration, ts, changed):
                    key = TopicIdPartition(topic.topic_id, partition_id)
                    self._reconfigure_log(self.partitions[key])
                count += 1
                if count % APPLY_SLICE_PARTITIONS == 0:
                    yield
                    ts = now_ms()

    def apply_delta(self, delta: MetadataDelta, image: MetadataImage) -> list[HostedPartition]:
        """Act on one committed change (Kafka's ReplicaManager.applyDelta), with work in
        proportion to it: the partitions of the topics it removes first (stopped, their logs
        deleted), then the partitions it names, and the broker view and min ISR (rule 9) of
        the hosted partitions whose brokers or configs it moved. A loaded snapshot replaced
        everything: apply_image. Returns partitions whose leadership changed."""
        changed: list[HostedPartition] = []
        for _ in self.apply_delta_steps(delta, image, changed):
            pass
        return changed

    def apply_delta_steps(
        self, delta: MetadataDelta, image: MetadataImage, changed: list[HostedPartition]
    ) -> Iterator[None]:
        """apply_delta, yielding every APPLY_SLICE_PARTITIONS partitions so the broker's loop
        serves fetches and heartbeats while it opens 10,000 new partitions (issue 35)."""
        if delta.full:
            yield from self.apply_image_steps(image, changed)
            return
        self.image = image
        ts = now_ms()
        if delta.removed_topics:
            for key in [k for k in self.partitions if k.topic_id in delta.removed_topics]:
                self._delete_partition(self.partitions[key], image, ts, changed)
        applied: set[TopicIdPartition] = set()
        for count, (topic_id, partition_id) in enumerate(sorted(delta.partitions), 1):
            topic = image.topics.get(topic_id)
            registration = None if topic is None else topic.partitions.get(partition_id)
            if topic is None or registration is None:
                continue  # created and removed within this change
            self._apply_partition(image, topic, partition_id, registration, ts, changed)
            applied.add(TopicIdPartition(topic_id, partition_id))
            if count % APPLY_SLICE_PARTITIONS == 0:
                yield
                ts = now_ms()
        for count, hosted in enumerate(self._metadata_dependents(delta, image), 1):
            if delta.configs:
                self._reconfigure_log(hosted)
            if count % APPLY_SLICE_PARTITIONS == 0:
                yield
                ts = now_ms()
            if hosted.key in applied:
                continue
            topic = image.topics.get(hosted.topic_id)
            if topic is not None and hosted.partition in topic.partitions:
                min_isr = image.effective_min_isr(topic.topic_id, hosted.partition)
                self.apply_ready(hosted, hosted.state.update_metadata(min_isr, image, ts))

    def _reconfigure_log(self, hosted: HostedPartition) -> None:
        configs = self.topic_configs(hosted.topic)
        hosted.log.reconfigure(
            int(configs[SEGMENT_BYTES] or DEFAULT_SEGMENT_BYTES), configs[PREALLOCATE] == "true"
        )
        hosted.log.retention = RetentionConfig.from_configs(configs)

    def _metadata_dependents(
        self, delta: MetadataDelta, image: MetadataImage
    ) -> Iterable[HostedPartition]:
        """Hosted partitions whose state reads what the change moved besides their own
        registration: every one when a broker moved (ISR eligibility and rule 18's refusals
        read broker epochs and fencing) or a broker config (the cluster default
        min.insync.replicas); those of a topic whose config moved."""
        if delta.brokers or any(kind == CONFIG_RESOURCE_BROKER for kind, _ in delta.configs):
            return list(self.partitions.values())
        dependents: list[HostedPartition] = []
        for kind, name in delta.configs:
            topic = image.topics_by_name.get(name) if kind == CONFIG_RESOURCE_TOPIC else None
            if topic is None:
                continue
            for partition_id in topic.partitions:
                hosted = self.partitions.get(TopicIdPartition(topic.topic_id, partition_id))
                if hosted is not None:
                    dependents.append(hosted)
        return dependents

    def _apply_partition(
        self,
        image: MetadataImage,
        topic: TopicImage,
        partition_id: int,
        registration: PartitionRegistration,
        ts: int,
        changed: list[HostedPartition],
    ) -> bool:
        """One partition of the image: open it if this broker became a replica, apply a new
        registration (appending to `changed` if its leadership moved), else refresh the broker
        view and min ISR. False if this broker neither hosts nor replicates it."""
        key = TopicIdPartition(topic.topic_id, partition_id)
        hosted = self.partitions.get(key)
        if hosted is None and self.broker_id not in registration.replicas:
            return False
        if hosted is None:
            self._move_aside_same_name(topic.name, partition_id, image, ts, changed)
            hosted = self._open(
                self.settings.log_dirs[0], topic.name, partition_id, topic.topic_id, None, 0
            )
            self.partitions[key] = hosted
        min_isr = image.effective_min_isr(topic.topic_id, partition_id)
        if registration != hosted.registration:
            before = (hosted.state.role, hosted.state.leader_id, hosted.state.leader_epoch)
            hosted.registration = registration
            self._sync_log(hosted, ts)
            self.apply_ready(hosted, hosted.state.apply_registration(registration, min_isr, image, ts))
            after = (hosted.state.role, hosted.state.leader_id, hosted.state.leader_epoch)
            if before != after:
                changed.append(hosted)
        else:
            self.apply_ready(hosted, hosted.state.update_metadata(min_isr, image, ts))
        return True

    def _move_aside_same_name(
        self, topic: str, partition: int, image: MetadataImage, ts: int,
        changed: list[HostedPartition],
    ) -> None:
        """A hosted log of another topic id holds the directory the new partition needs: the
        image no longer has that id under this name (Kafka's findStrayReplicas: "this
        partition now exists with topic ID ... not ..."), so it is a stray, moved aside."""
        for hosted in list(self.partitions.values()):
            if hosted.topic == topic and hosted.partition == partition:
                self._remove_partition(hosted, image, ts, changed, stray=True)

    def remove_strays(self) -> int:
        """Once caught up with the metadata log (the first heartbeat answer that says so):
        every hosted log whose topic id the image lacks, or whose replicas no longer name
        this broker, is a stray (Kafka's LogManager.isStrayKraftReplica) and is moved aside
        as `<topic>-<p>.<id>-stray`, kept for an operator as Kafka does. Returns how many."""
        ts = now_ms()
        changed: list[HostedPartition] = []
        strays = []
        for key, hosted in self.partitions.items():
            registration = self.image.partition(key.topic_id, key.partition)
            if registration is None or self.broker_id not in registration.replicas:
                strays.append(hosted)
        for hosted in strays:
            self._remove_partition(hosted, self.image, ts, changed, stray=True)
        return len(strays)

    def _delete_partition(
        self, hosted: HostedPartition, image: MetadataImage, ts: int,
        changed: list[HostedPartition],
    ) -> None:
        """The topic was deleted: stop serving, forget the partition and delete its log
        (Kafka's stopPartitions with delete and LogManager.asyncDelete)."""
        self._remove_partition(hosted, image, ts, changed, stray=False)

    def _remove_partition(
        self, hosted: HostedPartition, image: MetadataImage, ts: int,
        changed: list[HostedPartition], *, stray: bool,
    ) -> None:
        """Stop serving (pending acks fail, parked fetches wake, the fetcher stops through
        `changed`), forget the partition, and rename its directory at once, so a partition
        of the same name can be created in its place: `-delete` (removed after
        file.delete.delay.ms) or `-stray` (kept). Its files are closed once its fsync in
        flight is done."""
        self._stop_if_serving(hosted, image, ts, changed)
        self.partitions.pop(hosted.key, None)
        name = (stray_dir_name if stray else delete_dir_name)(hosted.topic, hosted.partition)
        path = hosted.log.rename_dir(name)
        log.info(
            "Partition %s-%d (topic id %s) %s: log moved to %s",
            hosted.topic, hosted.partition, uuid_to_str(hosted.topic_id),
            "is a stray" if stray else "deleted", path.name,
        )
        self._spawn(self._close_removed(hosted, None if stray else path))

    async def _close_removed(self, hosted: HostedPartition, delete: Path | None) -> None:
        await hosted.commit.idle()
        hosted.log.close(take_snapshot=False)
        if delete is not None:
            await self._remove_later(delete)

    async def _remove_later(self, path: Path) -> None:
        """Kafka's LogManager.deleteLogs: a `-delete` directory goes after the delay."""
        await asyncio.sleep(self.settings.file_delete_delay_ms / 1000)
        await asyncio.to_thread(shutil.rmtree, path, True)
        log.info("Deleted log %s", path)

    def _stop_if_serving(
        self, hosted: HostedPartition, image: MetadataImage, ts: int, changed: list[HostedPartition]
    ) -> None:
        """The partition is gone from the image: stop serving (the data stays on disk)."""
        if hosted.state.role is Role.NONE:
            return
        stopped = PartitionRegistration(replicas=(), isr=(), leader_epoch=1 << 30)
        self.apply_ready(hosted, hosted.state.apply_registration(stopped, 1, image, ts))
        changed.append(hosted)

    def _sync_log(self, hosted: HostedPartition, ts: int, *, flush_first: bool = False) -> None:
        plog = hosted.log
        self.apply_ready(
            hosted,
            hosted.state.update_local_log(
                plog.log_end_offset, plog.flushed_offset, ts, flush_first=flush_first
            ),
        )

    # ---- acting on the core's answers ----

    def apply_ready(self, hosted: HostedPartition, ready: PartitionReady) -> None:
        if ready.assign_leader_epoch is not None:
            entry = ready.assign_leader_epoch
            hosted.log.assign_leader_epoch(entry.epoch, entry.start_offset)
        if ready.flush_wanted:
            hosted.log.flush()
        if ready.events and self.journal is not None:
            self.journal.append(ready.events)
        for ack_id in ready.completed_acks:
            self._finish_ack(ack_id, Errors.NONE)
        for ack_id, error in ready.failed_acks:
            self._finish_ack(ack_id, error)
        if ready.alter_partition is not None:
            self._spawn(self._alter_partition(hosted, ready.alter_partition))
        if ready.news_for_followers:
            hosted.notify()
        elif ready.news_for_fetches:
            hosted.notify_high_watermark()
        if ready.flush_wanted:
            # Recovery waits for the flush (rule 21): report the flushed log and go on.
            self._sync_log(hosted, now_ms())

    def _finish_ack(self, ack_id: int, error: Errors) -> None:
        future = self._acks.pop(ack_id, None)
        if future is not None and not future.done():
            future.set_result(error)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alter_partition(self, hosted: HostedPartition, proposal: IsrProposal) -> None:
        """Submit one proposal to the AlterPartitionManager (batched with the broker's other
        ISR changes) and feed the outcome back (rule 18)."""
        error, result = await self.alter_partitions.submit(
            hosted.topic_id, hosted.partition, proposal
        )
        log.debug(
            "AlterPartition %s for %s-%d (isr %s): %s",
            proposal.kind.value, hosted.topic, hosted.partition, list(proposal.isr),
            (result.error if result is not None else error).name,
        )
        ready = hosted.state.on_alter_partition_response(
            proposal.proposal_id, error, result, now_ms()
        )
        if ready.alter_partition is not None:
            await asyncio.sleep(self.settings.alter_partition_backoff_ms / 1000)
        self.apply_ready(hosted, ready)

    def tick(self) -> None:
        """Periodic: shrink the ISR of followers that fell behind (replica.lag.time.max.ms)."""
        ts = now_ms()
        for hosted in self.partitions.values():
            if hosted.state.role is Role.LEADER:
                self.apply_ready(hosted, hosted.state.maybe_shrink_isr(ts))

    # ---- lookups ----

    def hosted_by_name(self, topic: str, partition: int) -> HostedPartition | None:
        """The hosted partition of the topic now named `topic` in the image, if any."""
        image_topic = self.image.topics_by_name.get(topic)
        if image_topic is None:
            return None
        return self.partitions.get(TopicIdPartition(image_topic.topic_id, partition))

    def hosted(self, topic: str, partition: int) -> HostedPartition:
        """The partition named in a request: UNKNOWN_TOPIC_OR_PARTITION if the image lacks it,
        NOT_LEADER_OR_FOLLOWER if this broker does not host it."""
        image_topic = self.image.topics_by_name.get(topic)
        if image_topic is None or partition not in image_topic.partitions:
            raise KafkaError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic or partition {topic}-{partition}"
            )
        hosted = self.partitions.get(TopicIdPartition(image_topic.topic_id, partition))
        if hosted is None:
            raise KafkaError(
                Errors.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.broker_id} does not host {topic}-{partition}",
            )
        return hosted

    # ---- Produce ----

    async def produce(self, request: bm.ProduceRequest) -> bm.ProduceResponse:
        try:
            hosted = self.hosted(request.topic, request.partition)
        except KafkaError as exc:
            return bm.ProduceResponse(int(exc.error), exc.message)
        state = hosted.state
        error = state.check_produce(request.acks)
        if error is not Errors.NONE:
            return self._produce_error(hosted, error, f"produce to {state.topic}-{state.partition}")
        write_config = self.write_config(request.topic)
        if len(request.records) > write_config.max_message_bytes * 4:
            return self._produce_error(
                hosted,
                Errors.RECORD_LIST_TOO_LARGE,
                f"{len(request.records)} bytes of records exceed the request limit",
            )
        try:
            info = hosted.log.append_as_leader(
                request.records,
                state.leader_epoch,
                compacted=write_config.compacted,
                write_config=write_config,
                now_ms=now_ms(),
            )
        except RecordValidationError as exc:
            # Kafka answers the log start offset and every record's error with it.
            return bm.ProduceResponse(
                int(exc.error),
                exc.message,
                leader_id=state.leader_id,
                leader_epoch=state.leader_epoch,
                log_start_offset=hosted.log.log_start_offset,
                record_errors=tuple((e.batch_index, e.message) for e in exc.record_errors),
            )
        except KafkaError as exc:
            return self._produce_error(hosted, exc.error, exc.message)
        ts = now_ms()
        flush_first = hosted.log.flush_due(request.acks)
        # Until it is flushed, the core does not count this append toward the HWM (rule 20).
        self._sync_log(hosted, ts, flush_first=flush_first)
        # A woken follower reads after the grouped fsync (_TURNS_BEFORE_READ) so that one answer
        # carries the whole group: a matter of batching, not of rule 20.
        hosted.notify_appended()
        if flush_first:
            await hosted.commit.sync(group=True)
            ts = now_ms()
            self._sync_log(hosted, ts)
        if request.acks == ACKS_ALL:
            ack_id = next(self._ack_ids)
            loop = asyncio.get_running_loop()
            future: asyncio.Future[Errors] = loop.create_future()
            self._acks[ack_id] = future
            # The request's timeout answers REQUEST_TIMED_OUT through the same future (one
            # timer per produce; wait_for and shield would add a task and two futures).
            timer = loop.call_later(
                request.timeout_ms / 1000, self._finish_ack, ack_id, Errors.REQUEST_TIMED_OUT
            )
            self.apply_ready(
                hosted, state.await_high_watermark(ack_id, info.base_offset, info.last_offset, ts)
            )
            try:
                error = await future
            finally:
                timer.cancel()
                self._acks.pop(ack_id, None)
            if error is Errors.REQUEST_TIMED_OUT:
                state.cancel_ack(ack_id)
            if error is not Errors.NONE:
                return self._produce_error(hosted, error, "acks=all not satisfied")
        return bm.ProduceResponse(
            base_offset=info.base_offset,
            log_end_offset=hosted.log.log_end_offset,
            high_watermark=state.high_watermark,
            leader_id=state.leader_id,
            leader_epoch=state.leader_epoch,
            log_append_time_ms=info.log_append_time_ms,
        )

    def topic_configs(self, topic: str) -> dict[str, str | None]:
        """The topic's effective configs on this broker: its own, then this broker's and the
        cluster's dynamic ones, the config file, the defaults (config_defs). Cached per topic
        until the metadata moves: opening a topic's 10,000 partitions asks 10,000 times."""
        if self._topic_configs_image is not self.image:
            self._topic_configs = {}
            self._topic_configs_image = self.image
        found = self._topic_configs.get(topic)
        if found is None:
            found = self._topic_configs[topic] = self._compute_topic_configs(topic)
        return dict(found)

    def _compute_topic_configs(self, topic: str) -> dict[str, str | None]:
        image = self.image
        levels = BrokerLevels(
            per_broker=image.configs.get((CONFIG_RESOURCE_BROKER, str(self.broker_id)), {}),
            cluster=image.configs.get((CONFIG_RESOURCE_BROKER, CLUSTER_DEFAULT_RESOURCE), {}),
            static=self.settings.static_configs,
            node_defaults=self.settings.node_defaults,
        )
        return effective_topic_configs(image.configs.get((CONFIG_RESOURCE_TOPIC, topic), {}), levels)

    def write_config(self, topic: str) -> TopicWriteConfig:
        """The topic's data configs for the write path, cached until the metadata moves."""
        if self._write_configs_image is not self.image:
            self._write_configs = {}
            self._write_configs_image = self.image
        found = self._write_configs.get(topic)
        if found is None:
            found = TopicWriteConfig.from_configs(self.topic_configs(topic))
            self._write_configs[topic] = found
        return found

    @staticmethod
    def _produce_error(hosted: HostedPartition, error: Errors, message: str) -> bm.ProduceResponse:
        return bm.ProduceResponse(
            int(error),
            message,
            leader_id=hosted.state.leader_id,
            leader_epoch=hosted.state.leader_epoch,
        )

    # ---- Fetch ----

    async def fetch(
        self, request: bm.FetchRequest, *, record_progress: bool = True
    ) -> bm.FetchResponse:
        """`record_progress=False` for a re-read while the same request long-polls: a
        follower's position counts once per request (Kafka's updateFollowerFetchState)."""
        try:
            hosted = self.hosted(request.topic, request.partition)
        except KafkaError as exc:
            return bm.FetchResponse(int(exc.error), exc.message)
        deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
        first = record_progress
        while True:
            response = self._fetch_once(hosted, request, first)
            first = False
            remaining = deadline - time.monotonic()
            if response.error_code != 0 or response.records or remaining <= 0:
                return response
            if response.diverging_epoch != bm.NO_EPOCH:
                return response
            await wait_for_change((hosted,), remaining, follower=request.replica_id >= 0)

    def _fetch_once(
        self, hosted: HostedPartition, request: bm.FetchRequest, record_progress: bool
    ) -> bm.FetchResponse:
        state = hosted.state
        error = state.check_fetch(request.replica_id, request.current_leader_epoch)
        if error is not Errors.NONE:
            return bm.FetchResponse(
                int(error),
                f"fetch from {state.topic}-{state.partition} on broker {self.broker_id}",
                leader_id=state.leader_id,
                leader_epoch=state.leader_epoch,
            )
        plog = hosted.log
        if request.replica_id >= 0:
            diverging = diverging_epoch(
                plog.epoch_cache, request.fetch_offset, request.last_fetched_epoch, plog.log_end_offset
            )
            if diverging is not None:
                return bm.FetchResponse(
                    high_watermark=state.high_watermark,
                    log_start_offset=plog.log_start_offset,
                    log_end_offset=plog.log_end_offset,
                    diverging_epoch=diverging.leader_epoch,
                    diverging_end_offset=diverging.end_offset,
                    leader_id=state.leader_id,
                    leader_epoch=state.leader_epoch,
                )
            if record_progress:
                # Rule 17: the follower's fetched broker epoch is what an expansion carries.
                self.apply_ready(
                    hosted,
                    state.on_follower_fetch(
                        request.replica_id, request.fetch_offset, request.replica_epoch, now_ms()
                    ),
                )
        upper = state.fetch_upper_bound(request.replica_id)
        try:
            records = plog.read(
                request.fetch_offset, request.max_bytes, upper,
                min_one_message=request.min_one_message,
            )
        except KafkaError as exc:
            return bm.FetchResponse(int(exc.error), exc.message, high_watermark=state.high_watermark)
        return bm.FetchResponse(
            high_watermark=state.high_watermark,
            log_start_offset=plog.log_start_offset,
            log_end_offset=plog.log_end_offset,
            records=records,
            leader_id=state.leader_id,
            leader_epoch=state.leader_epoch,
        )

    # ---- ListOffsets / OffsetForLeaderEpoch ----

    def list_offsets(self, request: bm.ListOffsetsRequest) -> bm.ListOffsetsResponse:
        hosted = self.hosted(request.topic, request.partition)
        error = hosted.state.check_leader_request(request.current_leader_epoch)
        if error is not Errors.NONE:
            raise KafkaError(error, f"list offsets of {request.topic}-{request.partition}")
        if request.timestamp == bm.EARLIEST_TIMESTAMP:
            offset = hosted.log.log_start_offset
        elif request.isolation_committed:
            offset = hosted.state.high_watermark
            # Kafka's Partition.fetchOffsetForTimestamp: a new leader whose HWM is still below
            # the start of its epoch (it cannot move while the ISR is below min ISR, rule 9)
            # does not know the committed end yet; clients ask again.
            epoch_start = hosted.state.leader_epoch_start_offset
            if epoch_start > offset:
                raise KafkaError(
                    Errors.OFFSET_NOT_AVAILABLE,
                    f"{request.topic}-{request.partition}: the high watermark ({offset}) is "
                    f"lagging behind the start offset of leader epoch "
                    f"{hosted.state.leader_epoch} ({epoch_start})",
                )
        else:
            offset = hosted.log.log_end_offset
        return bm.ListOffsetsResponse(offset=offset, leader_epoch=hosted.state.leader_epoch)

    def offset_for_leader_epoch(
        self, request: bm.OffsetForLeaderEpochRequest
    ) -> bm.OffsetForLeaderEpochResponse:
        hosted = self.hosted(request.topic, request.partition)
        error = hosted.state.check_leader_request(request.current_leader_epoch)
        if error is not Errors.NONE:
            raise KafkaError(error, f"offset for leader epoch of {request.topic}-{request.partition}")
        answer = hosted.log.end_offset_for_epoch(request.leader_epoch)
        return bm.OffsetForLeaderEpochResponse(
            leader_epoch=answer.leader_epoch, end_offset=answer.end_offset
        )

    # ---- DeleteRecords (KIP-107) ----

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """The leader advances the log start offset to `offset` (-1: the HWM) and checkpoints it
        before answering; returns the new low watermark (the log start offset). Beyond the HWM
        is OFFSET_OUT_OF_RANGE; a RECOVERING partition refuses as other leader requests do
        (rule 21). Followers follow through Fetch's LogStartOffset."""
        hosted = self.hosted(topic, partition)
        error = hosted.state.check_leader_request()
        if error is not Errors.NONE:
            raise KafkaError(error, f"delete records of {topic}-{partition}")
        high_watermark = hosted.state.high_watermark
        target = high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if target < 0 or target > high_watermark:
            raise KafkaError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"cannot delete {topic}-{partition} below {offset}: the high watermark is "
                f"{high_watermark}",
            )
        if hosted.log.advance_log_start_offset(target):
            self.checkpoint_log_start(hosted)
            hosted.notify()
        return hosted.log.log_start_offset

    def follow_log_start_offset(self, hosted: HostedPartition, leader_log_start_offset: int) -> None:
        """A follower moves its log start offset up to its leader's (Fetch's LogStartOffset), as
        Kafka's follower does, never past its own log end."""
        if hosted.log.advance_log_start_offset(leader_log_start_offset):
            self.checkpoint_log_start(hosted)

    # ---- GetReplicaLogInfo (seed 004) ----

    def replica_log_info(self, request: bm.GetReplicaLogInfoRequest) -> bm.GetReplicaLogInfoResponse:
        wanted: list[tuple[uuid.UUID, int]] = []
        if request.topic_partitions is None:
            wanted.extend(self.partitions)
        else:
            for tp in request.topic_partitions:
                wanted.extend((tp.topic_id, p) for p in tp.partitions)
        limit = bm.GET_REPLICA_LOG_INFO_MAX_PARTITIONS
        has_more = len(wanted) > limit
        by_topic: dict[uuid.UUID, list[bm.PartitionLogInfo]] = {}
        for topic_id, partition in wanted[:limit]:
            by_topic.setdefault(topic_id, []).append(self._log_info(topic_id, partition))
        return bm.GetReplicaLogInfoResponse(
            broker_epoch=self._broker_epoch(),
            has_more_data=has_more,
            topic_partition_log_info_list=[
                bm.TopicPartitionLogInfo(topic_id, infos) for topic_id, infos in by_topic.items()
            ],
        )

    def _log_info(self, topic_id: uuid.UUID, partition: int) -> bm.PartitionLogInfo:
        topic = self.image.topics.get(topic_id)
        registration = None if topic is None else topic.partitions.get(partition)
        if topic is None or registration is None:
            return bm.PartitionLogInfo(partition, error_code=int(Errors.UNKNOWN_TOPIC_OR_PARTITION))
        hosted = self.partitions.get(TopicIdPartition(topic_id, partition))
        if hosted is None:
            return bm.PartitionLogInfo(
                partition,
                partition_leader_epoch=registration.leader_epoch,
                error_code=int(Errors.NOT_LEADER_OR_FOLLOWER),
            )
        return bm.PartitionLogInfo(
            partition,
            partition_leader_epoch=registration.leader_epoch,
            last_written_leader_epoch=hosted.log.latest_epoch(),
            log_end_offset=hosted.log.log_end_offset,
        )
