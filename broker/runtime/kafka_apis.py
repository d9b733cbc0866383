"""The broker's client-facing APIs on Kafka's wire protocol (after Kafka's KafkaApis).

Each handler translates a kio request into the broker's existing internals (ReplicaManager's
produce/fetch/list-offsets/offset-for-leader-epoch/replica-log-info, the metadata image) and
the answer back into the kio response of the same version. The admin APIs live in
kafka_admin_apis (forwarded to the active controller, as Kafka does). Versions: kafkawire's
BROKER_API_VERSIONS (KIP-896's baseline), every one built with `kafkawire.entities.build`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from broker.core import messages as bm
from broker.core.fetch_session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    FetchSessionCache,
)
from broker.runtime.broker_context import BrokerContext, listener_name
from broker.runtime.fetch_reads import FetchReads, fetch_response
from broker.runtime.group_coordinator import OFFSETS_TOPIC
from broker.runtime.kafka_admin_apis import KafkaAdminApis, advertised_controller_id
from broker.runtime.kafka_group_apis import KafkaGroupApis
from broker.runtime.kafka_log_dirs import describe_log_dirs
from broker.runtime.kafka_replication import (
    OFFSET_FOR_LEADER_EPOCH_VERSION,
    fetch_replica,
    offset_for_leader_epoch_response,
)
from broker.runtime.producer_id_manager import ProducerIdManager
from broker.runtime.timestamp_lookup import OffsetAndTimestamp, find_offset_by_timestamp
from kafkawire import codec
from kafkawire import topic as topic_names
from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import BROKER_API_VERSIONS, api_versions_response
from kafkawire.authorized_operations import CLUSTER_OPERATIONS, NOT_REQUESTED, TOPIC_OPERATIONS
from kafkawire.connection import KafkaRequestContext, KafkaService
from kafkawire.constants import ACKS_NONE, ZERO_UUID
from kafkawire.create_topics import NewTopic
from kafkawire.entities import NO_THROTTLE, build, convert, has_field, item_type
from kafkawire.errors import Errors, KafkaError
from kafkawire.loop import run_sliced
from kafkawire.messages import (
    EncodedResponse,
    KafkaRequest,
    encoded_with_items,
    error_code,
    request_schema,
    response_schema,
)
from metadata import features, kafka_describe
from metadata.config_defs import declared_defaults
from metadata.metadata_image import MetadataImage

log = logging.getLogger("minikraft.broker.kafka")

# Kafka's broker defaults for topic auto-creation (Metadata with allow_auto_topic_creation).
AUTO_CREATE_DEFAULTS = declared_defaults(
    "auto.create.topics.enable", "num.partitions", "default.replication.factor"
)


Handler = Callable[[Any, int], Awaitable[Any | None]]
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _response(api_key: ApiKey, version: int) -> type:
    return response_schema(int(api_key), version)


class KafkaApis:
    """Serves BROKER_API_VERSIONS for one broker; `service` plugs into the RpcServer."""

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        for key, value in AUTO_CREATE_DEFAULTS.items():
            broker.config.props.setdefault(key, value)
        # Read once, at start-up: a garbled value stops the broker with the key's name rather
        # than failing every Metadata request that could auto-create.
        self._auto_create_topics = broker.config.get_bool("auto.create.topics.enable")
        self.admin = KafkaAdminApis(broker)
        # KIP-227: the leader's end of incremental fetch sessions, followers' and consumers'.
        self.fetch_sessions = FetchSessionCache(
            broker.config.get_int("max.incremental.fetch.session.cache.slots"),
            broker.config.get_int("min.incremental.fetch.session.eviction.ms"),
        )
        self.fetch_reads = FetchReads(broker.replicas, self._topic_name)
        self._handlers: dict[ApiKey, Handler] = {
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.METADATA: self._metadata,
            ApiKey.PRODUCE: self._produce,
            ApiKey.FETCH: self._fetch,
            ApiKey.LIST_OFFSETS: self._list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
            **self.admin.handlers(),
            ApiKey.GET_REPLICA_LOG_INFO: self._get_replica_log_info,
            ApiKey.DELETE_RECORDS: self._delete_records,
            ApiKey.DESCRIBE_LOG_DIRS: self._describe_log_dirs,
            ApiKey.INIT_PRODUCER_ID: self._init_producer_id,
        }
        self.producer_ids = ProducerIdManager(
            broker.broker_id,
            lambda: broker.broker_epoch,
            lambda body, timeout_ms: self.admin.forward_body(body, timeout_ms),
        )
        # The group coordinator's APIs take the connection's context (client id and host).
        self.groups = KafkaGroupApis(broker)
        missing = set(BROKER_API_VERSIONS) - set(self._handlers) - set(self.groups.handlers)
        if missing:  # the table advertises exactly what is implemented
            raise RuntimeError(f"advertised but not handled: {sorted(missing)}")
        self.service = KafkaService(BROKER_API_VERSIONS, self.handle)
        self._background: set[asyncio.Future[None]] = set()
        self._creating: set[str] = set()
        self._described_topics = kafka_describe.DescribedTopics()
        self._every_topic = EveryTopicAnswers()

    async def handle(self, request: KafkaRequest, ctx: KafkaRequestContext) -> Any | None:
        header = request.header
        if header.api_key in self.groups.handlers:
            return await self.groups.handle(request, ctx)
        key = ApiKey(header.api_key)
        if key is ApiKey.METADATA:
            response = await self._metadata(
                request.body, header.api_version, listener_name(ctx, self.broker)
            )
            if request.body.topics is None or (header.api_version == 0 and not request.body.topics):
                return self._every_topic.encoded(response)
            return response
        if key is ApiKey.DESCRIBE_CLUSTER:
            return await self.admin.describe_cluster(
                request.body, header.api_version, listener_name(ctx, self.broker)
            )
        return await self._handlers[key](request.body, header.api_version)

    @property
    def _image(self) -> MetadataImage:
        return self.broker.metadata.image

    # ---- ApiVersions ----

    async def _api_versions(self, _body: Any, version: int) -> Any:
        # KIP-584: the finalized features of this broker's image (kafka-features describe).
        return api_versions_response(
            BROKER_API_VERSIONS, version, features=features.api_features(self._image)
        )

    async def _describe_log_dirs(self, body: Any, version: int) -> Any:
        return describe_log_dirs(self.broker.replicas, body, version)

    # ---- Metadata ----

    async def _metadata(self, body: Any, version: int, listener: str | None = None) -> Any:
        """Brokers as reached on `listener`, the one the request came in on (Kafka's
        getAliveBrokerNodes(request.context.listenerName)); None: the inter-broker listener."""
        schema = _response(ApiKey.METADATA, version)
        broker_cls = item_type(schema, "brokers")
        topic_cls = item_type(schema, "topics")
        image = self._image
        requested: list[tuple[str | None, uuid.UUID | None]] | None
        if body.topics is None or (version == 0 and not body.topics):
            requested = None  # every topic (v0: an empty list meant all)
        else:
            requested = [(t.name, getattr(t, "topic_id", None) or None) for t in body.topics]
        allow_auto = getattr(body, "allow_auto_topic_creation", True)
        # KIP-430 (v8+): asked for, every operation (Kafka without an authorizer allows all).
        topic_operations = (
            TOPIC_OPERATIONS
            if getattr(body, "include_topic_authorized_operations", False)
            else NOT_REQUESTED
        )
        topics = []
        to_create: list[str] = []
        unfenced: frozenset[int] | None = None
        names: list[tuple[str | None, uuid.UUID | None]] = (
            [(name, None) for name in sorted(image.topics_by_name)]
            if requested is None
            else requested
        )
        for name, topic_id in names:
            topic = (
                image.topics_by_name.get(name)
                if name
                else image.topics.get(topic_id)
                if topic_id
                else None
            )
            if topic is None:
                error = Errors.UNKNOWN_TOPIC_OR_PARTITION
                if name is not None and not topic_id and not topic_names.is_valid(name):
                    # Kafka validates before auto-creating (AutoTopicCreationManager): no
                    # topic can have this name, so the client hears it now and the
                    # controller is never asked.
                    error = Errors.INVALID_TOPIC_EXCEPTION
                elif name and not topic_id and allow_auto and self._auto_create_topics:
                    to_create.append(name)
                    error = Errors.LEADER_NOT_AVAILABLE  # Kafka: being created, retry
                elif topic_id and not name:
                    error = Errors.UNKNOWN_TOPIC_ID
                topics.append(
                    build(
                        topic_cls,
                        error_code=error_code(error),
                        name=name,
                        topic_id=topic_id or ZERO_UUID,
                        is_internal=name is not None and topic_names.is_internal(name),
                        partitions=(),
                        topic_authorized_operations=topic_operations,
                    )
                )
                continue
            if unfenced is None:
                unfenced = kafka_describe.unfenced_broker_ids(image)
            topics.append(
                self._described_topics.topic(
                    topic_cls, image, topic, topic_operations, unfenced, topic.name == OFFSETS_TOPIC
                )
            )
        if to_create:
            task = asyncio.ensure_future(self._auto_create(to_create))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        brokers = tuple(
            build(broker_cls, node_id=b, host=host, port=port, rack=rack)
            for b, host, port, rack in kafka_describe.live_brokers(
                self._image, listener or self.broker.listener.name
            )
        )
        return build(
            schema,
            throttle_time=NO_THROTTLE,
            brokers=brokers,
            cluster_id=self.broker.raft.cluster_id,
            controller_id=advertised_controller_id(self._image),
            topics=tuple(topics),
            cluster_authorized_operations=CLUSTER_OPERATIONS
            if getattr(body, "include_cluster_authorized_operations", False)
            else NOT_REQUESTED,
        )

    async def _auto_create(self, names: list[str]) -> None:
        names = [n for n in names if n not in self._creating]
        if not names:
            return  # a request for these is already on its way to the controller
        self._creating.update(names)
        try:
            await self._auto_create_now(names)
        finally:
            self._creating.difference_update(names)

    async def _auto_create_now(self, names: list[str]) -> None:
        """Kafka's auto-creation: a CreateTopics with this broker's `num.partitions` and
        `default.replication.factor`, forwarded to the active controller like a client's."""
        config = self.broker.config
        topics = [
            NewTopic(name, config.get_int("num.partitions"), config.get_int("default.replication.factor"))
            for name in names
        ]
        try:
            for name, error in (await self.admin.create_topics(topics)).items():
                if error is Errors.NONE:
                    log.info("Auto-created topic %s for a client's Metadata request", name)
                elif error is not Errors.TOPIC_ALREADY_EXISTS:  # a race with its creation
                    log.info("Auto-creating topic %s failed: %s", name, error.name)
        except KafkaError as exc:
            log.info("Auto-creating %s failed: %s", names, exc)

    # ---- Produce ----

    async def _produce(self, body: Any, version: int) -> Any | None:
        acks = int(body.acks)
        timeout_ms = int(body.timeout.total_seconds() * 1000)
        if acks not in (-1, 0, 1):
            error: Errors | None = Errors.INVALID_REQUIRED_ACKS
        else:
            error = None
        calls: list[tuple[str, int, Awaitable[bm.ProduceResponse]]] = []
        for topic in body.topic_data:
            for partition in topic.partition_data:
                records = bytes(partition.records or b"")
                if error is not None:
                    calls.append((topic.name, int(partition.index), _failed(error)))
                    continue
                coroutine = self.broker.replicas.produce(
                    bm.ProduceRequest(topic.name, int(partition.index), records, acks, timeout_ms)
                )
                calls.append((topic.name, int(partition.index), coroutine))
        if len(calls) == 1:  # the common case: no task needed to wait on one partition
            results = [await calls[0][2]]
        else:
            # Each produce appends before its first await, so order on a partition holds.
            tasks = [asyncio.ensure_future(call) for _t, _p, call in calls]
            results = [await task for task in tasks]
        if acks == ACKS_NONE:
            return None  # Kafka sends no response to acks=0
        schema = _response(ApiKey.PRODUCE, version)
        topic_cls = item_type(schema, "responses")
        partition_cls = item_type(topic_cls, "partition_responses")
        record_errors = has_field(partition_cls, "record_errors")  # v8+
        by_topic: dict[str, list[Any]] = {}
        for (name, index, _call), result in zip(calls, results, strict=True):
            extra: dict[str, Any] = {}
            if has_field(partition_cls, "current_leader") and result.error_code:
                leader_cls = item_type(partition_cls, "current_leader")
                extra["current_leader"] = leader_cls(
                    leader_id=result.leader_id, leader_epoch=result.leader_epoch
                )
            by_topic.setdefault(name, []).append(
                build(
                    partition_cls,
                    index=index,
                    error_code=error_code(result.error_code),
                    base_offset=result.base_offset,
                    log_append_time=None
                    if result.log_append_time_ms < 0
                    else _EPOCH + datetime.timedelta(milliseconds=result.log_append_time_ms),
                    log_start_offset=self._log_start_offset(name, index)
                    if result.error_code == 0
                    else result.log_start_offset,
                    record_errors=_record_errors(partition_cls, result)
                    if record_errors
                    else (),
                    error_message=result.error_message or None,
                    **extra,
                )
            )
        return build(
            schema,
            responses=tuple(
                topic_cls(name=name, partition_responses=tuple(parts))
                for name, parts in by_topic.items()
            ),
            throttle_time=NO_THROTTLE,
        )

    def _log_start_offset(self, topic: str, partition: int) -> int:
        """The partition's log start offset (DeleteRecords moves it), for Produce answers."""
        hosted = self.broker.replicas.hosted_by_name(topic, partition)
        return -1 if hosted is None else hosted.log.log_start_offset

    # ---- Fetch ----

    def _topic_name(self, topic: Any) -> str | None:
        name = getattr(topic, "topic", None)
        if name is not None:
            return str(name)
        found = self._image.topics.get(topic.topic_id)
        return None if found is None else found.name

    async def _fetch(self, body: Any, version: int) -> Any:
        """Consumers and followers alike (kafka_replication): a follower names itself in
        ReplicaState with its broker epoch (KIP-903) and gets follower semantics from the same
        ReplicaManager.fetch (ISR tracking, log-end reads, DivergingEpoch)."""
        replica_id, replica_epoch = fetch_replica(body)
        cluster_id = getattr(body, "cluster_id", None)
        if cluster_id is not None and cluster_id != self.broker.raft.cluster_id:
            return build(
                _response(ApiKey.FETCH, version),
                error_code=error_code(Errors.INCONSISTENT_CLUSTER_ID),
                session_id=0,
                responses=(),
            )
        max_wait_ms = int(body.max_wait.total_seconds() * 1000)
        min_bytes = max(0, int(body.min_bytes))
        max_bytes = int(body.max_bytes)
        # In slices: a follower's Fetch after a create names its 5,000 new partitions, 15 ms
        # of the session taking them in one stretch (issue 35).
        context = await run_sliced(self.fetch_sessions.new_context_steps(
            int(getattr(body, "session_id", INVALID_SESSION_ID)),
            int(getattr(body, "session_epoch", FINAL_EPOCH)),
            [(topic, partition) for topic in body.topics for partition in topic.partitions],
            [
                (getattr(topic, "topic", None) or topic.topic_id, int(index))
                for topic in getattr(body, "forgotten_topics_data", None) or ()
                for index in topic.partitions
            ],
            privileged=replica_id >= 0,
            now_ms=int(time.monotonic() * 1000),
            new_session_id=lambda: random.getrandbits(31),
        ))
        if context.error is not Errors.NONE:
            return build(
                _response(ApiKey.FETCH, version),
                error_code=error_code(context.error),
                session_id=INVALID_SESSION_ID,
                responses=(),
            )
        read = await self.fetch_reads.read(
            context,
            replica_id=replica_id,
            replica_epoch=replica_epoch,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            # Fetch v0-v2 had a hard limit (Kafka's hardMaxBytesLimit): no first-batch exception.
            min_one_message=version > 2,
        )
        return await fetch_response(_response(ApiKey.FETCH, version), read, context)

    # ---- ListOffsets / OffsetForLeaderEpoch ----

    async def _list_offsets(self, body: Any, version: int) -> Any:
        def answer(topic: str, partition: Any) -> dict[str, Any]:
            try:
                found = self._offset_for_timestamp(
                    topic,
                    int(partition.partition_index),
                    int(partition.timestamp),
                    int(getattr(partition, "current_leader_epoch", -1)),
                )
                error = Errors.NONE
            except KafkaError as exc:
                found, error = OffsetAndTimestamp(-1, -1, -1), exc.error
            return dict(
                error_code=error_code(error),
                timestamp=found.timestamp_ms,
                offset=found.offset,
                leader_epoch=found.leader_epoch,
            )

        return _per_partition(_response(ApiKey.LIST_OFFSETS, version), body, answer)

    def _offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int, current_leader_epoch: int
    ) -> OffsetAndTimestamp:
        """Earliest (-2), latest (-1: the HWM, all a consumer may read), max timestamp (-3), or
        the first offset whose batch holds a timestamp at or after `timestamp`."""
        replicas = self.broker.replicas
        if timestamp in (bm.EARLIEST_TIMESTAMP, bm.LATEST_TIMESTAMP):
            answer = replicas.list_offsets(
                bm.ListOffsetsRequest(topic, partition, timestamp, current_leader_epoch)
            )
            return OffsetAndTimestamp(answer.offset, -1, answer.leader_epoch)
        # Same leader checks as earliest/latest (rule 21: RECOVERING refuses), then a scan.
        replicas.list_offsets(
            bm.ListOffsetsRequest(topic, partition, bm.LATEST_TIMESTAMP, current_leader_epoch,
                                  isolation_committed=False)
        )
        hosted = replicas.hosted(topic, partition)
        found = find_offset_by_timestamp(
            hosted.log, timestamp, hosted.state.high_watermark, hosted.state.leader_epoch
        )
        if found.offset < 0 and hosted.state.leader_epoch_start_offset > hosted.state.high_watermark:
            # Kafka: nothing found below the HWM while it lags the epoch's start is
            # OFFSET_NOT_AVAILABLE (the record may be there once the HWM catches up).
            raise KafkaError(Errors.OFFSET_NOT_AVAILABLE, f"{topic}-{partition}: HWM lagging")
        return found

    async def _offset_for_leader_epoch(self, body: Any, version: int) -> Any:
        """v2-v4 lifted into v4's entities (kafka_replication), answered per partition by the
        ReplicaManager, lowered into the version asked."""
        request = convert(body, request_schema(int(ApiKey.OFFSET_FOR_LEADER_EPOCH),
                                               OFFSET_FOR_LEADER_EPOCH_VERSION))
        response = offset_for_leader_epoch_response([
            (
                str(topic.topic),
                [self.broker.replicas.offset_for_leader_epoch(topic.topic, p)
                 for p in topic.partitions],
            )
            for topic in request.topics
        ])
        return convert(response, _response(ApiKey.OFFSET_FOR_LEADER_EPOCH, version))

    # ---- DeleteRecords (KIP-107) ----

    async def _delete_records(self, body: Any, version: int) -> Any:
        """Per partition: the leader advances its log start offset and answers the low
        watermark; a follower, an unknown partition or an offset beyond the HWM gets its error
        and low watermark -1. Answered once the leader's start is checkpointed (replicas
        follow through Fetch's LogStartOffset; the response does not wait for them)."""
        def answer(topic: str, partition: Any) -> dict[str, Any]:
            try:
                low_watermark = self.broker.replicas.delete_records(
                    topic, int(partition.partition_index), int(partition.offset)
                )
                error = Errors.NONE
            except KafkaError as exc:
                low_watermark, error = -1, exc.error
            return dict(low_watermark=low_watermark, error_code=error_code(error))

        return _per_partition(_response(ApiKey.DELETE_RECORDS, version), body, answer)

    # ---- InitProducerId (idempotent producers only) ----

    async def _init_producer_id(self, body: Any, version: int) -> Any:
        """A new producer id at epoch 0 for every request (Kafka's answer without a
        transactional id, also to an epoch bump). A transactional id is refused: transactions
        are not built, and their APIs are not advertised."""
        schema = _response(ApiKey.INIT_PRODUCER_ID, version)
        producer_id, epoch, error = -1, -1, Errors.NONE
        if body.transactional_id is not None:
            error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            try:
                producer_id, epoch = await self.producer_ids.generate(), 0
            except KafkaError as exc:
                error = exc.error
        return build(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=error_code(error),
            producer_id=producer_id,
            producer_epoch=epoch,
        )

    # ---- GetReplicaLogInfo (seed 004) ----

    async def _get_replica_log_info(self, body: Any, _version: int) -> Any:
        return self.broker.replicas.replica_log_info(body)


