"""ElectLeaders v3 (api key 43): KAFKA-20098's (seed 004) DesignatedLeaders beside Partitions, the
one field v3 adds (seed 001 spells it DesiredLeaders). Declared once in kio's style, like
get_replica_log_info.py, so kio's entity_reader/entity_writer encode it like any generated schema;
v0-v2 stay kio's. Election type 2 (DESIGNATED) is minikraft's documented extension (CLI.md).

The response is v2's, plus one tagged field (minikraft's, CLI.md `leader-election` JSON "leader"):
LeaderId, the partition's leader after the election. Tagged fields are Kafka's way to extend a
flexible message: a client that does not know the tag skips it. No `from __future__ import
annotations`: kio reads the field types at run time."""

import datetime
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

API_KEY = i16(43)
VERSION = i16(3)
# High tag numbers for minikraft's additions, far from any tag Apache Kafka assigns.
LEADER_ID_TAG = 10000


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic: str = field(metadata={"kafka_type": "string"})
    """The name of a topic."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partitions of this topic whose leader should be elected."""
    designated_leaders: tuple[i32, ...] | None = field(
        metadata={"kafka_type": "int32"}, default=None
    )
    """The designated leaders, by index with Partitions (DESIGNATED elections only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    election_type: i8 = field(metadata={"kafka_type": "int8"})
    """0 PREFERRED, 1 UNCLEAN, 2 DESIGNATED (minikraft's, seed 004)."""
    topic_partitions: tuple[TopicPartitions, ...] | None
    """The topic partitions to elect leaders (null: every partition)."""
    timeout: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"},
        default=i32Timedelta.parse(datetime.timedelta(milliseconds=60000)),
    )
    """The time in ms to wait for the election to complete."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_id: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    leader_id: i32 = field(metadata={"kafka_type": "int32", "tag": LEADER_ID_TAG}, default=i32(-1))
    """minikraft's (tagged): the partition's leader after the election, -1 if none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaElectionResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic: str = field(metadata={"kafka_type": "string"})
    partition_result: tuple[PartitionResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = API_KEY
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    replica_election_results: tuple[ReplicaElectionResult, ...]
