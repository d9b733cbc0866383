"""The broker family's messages on Kafka's protocol round-trip through the bytes: the lifecycle
messages are kio's entities (one shape, kafkawire.broker_lifecycle) and come back equal; the
replication ones go core dataclass -> kio -> encoded frame -> kio -> the same value; for every
version advertised (BrokerRegistration v4, BrokerHeartbeat v1, AlterPartition v3 on
controllers; Fetch v17 with ReplicaState and OffsetForLeaderEpoch v4 between brokers)."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest
from kio.schema.offset_for_leader_epoch.v4 import request as ofle_req
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.core import messages as bm
from broker.runtime import kafka_replication as wire
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import BROKER_API_VERSIONS, CONTROLLER_API_VERSIONS
from kafkawire.entities import build, convert, item_type
from kafkawire.errors import Errors
from kafkawire.framing import PREFIX_BYTES
from kafkawire.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_schema,
    response_schema,
)

TOPIC_ID = uuid.UUID("5b0ea0c9-1d7a-4b3c-9a0e-6d1f0c2b3a41")
DIR_A = uuid.UUID("11111111-2222-4333-8444-555555555555")
DIR_B = uuid.UUID("66666666-7777-4888-9999-aaaaaaaaaaaa")


def _request_bytes(kio_request: Any) -> Any:
    """Encode with a header as a node sends it, decode as the listener does."""
    decoded = decode_request(encode_request(kio_request, 7, "node-2")[PREFIX_BYTES:])
    assert decoded.header.client_id == "node-2"
    assert type(decoded.body) is type(kio_request)
    return decoded.body


def _response_bytes(kio_response: Any) -> Any:
    api_key, version = int(kio_response.__api_key__), int(kio_response.__version__)
    correlation_id, body = decode_response(
        encode_response(kio_response, 9)[PREFIX_BYTES:], api_key, version
    )
    assert correlation_id == 9
    return body


def test_the_controller_advertises_exactly_the_lifecycle_versions_spoken_here() -> None:
    for key, version in (
        (ApiKey.BROKER_REGISTRATION, lifecycle.REGISTRATION_VERSION),
        (ApiKey.BROKER_HEARTBEAT, lifecycle.HEARTBEAT_VERSION),
        (ApiKey.ALTER_PARTITION, lifecycle.ALTER_PARTITION_VERSION),
    ):
        assert list(CONTROLLER_API_VERSIONS[key].versions()) == [version], key.name
    assert wire.FETCH_VERSION in BROKER_API_VERSIONS[ApiKey.FETCH]
    assert (
        wire.OFFSET_FOR_LEADER_EPOCH_VERSION in BROKER_API_VERSIONS[ApiKey.OFFSET_FOR_LEADER_EPOCH]
    )


REGISTRATIONS = [
    lifecycle.registration_request(
        4,
        "MkU3OEVBNTcwNTJENDM2Qk",
        uuid.uuid4(),
        [("PLAINTEXT", "127.0.0.1", 9092)],
        rack="rack-a",
        log_dirs=[DIR_A, DIR_B],
        previous_broker_epoch=118,  # rule 12: the clean-shutdown file's epoch
    ),
    lifecycle.registration_request(0, "c", uuid.uuid4()),  # no listener, rack or log dirs
]


@pytest.mark.parametrize("request_", REGISTRATIONS)
def test_broker_registration_request_round_trips(
    request_: lifecycle.BrokerRegistrationRequest,
) -> None:
    assert int(request_.__version__) == 4
    assert _request_bytes(request_) == request_


@pytest.mark.parametrize(
    "request_",
    [
        lifecycle.heartbeat_request(3, 77, 1234),
        lifecycle.heartbeat_request(3, 77, 1234, want_fence=True),
        lifecycle.heartbeat_request(3, 77, 1234, want_shut_down=True),
    ],
)
def test_broker_heartbeat_request_round_trips(request_: lifecycle.BrokerHeartbeatRequest) -> None:
    assert int(request_.__version__) == 1
    assert _request_bytes(request_) == request_


LIFECYCLE_RESPONSES: dict[str, Any] = {
    "registration": lifecycle.registration_response(broker_epoch=42),
    "registration-INCONSISTENT_CLUSTER_ID":
        lifecycle.registration_response(Errors.INCONSISTENT_CLUSTER_ID),
    "registration-DUPLICATE_BROKER_REGISTRATION":
        lifecycle.registration_response(Errors.DUPLICATE_BROKER_REGISTRATION),
    "registration-NOT_CONTROLLER": lifecycle.registration_response(Errors.NOT_CONTROLLER),
    "heartbeat-unfenced": lifecycle.heartbeat_response(is_caught_up=True, is_fenced=False),
    "heartbeat-fenced-shut-down":
        lifecycle.heartbeat_response(is_caught_up=True, is_fenced=True, should_shut_down=True),
    "heartbeat-STALE_BROKER_EPOCH": lifecycle.heartbeat_response(Errors.STALE_BROKER_EPOCH),
    "heartbeat-BROKER_ID_NOT_REGISTERED":
        lifecycle.heartbeat_response(Errors.BROKER_ID_NOT_REGISTERED),
}


@pytest.mark.parametrize(
    "response", LIFECYCLE_RESPONSES.values(), ids=list(LIFECYCLE_RESPONSES)
)
def test_broker_registration_and_heartbeat_responses_round_trip(
    response: lifecycle.BrokerRegistrationResponse | lifecycle.BrokerHeartbeatResponse,
) -> None:
    assert _response_bytes(response) == response


ALTER_PARTITION = lifecycle.alter_partition_request(
    1,
    55,
    [
        (
            TOPIC_ID,
            [
                lifecycle.alter_partition_partition(
                    0,
                    leader_epoch=3,
                    # KIP-903: each member with the broker epoch it fetched with (rule 17)
                    new_isr_with_epochs=[
                        lifecycle.broker_state(1, 55),
                        lifecycle.broker_state(2, 61),
                    ],
                    leader_recovery_state=1,  # KIP-704: RECOVERING
                    partition_epoch=9,
                ),
                lifecycle.alter_partition_partition(2, 4, [lifecycle.broker_state(1)], 0, 10),
            ],
        )
    ],
)


def test_alter_partition_request_round_trips() -> None:
    assert int(ALTER_PARTITION.__version__) == 3
    assert _request_bytes(ALTER_PARTITION) == ALTER_PARTITION


@pytest.mark.parametrize(
    "response",
    [
        lifecycle.alter_partition_response(
            Errors.NONE,
            [
                (
                    TOPIC_ID,
                    [
                        lifecycle.alter_partition_result(0, Errors.NONE, 1, 3, [1, 2], 0, 10),
                        lifecycle.alter_partition_result(1, Errors.FENCED_LEADER_EPOCH),
                        lifecycle.alter_partition_result(2, Errors.INVALID_UPDATE_VERSION),
                        lifecycle.alter_partition_result(3, Errors.INELIGIBLE_REPLICA),
                        lifecycle.alter_partition_result(4, Errors.NEW_LEADER_ELECTED, 2, 4),
                    ],
                )
            ],
        ),
        lifecycle.alter_partition_response(Errors.STALE_BROKER_EPOCH),
    ],
)
def test_alter_partition_response_round_trips(
    response: lifecycle.AlterPartitionResponse,
) -> None:
    assert _response_bytes(response) == response


def test_a_whole_request_error_is_the_response_of_its_api() -> None:
    for api_key in (ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION):
        answer = lifecycle.error_response(api_key, Errors.NOT_CONTROLLER)
        assert int(answer.__api_key__) == api_key
        assert Errors.of(answer.error_code) is Errors.NOT_CONTROLLER
        assert _response_bytes(answer) == answer
    with pytest.raises(TypeError):
        lifecycle.error_response(ApiKey.CREATE_TOPICS, Errors.NOT_CONTROLLER)


# -- replication between brokers ----------------------------------------------------------------

FOLLOWER_FETCH = bm.FetchRequest(
    "orders",
    2,
    fetch_offset=120,
    replica_id=3,
    replica_epoch=77,  # KIP-903: the follower's broker epoch
    current_leader_epoch=5,
    last_fetched_epoch=4,
    max_wait_ms=500,
    max_bytes=1 << 20,
)


def test_follower_fetch_request_round_trips() -> None:
    kio = wire.fetch_request_to_kio(FOLLOWER_FETCH, TOPIC_ID, "cluster-a")
    body = _request_bytes(kio)
    assert body.cluster_id == "cluster-a"
    assert body.max_wait == datetime.timedelta(milliseconds=500)
    replica_id, replica_epoch = wire.fetch_replica(body)
    [topic] = body.topics
    [partition] = topic.partitions
    assert topic.topic_id == TOPIC_ID
    again = wire.fetch_partition_from_request(
        "orders", partition, replica_id, replica_epoch, int(partition.partition_max_bytes)
    )
    # The long-poll wait is the request's, not a partition's.
    assert again == dataclasses.replace(FOLLOWER_FETCH, max_wait_ms=0)


def test_one_replica_fetch_carries_every_partition_from_its_leader() -> None:
    """Kafka's ReplicaFetcherThread.buildFetch: one Fetch per leader broker, partitions grouped
    by topic in first-seen order, each with its replica.fetch.max.bytes, the request with
    replica.fetch.response.max.bytes / wait.max.ms / min.bytes."""
    other = uuid.UUID(int=7)
    parts = [
        (TOPIC_ID, FOLLOWER_FETCH),
        (other, dataclasses.replace(FOLLOWER_FETCH, topic="audit", partition=0, fetch_offset=3)),
        (TOPIC_ID, dataclasses.replace(FOLLOWER_FETCH, partition=5, max_bytes=4096)),
    ]
    body = _request_bytes(
        wire.replica_fetch_to_kio(
            3, 77, "cluster-a", max_wait_ms=250, min_bytes=64, max_bytes=10 << 20,
            partitions=parts,
        )
    )
    assert wire.fetch_replica(body) == (3, 77)
    assert (int(body.min_bytes), int(body.max_bytes)) == (64, 10 << 20)
    assert body.max_wait == datetime.timedelta(milliseconds=250)
    assert [
        (t.topic_id, int(p.partition), int(p.fetch_offset), int(p.partition_max_bytes))
        for t in body.topics
        for p in t.partitions
    ] == [(TOPIC_ID, 2, 120, 1 << 20), (TOPIC_ID, 5, 120, 4096), (other, 0, 3, 1 << 20)]


def test_a_consumer_fetch_has_no_replica() -> None:
    consumer = dataclasses.replace(FOLLOWER_FETCH, replica_id=-1, replica_epoch=-1)
    body = _request_bytes(wire.fetch_request_to_kio(consumer, TOPIC_ID, None))
    assert wire.fetch_replica(body) == (-1, -1)


def _fetch_response_v17(result: bm.FetchResponse, partition: int) -> Any:
    schema = response_schema(int(ApiKey.FETCH), wire.FETCH_VERSION)
    topic_cls = item_type(schema, "responses")
    partition_cls = item_type(topic_cls, "partitions")
    return build(
        schema,
        session_id=0,
        responses=(
            topic_cls(
                topic_id=TOPIC_ID,
                partitions=(wire.fetch_partition_to_kio(partition_cls, partition, result),),
            ),
        ),
    )


@pytest.mark.parametrize(
    ("result", "seen"),
    [
        (
            bm.FetchResponse(high_watermark=118, log_start_offset=0, records=b"\x00batch-bytes"),
            (0, 118, 0, b"\x00batch-bytes", (-1, -1), (-1, -1)),
        ),
        # Rule 22: the follower must truncate to epoch 4's end first.
        (
            bm.FetchResponse(
                high_watermark=118, log_start_offset=0, diverging_epoch=4, diverging_end_offset=97
            ),
            (0, 118, 0, b"", (4, 97), (-1, -1)),
        ),
        (
            bm.FetchResponse(int(Errors.FENCED_LEADER_EPOCH), leader_id=1, leader_epoch=6),
            (int(Errors.FENCED_LEADER_EPOCH), -1, -1, b"", (-1, -1), (1, 6)),
        ),
        (
            bm.FetchResponse(int(Errors.NOT_LEADER_OR_FOLLOWER), leader_id=-1, leader_epoch=6),
            (int(Errors.NOT_LEADER_OR_FOLLOWER), -1, -1, b"", (-1, -1), (-1, 6)),
        ),
    ],
)
def test_fetch_partition_answer_round_trips(result: bm.FetchResponse, seen: tuple[Any, ...]) -> None:
    """The leader's answer lowered into v17, as the follower reads it (kio's PartitionData)."""
    body = _response_bytes(_fetch_response_v17(result, 2))
    assert wire.fetch_error(body) is Errors.NONE
    data = wire.fetch_answers(body)[(TOPIC_ID, 2)]
    assert (
        int(data.error_code), int(data.high_watermark), int(data.log_start_offset),
        bytes(data.records or b""), (data.diverging_epoch.epoch, data.diverging_epoch.end_offset),
        (data.current_leader.leader_id, data.current_leader.leader_epoch),
    ) == seen


def test_a_top_level_fetch_error_counts_for_every_partition() -> None:
    schema = response_schema(int(ApiKey.FETCH), wire.FETCH_VERSION)
    body = _response_bytes(
        build(schema, error_code=Errors.INCONSISTENT_CLUSTER_ID, session_id=0, responses=())
    )
    assert wire.fetch_error(body) is Errors.INCONSISTENT_CLUSTER_ID
    assert wire.fetch_answers(body) == {}


def test_offset_for_leader_epoch_round_trips() -> None:
    """One shape, v4's entities: the follower's request goes through the bytes unchanged, every
    advertised version lifts into v4 and v4's answer lowers into it and back."""
    partition = wire.OffsetForLeaderPartition(
        partition=i32(2), current_leader_epoch=i32(5), leader_epoch=i32(4)
    )
    sent = ofle_req.OffsetForLeaderEpochRequest(
        replica_id=i32(3),
        topics=(ofle_req.OffsetForLeaderTopic(topic=TopicName("orders"), partitions=(partition,)),),
    )
    body = _request_bytes(sent)
    assert body == sent and int(body.replica_id) == 3
    answers = [
        wire.epoch_end_offset(2, Errors.NONE, leader_epoch=4, end_offset=97),
        wire.epoch_end_offset(3, Errors.FENCED_LEADER_EPOCH),
    ]
    response = wire.offset_for_leader_epoch_response([("orders", answers)])
    key = int(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    # v4 to v4 is the entity itself, no copy (issue 35: thousands of partitions a request).
    assert convert(sent, type(sent)) is sent and convert(response, type(response)) is response
    for version in BROKER_API_VERSIONS[ApiKey.OFFSET_FOR_LEADER_EPOCH].versions():
        older = convert(sent, request_schema(key, version))
        assert convert(older, type(sent)).topics == sent.topics
        lowered = convert(response, response_schema(key, version))
        back = _response_bytes(lowered)
        assert [str(t.topic) for t in back.topics] == ["orders"]
        assert [dataclasses.astuple(p) for p in back.topics[0].partitions] == [
            dataclasses.astuple(a) for a in answers
        ]
