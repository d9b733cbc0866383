"""The broker's per-partition request and response values (Produce, Fetch, ListOffsets) that
ReplicaManager takes and returns (GetReplicaLogInfo and OffsetForLeaderEpoch use the wire's
entities, kafkawire.get_replica_log_info and broker/runtime/kafka_replication). On the wire they
are Kafka's messages (kio), translated in broker/runtime/kafka_apis.py and kafka_replication.py;
these are not a wire schema. One partition per value keeps the shapes small.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import NamedTuple

NO_EPOCH = -1
CONSUMER_REPLICA_ID = -1
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1


class TopicIdPartition(NamedTuple):
    """Kafka's TopicIdPartition as the broker's key of a partition: a topic deleted and created
    again under its name gets another id, so its partitions are other partitions."""

    topic_id: uuid.UUID
    partition: int


# ---- Produce ----


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    topic: str
    partition: int
    records: bytes  # one or more record batches (storage.core.record_batch format)
    acks: int = -1
    timeout_ms: int = 30000


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    error_code: int = 0
    error_message: str = ""
    base_offset: int = -1
    log_end_offset: int = -1
    high_watermark: int = -1
    leader_id: int = -1
    leader_epoch: int = -1
    log_start_offset: int = -1
    log_append_time_ms: int = -1  # LogAppendTime topics: the broker's append time
    # (batch index, message) per rejected record (Kafka's LogValidator record errors)
    record_errors: tuple[tuple[int, str], ...] = ()


# ---- Fetch (partition data; replica_epoch is the follower's broker epoch, KIP-903) ----


@dataclass(frozen=True, slots=True)
class FetchRequest:
    topic: str
    partition: int
    fetch_offset: int
    replica_id: int = CONSUMER_REPLICA_ID
    replica_epoch: int = NO_EPOCH
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH
    max_wait_ms: int = 0
    max_bytes: int = 1 << 20
    # Kafka's minOneMessage: the first batch may exceed max_bytes (only for the first
    # partition of a Fetch that has data, so a consumer always progresses).
    min_one_message: bool = True


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int = 0
    error_message: str = ""
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: bytes = b""
    diverging_epoch: int = NO_EPOCH  # set when the follower must truncate (rule 22)
    diverging_end_offset: int = -1
    leader_id: int = -1
    leader_epoch: int = -1


# ---- ListOffsets ----


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    topic: str
    partition: int
    timestamp: int = LATEST_TIMESTAMP
    current_leader_epoch: int = NO_EPOCH
    isolation_committed: bool = True  # latest = HWM (read committed) else the log end


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    error_code: int = 0
    error_message: str = ""
    offset: int = -1
    leader_epoch: int = -1
