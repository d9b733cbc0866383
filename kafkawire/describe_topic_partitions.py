"""DescribeTopicPartitions v0's response (api key 75, seed 001) with minikraft's additions as
tagged fields (CLI.md: `partition_epoch`, `last_known_leader`, `leader_recovery_state` of
`topics describe`, and the topic's min.insync.replicas in force for --under-min-isr-partitions).
Tagged fields are Kafka's way to extend a flexible message: librdkafka and the Java client skip a
tag they do not know, so real clients read this response as Apache Kafka's. The request is kio's.
Declared once in kio's style, like get_replica_log_info.py. No `from __future__ import
annotations`: kio reads the field types at run time."""

import uuid

from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

from kafkawire.declared_schema import KafkaEntity, kafka_field, kafka_schema

API_KEY = i16(75)
VERSION = i16(0)
# High tag numbers for minikraft's additions, far from any tag Apache Kafka assigns.
PARTITION_EPOCH_TAG = 10000
LAST_KNOWN_LEADER_TAG = 10001
LEADER_RECOVERY_STATE_TAG = 10002
MIN_INSYNC_REPLICAS_TAG = 10000


@kafka_schema(EntityType.nested, VERSION, api_key=API_KEY, header=ResponseHeader)
class DescribeTopicPartitionsResponsePartition(KafkaEntity):
    error_code: ErrorCode = kafka_field("error_code")
    partition_index: i32 = kafka_field("int32")
    leader_id: i32 = kafka_field("int32")
    leader_epoch: i32 = kafka_field("int32", default=i32(-1))
    replica_nodes: tuple[i32, ...] = kafka_field("int32", default=())
    isr_nodes: tuple[i32, ...] = kafka_field("int32", default=())
    eligible_leader_replicas: tuple[i32, ...] | None = kafka_field("int32", default=None)
    last_known_elr: tuple[i32, ...] | None = kafka_field("int32", default=None)
    offline_replicas: tuple[i32, ...] = kafka_field("int32", default=())
    partition_epoch: i32 = kafka_field("int32", default=i32(-1), tag=PARTITION_EPOCH_TAG)
    """minikraft's (tagged): the partition epoch."""
    last_known_leader: i32 = kafka_field("int32", default=i32(-1), tag=LAST_KNOWN_LEADER_TAG)
    """minikraft's (tagged): KIP-966's LastKnownLeader, -1 if none."""
    leader_recovery_state: i8 = kafka_field("int8", default=i8(0), tag=LEADER_RECOVERY_STATE_TAG)
    """minikraft's (tagged): KIP-704's LeaderRecoveryState, 0 RECOVERED, 1 RECOVERING."""


@kafka_schema(EntityType.nested, VERSION, api_key=API_KEY, header=ResponseHeader)
class DescribeTopicPartitionsResponseTopic(KafkaEntity):
    error_code: ErrorCode = kafka_field("error_code")
    name: str | None = kafka_field("string")
    topic_id: uuid.UUID | None = kafka_field("uuid")
    is_internal: bool = kafka_field("bool", default=False)
    partitions: tuple[DescribeTopicPartitionsResponsePartition, ...]
    topic_authorized_operations: i32 = kafka_field("int32", default=i32(-2147483648))
    min_insync_replicas: i32 = kafka_field("int32", default=i32(-1), tag=MIN_INSYNC_REPLICAS_TAG)
    """minikraft's (tagged): the topic's min.insync.replicas in force, -1 if unknown."""


@kafka_schema(EntityType.nested, VERSION, api_key=API_KEY, header=ResponseHeader)
class Cursor(KafkaEntity):
    topic_name: str = kafka_field("string")
    partition_index: i32 = kafka_field("int32")


@kafka_schema(EntityType.response, VERSION, api_key=API_KEY, header=ResponseHeader)
class DescribeTopicPartitionsResponse(KafkaEntity):
    throttle_time: i32Timedelta = kafka_field("timedelta_i32")
    topics: tuple[DescribeTopicPartitionsResponseTopic, ...]
    next_cursor: Cursor | None = None