def _per_partition(
    schema: type, body: Any, answer: Callable[[str, Any], dict[str, Any]]
) -> Any:
    """A response of topics and their partitions (ListOffsets, DeleteRecords): one partition
    each the request names, its fields `answer(topic name, the request's partition)`."""
    topic_cls = item_type(schema, "topics")
    partition_cls = item_type(topic_cls, "partitions")
    topics = tuple(
        topic_cls(
            name=topic.name,
            partitions=tuple(
                build(partition_cls, partition_index=int(p.partition_index), **answer(topic.name, p))
                for p in topic.partitions
            ),
        )
        for topic in body.topics
    )
    return build(schema, throttle_time=NO_THROTTLE, topics=topics)


class EveryTopicAnswers:
    """A Metadata answer of every topic, encoded from each topic's bytes, kept while its entry
    is the same (DescribedTopics keeps one per unchanged TopicImage). Issue 35: encoding
    100,000 partitions costs a broker 0.2 CPU-s on its loop, and bench scale asks every half
    second while it waits for a full ISR (with DescribedTopics, the encoding was 12% of the
    CPU of the broker asked); the bytes are the codec's, unchanged topics' are not written
    again."""

    def __init__(self) -> None:
        self._topics: dict[Any, tuple[Any, bytes]] = {}  # topic id -> (entry, its bytes)

    def encoded(self, body: Any) -> EncodedResponse:
        kept, self._topics = self._topics, {}
        schema: type = type(body)
        write = codec.writer(item_type(schema, "topics"))
        items = []
        for topic in body.topics:
            key = getattr(topic, "topic_id", None) or topic.name
            found = kept.get(key)
            if found is None or found[0] is not topic:
                found = (topic, write(topic))
            self._topics[key] = found
            items.append(found[1])
        # After the topics: the cluster's authorized operations (v8-v10, an int32) and the
        # error code (v13+, an int16); a layout not so is refused by encoded_with_items.
        after = 4 * has_field(schema, "cluster_authorized_operations")
        after += 2 * has_field(schema, "error_code")
        return encoded_with_items(dataclasses.replace(body, topics=()), items, after)


def _record_errors(partition_cls: type, result: bm.ProduceResponse) -> tuple[Any, ...]:
    """Produce v8+'s record_errors: each rejected record's index in its batch and why."""
    if not result.record_errors:
        return ()
    error_cls = item_type(partition_cls, "record_errors")
    return tuple(
        error_cls(batch_index=index, batch_index_error_message=message)
        for index, message in result.record_errors
    )


async def _failed(error: Errors) -> bm.ProduceResponse:
    return bm.ProduceResponse(int(error), error.name)


def kafka_service(broker: BrokerContext) -> KafkaService:
    return KafkaApis(broker).service
