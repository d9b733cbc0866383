"""The raft core's messages are Kafka's own: kio's frozen entities, generated from Kafka's JSON
message definitions (KIP-595 with KIP-853's voter keys, KIP-996's pre-vote). The sender's core
builds one, the wire carries it, the receiver's core reads it: one shape, as h11's events are
its one vocabulary. One version each, the newest a controller serves (kafkawire's
CONTROLLER_API_VERSIONS): Vote v2, BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v17,
FetchSnapshot v1, DescribeQuorum v2, AddRaftVoter v1 (v0 read too), RemoveRaftVoter v0,
UpdateRaftVoter v0.

Here: the constructors (a message filled in from the core's values, with Kafka's defaults, for
the metadata partition `__cluster_metadata-0`) and the readers every handler needs (the one
partition, the error, the leader a response names). Kafka's messages carry an error message
only in DescribeQuorum, AddRaftVoter and RemoveRaftVoter; elsewhere the code travels alone.

Requests name the cluster id; a replica answers INCONSISTENT_CLUSTER_ID to another cluster, an
empty id included: only None (Kafka's null) skips the check (KafkaRaftClient.hasValidClusterId).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, cast

from kio.schema.add_raft_voter.v0 import request as arv0_rq
from kio.schema.add_raft_voter.v0 import response as arv0_rs
from kio.schema.add_raft_voter.v1 import request as arv_rq
from kio.schema.add_raft_voter.v1 import response as arv_rs
from kio.schema.begin_quorum_epoch.v1 import request as bqe_rq
from kio.schema.begin_quorum_epoch.v1 import response as bqe_rs
from kio.schema.describe_quorum.v2 import request as dq_rq
from kio.schema.describe_quorum.v2 import response as dq_rs
from kio.schema.end_quorum_epoch.v1 import request as eqe_rq
from kio.schema.end_quorum_epoch.v1 import response as eqe_rs
from kio.schema.fetch.v17 import request as fetch_rq
from kio.schema.fetch.v17 import response as fetch_rs
from kio.schema.fetch_snapshot.v1 import request as fs_rq
from kio.schema.fetch_snapshot.v1 import response as fs_rs
from kio.schema.remove_raft_voter.v0 import request as rrv_rq
from kio.schema.remove_raft_voter.v0 import response as rrv_rs
from kio.schema.types import BrokerId, TopicName
from kio.schema.update_raft_voter.v0 import request as urv_rq
from kio.schema.update_raft_voter.v0 import response as urv_rs
from kio.schema.vote.v2 import request as vote_rq
from kio.schema.vote.v2 import response as vote_rs
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64, u16

from kafkawire.constants import METADATA_TOPIC_ID, ZERO_UUID
from kafkawire.errors import Errors
from kafkawire.messages import error_code
from kafkawire.topic import CLUSTER_METADATA_TOPIC

# The messages, by the names the core uses.
VoteRequest = vote_rq.VoteRequest
VoteResponse = vote_rs.VoteResponse
BeginQuorumEpochRequest = bqe_rq.BeginQuorumEpochRequest
BeginQuorumEpochResponse = bqe_rs.BeginQuorumEpochResponse
EndQuorumEpochRequest = eqe_rq.EndQuorumEpochRequest
EndQuorumEpochResponse = eqe_rs.EndQuorumEpochResponse
FetchRequest = fetch_rq.FetchRequest
FetchResponse = fetch_rs.FetchResponse
FetchSnapshotRequest = fs_rq.FetchSnapshotRequest
FetchSnapshotResponse = fs_rs.FetchSnapshotResponse
DescribeQuorumRequest = dq_rq.DescribeQuorumRequest
DescribeQuorumResponse = dq_rs.DescribeQuorumResponse
AddRaftVoterRequest = arv_rq.AddRaftVoterRequest
AddRaftVoterRequestV0 = arv0_rq.AddRaftVoterRequest
AddRaftVoterResponse = arv_rs.AddRaftVoterResponse
AddRaftVoterResponseV0 = arv0_rs.AddRaftVoterResponse
RemoveRaftVoterRequest = rrv_rq.RemoveRaftVoterRequest
RemoveRaftVoterResponse = rrv_rs.RemoveRaftVoterResponse
UpdateRaftVoterRequest = urv_rq.UpdateRaftVoterRequest
UpdateRaftVoterResponse = urv_rs.UpdateRaftVoterResponse
ReplicaState = dq_rs.ReplicaState  # a voter's or observer's progress in DescribeQuorum

# Kafka's names for the metadata partition: topic `__cluster_metadata`, partition 0, and
# Uuid.METADATA_TOPIC_ID (0, 1) where a message names topics by id (Fetch v13+).
METADATA_TOPIC = CLUSTER_METADATA_TOPIC
METADATA_PARTITION = 0
# Kafka's Uuid.ZERO_UUID: "no directory id" (an old replica or an unknown key); on the wire
# kio reads it back as None.
NO_DIRECTORY_ID = ZERO_UUID
DEFAULT_LISTENER = "CONTROLLER"
# Kafka's RemoveRaftVoter has no timeout field: the leader waits up to this for the commit.
DEFAULT_VOTER_CHANGE_TIMEOUT_MS = 30_000

# Errors Kafka puts at the top level of a raft response (about the request, not the partition).
_TOP_LEVEL_ERRORS = frozenset(
    {Errors.INCONSISTENT_CLUSTER_ID, Errors.INVALID_REQUEST, Errors.UNKNOWN_SERVER_ERROR,
     Errors.CLUSTER_AUTHORIZATION_FAILED}
)
_TOPIC = TopicName(METADATA_TOPIC)
_PARTITION = i32(METADATA_PARTITION)
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


# kio's phantom types validate every value on construction (microseconds each, on every Fetch
# and its answer); the core's ints and bytes are in range by construction, so these only tag
# them for the type checker (a cast costs nothing at run time).
def _i8(value: int) -> i8:
    return cast(i8, value)


def _i16(value: int) -> i16:
    return cast(i16, value)


def _i32(value: int) -> i32:
    return cast(i32, value)


def _i64(value: int) -> i64:
    return cast(i64, value)


def _u16(value: int) -> u16:
    return cast(u16, value)


def _broker_id(value: int) -> BrokerId:
    return cast(BrokerId, value)


def _records(value: bytes) -> Records:
    return cast(Records, value)


def _timeout(value_ms: int) -> i32Timedelta:
    return cast(i32Timedelta, datetime.timedelta(milliseconds=value_ms))


def to_ms(value: datetime.timedelta) -> int:
    return int(value.total_seconds() * 1000)


def directory_id(value: uuid.UUID | None) -> uuid.UUID:
    """A directory id as read from a message (the zero id comes back from the wire as None)."""
    return NO_DIRECTORY_ID if value is None else value


def endpoint(host: str, port: int) -> str:
    return f"{host}:{port}"


def host_port(value: str) -> tuple[str, int] | None:
    """"host:port" (a bracketed IPv6 host too); None if it is not one."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _split(code: int) -> tuple[Any, Any]:
    """(top-level, partition-level) error codes for one error code."""
    error = Errors.of(code)
    if error in _TOP_LEVEL_ERRORS:
        return error_code(error), error_code(Errors.NONE)
    return error_code(Errors.NONE), error_code(error)


