"""The Raft RPCs on Kafka's wire protocol. The raft core builds and reads Kafka's own messages
(raft.core.messages, kio's entities), so what it sends is what travels: every raft API version a
controller advertises encodes to exactly the bytes b924f94's translators wrote for the same
values (tests/unit/raft_wire_b924f94.json, captured from that commit's request_to_kafka /
response_to_kafka / error_to_kafka), and what Kafka's messages have no field for is derived as
the core does (the receiver of EndQuorumEpoch finds itself among the candidates, a Fetch names
no endpoint, DescribeQuorum's Nodes are per node id)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.types import TopicName
from kio.static.primitive import i32

from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import CONTROLLER_API_VERSIONS
from kafkawire.errors import Errors
from kafkawire.framing import FrameDecoder
from kafkawire.messages import decode_request, decode_response, encode_request, encode_response
from raft.core.messages import (
    AddRaftVoterRequest,
    AddRaftVoterRequestV0,
    EndQuorumEpochResponse,
    add_raft_voter_request,
    add_raft_voter_response,
    answered_partition,
    begin_quorum_epoch_request,
    begin_quorum_epoch_response,
    describe_quorum_request,
    describe_quorum_response,
    end_quorum_epoch_request,
    end_quorum_epoch_response,
    error_of,
    error_response,
    fetch_request,
    fetch_response,
    fetch_snapshot_request,
    fetch_snapshot_response,
    remove_raft_voter_request,
    remove_raft_voter_response,
    replica_state,
    update_raft_voter_request,
    update_raft_voter_response,
    vote_request,
    vote_response,
)
from raft.runtime.kafka_raft_apis import RAFT_API_KEYS, in_version
from tests.unit.test_raft_replica import DIRS, elect, replica

D1, D2, D3 = (uuid.UUID(int=n) for n in (0x11, 0x22, 0x33))
RECORDS = bytes(range(256)) * 3  # opaque record batch bytes: carried as stored
GOLDEN: dict[str, str] = json.loads(
    (Path(__file__).with_name("raft_wire_b924f94.json")).read_text())


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


# (api key, request, answers) — the values b924f94's CASES had, as Kafka's messages.
CASES: list[tuple[ApiKey, Any, list[Any]]] = [
    (ApiKey.VOTE,
     vote_request(7, 1, D1, 2, D2, 6, 120, pre_vote=True, cluster_id="c1"),
     [vote_response(leader_id=3, leader_epoch=7, vote_granted=True),
      vote_response(Errors.INVALID_VOTER_KEY, -1, 7),
      vote_response(Errors.INCONSISTENT_CLUSTER_ID)]),
    (ApiKey.BEGIN_QUORUM_EPOCH,
     begin_quorum_epoch_request(1, 8, "127.0.0.1:19091", 2, D2, "c1"),
     [begin_quorum_epoch_response(leader_id=1, leader_epoch=8),
      begin_quorum_epoch_response(Errors.FENCED_LEADER_EPOCH, 3, 9)]),
    (ApiKey.END_QUORUM_EPOCH,
     end_quorum_epoch_request(1, 8, [3, 2], "c1", 2, D2),
     [end_quorum_epoch_response(leader_id=-1, leader_epoch=8)]),
    (ApiKey.FETCH,
     fetch_request(2, D2, 1500, 7, 8, max_wait_ms=500, max_bytes=1 << 20, cluster_id="c1"),
     [fetch_response(leader_id=1, leader_epoch=8, leader_endpoint="127.0.0.1:19091",
                     high_watermark=1490, log_start_offset=100, records=RECORDS),
      fetch_response(leader_id=1, leader_epoch=8, leader_endpoint="127.0.0.1:19091",
                     high_watermark=10, log_start_offset=0, diverging_epoch=6,
                     diverging_end_offset=1200),
      fetch_response(leader_id=1, leader_epoch=8, leader_endpoint="127.0.0.1:19091",
                     high_watermark=10, log_start_offset=900, snapshot_end_offset=900,
                     snapshot_epoch=5),
      fetch_response(Errors.NOT_LEADER_OR_FOLLOWER, 3, 9, "127.0.0.1:19093")]),
    (ApiKey.FETCH_SNAPSHOT,
     fetch_snapshot_request(2, 8, 900, 5, 4096, max_bytes=65536, replica_directory_id=D2,
                            cluster_id="c1"),
     [fetch_snapshot_response(leader_id=1, leader_epoch=8, leader_endpoint="127.0.0.1:19091",
                              snapshot_end_offset=900, snapshot_epoch=5, size=10_000,
                              position=4096, unaligned_records=RECORDS),
      fetch_snapshot_response(Errors.SNAPSHOT_NOT_FOUND, 1, 8, "127.0.0.1:19091",
                              snapshot_end_offset=900, snapshot_epoch=5)]),
    (ApiKey.DESCRIBE_QUORUM,
     describe_quorum_request(),
     [describe_quorum_response(
         leader_id=1, leader_epoch=8, high_watermark=1490,
         current_voters=[replica_state(1, D1, 1500, -1, 99), replica_state(2, D2, 1490, 98, 97)],
         observers=[replica_state(2, D3, 1400, 96, -1), replica_state(4, D3, 1300, 95, 94)],
         # seed 003: a replacement disk of voter 2 is reachable where voter 2 listens
         endpoints=[(1, {"CONTROLLER": "127.0.0.1:19091"}), (2, {"CONTROLLER": "127.0.0.1:19092"}),
                    (2, {"CONTROLLER": "127.0.0.1:19092"})]),
      describe_quorum_response(
          Errors.NOT_LEADER_OR_FOLLOWER, "not the quorum leader", leader_id=1, leader_epoch=8,
          endpoints=[(1, {"CONTROLLER": "127.0.0.1:19091"})])]),
    (ApiKey.ADD_RAFT_VOTER,
     add_raft_voter_request(4, D3, {"CONTROLLER": "127.0.0.1:19094"}, 15_000, "c1"),
     [add_raft_voter_response(),
      add_raft_voter_response(Errors.DUPLICATE_VOTER, "(4, ...) is a voter")]),
    (ApiKey.REMOVE_RAFT_VOTER,
     remove_raft_voter_request(2, D2, "c1"),
     [remove_raft_voter_response(),
      remove_raft_voter_response(Errors.VOTER_NOT_FOUND, "no voter (2, ...)")]),
    (ApiKey.UPDATE_RAFT_VOTER,
     update_raft_voter_request(8, 2, D2, {"CONTROLLER": "127.0.0.1:19192"}, 0, 1, "c1"),
     [update_raft_voter_response(leader_id=1, leader_epoch=8, leader_endpoint="127.0.0.1:19091"),
      update_raft_voter_response(Errors.VOTER_NOT_FOUND, 1, 8, "127.0.0.1:19091")]),
]


def _advertised() -> list[tuple[ApiKey, int]]:
    return [(key, v) for key in RAFT_API_KEYS for v in CONTROLLER_API_VERSIONS[key].versions()]


def test_every_raft_api_is_advertised_and_covered() -> None:
    assert {case[0] for case in CASES} == set(RAFT_API_KEYS) <= set(CONTROLLER_API_VERSIONS)
    assert len(GOLDEN) == len(CASES) + sum(
        len(next(c for c in CASES if c[0] == key)[2]) + 1 for key, _v in _advertised())


@pytest.mark.parametrize("api_key", [case[0] for case in CASES], ids=lambda k: k.name)
def test_request_bytes_are_the_ones_b924f94_sent(api_key: ApiKey) -> None:
    _, request, _ = next(c for c in CASES if c[0] == api_key)
    assert int(request.__api_key__) == api_key
    assert int(request.__version__) in CONTROLLER_API_VERSIONS[api_key]
    assert encode_request(request, 7, "node-2").hex() == GOLDEN[f"{api_key.name} request"]
    # What the receiver decodes encodes to the same bytes (kio reads a zero uuid as None).
    assert encode_request(_wire_request(request), 7, "node-2") == encode_request(
        request, 7, "node-2")


@pytest.mark.parametrize(("api_key", "version"), _advertised(), ids=str)
def test_response_bytes_are_the_ones_b924f94_sent(api_key: ApiKey, version: int) -> None:
    _, request, responses = next(c for c in CASES if c[0] == api_key)
    for index, response in enumerate(responses):
        body = in_version(response, version)
        assert int(body.__version__) == version
        assert encode_response(body, 9).hex() == GOLDEN[f"{api_key.name} v{version} response {index}"]
        assert encode_response(_wire_response(body), 9) == encode_response(body, 9)
    error = in_version(error_response(request, Errors.UNKNOWN_SERVER_ERROR, "boom"), version)
    assert encode_response(error, 9).hex() == GOLDEN[f"{api_key.name} v{version} error"]


def test_add_raft_voter_v0_is_served_as_v1_with_the_commit_awaited() -> None:
    v1 = add_raft_voter_request(4, D3, {"CONTROLLER": "127.0.0.1:19094"}, 5000, "c1")
    v0 = AddRaftVoterRequestV0(cluster_id=v1.cluster_id, timeout=v1.timeout,
                               voter_id=v1.voter_id, voter_directory_id=v1.voter_directory_id,
                               listeners=v1.listeners)  # type: ignore[arg-type]
    decoded = _wire_request(v0)
    assert isinstance(decoded, AddRaftVoterRequestV0) and not hasattr(decoded, "ack_when_committed")
    for ack in (False, True):
        body = _wire_request(add_raft_voter_request(4, D3, {"CONTROLLER": "127.0.0.1:19094"}, 5000,
                                                    "c1", ack_when_committed=ack))
        assert isinstance(body, AddRaftVoterRequest) and bool(body.ack_when_committed) is ack
    # The leader answers a v0 request the same way, in v0's shape.
    node = replica(1)
    elect(node)
    answer = node.handle_request(-1, decoded, 2100).response
    assert int(in_version(answer, 0).__version__) == 0
    assert error_of(answer) == Errors.REQUEST_TIMED_OUT  # no commit yet in its epoch (rule 5)


def test_an_empty_cluster_id_stays_empty_and_null_stays_null() -> None:
    # The receiver checks "" (INCONSISTENT_CLUSTER_ID) and skips only null (Kafka's rule).
    for cluster_id in ("", None):
        body = _wire_request(add_raft_voter_request(4, D3, {"CONTROLLER": "127.0.0.1:19094"},
                                                    5000, cluster_id))
        assert body.cluster_id == cluster_id


def test_end_quorum_epoch_receiver_finds_its_key_among_the_candidates() -> None:
    # The leader fills in only the receiver's directory id (node 2's here); node 3 is a
    # candidate of any disk, and a node that is no candidate is not checked (as Kafka).
    body = _wire_request(end_quorum_epoch_request(1, 8, [3, 2], "c1", 2, DIRS[2]))
    for node_id in (2, 3, 5):
        answer = replica(node_id).handle_request(1, body, 0).response
        assert isinstance(answer, EndQuorumEpochResponse) and error_of(answer) == 0
    wrong = _wire_request(end_quorum_epoch_request(1, 8, [3, 2], "c1", 2, D3))
    answer = replica(2).handle_request(1, wrong, 0).response
    assert error_of(answer) == Errors.INVALID_VOTER_KEY


def test_another_topic_partition_is_an_invalid_request() -> None:
    body = DescribeQuorumRequest(topics=(TopicData(topic_name=TopicName("orders"), partitions=(
        PartitionData(partition_index=i32(0)),)),))
    answer = _wire_response(replica(1).handle_request(-1, body, 0).response)
    assert int(answer.error_code) == Errors.INVALID_REQUEST
    assert answer.error_message == "only __cluster_metadata-0 is served here"


def test_cluster_id_mismatch_travels_at_the_top_level_as_kafka_puts_it() -> None:
    body = _wire_response(vote_response(Errors.INCONSISTENT_CLUSTER_ID))
    assert int(body.error_code) == Errors.INCONSISTENT_CLUSTER_ID
    part = answered_partition(body)
    assert part is not None and int(part.error_code) == 0
