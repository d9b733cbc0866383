"""A broker acting on committed metadata for its partitions (Kafka's ReplicaManager.applyDelta
and LogManager's stray and deleted logs): open the partitions it became a replica of, hand each
new registration to its core, refresh the broker view and min ISR (rule 9) of the partitions a
change touches, stop serving and move aside what was deleted or is a stray.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Protocol

from broker.core.messages import TopicIdPartition
from broker.core.partition_state import PartitionReady, Role
from broker.runtime.hosted_partition import HostedPartition
from broker.runtime.isr_counts import IsrCounts
from broker.runtime.partition_log import delete_dir_name, stray_dir_name
from broker.runtime.topic_config_cache import LogSettings
from metadata.metadata_image import BrokersView, MetadataDelta, MetadataImage, TopicImage
from metadata.partition_registration import PartitionRegistration
from metadata.records import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from raft.core.replica_key import uuid_to_str

log = logging.getLogger("minikraft.broker")

# Partitions a metadata change applies between two yields of the *_steps generators, where the
# runtime looks at its clock (issue 35): a new partition is about 120 us of CPU on an idle core,
# so 50 made a step overrun a 3 ms budget by 6 ms (twice that with the core shared). Each slice's
# journal events go out in one write (ReplicaManager.apply_delta_steps).
APPLY_SLICE_PARTITIONS = 5
# What a partition counts for in a slice (ReplicaDelta._apply_partition's answer): a slice is
# APPLY_SLICE_PARTITIONS partitions through their core, or ten times as many kept without it
# (PartitionState.holds / follow_on / lead_on, a few us each). A fencing at 100,000 partitions
# changes every one, most of them kept: a yield, a journal write and a clock read every 5 were
# a tenth of its apply (issue 35).
_NOT_HOSTED = 0
_KEPT = 1
_APPLIED = 10
_SLICE_WORK = APPLY_SLICE_PARTITIONS * _APPLIED
# Partitions a change passes over with next to nothing to do (PartitionState.keep_brokers, or
# applied already) between two yields: a yield and a clock read every 5 was most of the cost.
SKIP_SLICE_PARTITIONS = 500


class ReplicaHost(Protocol):
    """What the metadata application needs of the ReplicaManager."""

    broker_id: int
    partitions: dict[TopicIdPartition, HostedPartition]
    by_dir_name: dict[tuple[str, int], HostedPartition]
    image: MetadataImage
    isr_counts: IsrCounts

    @property
    def file_delete_delay_ms(self) -> int: ...

    def open_partition(
        self, topic: str, partition: int, topic_id: uuid.UUID
    ) -> HostedPartition: ...

    def host(self, hosted: HostedPartition) -> None: ...

    def unhost(self, hosted: HostedPartition) -> None: ...

    def log_settings(self, topic: str) -> LogSettings: ...

    def apply_ready(self, hosted: HostedPartition, ready: PartitionReady) -> None: ...

    def sync_log(self, hosted: HostedPartition, ts: int) -> None: ...

    def spawn(self, coro: Awaitable[None]) -> None: ...


def _log_moved(hosted: HostedPartition) -> bool:
    """The log's end or flushed offset is not what the core was last told: a registration
    change syncs them first. Most changes (an ISR shrink or expansion, a leadership moving
    off a follower's empty log) find them equal and skip the sync's two calls into the core:
    a fencing at 100,000 partitions changes every one (issue 35)."""
    plog, state = hosted.log, hosted.state
    end = plog.log_end_offset
    return state.log_end_offset != end or state.flushed_offset != min(plog.flushed_offset, end)


def _topic_then_partition(key: tuple[uuid.UUID, int]) -> tuple[int, int]:
    """A change's partitions in the order `sorted` gives them (a topic id's order is its
    int's), compared as ints: UUID's comparisons are Python code, and sorting the fencing's
    100,000 partitions with them was 0.3-0.5 s of CPU in one slice of the loop (issue 35)."""
    return (key[0].int, key[1])


def _session_view(hosted: HostedPartition) -> tuple[object, ...]:
    """What a follower session's skipping of the partition depends on besides its log
    (PartitionState.follower_idle): the leadership first (a change moves the fetchers), then
    the committed ISR and the replicas."""
    state = hosted.state
    return (state.role, state.leader_id, state.leader_epoch, state.committed_isr, state.replicas)


class ReplicaDelta:
    def __init__(self, host: ReplicaHost, now_ms: Callable[[], int]) -> None:
        self._host = host
        self._now_ms = now_ms
        self._view: tuple[MetadataImage, BrokersView] | None = None
        # Each topic's min.insync.replicas in the image being applied (`_min_isr`).
        self._topic_min_isrs: tuple[MetadataImage | None, dict[str, int]] = (None, {})

    def _min_isr(
        self, image: MetadataImage, topic: TopicImage, registration: PartitionRegistration
    ) -> int:
        """Rule 9, as image.effective_min_isr gives it, the topic's min.insync.replicas (its
        config, else the cluster default) read once per image and topic: reading it for each
        of a restarted broker's 100,000 partitions was 5% of its first publish (issue 35)."""
        cached_for, by_topic = self._topic_min_isrs
        if cached_for is not image:
            by_topic = {}
            self._topic_min_isrs = (image, by_topic)
        topic_min = by_topic.get(topic.name)
        if topic_min is None:
            topic_min = by_topic[topic.name] = image.topic_min_insync_replicas(topic.name)
        return min(topic_min, len(registration.replicas))

    def _brokers(self, image: MetadataImage) -> BrokersView:
        """The broker view partition states keep: an image's brokers alone, one object while
        the brokers do not change, so no state keeps a whole image (and its copied topic
        maps) alive after the image moved on (issue 35)."""
        view = self._view
        if view is not None and view[0] is image:
            return view[1]
        if view is None or view[1].brokers != image.brokers:
            view = (image, BrokersView(image.brokers))
        else:
            view = (image, view[1])
        self._view = view
        return view[1]

    def apply_image_steps(
        self, image: MetadataImage, changed: list[HostedPartition]
    ) -> Iterator[None]:
        """Act on a whole new image (a loaded snapshot), yielding every APPLY_SLICE_PARTITIONS
        partitions (issue 35). A topic the previous image had and this one lacks was deleted
        (Kafka's TopicsDelta.finishSnapshot): its partitions are deleted. A hosted log of a
        topic id neither image has only stops being served: the image may be older than the
        log, as after a restart from a local snapshot, and remove_strays decides once caught
        up. Then every partition of the image. `changed` gets partitions whose leadership
        changed."""
        host = self._host
        previous, host.image = host.image, image
        ts = self._now_ms()
        for count, (key, hosted) in enumerate(list(host.partitions.items()), 1):
            if count % APPLY_SLICE_PARTITIONS == 0:
                yield
                ts = self._now_ms()
            if key.topic_id in image.topics and key.partition in image.topics[key.topic_id].partitions:
                continue
            if key.topic_id in previous.topics and key.topic_id not in image.topics:
                self._remove_partition(hosted, image, ts, changed, stray=False)
            else:
                self._stop_if_serving(hosted, image, ts, changed)
        count = 0
        for topic in image.topics.values():
            for partition_id, registration in topic.partitions.items():
                if self._apply_partition(image, topic, partition_id, registration, ts, changed):
                    key = TopicIdPartition(topic.topic_id, partition_id)
                    self._reconfigure_log(host.partitions[key])
                count += 1
                if count % APPLY_SLICE_PARTITIONS == 0:
                    yield
                    ts = self._now_ms()

    def apply_delta_steps(
        self, delta: MetadataDelta, image: MetadataImage, changed: list[HostedPartition]
    ) -> Iterator[None]:
        """Act on one committed change (Kafka's ReplicaManager.applyDelta), with work in
        proportion to it: the partitions of the topics it removes first (stopped, their logs
        deleted), then the partitions it names, and the broker view and min ISR (rule 9) of
        the hosted partitions whose brokers or configs it moved. A loaded snapshot comes as
        the delta against the image it replaced (metadata.loader.snapshot_delta_steps).
        Yields every APPLY_SLICE_PARTITIONS partitions so the broker's loop serves fetches
        and heartbeats while it opens 10,000 new partitions (issue 35)."""
        host = self._host
        host.image = image
        ts = self._now_ms()
        if delta.removed_topics:
            removed = [k for k in host.partitions if k.topic_id in delta.removed_topics]
            for count, key in enumerate(removed, 1):
                hosted = host.partitions.get(key)
                if hosted is not None:
                    self._remove_partition(hosted, image, ts, changed, stray=False)
                if count % APPLY_SLICE_PARTITIONS == 0:
                    yield
                    ts = self._now_ms()
            if removed:
                # One line per change; each partition's own is at DEBUG (issue 35).
                log.info(
                    "Stopped %d partitions of %d deleted topics: their logs are deleted after "
                    "file.delete.delay.ms", len(removed), len(delta.removed_topics),
                )
        applied: set[TopicIdPartition] = set()
        ordered = sorted(delta.partitions, key=_topic_then_partition)
        work = 0
        for topic_id, partition_id in ordered:
            topic = image.topics.get(topic_id)
            registration = None if topic is None else topic.partitions.get(partition_id)
            if topic is None or registration is None:
                continue  # created and removed within this change
            work += self._apply_partition(
                image, topic, partition_id, registration, ts, changed, delta.brokers
            ) or _KEPT
            applied.add(TopicIdPartition(topic_id, partition_id))
            if work >= _SLICE_WORK:
                work = 0
                yield
                ts = self._now_ms()
        view = self._brokers(image)
        full = skipped = 0
        for hosted in self._metadata_dependents(delta, image):
            if delta.configs:
                self._reconfigure_log(hosted)
            elif hosted.key in applied or hosted.state.keep_brokers(view):
                # Applied above, or not led here: a change of the brokers alone leaves it
                # nothing to do but keep the new view. A broker's unfencing walked all its
                # 100,000 partitions through its core (issue 35).
                skipped += 1
                if skipped % SKIP_SLICE_PARTITIONS == 0:
                    yield
                    ts = self._now_ms()
                continue
            full += 1
            if full % APPLY_SLICE_PARTITIONS == 0:
                yield
                ts = self._now_ms()
            if hosted.key in applied:
                continue
            topic = image.topics.get(hosted.topic_id)
            current = None if topic is None else topic.partitions.get(hosted.partition)
            if topic is not None and current is not None:
                min_isr = self._min_isr(image, topic, current)
                host.apply_ready(
                    hosted, hosted.state.update_metadata(min_isr, view, ts, delta.brokers)
                )
                host.isr_counts.track(hosted)

    def remove_strays(self) -> int:
        """Once caught up with the metadata log (the first heartbeat answer that says so):
        every hosted log whose topic id the image lacks, or whose replicas no longer name
        this broker, is a stray (Kafka's LogManager.isStrayKraftReplica) and is moved aside
        as `<topic>-<p>.<id>-stray`, kept for an operator as Kafka does. Returns how many."""
        host = self._host
        ts = self._now_ms()
        changed: list[HostedPartition] = []
        strays = []
        for key, hosted in host.partitions.items():
            registration = host.image.partition(key.topic_id, key.partition)
            if registration is None or host.broker_id not in registration.replicas:
                strays.append(hosted)
        for hosted in strays:
            self._remove_partition(hosted, host.image, ts, changed, stray=True)
        return len(strays)

    async def remove_later(self, path: Path) -> None:
        """Kafka's LogManager.deleteLogs: a `-delete` directory goes after the delay."""
        await asyncio.sleep(self._host.file_delete_delay_ms / 1000)
        await asyncio.to_thread(shutil.rmtree, path, True)
        log.debug("Deleted log %s", path)  # per partition: DEBUG (issue 35)

    def _reconfigure_log(self, hosted: HostedPartition) -> None:
        settings = self._host.log_settings(hosted.topic)
        hosted.log.reconfigure(settings.segment_bytes, settings.preallocate)
        hosted.log.retention = settings.retention

    def _metadata_dependents(
        self, delta: MetadataDelta, image: MetadataImage
    ) -> Iterable[HostedPartition]:
        """Hosted partitions whose state reads what the change moved besides their own
        registration: every one when a broker moved (ISR eligibility and rule 18's refusals
        read broker epochs and fencing) or a broker config (the cluster default
        min.insync.replicas); those of a topic whose config moved."""
        partitions = self._host.partitions
        if delta.brokers or any(kind == CONFIG_RESOURCE_BROKER for kind, _ in delta.configs):
            return list(partitions.values())
        dependents: list[HostedPartition] = []
        for kind, name in delta.configs:
            topic = image.topics_by_name.get(name) if kind == CONFIG_RESOURCE_TOPIC else None
            if topic is None:
                continue
            for partition_id in topic.partitions:
                hosted = partitions.get(TopicIdPartition(topic.topic_id, partition_id))
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
        touched_brokers: AbstractSet[int] = frozenset(),
    ) -> int:
        """One partition of the image: open it if this broker became a replica, apply a new
        registration (appending to `changed` if its leadership moved), else refresh the broker
        view and min ISR. Returns the share of a slice it took: _NOT_HOSTED (0) if this broker
        neither hosts nor replicates it, _KEPT if its core kept the registration without a
        PartitionReady, else _APPLIED. `touched_brokers`: the brokers the change's
        registration records named (rule 18)."""
        host = self._host
        key = TopicIdPartition(topic.topic_id, partition_id)
        hosted = host.partitions.get(key)
        if hosted is None and host.broker_id not in registration.replicas:
            return _NOT_HOSTED
        opened = hosted is None
        if hosted is None:
            self._move_aside_same_name(topic.name, partition_id, image, ts, changed)
            hosted = host.open_partition(topic.name, partition_id, topic.topic_id)
            host.host(hosted)
        min_isr = self._min_isr(image, topic, registration)
        if registration != hosted.registration:
            state = hosted.state
            log_moved = not opened and _log_moved(hosted)
            if not opened and not log_moved:
                brokers = self._brokers(image)
                if not touched_brokers and state.holds(registration, min_isr, brokers):
                    # rule 18's refusals read touched_brokers. The leader's own ISR change,
                    # already applied from its AlterPartition answer: nothing to hand the
                    # core, no session to wake, no gauge moved.
                    hosted.registration = registration
                    return _KEPT
                isr, replicas = state.committed_isr, state.replicas
                leads = False
                if state.follow_on(registration, min_isr, brokers) or (
                    leads := state.lead_on(registration, min_isr, brokers)
                ):
                    # A follower's or a leader's ISR or replicas moved, its leadership did
                    # not: kept by its core without a PartitionReady. A leader's ISR gauges
                    # follow, and the sessions of the members that left read it again (the
                    # others' still skip it as idle); a follower's sessions read it again.
                    hosted.registration = registration
                    if leads:
                        host.isr_counts.track(hosted)
                        hosted.left_isr(r for r in isr if r not in registration.isr)
                    elif registration.isr != isr or registration.replicas != replicas:
                        hosted.changed(wake=True)
                    return _KEPT
            # A partition just opened had no role, leader or session: its leadership moved.
            before = None if opened else _session_view(hosted)
            hosted.registration = registration
            if log_moved:
                # The core's view of the log first: a new leader starts its epoch at the log
                # end (a new state starts from it: ReplicaManager._open).
                host.sync_log(hosted, ts)
            host.apply_ready(
                hosted,
                state.apply_registration(
                    registration, min_isr, self._brokers(image), ts, touched_brokers
                ),
            )
            host.isr_counts.track(hosted)
            if before is None:
                changed.append(hosted)
                return _APPLIED
            after = _session_view(hosted)
            if before != after:
                # An ISR change alone journals nothing: follower sessions skipping the
                # partition read it again (an expansion waits on a follower's fetch being
                # read). Not for the change a leader learned from its AlterPartition answer:
                # a follower back to 66,000 partitions had each read again (issue 35).
                hosted.changed(wake=True)
            if before[:3] != after[:3]:
                changed.append(hosted)
        else:
            host.apply_ready(
                hosted,
                hosted.state.update_metadata(min_isr, self._brokers(image), ts, touched_brokers),
            )
            host.isr_counts.track(hosted)
        return _APPLIED

    def _move_aside_same_name(
        self, topic: str, partition: int, image: MetadataImage, ts: int,
        changed: list[HostedPartition],
    ) -> None:
        """A hosted log of another topic id holds the directory the new partition needs: the
        image no longer has that id under this name (Kafka's findStrayReplicas: "this
        partition now exists with topic ID ... not ..."), so it is a stray, moved aside."""
        hosted = self._host.by_dir_name.get((topic, partition))
        if hosted is not None:
            self._remove_partition(hosted, image, ts, changed, stray=True)

    def _remove_partition(
        self, hosted: HostedPartition, image: MetadataImage, ts: int,
        changed: list[HostedPartition], *, stray: bool,
    ) -> None:
        """Stop serving (pending acks fail, parked fetches wake, the fetcher stops through
        `changed`), forget the partition, and rename its directory at once, so a partition
        of the same name can be created in its place: `-delete` (the topic was deleted: Kafka's
        stopPartitions with delete and LogManager.asyncDelete; removed after
        file.delete.delay.ms) or `-stray` (kept). Its files are closed once its fsync in
        flight is done."""
        self._stop_if_serving(hosted, image, ts, changed)
        self._host.unhost(hosted)
        self._host.isr_counts.forget(hosted.key)
        name = (stray_dir_name if stray else delete_dir_name)(hosted.topic, hosted.partition)
        on_disk = hosted.log.has_directory  # a lazy log never written has nothing to move
        path = hosted.log.rename_dir(name)
        # Per partition at DEBUG, but a stray (rare: a restart's leftovers) at INFO.
        log.log(
            logging.INFO if stray else logging.DEBUG,
            "Partition %s-%d (topic id %s) %s: log moved to %s",
            hosted.topic, hosted.partition, uuid_to_str(hosted.topic_id),
            "is a stray" if stray else "deleted", path.name if on_disk else "(none on disk)",
        )
        self._host.spawn(self._close_removed(hosted, None if stray or not on_disk else path))

    async def _close_removed(self, hosted: HostedPartition, delete: Path | None) -> None:
        await hosted.commit.idle()
        hosted.log.close(take_snapshot=False)
        if delete is not None:
            await self.remove_later(delete)

    def _stop_if_serving(
        self, hosted: HostedPartition, image: MetadataImage, ts: int, changed: list[HostedPartition]
    ) -> None:
        """The partition is gone from the image: stop serving (the data stays on disk)."""
        if hosted.state.role is Role.NONE:
            return
        stopped = PartitionRegistration(replicas=(), isr=(), leader_epoch=1 << 30)
        self._host.apply_ready(
            hosted, hosted.state.apply_registration(stopped, 1, self._brokers(image), ts)
        )
        self._host.isr_counts.track(hosted)
        changed.append(hosted)