def _listeners(listeners: Mapping[str, str], cls: Any) -> tuple[Any, ...]:
    return tuple(
        cls(name=name, host=hp[0], port=_u16(hp[1]))
        for name, hp in ((n, host_port(e)) for n, e in listeners.items())
        if hp is not None
    )


def listeners_of(message: Any) -> dict[str, str]:
    """AddRaftVoter's or UpdateRaftVoter's listeners: name -> "host:port"."""
    return {lst.name: endpoint(lst.host, int(lst.port)) for lst in message.listeners}


def _node_endpoint(node_id: int, address: str, cls: Any) -> tuple[Any, ...]:
    hp = host_port(address)
    if node_id < 0 or hp is None:
        return ()
    return (cls(node_id=_broker_id(node_id), host=hp[0], port=hp[1]),)


# -- requests -----------------------------------------------------------------------------------


def vote_request(replica_epoch: int, replica_id: int, replica_directory_id: uuid.UUID,
                 voter_id: int, voter_directory_id: uuid.UUID, last_offset_epoch: int,
                 last_offset: int, pre_vote: bool = False, cluster_id: str | None = None
                 ) -> VoteRequest:
    """A (pre-)vote for replica (id, directory id) at replica_epoch, asked of the voter."""
    return VoteRequest(
        cluster_id=cluster_id, voter_id=_broker_id(voter_id),
        topics=(vote_rq.TopicData(topic_name=_TOPIC, partitions=(vote_rq.PartitionData(
            partition_index=_PARTITION, replica_epoch=_i32(replica_epoch),
            replica_id=_broker_id(replica_id), replica_directory_id=replica_directory_id,
            voter_directory_id=voter_directory_id, last_offset_epoch=_i32(last_offset_epoch),
            last_offset=_i64(last_offset), pre_vote=pre_vote),)),))


