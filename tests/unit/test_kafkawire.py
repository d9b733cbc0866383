"""The foundation wire package: framing, headers, every advertised (api key, version) round trip
through kio, ApiVersions (KIP-511's downgrade answer), and GetReplicaLogInfo's bytes."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import struct
import types
import typing
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest as ElectLeadersRequestV2
from kio.schema.elect_leaders.v2.request import TopicPartitions as ElectTopicPartitionsV2
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v1.request import MetadataRequestTopic
from kio.static.primitive import Records, i8, i32

from kafkawire import elect_leaders_v3 as el3
from kafkawire import get_replica_log_info as grli
from kafkawire.api_keys import EXTENSION_BLOCK_START, ApiKey
from kafkawire.api_versions import (
    BROKER_API_VERSIONS,
    CONTROLLER_API_VERSIONS,
    api_versions_response,
)
from kafkawire.entities import NO_THROTTLE
from kafkawire.errors import Errors
from kafkawire.framing import FrameDecoder, FrameTooLargeError, frame
from kafkawire.messages import (
    UndecodableRequestError,
    UnknownApiError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    error_code,
    error_message,
    request_schema,
    response_schema,
    wire_error,
)

st.register_type_strategy(Records, st.binary(max_size=64))

ADVERTISED = sorted(
    {
        (int(key), version)
        for table in (BROKER_API_VERSIONS, CONTROLLER_API_VERSIONS)
        for key, versions in table.items()
        for version in versions.versions()
    }
)


def test_the_broker_table_is_kip_896s_client_facing_baseline() -> None:
    expected = {
        ApiKey.PRODUCE: (3, 12),
        ApiKey.FETCH: (4, 17),
        ApiKey.LIST_OFFSETS: (1, 10),
        ApiKey.METADATA: (0, 13),
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.ELECT_LEADERS: (0, 3),  # v3: seed 004's DesignatedLeaders
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.DESCRIBE_CLUSTER: (0, 2),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
        # The group coordinator (issue 16): Kafka 4.0's ranges.
        ApiKey.FIND_COORDINATOR: (0, 6),
        ApiKey.JOIN_GROUP: (2, 9),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.OFFSET_COMMIT: (2, 9),
        ApiKey.OFFSET_FETCH: (1, 9),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 6),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.OFFSET_DELETE: (0, 0),  # KIP-496 (issue 38)
        ApiKey.DELETE_RECORDS: (0, 2),
    }
    for key, (low, high) in expected.items():
        got = BROKER_API_VERSIONS[key]
        assert (got.min_version, got.max_version) == (low, high), key.name


def _sample(hint: Any) -> Any:
    """A value of a kio field type with every optional part present, so each field of each
    version is on the wire (deterministic; hypothesis fuzzes a few versions below)."""
    origin = typing.get_origin(hint)
    args = [a for a in typing.get_args(hint) if a is not type(None) and a is not Ellipsis]
    if origin is tuple:
        return (_sample(args[0]),)
    if origin in (typing.Union, types.UnionType):
        return _sample(args[0])
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return hint(**{f.name: _sample(hints[f.name]) for f in dataclasses.fields(hint)})
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return list(hint)[1]
    if hint is bool:
        return True
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return datetime.timedelta(milliseconds=5)
    if isinstance(hint, type) and issubclass(hint, datetime.datetime):
        return datetime.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=datetime.UTC)
    if hint is uuid.UUID:
        return uuid.UUID(int=0x1234)
    if isinstance(hint, type) and issubclass(hint, bytes):
        return b"\x01\x02"
    if isinstance(hint, type) and issubclass(hint, str):
        return "x"
    if isinstance(hint, type) and issubclass(hint, float):
        return 1.5
    if isinstance(hint, type) and issubclass(hint, int):
        return 1
    raise TypeError(f"no sample for {hint!r}")


def _round_trip(request: Any, response: Any, api_key: int, version: int, cid: int) -> None:
    wire = encode_request(request, cid, "client-1")
    assert struct.unpack(">I", wire[:4])[0] == len(wire) - 4
    decoded = decode_request(wire[4:])
    assert decoded.body == request
    assert (decoded.header.api_key, decoded.header.api_version) == (api_key, version)
    assert (decoded.header.correlation_id, decoded.header.client_id) == (cid, "client-1")
    out = encode_response(response, cid)
    assert decode_response(out[4:], api_key, version) == (cid, response)


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED, ids=lambda v: str(v))
def test_every_advertised_version_round_trips_through_kio(api_key: int, version: int) -> None:
    request_cls = request_schema(api_key, version)
    response_cls = response_schema(api_key, version)
    assert int(request_cls.__api_key__) == api_key and int(request_cls.__version__) == version
    _round_trip(_sample(request_cls), _sample(response_cls), api_key, version, 77)


FUZZED = [(int(ApiKey.PRODUCE), 3), (int(ApiKey.FETCH), 17), (int(ApiKey.METADATA), 13),
          (int(ApiKey.GET_REPLICA_LOG_INFO), 0)]


@pytest.mark.parametrize(("api_key", "version"), FUZZED, ids=lambda v: str(v))
def test_random_messages_round_trip(api_key: int, version: int) -> None:
    @settings(
        max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(
        st.from_type(request_schema(api_key, version)),
        st.from_type(response_schema(api_key, version)),
        st.integers(0, 2**31 - 1),
    )
    def round_trip(request: Any, response: Any, correlation_id: int) -> None:
        _round_trip(request, response, api_key, version, correlation_id)

    round_trip()


def test_api_versions_lists_the_table_in_every_version() -> None:
    for version in BROKER_API_VERSIONS[ApiKey.API_VERSIONS].versions():
        wire = encode_response(api_versions_response(BROKER_API_VERSIONS, version), 7)
        correlation_id, body = decode_response(wire[4:], int(ApiKey.API_VERSIONS), version)
        assert correlation_id == 7
        assert body.error_code == Errors.NONE
        assert {
            (int(a.api_key), int(a.min_version), int(a.max_version)) for a in body.api_keys
        } == {(int(k), r.min_version, r.max_version) for k, r in BROKER_API_VERSIONS.items()}


def test_api_versions_response_header_is_always_v0() -> None:
    """KIP-511: a client reads the answer before it knows our versions; no tagged header."""
    wire = encode_response(api_versions_response(BROKER_API_VERSIONS, 3), 9)
    payload = wire[4:]
    assert struct.unpack(">i", payload[:4])[0] == 9
    assert payload[4:6] == b"\x00\x00"  # error code right after the correlation id


def test_unsupported_api_versions_answer_is_v0_with_the_error_and_the_table() -> None:
    body = api_versions_response(BROKER_API_VERSIONS, 0, Errors.UNSUPPORTED_VERSION)
    _cid, decoded = decode_response(encode_response(body, 1)[4:], int(ApiKey.API_VERSIONS), 0)
    assert decoded.error_code == Errors.UNSUPPORTED_VERSION
    assert len(decoded.api_keys) == len(BROKER_API_VERSIONS)


def test_request_header_v1_and_v2_carry_the_client_id() -> None:
    flexible = ApiVersionsRequest(client_software_name="c", client_software_version="1")
    decoded = decode_request(encode_request(flexible, 3, "rdkafka")[4:])
    assert decoded.header.client_id == "rdkafka" and decoded.body == flexible
    legacy = MetadataRequestV1(topics=(MetadataRequestTopic(name="t"),))  # type: ignore[arg-type]
    decoded = decode_request(encode_request(legacy, 4, None)[4:])
    assert decoded.header.client_id is None and decoded.body == legacy


def test_garbage_and_unknown_apis_are_undecodable() -> None:
    with pytest.raises(UndecodableRequestError):
        decode_request(b"\x00")
    with pytest.raises(UnknownApiError):
        decode_request(struct.pack(">hhi", 999, 0, 1) + b"\x00\x00")
    good = encode_request(
        ApiVersionsRequest(client_software_name="c", client_software_version="1"), 1, "x"
    )[4:]
    with pytest.raises(UndecodableRequestError):
        decode_request(good[:-3])  # truncated body


def _kio_has(api_key: int, version: int) -> bool:
    try:
        load_request_schema(api_key, version)
    except Exception:  # kio's index raises its own errors for a version it lacks
        return False
    return True


def test_extensions_take_no_key_kafka_uses() -> None:
    # ARCHITECTURE.md "Wire protocol": below the extension block every key is one of Kafka's,
    # with a schema kio generated from Kafka's message definitions; minikraft's own are in the
    # block, far above Kafka 4.4's highest key (94, UnregisterController).
    for key in ApiKey:
        if key >= EXTENSION_BLOCK_START:
            continue
        assert key <= 94, key
        assert any(_kio_has(int(key), v) for v in range(20)), key  # Kafka's key: kio knows it
    assert ApiKey.GET_REPLICA_LOG_INFO >= EXTENSION_BLOCK_START > 94
    assert grli.GetReplicaLogInfoRequest.__api_key__ == ApiKey.GET_REPLICA_LOG_INFO
    assert not {93, 94} & {int(k) for k in ApiKey}


def test_get_replica_log_info_bytes_follow_upstreams_schema() -> None:
    topic_id = uuid.UUID("00000000-0000-0000-0000-000000000001")
    request = grli.GetReplicaLogInfoRequest(
        topic_partitions=(grli.TopicPartitions(topic_id=topic_id, partitions=(i32(2),)),)
    )
    wire = encode_request(request, 5, None)[4:]
    header = struct.pack(">hhi", 10_000, 0, 5) + b"\xff\xff" + b"\x00"  # null client id, no tags
    # compact array of 1, uuid, compact array [2], no tags (entry), no tags (request)
    body = b"\x02" + topic_id.bytes + b"\x02" + struct.pack(">i", 2) + b"\x00" + b"\x00"
    assert wire == header + body
    assert decode_request(wire).body == request
    response = grli.GetReplicaLogInfoResponse(
        throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
        broker_epoch=7,  # type: ignore[arg-type]
        truncated=False,
        topic_partition_log_info_list=(
            grli.TopicPartitionLogInfo(
                topic_id=topic_id,
                partition_log_info=(
                    grli.PartitionLogInfo(
                        partition=2,  # type: ignore[arg-type]
                        last_written_leader_epoch=3,  # type: ignore[arg-type]
                        current_leader_epoch=4,  # type: ignore[arg-type]
                        log_end_offset=100,  # type: ignore[arg-type]
                        error_code=error_code(Errors.NONE),
                    ),
                ),
            ),
        ),
    )
    assert decode_response(
        encode_response(response, 5)[4:], int(ApiKey.GET_REPLICA_LOG_INFO), 0) == (5, response)


def test_elect_leaders_v3_is_v2_plus_designated_leaders_beside_partitions() -> None:
    """Seed 004: v3 adds one nullable []int32 after Partitions in each TopicPartitions entry."""
    v2 = ElectLeadersRequestV2(
        election_type=i8(1),
        topic_partitions=(ElectTopicPartitionsV2(topic="foo", partitions=(i32(1), i32(4))),),
    )
    v3 = el3.ElectLeadersRequest(
        election_type=i8(2),
        topic_partitions=(
            el3.TopicPartitions(
                topic="foo", partitions=(i32(1), i32(4)), designated_leaders=(i32(7), i32(8))
            ),
        ),
    )
    body2 = encode_request(v2, 1, None)[4 + 11 :]  # after size, api key/version/cid, null id, tags
    body3 = encode_request(v3, 1, None)[4 + 11 :]
    partitions = b"\x03" + struct.pack(">ii", 1, 4)
    assert body2 == b"\x01" + b"\x02" + b"\x04foo" + partitions + b"\x00" + body2[-5:]
    designated = b"\x03" + struct.pack(">ii", 7, 8)
    assert body3 == b"\x02" + b"\x02" + b"\x04foo" + partitions + designated + b"\x00" + body3[-5:]
    assert decode_request(encode_request(v3, 1, None)[4:]).body == v3
    # Null DesignatedLeaders (PREFERRED/UNCLEAN at v3) is a null compact array.
    plain = el3.ElectLeadersRequest(
        election_type=i8(0),
        topic_partitions=(el3.TopicPartitions(topic="foo", partitions=(i32(1),)),),
    )
    assert b"\x02" + struct.pack(">i", 1) + b"\x00\x00" in encode_request(plain, 1, None)


def test_minikraft_additions_are_tagged_fields_that_kafkas_schema_ignores() -> None:
    """DescribeTopicPartitions' and ElectLeaders v3's additions travel as tagged fields; at
    their defaults nothing extra is on the wire, so the bytes are Apache Kafka's."""
    result = el3.PartitionResult(
        partition_id=i32(0), error_code=error_code(Errors.NONE), error_message=None
    )
    response = el3.ElectLeadersResponse(
        throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
        error_code=error_code(Errors.NONE),
        replica_election_results=(
            el3.ReplicaElectionResult(topic="t", partition_result=(result,)),
        ),
    )
    plain = encode_response(response, 3)
    tagged = encode_response(
        dataclasses.replace(
            response,
            replica_election_results=(
                el3.ReplicaElectionResult(
                    topic="t", partition_result=(dataclasses.replace(result, leader_id=i32(2)),)
                ),
            ),
        ),
        3,
    )
    # The tag adds: tag count 1 (replacing 0), tag 10000 as a varint (2 bytes), size, int32.
    assert len(tagged) == len(plain) + 2 + 1 + 4
    assert decode_response(tagged[4:], 43, 3)[1].replica_election_results[0].partition_result[
        0
    ].leader_id == 2


