"""Golden bytes of the encodings minikraft declares itself, as main wrote them before their
declarations were shared (kafkawire.declared_schema, journal_events.PartitionEvent), and round
trips: a change to a declaration cannot change a byte on the wire, in `__consumer_offsets`, in
the metadata log's KRaftVersionRecord or in a broker journal the audit reads. Schemas in kio's
style also encode and decode the same through kafkawire.codec."""

import datetime
import io
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

from broker.core.journal_events import (
    HwmAdvanced,
    IsrProposed,
    IsrResult,
    ProduceAcked,
    RecoveryStateChanged,
    RoleChanged,
    Truncated,
    decode_event,
    encode_event,
)
from kafkawire import codec
from kafkawire import describe_topic_partitions as dtp
from kafkawire import get_replica_log_info as grli
from kafkawire import group_coordinator_records as gcr
from raft.core.kraft_version_schema import KRaftVersionRecord

U = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)


def kio_samples() -> dict[str, Any]:
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


KIO_HEX = {
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


def journal_samples() -> dict[str, Any]:
    return {
        "hwm_advanced": HwmAdvanced(
            1, "foo", 0, 0, 10, 2, 2, 5, 1_000, isr=(1, 2), topic_id="AAAAAAAAAAAAAAAAAAAAAQ"
        ),
        "hwm_advanced_v0": HwmAdvanced(1, "foo", 0, 0, 10, 2, 2, 5, 1_000),
        "truncated": Truncated(2, "foo", 0, 20, 15, "epoch 5 ends at 15", 5, 10, 1_001),
        "isr_proposed": IsrProposed(
            1,
            "foo",
            0,
            3,
            "expand",
            5,
            10,
            (1, 2),
            (1, 2, 3),
            (100, 200, 300),
            0,
            1_002,
            topic_id="t",
        ),
        "isr_result": IsrResult(1, "foo", 0, 3, "NONE", "committed", (1, 2, 3), 5, 11, 0, 1_003),
        "recovery_state_changed": RecoveryStateChanged(
            1, "foo", 0, 6, 1, 0, "leader caught up", 1_004
        ),
        "produce_acked": ProduceAcked(1, "foo", 0, 100, 109, -1, 5, 110, 1_005, topic_id="t"),
        "role_changed": RoleChanged(3, "bar", 2, "leader", 3, 7, 9, (3, 1), 0, 50, 40, 1_006),
    }


JOURNAL_HEX = {
    "hwm_advanced": "8da56576656e74ab48776d416476616e636564a776657273696f6e00a962726f6b65725f696401a5746f706963a3666f6fa9706172746974696f6e00a36f6c6400a36e65770aa86973725f73697a6502a76d696e5f69737202ac6c65616465725f65706f636805a27473cd03e8a3697372920102a8746f7069635f6964b641414141414141414141414141414141414141414151",
    "hwm_advanced_v0": "8da56576656e74ab48776d416476616e636564a776657273696f6e00a962726f6b65725f696401a5746f706963a3666f6fa9706172746974696f6e00a36f6c6400a36e65770aa86973725f73697a6502a76d696e5f69737202ac6c65616465725f65706f636805a27473cd03e8a369737290a8746f7069635f6964a0",
    "truncated": "8ca56576656e74a95472756e6361746564a776657273696f6e00a962726f6b65725f696402a5746f706963a3666f6fa9706172746974696f6e00ab66726f6d5f6f666673657414a9746f5f6f66667365740fa6726561736f6eb265706f6368203520656e6473206174203135ac6c65616465725f65706f636805ae686967685f77617465726d61726b0aa27473cd03e9a8746f7069635f6964a0",
    "isr_proposed": "8fa56576656e74ab49737250726f706f736564a776657273696f6e00a962726f6b65725f696401a5746f706963a3666f6fa9706172746974696f6e00ab70726f706f73616c5f696403a46b696e64a6657870616e64ac6c65616465725f65706f636805af706172746974696f6e5f65706f63680aad636f6d6d69747465645f697372920102ac70726f706f7365645f69737293010203ad62726f6b65725f65706f6368739364ccc8cd012cb56c65616465725f7265636f766572795f737461746500a27473cd03eaa8746f7069635f6964a174",
    "isr_result": "8ea56576656e74a9497372526573756c74a776657273696f6e00a962726f6b65725f696401a5746f706963a3666f6fa9706172746974696f6e00ab70726f706f73616c5f696403a56572726f72a44e4f4e45a76f7574636f6d65a9636f6d6d6974746564a369737293010203ac6c65616465725f65706f636805af706172746974696f6e5f65706f63680bb56c65616465725f7265636f766572795f737461746500a27473cd03eba8746f7069635f6964a0",
    "recovery_state_changed": "8ba56576656e74b45265636f7665727953746174654368616e676564a776657273696f6e00a962726f6b65725f696401a5746f706963a3666f6fa9706172746974696f6e00ac6c65616465725f65706f636806a96f6c645f737461746501a96e65775f737461746500a6726561736f6eb06c656164657220636175676874207570a27473cd03eca8746f7069635f6964a0",
    "produce_acked": "8ca56576656e74ac50726f6475636541636b6564a776657273696f6e00a962726f6b65725f696401a5746f706963a3666f6fa9706172746974696f6e00ab626173655f6f666673657464ab6c6173745f6f66667365746da461636b73ffac6c65616465725f65706f636805ae686967685f77617465726d61726b6ea27473cd03eda8746f7069635f6964a174",
    "role_changed": "8fa56576656e74ab526f6c654368616e676564a776657273696f6e00a962726f6b65725f696403a5746f706963a3626172a9706172746974696f6e02a4726f6c65a66c6561646572a96c65616465725f696403ac6c65616465725f65706f636807af706172746974696f6e5f65706f636809a3697372920301b56c65616465725f7265636f766572795f737461746500ae6c6f675f656e645f6f666673657432ae686967685f77617465726d61726b28a27473cd03eea8746f7069635f6964a0",
}


def _kio_encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    assert codec.writer(type(entity))(entity) == buffer.getvalue()
    return buffer.getvalue()


def _kio_decode(entity_type: type, data: bytes) -> Any:
    decoded, size = entity_reader(entity_type)(data, 0)
    assert size == len(data)
    assert codec.reader(entity_type)(data, 0)[0] == decoded
    return decoded


Family = tuple[
    Callable[[], dict[str, Any]],
    dict[str, str],
    Callable[[Any], bytes],
    Callable[[type, bytes], Any],
]
FAMILIES: dict[str, Family] = {
    "kio": (kio_samples, KIO_HEX, _kio_encode, _kio_decode),
    "journal": (journal_samples, JOURNAL_HEX, encode_event, lambda _type, data: decode_event(data)),
}
CASES = [
    (family, name) for family, (_, golden, _, _) in FAMILIES.items() for name in sorted(golden)
]


@pytest.mark.parametrize(("family", "name"), CASES)
def test_golden_bytes_pin_the_encoding(family: str, name: str) -> None:
    samples, golden, encode, _ = FAMILIES[family]
    assert encode(samples()[name]).hex() == golden[name]


@pytest.mark.parametrize(("family", "name"), CASES)
def test_round_trip(family: str, name: str) -> None:
    samples, golden, _, decode = FAMILIES[family]
    entity = samples()[name]
    assert decode(type(entity), bytes.fromhex(golden[name])) == entity


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