def begin_quorum_epoch_request(leader_id: int, leader_epoch: int, leader_endpoint: str,
                               voter_id: int, voter_directory_id: uuid.UUID,
                               cluster_id: str | None = None,
                               listener: str = DEFAULT_LISTENER) -> BeginQuorumEpochRequest:
    hp = host_port(leader_endpoint)
    return BeginQuorumEpochRequest(
        cluster_id=cluster_id, voter_id=_broker_id(voter_id),
        topics=(bqe_rq.TopicData(topic_name=_TOPIC, partitions=(bqe_rq.PartitionData(
            partition_index=_PARTITION, voter_directory_id=voter_directory_id,
            leader_id=_broker_id(leader_id), leader_epoch=_i32(leader_epoch)),)),),
        leader_endpoints=() if hp is None else (
            bqe_rq.LeaderEndpoint(name=listener, host=hp[0], port=_u16(hp[1])),))


def end_quorum_epoch_request(leader_id: int, leader_epoch: int, preferred_successors: list[int],
                             cluster_id: str | None = None, voter_id: int = -1,
                             voter_directory_id: uuid.UUID = NO_DIRECTORY_ID
                             ) -> EndQuorumEpochRequest:
    """Kafka's names no receiver: it finds its own key among the candidates, so the receiver's
    directory id rides on its candidate entry (rule 4); the others' are not known here."""
    candidates = tuple(
        eqe_rq.ReplicaInfo(candidate_id=_broker_id(node_id),
                           candidate_directory_id=voter_directory_id
                           if node_id == voter_id else NO_DIRECTORY_ID)
        for node_id in preferred_successors)
    return EndQuorumEpochRequest(
        cluster_id=cluster_id,
        topics=(eqe_rq.TopicData(topic_name=_TOPIC, partitions=(eqe_rq.PartitionData(
            partition_index=_PARTITION, leader_id=_broker_id(leader_id),
            leader_epoch=_i32(leader_epoch), preferred_candidates=candidates),)),),
        leader_endpoints=())


def fetch_request(replica_id: int, replica_directory_id: uuid.UUID, fetch_offset: int,
                  last_fetched_epoch: int, current_leader_epoch: int, max_wait_ms: int = 500,
                  max_bytes: int = 1024 * 1024, cluster_id: str | None = None) -> FetchRequest:
    """A replica's pull from the metadata partition's leader (rule 3)."""
    return FetchRequest(
        cluster_id=cluster_id,
        replica_state=fetch_rq.ReplicaState(replica_id=_broker_id(replica_id)),
        max_wait=_timeout(max_wait_ms), min_bytes=_i32(0), max_bytes=_i32(max_bytes),
        isolation_level=_i8(0),
        topics=(fetch_rq.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=(
            fetch_rq.FetchPartition(
                partition=_PARTITION, current_leader_epoch=_i32(current_leader_epoch),
                fetch_offset=_i64(fetch_offset), last_fetched_epoch=_i32(last_fetched_epoch),
                log_start_offset=_i64(-1), partition_max_bytes=_i32(max_bytes),
                replica_directory_id=replica_directory_id),)),),
        forgotten_topics_data=())


def fetch_snapshot_request(replica_id: int, current_leader_epoch: int, snapshot_end_offset: int,
                           snapshot_epoch: int, position: int, max_bytes: int = 1024 * 1024,
                           replica_directory_id: uuid.UUID = NO_DIRECTORY_ID,
                           cluster_id: str | None = None) -> FetchSnapshotRequest:
    return FetchSnapshotRequest(
        cluster_id=cluster_id, replica_id=_broker_id(replica_id), max_bytes=_i32(max_bytes),
        topics=(fs_rq.TopicSnapshot(name=_TOPIC, partitions=(fs_rq.PartitionSnapshot(
            partition=_PARTITION, current_leader_epoch=_i32(current_leader_epoch),
            snapshot_id=fs_rq.SnapshotId(end_offset=_i64(snapshot_end_offset),
                                         epoch=_i32(snapshot_epoch)),
            position=_i64(position), replica_directory_id=replica_directory_id),)),))


