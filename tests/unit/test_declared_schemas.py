"""The schemas minikraft declares in kio's style (kafkawire.declared_schema): golden bytes, as
the code before kafka_schema wrote them, and round trips through kio and kafkawire.codec, so a
change to the declarations cannot change a byte on the wire or in `__consumer_offsets`."""

import datetime
import io
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

from kafkawire import codec
from kafkawire import describe_topic_partitions as dtp
from kafkawire import get_replica_log_info as grli
from kafkawire import group_coordinator_records as gcr
from raft.core.kraft_version_schema import KRaftVersionRecord

U = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)


def samples() -> dict[str, Any]:
    part = dtp.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.none,
        partition_index=i32(3),
        leader_id=i32(2),
        leader_epoch=i32(7),
        replica_nodes=(i32(1), i32(2)),
        isr_nodes=(i32(2),),
        eligible_leader_replicas=(i32(1),),
        last_known_elr=None,
        offline_replicas=(),
        partition_epoch=i32(9),
        last_known_leader=i32(1),
        leader_recovery_state=i8(1),
    )
    topic = dtp.DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode.none,
        name="t",
        topic_id=U,
        is_internal=False,
        partitions=(part,),
        min_insync_replicas=i32(2),
    )
    return {
        "dtp_response": dtp.DescribeTopicPartitionsResponse(
            throttle_time=datetime.timedelta(milliseconds=5),
            topics=(topic,),
            next_cursor=dtp.Cursor(topic_name="t", partition_index=i32(4)),
        ),
        "dtp_response_defaults": dtp.DescribeTopicPartitionsResponse(
            throttle_time=datetime.timedelta(0),
            topics=(
                dtp.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.none,
                    name=None,
                    topic_id=None,
                    partitions=(
                        dtp.DescribeTopicPartitionsResponsePartition(
                            error_code=ErrorCode.unknown_topic_or_partition,
                            partition_index=i32(0),
                            leader_id=i32(-1),
                        ),
                    ),
                ),
            ),
        ),
        "grli_request": grli.GetReplicaLogInfoRequest(
            topic_partitions=(grli.TopicPartitions(topic_id=U, partitions=(i32(0), i32(5))),)
        ),
        "grli_request_all": grli.GetReplicaLogInfoRequest(topic_partitions=None),
        "grli_response": grli.GetReplicaLogInfoResponse(
            throttle_time=datetime.timedelta(0),
            broker_epoch=i64(12),
            truncated=True,
            topic_partition_log_info_list=(
                grli.TopicPartitionLogInfo(
                    topic_id=U,
                    partition_log_info=(
                        grli.PartitionLogInfo(
                            partition=i32(1),
                            last_written_leader_epoch=i32(4),
                            current_leader_epoch=i32(5),
                            log_end_offset=i64(99),
                            error_code=ErrorCode.none,
                        ),
                    ),
                ),
            ),
        ),
        "offset_commit_key": gcr.OffsetCommitKey(group="g", topic="t", partition=i32(2)),
        "offset_commit_value": gcr.OffsetCommitValue(
            offset=i64(42), leader_epoch=i32(3), metadata="m", commit_timestamp=i64(1700000000000)
        ),
        "group_metadata_key": gcr.GroupMetadataKey(group="g"),
        "group_metadata_value": gcr.GroupMetadataValue(
            protocol_type="consumer",
            generation=i32(4),
            protocol="range",
            leader="m1",
            current_state_timestamp=i64(17),
            members=(
                gcr.MemberMetadata(
                    member_id="m1",
                    group_instance_id=None,
                    client_id="c",
                    client_host="/127.0.0.1",
                    rebalance_timeout=i32(300000),
                    session_timeout=i32(45000),
                    subscription=b"\x00\x01",
                    assignment=b"",
                ),
            ),
        ),
        "kraft_version": KRaftVersionRecord(version=i16(0), k_raft_version=i16(1)),
    }


GOLDEN_HEX = {
    "dtp_response": "0000000502000002740123456789abcdef0123456789abcdef0002000000000003000000020000000703000000010000000202000000020200000001000103904e0400000009914e0400000001924e01018000000001904e0400000002010274000000040000",
    "dtp_response_defaults": "0000000002000000000000000000000000000000000000000002000300000000ffffffffffffffff0101000001008000000000ff00",
    "grli_request": "020123456789abcdef0123456789abcdef0300000000000000050000",
    "grli_request_all": "0000",
    "grli_response": "00000000000000000000000c01020123456789abcdef0123456789abcdef0200000001000000040000000500000000000000630000000000",
    "offset_commit_key": "00016700017400000002",
    "offset_commit_value": "000000000000002a0000000300016d0000018bcfe56800",
    "group_metadata_key": "000167",
    "group_metadata_value": "0008636f6e73756d657200000004000572616e676500026d3100000000000000110000000100026d31ffff000163000a2f3132372e302e302e31000493e00000afc800000002000100000000",
    "kraft_version": "0000000100",
}


@pytest.mark.parametrize("name", sorted(GOLDEN_HEX))
def test_golden_bytes_pin_the_encoding(name: str) -> None:
    entity = samples()[name]
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    assert buffer.getvalue().hex() == GOLDEN_HEX[name]
    assert codec.writer(type(entity))(entity).hex() == GOLDEN_HEX[name]


@pytest.mark.parametrize("name", sorted(GOLDEN_HEX))
def test_round_trip(name: str) -> None:
    entity = samples()[name]
    data = bytes.fromhex(GOLDEN_HEX[name])
    decoded, size = entity_reader(type(entity))(data, 0)
    assert (decoded, size) == (entity, len(data))
    assert codec.reader(type(entity))(data, 0)[0] == entity


def test_the_class_attributes_kio_reads() -> None:
    assert (dtp.DescribeTopicPartitionsResponse.__api_key__, grli.PartitionLogInfo.__api_key__) == (
        75,
        10_000,
    )
    assert (
        grli.TopicPartitions.__header_schema__.__module__ == "kio.schema.request_header.v2.header"
    )
    assert dtp.Cursor.__header_schema__.__module__ == "kio.schema.response_header.v1.header"
    assert (gcr.MemberMetadata.__flexible__, gcr.MemberMetadata.__version__) == (False, 3)
    assert (KRaftVersionRecord.__flexible__, KRaftVersionRecord.__version__) == (True, 0)
