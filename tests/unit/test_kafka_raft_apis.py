"""The Raft RPCs on Kafka's wire protocol: every raft API version a controller advertises
round-trips core dataclass -> kio -> bytes (kafkawire.messages) -> kio -> core dataclass, both
requests (client -> leader) and responses (leader -> client), and the values Kafka's messages
have no field for are derived as raft/runtime/kafka_raft_apis.py says."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import replace
from typing import Any

import pytest
from kio.schema.add_raft_voter.v0.request import AddRaftVoterRequest, Listener
from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, u16

from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import CONTROLLER_API_VERSIONS
from kafkawire.errors import Errors, KafkaError
from kafkawire.framing import FrameDecoder
from kafkawire.messages import decode_request, decode_response, encode_request, encode_response
from raft.core import messages as rm
from raft.runtime.kafka_raft_apis import (
    RAFT_API_KEYS,
    error_to_kafka,
    request_from_kafka,
    request_to_kafka,
    response_from_kafka,
    response_to_kafka,
)

D1, D2, D3 = (uuid.UUID(int=n) for n in (0x11, 0x22, 0x33))
RECORDS = bytes(range(256)) * 3  # opaque record batch bytes: carried as stored


def _unframe(data: bytes) -> bytes:
    (payload,) = FrameDecoder(1 << 24).feed(data)
    return payload


def _wire_request(body: Any) -> Any:
    request = decode_request(_unframe(encode_request(body, 7, "node-2")))
    assert request.header.client_id == "node-2"
    return request.body


def _wire_response(body: Any) -> Any:
    api_key, version = int(body.__api_key__), int(body.__version__)
    correlation_id, decoded = decode_response(_unframe(encode_response(body, 9)), api_key, version)
    assert correlation_id == 9
    return decoded


# (api key, core request, core responses) — the receiver of EndQuorumEpoch is node 2.
CASES: list[tuple[ApiKey, object, list[object]]] = [
    (ApiKey.VOTE,
     rm.VoteRequest(7, 1, D1, 2, D2, 6, 120, pre_vote=True, cluster_id="c1"),
     [rm.VoteResponse(leader_id=3, leader_epoch=7, vote_granted=True),
      rm.VoteResponse(error_code=int(Errors.INVALID_VOTER_KEY), leader_id=-1, leader_epoch=7),
      rm.VoteResponse(error_code=int(Errors.INCONSISTENT_CLUSTER_ID))]),
    (ApiKey.BEGIN_QUORUM_EPOCH,
     rm.BeginQuorumEpochRequest(1, 8, "127.0.0.1:19091", 2, D2, "c1"),
     [rm.BeginQuorumEpochResponse(leader_id=1, leader_epoch=8),
      rm.BeginQuorumEpochResponse(error_code=int(Errors.FENCED_LEADER_EPOCH), leader_id=3,
                                  leader_epoch=9)]),
    (ApiKey.END_QUORUM_EPOCH,
     rm.EndQuorumEpochRequest(1, 8, [3, 2], "c1", 2, D2),
     [rm.EndQuorumEpochResponse(leader_id=-1, leader_epoch=8)]),
    (ApiKey.FETCH,
     rm.FetchRequest(2, D2, 1500, 7, 8, max_wait_ms=500, max_bytes=1 << 20, cluster_id="c1"),
     [rm.FetchResponse(leader_id=1, leader_epoch=8, leader_endpoint="127.0.0.1:19091",
                       high_watermark=1490, log_start_offset=100, records=RECORDS),
      rm.FetchResponse(leader_id=1, leader_epoch=8, leader_endpoint="127.0.0.1:19091",
                       high_watermark=10, log_start_offset=0, diverging_epoch=6,
                       diverging_end_offset=1200),
      rm.FetchResponse(leader_id=1, leader_epoch=8, leader_endpoint="127.0.0.1:19091",
                       high_watermark=10, log_start_offset=900, snapshot_end_offset=900,
                       snapshot_epoch=5),
      rm.FetchResponse(error_code=int(Errors.NOT_LEADER_OR_FOLLOWER), leader_id=3,
                       leader_epoch=9, leader_endpoint="127.0.0.1:19093")]),
    (ApiKey.FETCH_SNAPSHOT,
     rm.FetchSnapshotRequest(2, 8, 900, 5, 4096, max_bytes=65536, replica_directory_id=D2,
                             cluster_id="c1"),
     [rm.FetchSnapshotResponse(leader_id=1, leader_epoch=8, leader_endpoint="127.0.0.1:19091",
                               snapshot_end_offset=900, snapshot_epoch=5, size=10_000,
                               position=4096, unaligned_records=RECORDS),
      rm.FetchSnapshotResponse(error_code=int(Errors.SNAPSHOT_NOT_FOUND), leader_id=1,
                               leader_epoch=8, leader_endpoint="127.0.0.1:19091",
                               snapshot_end_offset=900, snapshot_epoch=5)]),
    (ApiKey.DESCRIBE_QUORUM,
     rm.DescribeQuorumRequest(),
     [rm.DescribeQuorumResponse(
         leader_id=1, leader_epoch=8, high_watermark=1490,
         current_voters=[rm.ReplicaState(1, D1, 1500, -1, 99), rm.ReplicaState(2, D2, 1490, 98,
                                                                               97)],
         observers=[rm.ReplicaState(2, D3, 1400, 96, -1), rm.ReplicaState(4, D3, 1300, 95, 94)],
         voter_endpoints=[rm.VoterEndpoint(1, D1, {"CONTROLLER": "127.0.0.1:19091"}),
                          rm.VoterEndpoint(2, D2, {"CONTROLLER": "127.0.0.1:19092"})],
         # seed 003: a replacement disk of voter 2 is reachable where voter 2 listens
         observer_endpoints=[rm.VoterEndpoint(2, D3, {"CONTROLLER": "127.0.0.1:19092"})]),
      rm.DescribeQuorumResponse(
          error_code=int(Errors.NOT_LEADER_OR_FOLLOWER), error_message="not the quorum leader",
          leader_id=1, leader_epoch=8,
          voter_endpoints=[rm.VoterEndpoint(1, rm.NO_DIRECTORY_ID,
                                            {"CONTROLLER": "127.0.0.1:19091"})])]),
    (ApiKey.ADD_RAFT_VOTER,
     rm.AddRaftVoterRequest(4, D3, {"CONTROLLER": "127.0.0.1:19094"}, 15_000, "c1"),
     [rm.AddRaftVoterResponse(),
      rm.AddRaftVoterResponse(error_code=int(Errors.DUPLICATE_VOTER),
                              error_message="(4, ...) is a voter")]),
    (ApiKey.REMOVE_RAFT_VOTER,
     rm.RemoveRaftVoterRequest(2, D2, 30_000, "c1"),
     [rm.RemoveRaftVoterResponse(),
      rm.RemoveRaftVoterResponse(error_code=int(Errors.VOTER_NOT_FOUND),
                                 error_message="no voter (2, ...)")]),
    (ApiKey.UPDATE_RAFT_VOTER,
     rm.UpdateRaftVoterRequest(8, 2, D2, {"CONTROLLER": "127.0.0.1:19192"}, 0, 1, "c1"),
     [rm.UpdateRaftVoterResponse(leader_id=1, leader_epoch=8,
                                 leader_endpoint="127.0.0.1:19091"),
      rm.UpdateRaftVoterResponse(error_code=int(Errors.VOTER_NOT_FOUND), leader_id=1,
                                 leader_epoch=8, leader_endpoint="127.0.0.1:19091")]),
]


def _advertised() -> list[tuple[ApiKey, int]]:
    return [(key, v) for key in RAFT_API_KEYS for v in CONTROLLER_API_VERSIONS[key].versions()]


def test_every_raft_api_is_advertised_and_covered() -> None:
    assert {case[0] for case in CASES} == set(RAFT_API_KEYS) <= set(CONTROLLER_API_VERSIONS)


@pytest.mark.parametrize("api_key", [case[0] for case in CASES], ids=lambda k: k.name)
def test_request_round_trips_through_the_wire(api_key: ApiKey) -> None:
    _, request, _ = next(c for c in CASES if c[0] == api_key)
    body = request_to_kafka(request)
    assert int(body.__api_key__) == api_key
    assert int(body.__version__) in CONTROLLER_API_VERSIONS[api_key]
    decoded = request_from_kafka(api_key, _wire_request(body), local_node_id=2)
    assert decoded == request


@pytest.mark.parametrize(("api_key", "version"), _advertised(), ids=str)
def test_responses_round_trip_through_the_wire(api_key: ApiKey, version: int) -> None:
    _, request, responses = next(c for c in CASES if c[0] == api_key)
    for response in responses:
        body = response_to_kafka(api_key, version, response)
        assert int(body.__version__) == version
        back = response_from_kafka(request, _wire_response(body))
        # Only DescribeQuorum, AddRaftVoter and RemoveRaftVoter carry an error message.
        expected = response if hasattr(_wire_response(body), "error_message") else replace(
            response, error_message="")  # type: ignore[type-var]
        assert back == expected


def test_add_raft_voter_v0_request_has_no_ack_when_committed_but_the_same_key() -> None:
    body = AddRaftVoterRequest(
        cluster_id="c1", timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        voter_id=i32(4), voter_directory_id=D3,
        listeners=(Listener(name="CONTROLLER", host="127.0.0.1", port=u16(19094)),))
    decoded = request_from_kafka(ApiKey.ADD_RAFT_VOTER, _wire_request(body), local_node_id=1)
    assert decoded == rm.AddRaftVoterRequest(4, D3, {"CONTROLLER": "127.0.0.1:19094"}, 5000, "c1")


def test_add_raft_voter_v1_carries_ack_when_committed_both_ways() -> None:
    for ack in (False, True):
        request = rm.AddRaftVoterRequest(4, D3, {"CONTROLLER": "127.0.0.1:19094"}, 5000, "c1",
                                         ack_when_committed=ack)
        body = _wire_request(request_to_kafka(request))
        assert bool(body.ack_when_committed) is ack
        assert request_from_kafka(ApiKey.ADD_RAFT_VOTER, body, local_node_id=1) == request


def test_an_empty_cluster_id_stays_empty_and_null_stays_null() -> None:
    # The receiver checks "" (INCONSISTENT_CLUSTER_ID) and skips only null (Kafka's rule).
    for cluster_id in ("", None):
        body = AddRaftVoterRequest(
            cluster_id=cluster_id, timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
            voter_id=i32(4), voter_directory_id=D3,
            listeners=(Listener(name="CONTROLLER", host="127.0.0.1", port=u16(19094)),))
        decoded = request_from_kafka(ApiKey.ADD_RAFT_VOTER, _wire_request(body), local_node_id=1)
        assert isinstance(decoded, rm.AddRaftVoterRequest)
        assert decoded.cluster_id == cluster_id


def test_end_quorum_epoch_receiver_finds_its_key_among_the_candidates() -> None:
    body = _wire_request(request_to_kafka(rm.EndQuorumEpochRequest(1, 8, [3, 2], "c1", 2, D2)))
    # Node 3 is a candidate whose directory id the leader did not fill in (any of its disks);
    # a node that is no candidate is not checked (-1), as Kafka does not check it either.
    assert request_from_kafka(ApiKey.END_QUORUM_EPOCH, body, local_node_id=3) == (
        rm.EndQuorumEpochRequest(1, 8, [3, 2], "c1", 3, rm.NO_DIRECTORY_ID))
    assert request_from_kafka(ApiKey.END_QUORUM_EPOCH, body, local_node_id=5) == (
        rm.EndQuorumEpochRequest(1, 8, [3, 2], "c1", -1, rm.NO_DIRECTORY_ID))


def test_fetch_replica_endpoint_is_derived_by_the_leader() -> None:
    body = _wire_request(request_to_kafka(rm.FetchRequest(2, D3, 0, 0, 8, cluster_id="c1")))
    known = {2: "127.0.0.1:19092"}
    decoded = request_from_kafka(ApiKey.FETCH, body, local_node_id=1,
                                 replica_endpoint=lambda n: known.get(n, ""))
    assert isinstance(decoded, rm.FetchRequest)
    assert decoded.replica_endpoint == "127.0.0.1:19092"


def test_another_topic_partition_is_an_invalid_request() -> None:
    body = DescribeQuorumRequest(topics=(TopicData(topic_name=TopicName("orders"), partitions=(
        PartitionData(partition_index=i32(0)),)),))
    with pytest.raises(KafkaError) as info:
        request_from_kafka(ApiKey.DESCRIBE_QUORUM, body, local_node_id=1)
    assert info.value.error == Errors.INVALID_REQUEST
    answer = _wire_response(error_to_kafka(ApiKey.DESCRIBE_QUORUM, 2, Errors.INVALID_REQUEST, "x"))
    assert int(answer.error_code) == Errors.INVALID_REQUEST and answer.error_message == "x"


def test_cluster_id_mismatch_travels_at_the_top_level_as_kafka_puts_it() -> None:
    body = _wire_response(response_to_kafka(
        ApiKey.VOTE, 2, rm.VoteResponse(error_code=int(Errors.INCONSISTENT_CLUSTER_ID))))
    assert int(body.error_code) == Errors.INCONSISTENT_CLUSTER_ID
    assert int(body.topics[0].partitions[0].error_code) == 0