def describe_quorum_request() -> DescribeQuorumRequest:
    return DescribeQuorumRequest(topics=(dq_rq.TopicData(
        topic_name=_TOPIC, partitions=(dq_rq.PartitionData(partition_index=_PARTITION),)),))


def add_raft_voter_request(voter_id: int, voter_directory_id: uuid.UUID,
                           listeners: Mapping[str, str], timeout_ms: int = 30_000,
                           cluster_id: str | None = None, ack_when_committed: bool = True
                           ) -> AddRaftVoterRequest:
    """KIP-853 AddRaftVoter (rule 5); v1 (KIP-1186): ack_when_committed False answers once the
    new voter set is appended, True once it commits."""
    return AddRaftVoterRequest(
        cluster_id=cluster_id, timeout=_timeout(timeout_ms), voter_id=_i32(voter_id),
        voter_directory_id=voter_directory_id,
        listeners=_listeners(listeners, arv_rq.Listener), ack_when_committed=ack_when_committed)


def remove_raft_voter_request(voter_id: int, voter_directory_id: uuid.UUID,
                              cluster_id: str | None = None) -> RemoveRaftVoterRequest:
    """KIP-853 RemoveRaftVoter: the exact key (rule 5)."""
    return RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=_i32(voter_id),
                                  voter_directory_id=voter_directory_id)


def update_raft_voter_request(current_leader_epoch: int, voter_id: int,
                              voter_directory_id: uuid.UUID, listeners: Mapping[str, str],
                              min_kraft_version: int = 0, max_kraft_version: int = 1,
                              cluster_id: str | None = None) -> UpdateRaftVoterRequest:
    """KIP-853 UpdateRaftVoter: a voter tells the leader its listeners and the kraft.version
    range it supports; the leader rewrites its entry in the voter set (rule 5)."""
    return UpdateRaftVoterRequest(
        cluster_id=cluster_id, current_leader_epoch=_i32(current_leader_epoch),
        voter_id=_i32(voter_id), voter_directory_id=voter_directory_id,
        listeners=_listeners(listeners, urv_rq.Listener),
        k_raft_version_feature=urv_rq.KRaftVersionFeature(
            min_supported_version=_i16(min_kraft_version),
            max_supported_version=_i16(max_kraft_version)))


# -- responses ----------------------------------------------------------------------------------


def vote_response(error: int = 0, leader_id: int = -1, leader_epoch: int = -1,
                  vote_granted: bool = False) -> VoteResponse:
    top, part = _split(error)
    return VoteResponse(error_code=top, topics=(vote_rs.TopicData(
        topic_name=_TOPIC, partitions=(vote_rs.PartitionData(
            partition_index=_PARTITION, error_code=part, leader_id=_broker_id(leader_id),
            leader_epoch=_i32(leader_epoch), vote_granted=vote_granted),)),))


def begin_quorum_epoch_response(error: int = 0, leader_id: int = -1, leader_epoch: int = -1
                                ) -> BeginQuorumEpochResponse:
    top, part = _split(error)
    return BeginQuorumEpochResponse(error_code=top, topics=(bqe_rs.TopicData(
        topic_name=_TOPIC, partitions=(bqe_rs.PartitionData(
            partition_index=_PARTITION, error_code=part, leader_id=_broker_id(leader_id),
            leader_epoch=_i32(leader_epoch)),)),))


def end_quorum_epoch_response(error: int = 0, leader_id: int = -1, leader_epoch: int = -1
                              ) -> EndQuorumEpochResponse:
    top, part = _split(error)
    return EndQuorumEpochResponse(error_code=top, topics=(eqe_rs.TopicData(
        topic_name=_TOPIC, partitions=(eqe_rs.PartitionData(
            partition_index=_PARTITION, error_code=part, leader_id=_broker_id(leader_id),
            leader_epoch=_i32(leader_epoch)),)),))


