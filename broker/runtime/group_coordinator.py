"""The broker's group coordinator (after Kafka's GroupCoordinatorService): one
GroupCoordinatorShard per `__consumer_offsets` partition this broker leads.

The coordinator of a group is the leader of partition abs(hash(group id)) % partitions (Java's
String.hashCode, so a group lands where Kafka would put it). A shard is loaded from its
partition's log (to the log end, as Kafka loads) the first time a request needs it after this
broker became leader, and dropped when leadership goes. Every group and offset record goes
through the broker's own produce path with acks=all: a commit is answered once the high
watermark passed it, so a new coordinator on another replica has it (INVARIANTS rules 20, 23).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from broker.core import messages as bm
from broker.core.group_coordinator_shard import (
    GroupConfig,
    GroupCoordinatorShard,
    JoinRequest,
    JoinResult,
    ShardResult,
    StoreGroup,
    StoreStaticMember,
    SyncResult,
)
from broker.core.partition_state import Role
from broker.runtime.broker_context import BrokerContext
from kafkawire.clock import now_ms
from kafkawire.constants import ACKS_ALL
from kafkawire.create_topics import NewTopic
from kafkawire.errors import Errors, KafkaError
from kafkawire.group_coordinator_records import (
    Key,
    UnknownRecordVersionError,
    Value,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kafkawire.loop import cancel_and_wait
from storage.core.record_batch import Record, encode_batch, iter_batches

log = logging.getLogger("minikraft.broker.groups")

OFFSETS_TOPIC = "__consumer_offsets"
TICK_INTERVAL_S = 0.1

R = TypeVar("R", JoinResult, SyncResult)
LOAD_READ_BYTES = 1 << 20
# Kafka's broker settings, sized for a laptop cluster (Kafka: 50 partitions, RF 3).
GROUP_DEFAULTS = {
    "offsets.topic.num.partitions": "5",
    "offsets.topic.replication.factor": "3",
    "offsets.commit.timeout.ms": "5000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.initial.rebalance.delay.ms": "3000",
    "offset.metadata.max.bytes": "4096",
}


def java_string_hash(text: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partitions


def produce_error_to_coordinator_error(error: Errors) -> Errors:
    """How Kafka's coordinator answers a failed write of its records."""
    if error in (
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.REQUEST_TIMED_OUT,
    ):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR, Errors.FENCED_LEADER_EPOCH):
        return Errors.NOT_COORDINATOR
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.UNKNOWN_SERVER_ERROR
    return error


@dataclass
class LoadedShard:
    partition: int
    leader_epoch: int
    shard: GroupCoordinatorShard


@dataclass(frozen=True, slots=True)
class Coordinator:
    node_id: int
    host: str
    port: int


