"""ElectLeaders v3 (api key 43): KAFKA-20098's (seed 004) DesignatedLeaders beside Partitions, the
one field v3 adds (seed 001 spells it DesiredLeaders). Declared once in kio's style, like
get_replica_log_info.py, so kio's entity_reader/entity_writer encode it like any generated schema;
v0-v2 stay kio's. Election type 2 (DESIGNATED) is minikraft's documented extension (CLI.md).

The response is v2's, plus one tagged field (minikraft's, CLI.md `leader-election` JSON "leader"):
LeaderId, the partition's leader after the election. Tagged fields are Kafka's way to extend a
flexible message: a client that does not know the tag skips it. No `from __future__ import
annotations`: kio reads the field types at run time."""

import datetime

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

from kafkawire.declared_schema import KafkaEntity, kafka_field, kafka_schema

API_KEY = i16(43)
VERSION = i16(3)
# High tag numbers for minikraft's additions, far from any tag Apache Kafka assigns.
LEADER_ID_TAG = 10000


@kafka_schema(EntityType.nested, VERSION, api_key=API_KEY, header=RequestHeader)
class TopicPartitions(KafkaEntity):
    topic: str = kafka_field("string")
    """The name of a topic."""
    partitions: tuple[i32, ...] = kafka_field("int32", default=())
    """The partitions of this topic whose leader should be elected."""
    designated_leaders: tuple[i32, ...] | None = kafka_field("int32", default=None)
    """The designated leaders, by index with Partitions (DESIGNATED elections only)."""


@kafka_schema(EntityType.request, VERSION, api_key=API_KEY, header=RequestHeader)
class ElectLeadersRequest(KafkaEntity):
    election_type: i8 = kafka_field("int8")
    """0 PREFERRED, 1 UNCLEAN, 2 DESIGNATED (minikraft's, seed 004)."""
    topic_partitions: tuple[TopicPartitions, ...] | None
    """The topic partitions to elect leaders (null: every partition)."""
    timeout: i32Timedelta = kafka_field(
        "timedelta_i32", default=i32Timedelta.parse(datetime.timedelta(milliseconds=60000))
    )
    """The time in ms to wait for the election to complete."""


@kafka_schema(EntityType.nested, VERSION, api_key=API_KEY, header=ResponseHeader)
class PartitionResult(KafkaEntity):
    partition_id: i32 = kafka_field("int32")
    error_code: ErrorCode = kafka_field("error_code")
    error_message: str | None = kafka_field("string")
    leader_id: i32 = kafka_field("int32", tag=LEADER_ID_TAG, default=i32(-1))
    """minikraft's (tagged): the partition's leader after the election, -1 if none."""


@kafka_schema(EntityType.nested, VERSION, api_key=API_KEY, header=ResponseHeader)
class ReplicaElectionResult(KafkaEntity):
    topic: str = kafka_field("string")
    partition_result: tuple[PartitionResult, ...]


@kafka_schema(EntityType.response, VERSION, api_key=API_KEY, header=ResponseHeader)
class ElectLeadersResponse(KafkaEntity):
    throttle_time: i32Timedelta = kafka_field("timedelta_i32")
    error_code: ErrorCode = kafka_field("error_code")
    replica_election_results: tuple[ReplicaElectionResult, ...]