def fetch_response(error: int = 0, leader_id: int = -1, leader_epoch: int = -1,
                   leader_endpoint: str = "", high_watermark: int = -1,
                   log_start_offset: int = -1, records: bytes = b"", diverging_epoch: int = -1,
                   diverging_end_offset: int = -1, snapshot_end_offset: int = -1,
                   snapshot_epoch: int = -1) -> FetchResponse:
    top, part = _split(error)
    return FetchResponse(
        throttle_time=_NO_THROTTLE, error_code=top, session_id=_i32(0),
        responses=(fetch_rs.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=(
            fetch_rs.PartitionData(
                partition_index=_PARTITION, error_code=part,
                high_watermark=_i64(high_watermark), last_stable_offset=_i64(high_watermark),
                log_start_offset=_i64(log_start_offset),
                diverging_epoch=fetch_rs.EpochEndOffset(
                    epoch=_i32(diverging_epoch), end_offset=_i64(diverging_end_offset)),
                current_leader=fetch_rs.LeaderIdAndEpoch(
                    leader_id=_broker_id(leader_id), leader_epoch=_i32(leader_epoch)),
                snapshot_id=fetch_rs.SnapshotId(
                    end_offset=_i64(snapshot_end_offset), epoch=_i32(snapshot_epoch)),
                aborted_transactions=None, records=_records(records)),)),),
        node_endpoints=_node_endpoint(leader_id, leader_endpoint, fetch_rs.NodeEndpoint))


def fetch_snapshot_response(error: int = 0, leader_id: int = -1, leader_epoch: int = -1,
                            leader_endpoint: str = "", snapshot_end_offset: int = -1,
                            snapshot_epoch: int = -1, size: int = -1, position: int = -1,
                            unaligned_records: bytes = b"") -> FetchSnapshotResponse:
    top, part = _split(error)
    return FetchSnapshotResponse(
        throttle_time=_NO_THROTTLE, error_code=top,
        topics=(fs_rs.TopicSnapshot(name=_TOPIC, partitions=(fs_rs.PartitionSnapshot(
            index=_PARTITION, error_code=part,
            snapshot_id=fs_rs.SnapshotId(end_offset=_i64(snapshot_end_offset),
                                         epoch=_i32(snapshot_epoch)),
            current_leader=fs_rs.LeaderIdAndEpoch(leader_id=_broker_id(leader_id),
                                                  leader_epoch=_i32(leader_epoch)),
            size=_i64(size), position=_i64(position),
            unaligned_records=_records(unaligned_records)),)),),
        node_endpoints=_node_endpoint(leader_id, leader_endpoint, fs_rs.NodeEndpoint))


def replica_state(replica_id: int, replica_directory_id: uuid.UUID, log_end_offset: int,
                  last_fetch_timestamp_ms: int = -1, last_caught_up_timestamp_ms: int = -1
                  ) -> ReplicaState:
    return ReplicaState(
        replica_id=_broker_id(replica_id), replica_directory_id=replica_directory_id,
        log_end_offset=_i64(log_end_offset), last_fetch_timestamp=_i64(last_fetch_timestamp_ms),
        last_caught_up_timestamp=_i64(last_caught_up_timestamp_ms))


def describe_quorum_response(
    error: int = 0, error_message: str = "", leader_id: int = -1, leader_epoch: int = -1,
    high_watermark: int = -1, current_voters: Iterable[ReplicaState] = (),
    observers: Iterable[ReplicaState] = (),
    endpoints: Iterable[tuple[int, Mapping[str, str]]] = (),
) -> DescribeQuorumResponse:
    """endpoints: (node id, listener name -> "host:port"), voters first; Kafka's Nodes are per
    node id, so the listeners of every key of an id merge."""
    top, part = _split(error)
    nodes: dict[int, dict[str, str]] = {}
    for node_id, listeners in endpoints:
        nodes.setdefault(node_id, {}).update(listeners)
    message = error_message or None
    return DescribeQuorumResponse(
        error_code=top, error_message=message if int(top) else None,
        topics=(dq_rs.TopicData(topic_name=_TOPIC, partitions=(dq_rs.PartitionData(
            partition_index=_PARTITION, error_code=part,
            error_message=message if int(part) else None,
            leader_id=_broker_id(leader_id), leader_epoch=_i32(leader_epoch),
            high_watermark=_i64(high_watermark), current_voters=tuple(current_voters),
            observers=tuple(observers)),)),),
        nodes=tuple(dq_rs.Node(node_id=_broker_id(node_id),
                               listeners=_listeners(listeners, dq_rs.Listener))
                    for node_id, listeners in nodes.items()))


def add_raft_voter_response(error: int = 0, error_message: str = "") -> AddRaftVoterResponse:
    return AddRaftVoterResponse(throttle_time=_NO_THROTTLE, error_code=error_code(error),
                                error_message=error_message or None)


def remove_raft_voter_response(error: int = 0, error_message: str = ""
                               ) -> RemoveRaftVoterResponse:
    return RemoveRaftVoterResponse(throttle_time=_NO_THROTTLE, error_code=error_code(error),
                                   error_message=error_message or None)


