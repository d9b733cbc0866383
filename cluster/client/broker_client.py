"""What the data tools (`produce`, `consume`, the chaos workload, `bench produce`) share: a
Kafka client of the brokers, Metadata from whichever bootstrap broker answers, partition leader
lookup, and one Produce / Fetch / ListOffsets per partition in kio entities, records as Kafka
record batch v2 (storage.core.record_batch). After the Kafka producer's and consumer's metadata
handling: a retriable error refreshes metadata and the caller retries.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from dataclasses import dataclass

from kio.schema.create_topics.v7.response import CreateTopicsResponse
from kio.schema.fetch.v16 import request as fetch_request
from kio.schema.fetch.v16.response import FetchResponse
from kio.schema.list_offsets.v9 import request as list_offsets_request
from kio.schema.list_offsets.v9.response import ListOffsetsResponse
from kio.schema.metadata.v12 import request as metadata_request
from kio.schema.metadata.v12.response import MetadataResponse, MetadataResponsePartition
from kio.schema.produce.v11 import request as produce_request
from kio.schema.produce.v11.response import ProduceResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from cluster.client.bootstrap import new_client as new_kafka_client
from cluster.client.bootstrap import send_to_any
from kafkawire.client import KafkaClient
from kafkawire.constants import ACKS_NONE
from kafkawire.create_topics import NewTopic
from kafkawire.create_topics import create_topics_request as build_create_topics
from kafkawire.errors import Errors, KafkaError
from storage.core.record_batch import Record, iter_batches

REQUEST_TIMEOUT_MS = 10_000
METADATA_TIMEOUT_MS = 3000
# Kafka's ListOffsets sentinels (KIP-79): the log start, the latest (the HWM when committed).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
READ_COMMITTED = 1  # no transactions yet: the last stable offset is the HWM (rule 20)
NO_REPLICA = -1  # a consumer, not a follower
# Errors a data client refreshes metadata on and retries, as Kafka's clients do: the leader
# moved, is being elected, or is RECOVERING (rule 21 answers NOT_LEADER_OR_FOLLOWER until the
# recovery commits), or the leader has not replayed a just-created topic yet, or a new leader's
# high watermark has not reached the start of its epoch (ListOffsets' OFFSET_NOT_AVAILABLE).
RETRIABLE_ERRORS = frozenset(
    {Errors.NOT_LEADER_OR_FOLLOWER, Errors.LEADER_NOT_AVAILABLE, Errors.NETWORK_EXCEPTION,
     Errors.UNKNOWN_LEADER_EPOCH, Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION,
     Errors.OFFSET_NOT_AVAILABLE}
)


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def data_client(client_id: str, request_timeout_ms: int = REQUEST_TIMEOUT_MS) -> KafkaClient:
    """A Kafka client of the brokers for one producer or consumer (its own connections)."""
    return new_kafka_client(client_id, request_timeout_ms=request_timeout_ms)


async def metadata(
    client: KafkaClient,
    bootstrap: str | list[str],
    topics: list[str] | None,
    timeout_ms: int = METADATA_TIMEOUT_MS,
) -> MetadataResponse:
    """Metadata v12 from the first bootstrap broker that answers (None: every topic). Topics are
    never auto-created here: the tools create theirs explicitly."""
    request = metadata_request.MetadataRequest(
        topics=None
        if topics is None
        else tuple(metadata_request.MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    _address, response = await send_to_any(client, bootstrap, request, timeout_ms=timeout_ms)
    answer: MetadataResponse = response
    return answer


async def create_topic(
    client: KafkaClient,
    bootstrap: str,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: dict[str, str] | None = None,
    timeout_ms: int = 30_000,
) -> Errors:
    """CreateTopics v7 through a broker (forwarded to the active controller): NONE, or
    TOPIC_ALREADY_EXISTS for a topic a previous run made; any other error raises KafkaError."""
    request = build_create_topics([NewTopic(name, partitions, replication_factor, configs or {})], timeout_ms)
    _address, response = await send_to_any(
        client, bootstrap, request, timeout_ms=timeout_ms + 2000
    )
    answer: CreateTopicsResponse = response
    result = answer.topics[0]
    error = Errors.of(result.error_code)
    if error not in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
        raise KafkaError(error, f"create topic {name}: {result.error_message or error.name}")
    return error


class Leaders:
    """Partition -> leader (address, epoch) of one topic from Metadata, refreshed on demand."""

    def __init__(self, client: KafkaClient, bootstrap: str, topic: str) -> None:
        self.client = client
        self.bootstrap = bootstrap
        self.topic = topic
        self.topic_id: uuid.UUID | None = None
        self.partitions: dict[int, MetadataResponsePartition] = {}
        self.addresses: dict[int, str] = {}

    async def refresh(self) -> None:
        response = await metadata(self.client, self.bootstrap, [self.topic])
        self.addresses = {int(b.node_id): f"{b.host}:{b.port}" for b in response.brokers}
        topic = response.topics[0] if response.topics else None
        if topic is None or topic.error_code != 0:
            code = (
                Errors.UNKNOWN_TOPIC_OR_PARTITION if topic is None else Errors.of(topic.error_code)
            )
            raise KafkaError(code, f"topic {self.topic}: {code.name}")
        self.topic_id = topic.topic_id
        self.partitions = {int(p.partition_index): p for p in topic.partitions}

    async def wait_ready(self, timeout_ms: int = 3000) -> None:
        """Refresh until the topic is known with a leader per partition (a just-created topic
        reaches the brokers' metadata a moment later: Kafka's max.block.ms)."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            try:
                await self.refresh()
                if all(p.leader_id >= 0 for p in self.partitions.values()):
                    return
            except KafkaError as exc:
                if exc.error is not Errors.UNKNOWN_TOPIC_OR_PARTITION or time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                return
            await asyncio.sleep(0.1)

    def _partition(self, partition: int) -> MetadataResponsePartition:
        info = self.partitions.get(partition)
        if info is None:
            raise KafkaError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {self.topic}-{partition}"
            )
        return info

    def leader_address(self, partition: int) -> str:
        info = self._partition(partition)
        address = self.addresses.get(int(info.leader_id))
        if address is None:
            raise KafkaError(
                Errors.LEADER_NOT_AVAILABLE, f"{self.topic}-{partition} has no leader"
            )
        return address

    def leader_epoch(self, partition: int) -> int:
        """The leader epoch Metadata gave for the partition (-1 if unknown)."""
        info = self.partitions.get(partition)
        return -1 if info is None else int(info.leader_epoch)


