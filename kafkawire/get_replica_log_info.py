"""GetReplicaLogInfo (v0, flexible): the one message kio lacks, declared once in kio's style from
the GetReplicaLogInfoRequest.json / GetReplicaLogInfoResponse.json Apache Kafka trunk had (seed
004), so kio's entity_reader/entity_writer encode it like any generated schema. Kafka reverted
it from key 93 (now StreamsGroupTopologyDescriptionUpdate): it is minikraft's extension at
kafkawire.api_keys.ApiKey.GET_REPLICA_LOG_INFO, in the extension block. No `from __future__
import annotations`: kio reads the field types at run time."""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

from kafkawire.api_keys import ApiKey

API_KEY = i16(ApiKey.GET_REPLICA_LOG_INFO)
VERSION = i16(0)
MAX_PARTITIONS = 1000  # upstream: only the first 1000 topic partitions, then Truncated


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The unique topic ID."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partitions of this topic."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GetReplicaLogInfoRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_partitions: tuple[TopicPartitions, ...] | None
    """The topic partitions to query the log info for (null: every hosted partition)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionLogInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition: i32 = field(metadata={"kafka_type": "int32"})
    last_written_leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    current_leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    log_end_offset: i64 = field(metadata={"kafka_type": "int64"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitionLogInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_log_info: tuple[PartitionLogInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GetReplicaLogInfoResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"})
    truncated: bool = field(metadata={"kafka_type": "bool"})
    """True if the response does not hold every requested partition (only the first 1000)."""
    topic_partition_log_info_list: tuple[TopicPartitionLogInfo, ...]