def update_raft_voter_response(error: int = 0, leader_id: int = -1, leader_epoch: int = -1,
                               leader_endpoint: str = "") -> UpdateRaftVoterResponse:
    host, port = host_port(leader_endpoint) or ("", -1)
    return UpdateRaftVoterResponse(
        throttle_time=_NO_THROTTLE, error_code=error_code(error),
        current_leader=urv_rs.CurrentLeader(leader_id=_broker_id(leader_id),
                                            leader_epoch=_i32(leader_epoch), host=host,
                                            port=_i32(port)))


def error_response(request: object, error: int, message: str = "") -> object:
    """The answer to `request` that carries only an error (top level where Kafka puts it)."""
    if isinstance(request, DescribeQuorumRequest):
        return describe_quorum_response(error, message)
    if isinstance(request, (AddRaftVoterRequest, AddRaftVoterRequestV0)):
        return add_raft_voter_response(error, message)
    if isinstance(request, RemoveRaftVoterRequest):
        return remove_raft_voter_response(error, message)
    answer = _ERROR_ONLY.get(type(request))
    if answer is None:
        raise TypeError(f"not a raft request: {type(request).__name__}")
    return answer(error)


_ERROR_ONLY: dict[type, Any] = {
    VoteRequest: vote_response,
    BeginQuorumEpochRequest: begin_quorum_epoch_response,
    EndQuorumEpochRequest: end_quorum_epoch_response,
    FetchRequest: fetch_response,
    FetchSnapshotRequest: fetch_snapshot_response,
    UpdateRaftVoterRequest: update_raft_voter_response,
}


# -- reading ------------------------------------------------------------------------------------


def invalid_partition(request: object) -> str | None:
    """Why a request is not for `__cluster_metadata-0` (INVALID_REQUEST, as Kafka's
    KafkaRaftClient answers a request for another topic partition); None if it is."""
    topics = getattr(request, "topics", None)
    if topics is None:
        return None  # AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter name no partition
    if len(topics) == 1 and len(topics[0].partitions) == 1:
        topic, partition = topics[0], topics[0].partitions[0]
        if isinstance(request, FetchRequest):
            ours = topic.topic_id == METADATA_TOPIC_ID and partition.partition == _PARTITION
        elif isinstance(request, FetchSnapshotRequest):
            ours = topic.name == METADATA_TOPIC and partition.partition == _PARTITION
        else:
            ours = topic.topic_name == METADATA_TOPIC and partition.partition_index == _PARTITION
        if ours:
            return None
    return f"only {METADATA_TOPIC}-0 is served here"


def the_partition(message: Any) -> Any:
    """The one partition of a request checked by invalid_partition."""
    return message.topics[0].partitions[0]


def answered_partition(response: Any) -> Any | None:
    """The metadata partition's part of an answer; None if it names none (an error answer)."""
    if isinstance(response, FetchResponse):
        for topic in response.responses:
            if topic.topic_id == METADATA_TOPIC_ID and topic.partitions:
                return topic.partitions[0]
        return None
    topics = getattr(response, "topics", None)
    if topics and topics[0].partitions:
        return topics[0].partitions[0]
    return None


def error_of(response: Any) -> int:
    """The answer's error: the top level's, else its partition's."""
    top = int(response.error_code)
    if top:
        return top
    p = answered_partition(response)
    return int(p.error_code) if p is not None else 0


class Leader(NamedTuple):
    """The leader an answer names (-1, -1, "" if none)."""

    id: int
    epoch: int
    endpoint: str


def leader_of(response: Any) -> Leader:
    """The leader an answer names, with its endpoint where the answer carries one."""
    if isinstance(response, UpdateRaftVoterResponse):
        leader = response.current_leader
        address = endpoint(leader.host, int(leader.port)) if leader.host else ""
        return Leader(int(leader.leader_id), int(leader.leader_epoch), address)
    p = answered_partition(response)
    if p is None:
        return Leader(-1, -1, "")
    current = getattr(p, "current_leader", p)  # Fetch and FetchSnapshot nest it
    leader_id = int(current.leader_id)
    address = ""
    for node in getattr(response, "node_endpoints", ()):
        if int(node.node_id) == leader_id:
            address = endpoint(node.host, int(node.port))
            break
    return Leader(leader_id, int(current.leader_epoch), address)