@dataclass(frozen=True, slots=True)
class ProduceAck:
    """One partition's answer to a Produce: Kafka's error, base offset, the log start offset,
    and the leader epoch of the leader it went to (from Metadata: Kafka's Produce response
    carries the epoch only with an error, as CurrentLeader)."""

    error: Errors
    base_offset: int = -1
    leader_epoch: int = -1
    message: str | None = None


async def produce_batch(
    leaders: Leaders, partition: int, batch: bytes, acks: int, timeout_ms: int
) -> ProduceAck:
    """One Produce of one batch to the partition's leader; transport failures raise KafkaError
    (NETWORK_EXCEPTION / REQUEST_TIMED_OUT). acks=0 gets no response (Kafka): NONE, offset -1."""
    address = leaders.leader_address(partition)
    epoch = leaders.leader_epoch(partition)
    request = produce_request.ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=i32Timedelta.parse(_ms(timeout_ms)),
        topic_data=(
            produce_request.TopicProduceData(
                name=TopicName(leaders.topic),
                partition_data=(
                    produce_request.PartitionProduceData(
                        index=i32(partition),
                        records=Records(batch),
                    ),
                ),
            ),
        ),
    )
    if acks == ACKS_NONE:
        await leaders.client.send(address, request)
        return ProduceAck(Errors.NONE, -1, epoch)
    response: ProduceResponse = await leaders.client.request(
        address, request, timeout_ms=timeout_ms + 2000
    )
    for topic in response.responses:
        for answer in topic.partition_responses:
            if int(answer.index) != partition:
                continue
            error = Errors.of(answer.error_code)
            if error is not Errors.NONE and int(answer.current_leader.leader_epoch) >= 0:
                epoch = int(answer.current_leader.leader_epoch)
            return ProduceAck(error, int(answer.base_offset), epoch, answer.error_message)
    return ProduceAck(Errors.UNKNOWN_SERVER_ERROR, message="no answer for the partition")


