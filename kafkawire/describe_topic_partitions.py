"""DescribeTopicPartitions v0's response (api key 75, seed 001) with minikraft's additions as
tagged fields (CLI.md: `partition_epoch`, `last_known_leader`, `leader_recovery_state` of
`topics describe`, and the topic's min.insync.replicas in force for --under-min-isr-partitions).
Tagged fields are Kafka's way to extend a flexible message: librdkafka and the Java client skip a
tag they do not know, so real clients read this response as Apache Kafka's. The request is kio's.
Declared once in kio's style, like get_replica_log_info.py. No `from __future__ import
annotations`: kio reads the field types at run time."""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

API_KEY = i16(75)
VERSION = i16(0)
# High tag numbers for minikraft's additions, far from any tag Apache Kafka assigns.
PARTITION_EPOCH_TAG = 10000
LAST_KNOWN_LEADER_TAG = 10001
LEADER_RECOVERY_STATE_TAG = 10002
MIN_INSYNC_REPLICAS_TAG = 10000


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicPartitionsResponsePartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    leader_id: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    replica_nodes: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    isr_nodes: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    eligible_leader_replicas: tuple[i32, ...] | None = field(
        metadata={"kafka_type": "int32"}, default=None
    )
    last_known_elr: tuple[i32, ...] | None = field(metadata={"kafka_type": "int32"}, default=None)
    offline_replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    partition_epoch: i32 = field(
        metadata={"kafka_type": "int32", "tag": PARTITION_EPOCH_TAG}, default=i32(-1)
    )
    """minikraft's (tagged): the partition epoch."""
    last_known_leader: i32 = field(
        metadata={"kafka_type": "int32", "tag": LAST_KNOWN_LEADER_TAG}, default=i32(-1)
    )
    """minikraft's (tagged): KIP-966's LastKnownLeader, -1 if none."""
    leader_recovery_state: i8 = field(
        metadata={"kafka_type": "int8", "tag": LEADER_RECOVERY_STATE_TAG}, default=i8(0)
    )
    """minikraft's (tagged): KIP-704's LeaderRecoveryState, 0 RECOVERED, 1 RECOVERING."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicPartitionsResponseTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    name: str | None = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    is_internal: bool = field(metadata={"kafka_type": "bool"}, default=False)
    partitions: tuple[DescribeTopicPartitionsResponsePartition, ...]
    topic_authorized_operations: i32 = field(
        metadata={"kafka_type": "int32"}, default=i32(-2147483648)
    )
    min_insync_replicas: i32 = field(
        metadata={"kafka_type": "int32", "tag": MIN_INSYNC_REPLICAS_TAG}, default=i32(-1)
    )
    """minikraft's (tagged): the topic's min.insync.replicas in force, -1 if unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cursor:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicPartitionsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    topics: tuple[DescribeTopicPartitionsResponseTopic, ...]
    next_cursor: Cursor | None = field(default=None)
