"""The broker family's translations on Kafka's protocol round-trip through the bytes: the core's
dataclass -> kio -> encoded frame -> kio -> the core's dataclass is the same value, for every
version advertised (BrokerRegistration v4, BrokerHeartbeat v1, AlterPartition v3 on
controllers; Fetch v17 with ReplicaState and OffsetForLeaderEpoch v4 between brokers)."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest

from broker.core import messages as bm
from broker.runtime import kafka_replication as wire
from controller.core import messages as cm
from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import BROKER_API_VERSIONS, CONTROLLER_API_VERSIONS
from kafkawire.entities import build, item_type
from kafkawire.errors import Errors
from kafkawire.framing import PREFIX_BYTES
from kafkawire.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    response_schema,
)
from metadata import broker_lifecycle_wire as lifecycle

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


def test_the_controller_advertises_exactly_the_lifecycle_versions_translated_here() -> None:
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
    cm.BrokerRegistrationRequest(
        4,
        "MkU3OEVBNTcwNTJENDM2Qk",
        uuid.uuid4(),
        [cm.BrokerListener("PLAINTEXT", "127.0.0.1", 9092)],
        rack="rack-a",
        log_dirs=[DIR_A, DIR_B],
        previous_broker_epoch=118,  # rule 12: the clean-shutdown file's epoch
    ),
    cm.BrokerRegistrationRequest(0, "c", uuid.uuid4()),  # no listener, rack or log dirs
]


@pytest.mark.parametrize("request_", REGISTRATIONS)
def test_broker_registration_request_round_trips(request_: cm.BrokerRegistrationRequest) -> None:
    kio = lifecycle.registration_request_to_kio(request_)
    assert int(kio.__version__) == 4 and kio.cluster_id == request_.cluster_id
    assert lifecycle.registration_request_from_kio(_request_bytes(kio)) == request_


@pytest.mark.parametrize(
    "response",
    [
        cm.BrokerRegistrationResponse(broker_epoch=42),
        cm.BrokerRegistrationResponse(int(Errors.INCONSISTENT_CLUSTER_ID)),
        cm.BrokerRegistrationResponse(int(Errors.DUPLICATE_BROKER_REGISTRATION)),
        cm.BrokerRegistrationResponse(int(Errors.NOT_CONTROLLER)),
    ],
)
def test_broker_registration_response_round_trips(response: cm.BrokerRegistrationResponse) -> None:
    body = _response_bytes(lifecycle.registration_response_to_kio(response))
    assert lifecycle.registration_response_from_kio(body) == response


@pytest.mark.parametrize(
    "request_",
    [
        cm.BrokerHeartbeatRequest(3, 77, 1234),
        cm.BrokerHeartbeatRequest(3, 77, 1234, want_fence=True),
        cm.BrokerHeartbeatRequest(3, 77, 1234, want_shut_down=True),
    ],
)
def test_broker_heartbeat_request_round_trips(request_: cm.BrokerHeartbeatRequest) -> None:
    kio = lifecycle.heartbeat_request_to_kio(request_)
    assert int(kio.__version__) == 1
    assert lifecycle.heartbeat_request_from_kio(_request_bytes(kio)) == request_


@pytest.mark.parametrize(
    "response",
    [
        cm.BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False),
        cm.BrokerHeartbeatResponse(is_caught_up=True, is_fenced=True, should_shut_down=True),
        cm.BrokerHeartbeatResponse(int(Errors.STALE_BROKER_EPOCH)),
        cm.BrokerHeartbeatResponse(int(Errors.BROKER_ID_NOT_REGISTERED)),
    ],
)
def test_broker_heartbeat_response_round_trips(response: cm.BrokerHeartbeatResponse) -> None:
    body = _response_bytes(lifecycle.heartbeat_response_to_kio(response))
    assert lifecycle.heartbeat_response_from_kio(body) == response


ALTER_PARTITION = cm.AlterPartitionRequest(
    1,
    55,
    [
        cm.AlterPartitionTopicData(
            TOPIC_ID,
            [
                cm.AlterPartitionPartitionData(
                    0,
                    leader_epoch=3,
                    # KIP-903: each member with the broker epoch it fetched with (rule 17)
                    new_isr_with_epochs=[cm.BrokerState(1, 55), cm.BrokerState(2, 61)],
                    leader_recovery_state=1,  # KIP-704: RECOVERING
                    partition_epoch=9,
                ),
                cm.AlterPartitionPartitionData(2, 4, [cm.BrokerState(1)], 0, 10),
            ],
        )
    ],
)


def test_alter_partition_request_round_trips() -> None:
    kio = lifecycle.alter_partition_request_to_kio(ALTER_PARTITION)
    assert int(kio.__version__) == 3
    assert lifecycle.alter_partition_request_from_kio(_request_bytes(kio)) == ALTER_PARTITION


@pytest.mark.parametrize(
    "response",
    [
        cm.AlterPartitionResponse(
            topics=[
                cm.AlterPartitionTopicResult(
                    TOPIC_ID,
                    [
                        cm.AlterPartitionPartitionResult(0, 0, 1, 3, [1, 2], 0, 10),
                        cm.AlterPartitionPartitionResult(1, int(Errors.FENCED_LEADER_EPOCH)),
                        cm.AlterPartitionPartitionResult(2, int(Errors.INVALID_UPDATE_VERSION)),
                        cm.AlterPartitionPartitionResult(3, int(Errors.INELIGIBLE_REPLICA)),
                        cm.AlterPartitionPartitionResult(4, int(Errors.NEW_LEADER_ELECTED), 2, 4),
                    ],
                )
            ]
        ),
        cm.AlterPartitionResponse(int(Errors.STALE_BROKER_EPOCH)),
    ],
)
def test_alter_partition_response_round_trips(response: cm.AlterPartitionResponse) -> None:
    body = _response_bytes(lifecycle.alter_partition_response_to_kio(response))
    assert lifecycle.alter_partition_response_from_kio(body) == response


def test_lifecycle_dispatch_picks_the_api_of_each_core_request() -> None:
    for request_, api_key in (
        (REGISTRATIONS[0], ApiKey.BROKER_REGISTRATION),
        (cm.BrokerHeartbeatRequest(1, 2, 3), ApiKey.BROKER_HEARTBEAT),
        (ALTER_PARTITION, ApiKey.ALTER_PARTITION),
    ):
        assert int(lifecycle.lifecycle_request_to_kio(request_).__api_key__) == api_key
    with pytest.raises(TypeError):
        lifecycle.lifecycle_request_to_kio(cm.CreateTopicsRequest([]))


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
    "result",
    [
        bm.FetchResponse(high_watermark=118, log_start_offset=0, records=b"\x00batch-bytes"),
        # Rule 22: the follower must truncate to epoch 4's end first.
        bm.FetchResponse(
            high_watermark=118, log_start_offset=0, diverging_epoch=4, diverging_end_offset=97
        ),
        bm.FetchResponse(int(Errors.FENCED_LEADER_EPOCH), leader_id=1, leader_epoch=6),
        bm.FetchResponse(int(Errors.NOT_LEADER_OR_FOLLOWER), leader_id=-1, leader_epoch=6),
    ],
)
def test_fetch_partition_answer_round_trips(result: bm.FetchResponse) -> None:
    body = _response_bytes(_fetch_response_v17(result, 2))
    assert wire.fetch_response_from_kio(body, TOPIC_ID, 2) == result


def test_a_top_level_fetch_error_counts_for_the_partition() -> None:
    schema = response_schema(int(ApiKey.FETCH), wire.FETCH_VERSION)
    body = _response_bytes(
        build(schema, error_code=Errors.INCONSISTENT_CLUSTER_ID, session_id=0, responses=())
    )
    answer = wire.fetch_response_from_kio(body, TOPIC_ID, 2)
    assert Errors.of(answer.error_code) is Errors.INCONSISTENT_CLUSTER_ID
    missing = wire.fetch_response_from_kio(
        _response_bytes(_fetch_response_v17(bm.FetchResponse(), 0)), TOPIC_ID, 2
    )
    assert Errors.of(missing.error_code) is Errors.UNKNOWN_SERVER_ERROR


def test_offset_for_leader_epoch_round_trips() -> None:
    request_ = bm.OffsetForLeaderEpochRequest(
        "orders", 2, leader_epoch=4, current_leader_epoch=5, replica_id=3
    )
    body = _request_bytes(wire.offset_for_leader_epoch_request_to_kio(request_))
    assert int(body.replica_id) == 3
    [topic] = body.topics
    [partition] = topic.partitions
    assert (
        bm.OffsetForLeaderEpochRequest(
            topic.topic,
            int(partition.partition),
            int(partition.leader_epoch),
            int(partition.current_leader_epoch),
            int(body.replica_id),
        )
        == request_
    )
    schema = response_schema(
        int(ApiKey.OFFSET_FOR_LEADER_EPOCH), wire.OFFSET_FOR_LEADER_EPOCH_VERSION
    )
    topic_cls = item_type(schema, "topics")
    partition_cls = item_type(topic_cls, "partitions")
    for answer in (
        bm.OffsetForLeaderEpochResponse(leader_epoch=4, end_offset=97),
        bm.OffsetForLeaderEpochResponse(int(Errors.FENCED_LEADER_EPOCH)),
    ):
        kio = build(
            schema,
            topics=(
                topic_cls(
                    topic="orders",
                    partitions=(
                        wire.offset_for_leader_epoch_partition_to_kio(partition_cls, 2, answer),
                    ),
                ),
            ),
        )
        back = wire.offset_for_leader_epoch_response_from_kio(_response_bytes(kio), "orders", 2)
        assert back == answer
