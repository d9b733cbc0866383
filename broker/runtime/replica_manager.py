"""The partitions a broker hosts and the data-path handlers (Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch, DeleteRecords). After Kafka's ReplicaManager. Every PartitionReady from the
core is acted on in order (`apply_ready`): persist the leader epoch entry, flush, journal, complete
acks=all waiters, send AlterPartition. Beside it, each with one job: the hosted partition
(hosted_partition), what requests wait on (purgatory), the offset checkpoints
(offset_checkpoints), acting on committed metadata (replica_delta), the effective topic configs
(topic_config_cache), AlterPartition batching (alter_partition_manager), GetReplicaLogInfo
(replica_log_info).

Rules: 17 (fetch carries the broker epoch), 18 (revert handled by the core), 20 (acks=all waits
for the HWM; consumers read below it; the core decides it), 21 (RECOVERING refuses), 22
(diverging epoch answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from broker.core import messages as bm
from broker.core.messages import TopicIdPartition
from broker.core.partition_state import IsrProposal, PartitionReady, PartitionState
from broker.runtime.alter_partition_manager import (
    AlterPartitionManager,
    AlterPartitionOutcome,
    AlterPartitionSender,
)
from broker.runtime.event_journal import EventJournal
from broker.runtime.hosted_partition import HostedPartition
from broker.runtime.isr_counts import IsrCounts
from broker.runtime.kafka_replication import (
    EpochEndOffset,
    OffsetForLeaderPartition,
    epoch_end_offset,
)
from broker.runtime.offset_checkpoints import OffsetCheckpoints
from broker.runtime.partition_log import (
    DELETE_DIR_SUFFIX,
    PartitionLog,
    parse_partition_dir_name,
    read_partition_metadata,
    stray_dir_name,
)
from broker.runtime.purgatory import ProducePurgatory, delayed_fetch, wait_for_change
from broker.runtime.replica_delta import ReplicaDelta
from broker.runtime.replica_log_info import replica_log_info
from broker.runtime.topic_config_cache import LogSettings, TopicConfigCache
from kafkawire import get_replica_log_info as grli
from kafkawire.clock import now_ms
from kafkawire.constants import ACKS_ALL
from kafkawire.errors import Errors, KafkaError
from kafkawire.loop import cancel_and_wait
from kafkawire.slots import slot_constructor
from metadata.metadata_image import MetadataDelta, MetadataImage
from raft.core.replica_key import uuid_to_str
from storage.core.leader_epoch_cache import diverging_epoch
from storage.core.record_validation import RecordValidationError

__all__ = ["HostedPartition", "ReplicaManager", "ReplicaSettings", "now_ms", "wait_for_change"]

log = logging.getLogger("minikraft.broker")

_new_fetch_response = slot_constructor(bm.FetchResponse)

# Partitions the ISR shrink pass walks between two yields (tick_steps).
TICK_SLICE_PARTITIONS = 500

_END = object()  # what next() gives for a generator that ended

# DeleteRecords' offset -1: delete up to the high watermark (Kafka's DeleteRecordsRequest).
DELETE_TO_HIGH_WATERMARK = -1


# Kafka's text of a topic id, which every journal event of a partition names: built once per
# topic, not for each of a restarted broker's 100,000 partitions (issue 35).
_topic_id_text = functools.lru_cache(maxsize=1024)(uuid_to_str)


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    broker_id: int
    log_dirs: list[Path]
    replica_lag_time_max_ms: int = 30_000
    flush_messages: int | None = None
    alter_partition_backoff_ms: int = 100
    # minikraft.log.flush.in.thread: fsync in a worker thread instead of on the loop (group_commit)
    flush_in_thread: bool = False
    # log.preallocate: extend segments ahead of the appends (raft.runtime.segment)
    preallocate: bool = False
    # The node's config file (STATIC_BROKER_CONFIG) and its other, default, properties: the
    # broker levels below a topic's own configs (metadata.config_defs.BrokerLevels).
    static_configs: Mapping[str, str] = field(default_factory=dict)
    node_defaults: Mapping[str, str] = field(default_factory=dict)
    # log.segment.delete.delay.ms (the broker default of file.delete.delay.ms): how long a
    # deleted partition's `-delete` directory stays before it is removed
    file_delete_delay_ms: int = 60_000


class _LeaderPosition(TypedDict):
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    leader_id: int
    leader_epoch: int


def _leader_position(hosted: HostedPartition) -> _LeaderPosition:
    """What a Fetch answer tells of the partition besides its records or divergence (read
    when answering: the follower's fetch may just have moved the HWM)."""
    return {
        "high_watermark": hosted.state.high_watermark,
        "log_start_offset": hosted.log.log_start_offset,
        "log_end_offset": hosted.log.log_end_offset,
        "leader_id": hosted.state.leader_id,
        "leader_epoch": hosted.state.leader_epoch,
    }


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
            settings.broker_id, broker_epoch, send_alter_partition, self._journal_buffered
        )
        # Kafka's TopicIdPartition: a topic deleted and created again under its name is
        # another partition, with another log (issue 38).
        self.partitions: dict[TopicIdPartition, HostedPartition] = {}
        # The same partitions by the directory name each holds, (topic name, partition): a new
        # partition of another topic id under that name moves the old log aside. Kept as
        # partitions come and go (host / unhost): building it for every change with new
        # partitions walked all 66,000 hosted at 100,000 in one slice (issue 35).
        self.by_dir_name: dict[tuple[str, int], HostedPartition] = {}
        self.image = MetadataImage()
        self.produces = ProducePurgatory()
        self.checkpoints = OffsetCheckpoints(settings.log_dirs)
        self.isr_counts = IsrCounts()  # the ISR gauges (broker.runtime.isr_counts)
        self._configs = TopicConfigCache(
            settings.broker_id, settings.static_configs, settings.node_defaults
        )
        self._delta = ReplicaDelta(self, now_ms)
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def file_delete_delay_ms(self) -> int:
        return self.settings.file_delete_delay_ms

    # ---- loading and closing ----

    def load_logs(self) -> int:
        """Open every partition directory found in the log dirs (recovery cuts torn tails).
        A deleted partition's `-delete` directory is removed after file.delete.delay.ms, as
        Kafka's LogManager does at start-up; a `-stray` one is left for an operator; a log
        without a topic id (partition.metadata) is moved aside as stray (Kafka's
        isStrayKraftReplica: no data was appended to it)."""
        count = 0
        for log_dir, recovery_points, high_watermarks, log_start_offsets in self.checkpoints.read():
            if not log_dir.exists():
                continue
            for child in sorted(log_dir.iterdir()):
                if child.is_dir() and child.name.endswith(DELETE_DIR_SUFFIX):
                    self.spawn(self._delta.remove_later(child))
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
                self.host(hosted)
                count += 1
        return count

    def host(self, hosted: HostedPartition) -> None:
        """Serve `hosted` from now on (its directory name must be free: by_dir_name)."""
        self.partitions[hosted.key] = hosted
        self.by_dir_name[(hosted.topic, hosted.partition)] = hosted

    def unhost(self, hosted: HostedPartition) -> None:
        """Forget `hosted` (its log is closed or moved by the caller)."""
        if self.partitions.get(hosted.key) is hosted:
            del self.partitions[hosted.key]
        name = (hosted.topic, hosted.partition)
        if self.by_dir_name.get(name) is hosted:
            del self.by_dir_name[name]

    def open_partition(self, topic: str, partition: int, topic_id: uuid.UUID) -> HostedPartition:
        """A partition this broker just became a replica of: a new log in the first log dir.
        Nothing of it is on disk: load_logs hosted every partition directory it found, and
        the caller moved aside any hosted log holding the name (ReplicaDelta), so the log is
        opened without looking (a stat per partition, 100,000 at scale: issue 35)."""
        return self._open(self.settings.log_dirs[0], topic, partition, topic_id, None, 0, new=True)

    def _open(
        self,
        log_dir: Path,
        topic: str,
        partition: int,
        topic_id: uuid.UUID,
        recovery_point: int | None,
        high_watermark: int,
        log_start_offset: int | None = None,
        *,
        new: bool = False,
    ) -> HostedPartition:
        settings = self.log_settings(topic)
        plog = PartitionLog(
            log_dir,
            topic,
            partition,
            segment_bytes=settings.segment_bytes,
            flush_messages=self.settings.flush_messages,
            preallocate=settings.preallocate,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            topic_id=topic_id,
            lazy=True,  # issue 35: no file, fsync or descriptor until the first append
            new=new,
        )
        plog.retention = settings.retention
        state = PartitionState(
            topic,
            partition,
            self.broker_id,
            replica_lag_time_max_ms=self.settings.replica_lag_time_max_ms,
            log_end_offset=plog.log_end_offset,
            flushed_offset=plog.flushed_offset,
            high_watermark=high_watermark,
            topic_id=_topic_id_text(topic_id),
        )
        return HostedPartition(
            topic, partition, plog, state, topic_id, flush_in_thread=self.settings.flush_in_thread
        )

    async def write_checkpoints_off_loop(self) -> None:
        """The periodic checkpoint (Kafka's replica.high.watermark.checkpoint.interval.ms)."""
        await self.checkpoints.write_off_loop(self.partitions.values())

    def checkpoint_log_start(self, hosted: HostedPartition) -> None:
        """Write the log start offsets of hosted's log dir now (DeleteRecords answers after)."""
        self.checkpoints.write_log_starts(hosted.log.directory.parent, self.partitions.values())

    def flush_all(self) -> None:
        for hosted in self.partitions.values():
            hosted.log.flush()

    async def close(self) -> None:
        await self.alter_partitions.close()
        await cancel_and_wait(*self._tasks)
        self.produces.fail_all(Errors.NOT_LEADER_OR_FOLLOWER)
        for hosted in self.partitions.values():
            hosted.log.close()

    # ---- metadata (broker.runtime.replica_delta) ----

    def apply_image(self, image: MetadataImage) -> list[HostedPartition]:
        """Act on a whole new image (a loaded snapshot): ReplicaDelta.apply_image_steps at
        once. Returns partitions whose leadership changed."""
        changed: list[HostedPartition] = []
        for _ in self._delta.apply_image_steps(image, changed):
            pass
        return changed

    def apply_delta_steps(
        self, delta: MetadataDelta, image: MetadataImage, changed: list[HostedPartition]
    ) -> Iterator[None]:
        """ReplicaDelta.apply_delta_steps, each slice's journal events in one write (a slice
        runs without a yield: nothing else runs before its end)."""
        steps = self._delta.apply_delta_steps(delta, image, changed)
        journal = self.journal
        if journal is None:
            yield from steps
            return
        while True:
            with journal.buffered():
                ended = next(steps, _END) is _END
            if ended:
                return
            yield

    def remove_strays(self) -> int:
        return self._delta.remove_strays()

    def topic_configs(self, topic: str) -> dict[str, str | None]:
        """The topic's effective configs on this broker (broker.runtime.topic_config_cache)."""
        return self._configs.topic_configs(self.image, topic)

    def log_settings(self, topic: str) -> LogSettings:
        """What the topic's logs take from its configs (broker.runtime.topic_config_cache)."""
        return self._configs.log_settings(self.image, topic)

    def sync_log(self, hosted: HostedPartition, ts: int, *, flush_first: bool = False) -> None:
        """Tell the core where the log ends and how far it is flushed (rule 20)."""
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
            self.produces.complete(ack_id, Errors.NONE)
        for ack_id, error in ready.failed_acks:
            self.produces.complete(ack_id, error)
        if ready.alter_partition is not None:
            self._submit_alter_partition(hosted, ready.alter_partition)
        if ready.events or ready.completed_acks:  # what the news is made of
            if ready.news_for_followers:
                hosted.notify()
            elif ready.news_for_fetches:
                hosted.notify_high_watermark()
        if ready.idle_members_left:
            hosted.changed(wake=True)
        if ready.flush_wanted:
            # Recovery waits for the flush (rule 21): report the flushed log and go on.
            self.sync_log(hosted, now_ms())

    def spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _submit_alter_partition(self, hosted: HostedPartition, proposal: IsrProposal) -> None:
        """Submit one proposal to the AlterPartitionManager (batched with the broker's other
        ISR changes); its outcome comes back in a callback of the answer, not a task per
        proposal: a follower back to 66,000 partitions made 66,000 tasks (issue 35)."""
        self.alter_partitions.submit_with(
            hosted.topic_id, hosted.partition, proposal,
            functools.partial(self._alter_partition_outcome, hosted, proposal),
        )

    def _journal_buffered(self) -> contextlib.AbstractContextManager[object]:
        """The journal's events written together until the context ends (an answer's
        outcomes: AlterPartitionManager.submit_with)."""
        journal = self.journal
        return journal.buffered() if journal is not None else contextlib.nullcontext()

    def _alter_partition_outcome(
        self,
        hosted: HostedPartition,
        proposal: IsrProposal,
        outcome: AlterPartitionOutcome,
    ) -> None:
        """Feed a proposal's outcome back to the core (rule 18); a retry goes after
        alter_partition_backoff_ms."""
        error, result = outcome
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "AlterPartition %s for %s-%d (isr %s): %s",
                proposal.kind.value, hosted.topic, hosted.partition, list(proposal.isr),
                (Errors.of(result.error_code) if result is not None else error).name,
            )
        ready = hosted.state.on_alter_partition_response(
            proposal.proposal_id, error, result, now_ms()
        )
        self.isr_counts.track(hosted)
        if ready.alter_partition is not None:
            self.spawn(self._apply_later(hosted, ready))
        else:
            self.apply_ready(hosted, ready)

    async def _apply_later(self, hosted: HostedPartition, ready: PartitionReady) -> None:
        await asyncio.sleep(self.settings.alter_partition_backoff_ms / 1000)
        self.apply_ready(hosted, ready)

    def tick(self) -> None:
        """Periodic: shrink the ISR of followers that fell behind (replica.lag.time.max.ms)."""
        for _ in self.tick_steps():
            pass

    def tick_steps(self) -> Iterator[None]:
        """tick in slices (the broker drives it with raft_driver.run_steps' budget): one walk
        of 33,000 led partitions held a 100,000-partition broker's loop for seconds at the
        machine's load (issue 35)."""
        ts = now_ms()
        for count, hosted in enumerate(list(self.partitions.values()), 1):
            state = hosted.state
            if state.isr_shrink_due(ts) and self.partitions.get(hosted.key) is hosted:
                self.apply_ready(hosted, state.maybe_shrink_isr(ts))
            if count % TICK_SLICE_PARTITIONS == 0:
                yield
                ts = now_ms()

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
        write_config = self._configs.write_config(self.image, request.topic)
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
        self.sync_log(hosted, ts, flush_first=flush_first)
        # A woken follower reads after the grouped fsync (_TURNS_BEFORE_READ) so that one answer
        # carries the whole group: a matter of batching, not of rule 20.
        hosted.notify_appended()
        if flush_first:
            await hosted.commit.sync(group=True)
            ts = now_ms()
            self.sync_log(hosted, ts)
        if request.acks == ACKS_ALL:
            # Kafka's DelayedProduce: answered once the core says the HWM passed the batch.
            error = await self.produces.wait(
                request.timeout_ms,
                lambda ack_id: self.apply_ready(
                    hosted, state.await_high_watermark(ack_id, info.base_offset, info.last_offset, ts)
                ),
                state.cancel_ack,
            )
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

        async def read(first: bool) -> tuple[bm.FetchResponse, bool]:
            response = self._fetch_once(hosted, request, record_progress and first)
            done = bool(
                response.error_code != 0
                or response.records
                or response.diverging_epoch != bm.NO_EPOCH
            )
            return response, done

        return await delayed_fetch(
            read, lambda: (hosted,), request.max_wait_ms, follower=request.replica_id >= 0
        )

    def fetch_now(
        self, request: bm.FetchRequest, *, record_progress: bool = True
    ) -> tuple[HostedPartition | None, bm.FetchResponse]:
        """One partition of a Fetch read at once, with no wait of its own: the request's
        DelayedFetch (KafkaApis) waits for the request as a whole. A coroutine and a
        DelayedFetch per partition cost a follower's session of thousands of partitions more
        than the reads (issue 35). With the hosted partition read (None if there is none),
        which the session's idle check reads next."""
        try:
            hosted = self.hosted(request.topic, request.partition)
        except KafkaError as exc:
            return None, bm.FetchResponse(int(exc.error), exc.message)
        return hosted, self._fetch_once(hosted, request, record_progress)

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
                    diverging_epoch=diverging.leader_epoch,
                    diverging_end_offset=diverging.end_offset,
                    **_leader_position(hosted),
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
        # FetchResponse's fields in order, through its slots (kafkawire.slots): once for each
        # partition of each follower Fetch read (issue 35).
        return _new_fetch_response(
            0, "", state.high_watermark, plog.log_start_offset, plog.log_end_offset, records,
            bm.NO_EPOCH, -1, state.leader_id, state.leader_epoch,
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
        self, topic: str, partition: OffsetForLeaderPartition
    ) -> EpochEndOffset:
        """Where `partition.leader_epoch` ends in this leader's log (Kafka's
        lastOffsetForLeaderEpoch); its error as the answer's."""
        index = int(partition.partition)
        try:
            hosted = self.hosted(topic, index)
        except KafkaError as exc:
            return epoch_end_offset(index, exc.error)
        error = hosted.state.check_leader_request(int(partition.current_leader_epoch))
        if error is not Errors.NONE:
            return epoch_end_offset(index, error)
        answer = hosted.log.end_offset_for_epoch(int(partition.leader_epoch))
        return epoch_end_offset(index, Errors.NONE, answer.leader_epoch, answer.end_offset)

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

    def replica_log_info(
        self, request: grli.GetReplicaLogInfoRequest
    ) -> grli.GetReplicaLogInfoResponse:
        return replica_log_info(self.partitions, self.image, self._broker_epoch(), request)