def test_our_own_code_travels_by_name_in_the_message_and_comes_back() -> None:
    """REQUEST_LIMIT_REACHED has no Kafka number: UNKNOWN_SERVER_ERROR on the wire, its name
    first in the message, so the CLI still resends what was over ElectLeaders' limit."""
    code = error_code(Errors.REQUEST_LIMIT_REACHED)
    message = error_message(Errors.REQUEST_LIMIT_REACHED, "at most 1000 partitions per request")
    assert message == "REQUEST_LIMIT_REACHED: at most 1000 partitions per request"
    assert wire_error(int(code), message) is Errors.REQUEST_LIMIT_REACHED
    assert error_message(Errors.NOT_CONTROLLER, "standby") == "standby"
    assert wire_error(int(error_code(Errors.NOT_CONTROLLER)), "x") is Errors.NOT_CONTROLLER
    assert wire_error(-1, "boom: no name") is Errors.UNKNOWN_SERVER_ERROR


def test_error_code_maps_ours_outside_kafkas_range_to_unknown_server_error() -> None:
    assert int(error_code(Errors.NOT_LEADER_OR_FOLLOWER)) == 6
    assert int(error_code(Errors.REQUEST_LIMIT_REACHED)) == -1


def test_frame_decoder_waits_for_whole_frames_and_refuses_oversize_lengths() -> None:
    decoder = FrameDecoder(max_frame_bytes=16)
    assert list(decoder.feed(frame(b"abc")[:5])) == []
    assert list(decoder.feed(frame(b"abc")[5:] + frame(b"de"))) == [b"abc", b"de"]
    with pytest.raises(FrameTooLargeError):
        list(decoder.feed(struct.pack(">I", 17)))


def test_an_error_code_is_looked_up_by_number_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """kio's ErrorCode for one of ours is built once per number (an AlterPartition answers
    thousands of partitions at 100,000 partitions, and the Enum call was a third of each,
    issue 35); a code kio lacks still travels as UNKNOWN_SERVER_ERROR."""
    from kafkawire import messages

    real = messages.ErrorCode
    first = (error_code(Errors.NOT_CONTROLLER), error_code(Errors.REQUEST_LIMIT_REACHED))
    calls: list[int] = []

    class Counting:
        unknown_server_error = real.unknown_server_error

        def __new__(cls, code: int) -> object:
            calls.append(code)
            return real(code)

    monkeypatch.setattr(messages, "ErrorCode", Counting)
    again = (error_code(Errors.NOT_CONTROLLER), error_code(Errors.REQUEST_LIMIT_REACHED))
    assert again == first == (real.not_controller, real.unknown_server_error)
    assert calls == []