class GroupCoordinator:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        config = broker.config
        for key, value in GROUP_DEFAULTS.items():
            config.props.setdefault(key, value)
        self.group_config = GroupConfig(
            min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
        )
        self.shards: dict[int, LoadedShard] = {}
        self._joins: dict[tuple[str, str], asyncio.Future[JoinResult]] = {}
        self._syncs: dict[tuple[str, str], asyncio.Future[SyncResult]] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._background: set[asyncio.Future[None]] = set()
        self._creating = False

    # ---- lifecycle ----

    def ensure_started(self) -> None:
        if self._ticker is None:
            self._ticker = asyncio.ensure_future(self._tick_loop())

    async def stop(self) -> None:
        await cancel_and_wait(self._ticker)
        self._unload_all(Errors.NOT_COORDINATOR)

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_S)
            try:
                self._tick()
            except Exception:
                log.exception("Group coordinator tick failed")

    def _tick(self) -> None:
        ts = now_ms()
        for partition in list(self.shards):
            loaded = self._shard(partition)
            if loaded is not None:
                self._dispatch(loaded, loaded.shard.tick(ts))

    # ---- which partition, which broker ----

    def offsets_partitions(self) -> int:
        topic = self.broker.metadata.image.topics_by_name.get(OFFSETS_TOPIC)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self.broker.config.get_int("offsets.topic.num.partitions")

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.offsets_partitions())

    def find_coordinator(self, group_id: str, listener: str | None = None) -> Coordinator:
        """The leader of the group's offsets partition; creates `__consumer_offsets` the first
        time (COORDINATOR_NOT_AVAILABLE meanwhile: clients retry)."""
        image = self.broker.metadata.image
        topic = image.topics_by_name.get(OFFSETS_TOPIC)
        if topic is None:
            self._create_offsets_topic()
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"creating {OFFSETS_TOPIC}")
        registration = topic.partitions.get(self.partition_of(group_id))
        if registration is None or registration.leader < 0:
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, "offsets partition has no leader")
        broker = image.brokers.get(registration.leader)
        if broker is not None and not broker.fenced:
            for endpoint in broker.endpoints:
                if endpoint.name == (listener or self.broker.listener.name):
                    return Coordinator(registration.leader, endpoint.host, endpoint.port)
        raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, "the coordinator is not reachable")

    def _create_offsets_topic(self) -> None:
        if self._creating:
            return
        self._creating = True
        task = asyncio.ensure_future(self._create_offsets_topic_now())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _create_offsets_topic_now(self) -> None:
        config = self.broker.config
        live = sum(1 for b in self.broker.metadata.image.brokers.values() if not b.fenced)
        replication_factor = max(1, min(config.get_int("offsets.topic.replication.factor"), live))
        partitions = config.get_int("offsets.topic.num.partitions")
        topic = NewTopic(OFFSETS_TOPIC, partitions, replication_factor, {"cleanup.policy": "compact"})
        try:
            outcome = await self.broker.kafka_apis.admin.create_topics([topic])
            log.info(
                "Creating %s (%d partitions, replication factor %d): %s",
                OFFSETS_TOPIC, partitions, replication_factor, outcome.get(OFFSETS_TOPIC),
            )
        except KafkaError as exc:
            log.info("Creating %s failed: %s", OFFSETS_TOPIC, exc)
        finally:
            self._creating = False

    # ---- shards: load on leadership, drop when it goes ----

    def shard_for(self, group_id: str) -> LoadedShard:
        """The loaded shard of the group's partition, or NOT_COORDINATOR."""
        partition = self.partition_of(group_id)
        loaded = self._shard(partition)
        if loaded is None:
            raise KafkaError(
                Errors.NOT_COORDINATOR,
                f"broker {self.broker.broker_id} does not lead {OFFSETS_TOPIC}-{partition}",
            )
        return loaded

    def loaded_shards(self) -> list[LoadedShard]:
        return [s for p in sorted(self.shards) if (s := self._shard(p)) is not None]

    def _leader_epoch(self, partition: int) -> int | None:
        hosted = self.broker.replicas.hosted_by_name(OFFSETS_TOPIC, partition)
        if hosted is None or hosted.state.role is not Role.LEADER:
            return None
        return hosted.state.leader_epoch

    def _shard(self, partition: int) -> LoadedShard | None:
        epoch = self._leader_epoch(partition)
        loaded = self.shards.get(partition)
        if loaded is not None and loaded.leader_epoch == epoch:
            return loaded
        if loaded is not None:
            self._unload(loaded, Errors.NOT_COORDINATOR)
        if epoch is None:
            return None
        self.ensure_started()
        loaded = self._load(partition, epoch)
        self.shards[partition] = loaded
        return loaded

    def _load(self, partition: int, leader_epoch: int) -> LoadedShard:
        """Replay the partition from its start to its log end: offsets and group metadata."""
        hosted = self.broker.replicas.hosted(OFFSETS_TOPIC, partition)
        shard = GroupCoordinatorShard(self.group_config)
        plog = hosted.log
        offset, end = plog.log_start_offset, plog.log_end_offset
        ts = now_ms()
        records = 0
        while offset < end:
            raw = plog.read(offset, LOAD_READ_BYTES, end)
            if not raw:
                break
            for batch, _position in iter_batches(raw):
                for index, record in enumerate(batch.records):
                    if record.key is None:
                        continue
                    try:
                        key = decode_key(record.key)
                        value = decode_value(key, record.value)
                    except (UnknownRecordVersionError, ValueError) as exc:
                        log.warning("Skipping a record of %s-%d: %s", OFFSETS_TOPIC, partition, exc)
                        continue
                    shard.replay(key, value, batch.offset_of(index), ts)
                    records += 1
                offset = batch.next_offset
        log.info(
            "Loaded %s-%d (leader epoch %d): %d records, %d groups",
            OFFSETS_TOPIC, partition, leader_epoch, records, len(shard.groups),
        )
        return LoadedShard(partition, leader_epoch, shard)

    def _unload(self, loaded: LoadedShard, error: Errors) -> None:
        self.shards.pop(loaded.partition, None)
        groups = set(loaded.shard.groups)
        for key, joining in list(self._joins.items()):
            if key[0] in groups and not joining.done():
                joining.set_result(JoinResult(error, key[1]))
        for key, syncing in list(self._syncs.items()):
            if key[0] in groups and not syncing.done():
                syncing.set_result(SyncResult(error))
        log.info("Unloaded %s-%d: no longer its leader", OFFSETS_TOPIC, loaded.partition)

    def _unload_all(self, error: Errors) -> None:
        for loaded in list(self.shards.values()):
            self._unload(loaded, error)

    # ---- answering and writing what a shard decided ----

    def _dispatch(self, loaded: LoadedShard, result: ShardResult) -> None:
        for group_id, member_id, join in result.joins:
            join_future = self._joins.pop((group_id, member_id), None)
            if join_future is not None and not join_future.done():
                join_future.set_result(join)
        for group_id, member_id, sync in result.syncs:
            waiting = self._syncs.pop((group_id, member_id), None)
            if waiting is not None and not waiting.done():
                waiting.set_result(sync)
        if result.store is not None:
            self._spawn(self._store_group(loaded, result.records, result.store))
        elif result.records:
            self._spawn(self._write_logged(loaded, result.records))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _store_group(
        self,
        loaded: LoadedShard,
        records: Sequence[tuple[Key, Value | None]],
        store: StoreGroup | StoreStaticMember,
    ) -> None:
        error, _base = await self.write(loaded.partition, records)
        if error is not Errors.NONE:
            log.info("Storing group %s failed: %s (%s)", store.group_id, error.name, store)
        if self.shards.get(loaded.partition) is loaded:
            self._dispatch(loaded, loaded.shard.on_group_stored(store, error, now_ms()))

    async def _write_logged(
        self, loaded: LoadedShard, records: Sequence[tuple[Key, Value | None]]
    ) -> None:
        error, _base = await self.write(loaded.partition, records)
        if error is not Errors.NONE:
            log.info("Writing %d group records to %s-%d failed: %s", len(records), OFFSETS_TOPIC, loaded.partition, error.name)

    async def write(
        self, partition: int, records: Sequence[tuple[Key, Value | None]]
    ) -> tuple[Errors, int]:
        """Append the records as one batch with acks=all; (coordinator error, base offset)."""
        batch = encode_batch(
            0,
            -1,
            now_ms(),
            [Record(encode_key(k), encode_value(v)) for k, v in records],
        )
        timeout_ms = self.broker.config.get_int("offsets.commit.timeout.ms")
        response = await self.broker.replicas.produce(
            bm.ProduceRequest(OFFSETS_TOPIC, partition, batch, ACKS_ALL, timeout_ms)
        )
        error = Errors.of(response.error_code)
        return produce_error_to_coordinator_error(error), response.base_offset

    # ---- the requests ----

    async def join(self, request: JoinRequest) -> JoinResult:
        loaded = self.shard_for(request.group_id)
        member_id, immediate, result = loaded.shard.join(request, now_ms(), str(uuid.uuid4()))
        return await self._answer(
            loaded, immediate, result, self._joins, (request.group_id, member_id),
            JoinResult(Errors.REBALANCE_IN_PROGRESS, member_id),
        )

    async def sync(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        group_instance_id: str | None = None,
    ) -> SyncResult:
        loaded = self.shard_for(group_id)
        immediate, result = loaded.shard.sync(
            group_id, member_id, generation_id, protocol_type, protocol_name, assignments, now_ms(),
            group_instance_id,
        )
        return await self._answer(
            loaded, immediate, result, self._syncs, (group_id, member_id),
            SyncResult(Errors.REBALANCE_IN_PROGRESS),
        )

    async def _answer(
        self,
        loaded: LoadedShard,
        immediate: R | None,
        result: ShardResult,
        waiting: dict[tuple[str, str], asyncio.Future[R]],
        key: tuple[str, str],
        superseded: R,
    ) -> R:
        """The shard's immediate answer, or one the member waits for until the rebalance gives
        it (its earlier wait, if any, is answered `superseded`). The wait is registered before
        the shard's result is dispatched, which may answer it at once."""
        if immediate is not None:
            self._dispatch(loaded, result)
            return immediate
        previous = waiting.pop(key, None)
        if previous is not None and not previous.done():
            previous.set_result(superseded)
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        waiting[key] = future
        self._dispatch(loaded, result)
        return await future

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> Errors:
        loaded = self.shard_for(group_id)
        return loaded.shard.heartbeat(group_id, member_id, generation_id, now_ms(), group_instance_id)

    def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[Errors, list[Errors]]:
        loaded = self.shard_for(group_id)
        error, errors, result = loaded.shard.leave(group_id, members, now_ms())
        self._dispatch(loaded, result)
        return error, errors

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        commits: Sequence[tuple[str, int, int, int, str]],
        group_instance_id: str | None = None,
    ) -> list[Errors]:
        """One error per (topic, partition, offset, leader epoch, metadata), in order. The
        commit is applied to the coordinator's state once the partition's HWM passed it."""
        loaded = self.shard_for(group_id)
        shard = loaded.shard
        ts = now_ms()
        error = shard.validate_offset_commit(group_id, member_id, generation_id, ts, group_instance_id)
        if error is not Errors.NONE:
            return [error] * len(commits)
        limit = self.group_config.offset_metadata_max_bytes
        errors = [
            Errors.OFFSET_METADATA_TOO_LARGE if len(c[4].encode()) > limit else Errors.NONE
            for c in commits
        ]
        accepted = [c for c, e in zip(commits, errors, strict=True) if e is Errors.NONE]
        if not accepted:
            return errors
        records = shard.offset_records(group_id, accepted, ts)
        write_error, base_offset = await self.write(loaded.partition, records)
        if write_error is Errors.NONE and self.shards.get(loaded.partition) is loaded:
            for index, (key, value) in enumerate(records):
                shard.replay(key, value, base_offset + index, ts)
        return [write_error if e is Errors.NONE else e for e in errors]

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[Errors, list[Errors]]:
        """OffsetDelete: (top-level error, one error per (topic, partition)). The tombstones
        are written with acks=all, then applied, as a commit is (INVARIANTS rules 20, 23)."""
        loaded = self.shard_for(group_id)
        shard = loaded.shard
        error, errors, tombstones = shard.delete_offsets(group_id, partitions)
        if error is not Errors.NONE or not tombstones:
            return error, errors
        write_error, base_offset = await self.write(loaded.partition, tombstones)
        if write_error is not Errors.NONE:
            return write_error, []
        if self.shards.get(loaded.partition) is loaded:
            for index, (key, value) in enumerate(tombstones):
                shard.replay(key, value, base_offset + index, now_ms())
        return Errors.NONE, errors

    async def delete_group(self, group_id: str) -> Errors:
        loaded = self.shard_for(group_id)
        error, tombstones = loaded.shard.prepare_delete(group_id, now_ms())
        if error is not Errors.NONE:
            return error
        write_error, _base = await self.write(loaded.partition, tombstones)
        loaded.shard.finish_delete(group_id, write_error, now_ms())
        return write_error
