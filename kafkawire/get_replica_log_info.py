"""GetReplicaLogInfo (v0, flexible): the one message kio lacks, declared once in kio's style from
the GetReplicaLogInfoRequest.json / GetReplicaLogInfoResponse.json Apache Kafka trunk had (seed
004), so kio's entity_reader/entity_writer encode it like any generated schema. Kafka reverted
it from key 93 (now StreamsGroupTopologyDescriptionUpdate): it is minikraft's extension at
kafkawire.api_keys.ApiKey.GET_REPLICA_LOG_INFO, in the extension block. No `from __future__
import annotations`: kio reads the field types at run time."""

import uuid

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

from kafkawire.api_keys import ApiKey
from kafkawire.declared_schema import KafkaEntity, kafka_field, kafka_schema

API_KEY = i16(ApiKey.GET_REPLICA_LOG_INFO)
VERSION = i16(0)
MAX_PARTITIONS = 1000  # upstream: only the first 1000 topic partitions, then Truncated


@kafka_schema(EntityType.nested, VERSION, api_key=API_KEY, header=RequestHeader)
class TopicPartitions(KafkaEntity):
    topic_id: uuid.UUID | None = kafka_field("uuid")
    """The unique topic ID."""
    partitions: tuple[i32, ...] = kafka_field("int32", default=())
    """The partitions of this topic."""


@kafka_schema(EntityType.request, VERSION, api_key=API_KEY, header=RequestHeader)
class GetReplicaLogInfoRequest(KafkaEntity):
    topic_partitions: tuple[TopicPartitions, ...] | None
    """The topic partitions to query the log info for (null: every hosted partition)."""


@kafka_schema(EntityType.nested, VERSION, api_key=API_KEY, header=ResponseHeader)
class PartitionLogInfo(KafkaEntity):
    partition: i32 = kafka_field("int32")
    last_written_leader_epoch: i32 = kafka_field("int32")
    current_leader_epoch: i32 = kafka_field("int32")
    log_end_offset: i64 = kafka_field("int64")
    error_code: ErrorCode = kafka_field("error_code")


@kafka_schema(EntityType.nested, VERSION, api_key=API_KEY, header=ResponseHeader)
class TopicPartitionLogInfo(KafkaEntity):
    topic_id: uuid.UUID | None = kafka_field("uuid")
    partition_log_info: tuple[PartitionLogInfo, ...]


@kafka_schema(EntityType.response, VERSION, api_key=API_KEY, header=ResponseHeader)
class GetReplicaLogInfoResponse(KafkaEntity):
    throttle_time: i32Timedelta = kafka_field("timedelta_i32")
    broker_epoch: i64 = kafka_field("int64")
    truncated: bool = kafka_field("bool")
    """True if the response does not hold every requested partition (only the first 1000)."""
    topic_partition_log_info_list: tuple[TopicPartitionLogInfo, ...]