async def list_offset(leaders: Leaders, partition: int, timestamp: int) -> int:
    """ListOffsets v9 (read committed) at the partition's leader: earliest (-2) is the log start
    offset, latest (-1) the HWM. Errors raise KafkaError."""
    request = list_offsets_request.ListOffsetsRequest(
        replica_id=BrokerId(NO_REPLICA),
        isolation_level=i8(READ_COMMITTED),
        topics=(
            list_offsets_request.ListOffsetsTopic(
                name=TopicName(leaders.topic),
                partitions=(
                    list_offsets_request.ListOffsetsPartition(
                        partition_index=i32(partition),
                        current_leader_epoch=i32(leaders.leader_epoch(partition)),
                        timestamp=i64(timestamp),
                    ),
                ),
            ),
        ),
    )
    response: ListOffsetsResponse = await leaders.client.request(
        leaders.leader_address(partition), request
    )
    for topic in response.topics:
        for answer in topic.partitions:
            if int(answer.partition_index) == partition:
                error = Errors.of(answer.error_code)
                if error is not Errors.NONE:
                    raise KafkaError(error, f"list offsets of {leaders.topic}-{partition}")
                return int(answer.offset)
    raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"no ListOffsets answer for {partition}")


@dataclass(frozen=True, slots=True)
class FetchedRecords:
    records: list[tuple[int, Record]]  # (offset, record), offsets at or after the position
    high_watermark: int
    log_start_offset: int


async def fetch_records(
    leaders: Leaders,
    partition: int,
    position: int,
    *,
    max_wait_ms: int,
    max_bytes: int = 1 << 20,
) -> FetchedRecords:
    """Fetch v16 (read committed) of one partition from its leader: records below the HWM at or
    after `position` (a batch may start below it). Errors raise KafkaError."""
    if leaders.topic_id is None:
        raise KafkaError(Errors.UNKNOWN_TOPIC_ID, f"no topic id known for {leaders.topic}")
    request = fetch_request.FetchRequest(
        max_wait=i32Timedelta.parse(_ms(max_wait_ms)),
        min_bytes=i32(1),
        max_bytes=i32(max_bytes),
        isolation_level=i8(READ_COMMITTED),
        topics=(
            fetch_request.FetchTopic(
                topic_id=leaders.topic_id,
                partitions=(
                    fetch_request.FetchPartition(
                        partition=i32(partition),
                        current_leader_epoch=i32(leaders.leader_epoch(partition)),
                        fetch_offset=i64(position),
                        partition_max_bytes=i32(max_bytes),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    response: FetchResponse = await leaders.client.request(
        leaders.leader_address(partition), request, timeout_ms=max_wait_ms + REQUEST_TIMEOUT_MS
    )
    if response.error_code != 0:
        raise KafkaError(Errors.of(response.error_code), f"fetch {leaders.topic}-{partition}")
    for topic in response.responses:
        for answer in topic.partitions:
            if int(answer.partition_index) != partition:
                continue
            error = Errors.of(answer.error_code)
            if error is not Errors.NONE:
                raise KafkaError(error, f"fetch {leaders.topic}-{partition} at {position}")
            out = []
            for batch, _size in iter_batches(bytes(answer.records or b"")):
                if batch.is_control:
                    continue
                for index, record in enumerate(batch.records):
                    offset = batch.offset_of(index)
                    if offset >= position:
                        out.append((offset, record))
            return FetchedRecords(out, int(answer.high_watermark), int(answer.log_start_offset))
    raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"no Fetch answer for {partition}")
