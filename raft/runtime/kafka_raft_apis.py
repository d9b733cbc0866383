"""The metadata quorum's Raft RPCs on Kafka's wire protocol: translation between the core's
input dataclasses (raft.core.messages) and kio's entities, both ways, and the
controller listener's handlers (Kafka's KafkaRaftClient request handling, KIP-595/853/996).

One version per API node to node (kafkawire's CONTROLLER_API_VERSIONS), the newest kio has with every field the
core uses: Vote v2 (PreVote, KIP-996), BeginQuorumEpoch v1, EndQuorumEpoch v1 (directory ids,
endpoints), Fetch v17 (ReplicaState, ReplicaDirectoryId, topic id), FetchSnapshot v1,
DescribeQuorum v2 (directory ids, timestamps, Nodes), AddRaftVoter v0-v1, RemoveRaftVoter v0,
UpdateRaftVoter v0.

Where Kafka's message has no field for a core value, it is derived as Kafka does:
- error_message exists only in DescribeQuorum/AddRaftVoter/RemoveRaftVoter; elsewhere the code
  travels alone.
- EndQuorumEpoch names no receiver: the receiver finds its own key among PreferredCandidates
  (as Kafka's handleEndQuorumEpochRequest does); the sender fills in the receiver's directory id.
- Fetch carries no replica endpoint: the leader derives it from what it knows of that node id
  (`replica_endpoint`, given by the runtime), so a replacement disk of a voter id is promotable
  without listeners (seed 003) and a broker observer is not.
- UpdateRaftVoter's answer has no error message; its leader is CurrentLeader's host and port.
- AddRaftVoter/RemoveRaftVoter answers name no leader: the CLI asks DescribeQuorum for it.
- DescribeQuorum's Nodes are per node id, so endpoints attach to every key of that id.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from kio.schema.add_raft_voter.v0 import response as arv0_rs
from kio.schema.add_raft_voter.v1 import request as arv1_rq
from kio.schema.add_raft_voter.v1 import response as arv1_rs
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

from kafkawire.api_keys import ApiKey
from kafkawire.client import parse_address
from kafkawire.connection import KafkaRequestContext
from kafkawire.errors import Errors, KafkaError
from kafkawire.messages import error_code
from raft.core import messages as rm

if TYPE_CHECKING:
    from kafkawire.router import KafkaRouter
    from raft.core.raft_replica import RaftReplica

# The driver's handle_request: a core request from a node id in, the core response out.
RequestHandler = Callable[[int, Any], Awaitable[Any]]

log = logging.getLogger("minikraft.raft")

# Kafka's names for the metadata partition: topic `__cluster_metadata`, partition 0, and
# Uuid.METADATA_TOPIC_ID (0, 1) where a message names topics by id (Fetch v13+).
METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
METADATA_PARTITION = 0
DEFAULT_LISTENER = "CONTROLLER"
# AddRaftVoter's answer waits for the commit (rule 5); Kafka's RemoveRaftVoter has no timeout
# field, so the leader waits up to the core's default.
DEFAULT_VOTER_CHANGE_TIMEOUT_MS = 30_000

# The APIs routed here; their versions are kafkawire's CONTROLLER_API_VERSIONS.
RAFT_API_KEYS = (
    ApiKey.FETCH,
    ApiKey.VOTE,
    ApiKey.BEGIN_QUORUM_EPOCH,
    ApiKey.END_QUORUM_EPOCH,
    ApiKey.DESCRIBE_QUORUM,
    ApiKey.FETCH_SNAPSHOT,
    ApiKey.ADD_RAFT_VOTER,
    ApiKey.REMOVE_RAFT_VOTER,
    ApiKey.UPDATE_RAFT_VOTER,
)

# Errors Kafka puts at the top level of a raft response (about the request, not the partition).
_TOP_LEVEL_ERRORS = frozenset(
    {Errors.INCONSISTENT_CLUSTER_ID, Errors.INVALID_REQUEST, Errors.UNKNOWN_SERVER_ERROR,
     Errors.CLUSTER_AUTHORIZATION_FAILED}
)

_TOPIC = TopicName(METADATA_TOPIC)
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_PARTITION = i32(METADATA_PARTITION)


# -- small conversions -------------------------------------------------------------------------


# kio's phantom types validate every value on construction (microseconds each, on every Fetch
# and its answer); the values here are the core's ints and bytes, in range by construction, so
# the hot path only tags them for the type checker (a cast costs nothing at run time).
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


def _ms(value: int) -> i32Timedelta:
    return cast(i32Timedelta, datetime.timedelta(milliseconds=value))


def _to_ms(value: datetime.timedelta) -> int:
    return int(value.total_seconds() * 1000)


def _dir(value: uuid.UUID | None) -> uuid.UUID:
    return rm.NO_DIRECTORY_ID if value is None else value


def _cluster(value: str | None) -> str | None:
    # Kept as sent: an empty id is another cluster's, only null skips the check (Kafka's).
    return None if value is None else str(value)


def _split(errors: int) -> tuple[Any, Any]:
    """(top-level, partition-level) error codes for one core error code."""
    error = Errors.of(errors)
    if error in _TOP_LEVEL_ERRORS:
        return error_code(error), error_code(Errors.NONE)
    return error_code(Errors.NONE), error_code(error)


def _merge(top: int, partition: int) -> int:
    return int(top) if int(top) != 0 else int(partition)


def _host_port(endpoint: str) -> tuple[str, int] | None:
    if not endpoint:
        return None
    try:
        return parse_address(endpoint)
    except ValueError:
        return None


def _endpoint(host: str, port: int) -> str:
    return f"{host}:{port}"


def _one_partition(topics: Any, name_of: Callable[[Any], object], expected: object) -> Any:
    """The single metadata partition of a request (INVALID_REQUEST otherwise, as Kafka's
    KafkaRaftClient answers a request for another topic partition)."""
    if len(topics) != 1 or name_of(topics[0]) != expected or len(topics[0].partitions) != 1:
        raise KafkaError(Errors.INVALID_REQUEST, f"only {METADATA_TOPIC}-0 is served here")
    partition = topics[0].partitions[0]
    index = partition.partition if hasattr(partition, "partition") else partition.partition_index
    if int(index) != METADATA_PARTITION:
        raise KafkaError(Errors.INVALID_REQUEST, f"only {METADATA_TOPIC}-0 is served here")
    return partition


def _first_partition(topics: Any) -> Any | None:
    if topics and topics[0].partitions:
        return topics[0].partitions[0]
    return None


def _leader_endpoints(endpoint: str, listener: str, cls: Any) -> tuple[Any, ...]:
    hp = _host_port(endpoint)
    return () if hp is None else (cls(name=listener, host=hp[0], port=_u16(hp[1])),)


def _listeners(listeners: dict[str, str], cls: Any) -> tuple[Any, ...]:
    return tuple(
        cls(name=name, host=hp[0], port=_u16(hp[1]))
        for name, hp in ((n, _host_port(e)) for n, e in listeners.items())
        if hp is not None
    )


def _node_endpoint(node_id: int, endpoint: str, cls: Any) -> tuple[Any, ...]:
    hp = _host_port(endpoint)
    if node_id < 0 or hp is None:
        return ()
    return (cls(node_id=_broker_id(node_id), host=hp[0], port=hp[1]),)


def _endpoint_of_node(node_id: int, nodes: Any) -> str:
    for node in nodes:
        if int(node.node_id) == node_id:
            return _endpoint(node.host, int(node.port))
    return ""


# -- client side: core request -> kio request ---------------------------------------------------


def request_to_kafka(request: object, listener: str = DEFAULT_LISTENER) -> Any:
    """The kio request entity for a core raft request (the version a controller serves)."""
    if isinstance(request, rm.VoteRequest):
        return vote_rq.VoteRequest(
            cluster_id=request.cluster_id or None,
            voter_id=_broker_id(request.voter_id),
            topics=(vote_rq.TopicData(topic_name=_TOPIC, partitions=(vote_rq.PartitionData(
                partition_index=_PARTITION,
                replica_epoch=_i32(request.candidate_epoch),
                replica_id=_broker_id(request.candidate_id),
                replica_directory_id=request.candidate_directory_id,
                voter_directory_id=request.voter_directory_id,
                last_offset_epoch=_i32(request.last_offset_epoch),
                last_offset=_i64(request.last_offset),
                pre_vote=request.pre_vote,
            ),)),),
        )
    if isinstance(request, rm.BeginQuorumEpochRequest):
        return bqe_rq.BeginQuorumEpochRequest(
            cluster_id=request.cluster_id or None,
            voter_id=_broker_id(request.voter_id),
            topics=(bqe_rq.TopicData(topic_name=_TOPIC, partitions=(bqe_rq.PartitionData(
                partition_index=_PARTITION,
                voter_directory_id=request.voter_directory_id,
                leader_id=_broker_id(request.leader_id),
                leader_epoch=_i32(request.leader_epoch),
            ),)),),
            leader_endpoints=_leader_endpoints(request.leader_endpoint, listener,
                                               bqe_rq.LeaderEndpoint),
        )
    if isinstance(request, rm.EndQuorumEpochRequest):
        # Kafka names no receiver: it finds its own key among the candidates, so the receiver's
        # directory id rides on its candidate entry (rule 4); the others' are not known here.
        candidates = tuple(
            eqe_rq.ReplicaInfo(
                candidate_id=_broker_id(node_id),
                candidate_directory_id=request.voter_directory_id
                if node_id == request.voter_id else rm.NO_DIRECTORY_ID,
            )
            for node_id in request.preferred_successors
        )
        return eqe_rq.EndQuorumEpochRequest(
            cluster_id=request.cluster_id or None,
            topics=(eqe_rq.TopicData(topic_name=_TOPIC, partitions=(eqe_rq.PartitionData(
                partition_index=_PARTITION,
                leader_id=_broker_id(request.leader_id),
                leader_epoch=_i32(request.leader_epoch),
                preferred_candidates=candidates,
            ),)),),
            leader_endpoints=(),
        )
    if isinstance(request, rm.FetchRequest):
        return fetch_rq.FetchRequest(
            cluster_id=request.cluster_id or None,
            replica_state=fetch_rq.ReplicaState(replica_id=_broker_id(request.replica_id)),
            max_wait=_ms(request.max_wait_ms),
            min_bytes=_i32(0),
            max_bytes=_i32(request.max_bytes),
            isolation_level=_i8(0),
            topics=(fetch_rq.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=(
                fetch_rq.FetchPartition(
                    partition=_PARTITION,
                    current_leader_epoch=_i32(request.current_leader_epoch),
                    fetch_offset=_i64(request.fetch_offset),
                    last_fetched_epoch=_i32(request.last_fetched_epoch),
                    log_start_offset=_i64(-1),
                    partition_max_bytes=_i32(request.max_bytes),
                    replica_directory_id=request.replica_directory_id,
                ),)),),
            forgotten_topics_data=(),
        )
    if isinstance(request, rm.FetchSnapshotRequest):
        return fs_rq.FetchSnapshotRequest(
            cluster_id=request.cluster_id or None,
            replica_id=_broker_id(request.replica_id),
            max_bytes=_i32(request.max_bytes),
            topics=(fs_rq.TopicSnapshot(name=_TOPIC, partitions=(fs_rq.PartitionSnapshot(
                partition=_PARTITION,
                current_leader_epoch=_i32(request.current_leader_epoch),
                snapshot_id=fs_rq.SnapshotId(end_offset=_i64(request.snapshot_end_offset),
                                             epoch=_i32(request.snapshot_epoch)),
                position=_i64(request.position),
                replica_directory_id=request.replica_directory_id,
            ),)),),
        )
    if isinstance(request, rm.DescribeQuorumRequest):
        return dq_rq.DescribeQuorumRequest(topics=(dq_rq.TopicData(
            topic_name=_TOPIC, partitions=(dq_rq.PartitionData(partition_index=_PARTITION),)),))
    if isinstance(request, rm.AddRaftVoterRequest):
        return arv1_rq.AddRaftVoterRequest(
            cluster_id=request.cluster_id or None,
            timeout=_ms(request.timeout_ms),
            voter_id=_i32(request.voter_id),
            voter_directory_id=request.voter_directory_id,
            listeners=_listeners(request.listeners, arv1_rq.Listener),
            ack_when_committed=request.ack_when_committed,
        )
    if isinstance(request, rm.RemoveRaftVoterRequest):
        return rrv_rq.RemoveRaftVoterRequest(
            cluster_id=request.cluster_id or None,
            voter_id=_i32(request.voter_id),
            voter_directory_id=request.voter_directory_id,
        )
    if isinstance(request, rm.UpdateRaftVoterRequest):
        return urv_rq.UpdateRaftVoterRequest(
            cluster_id=request.cluster_id or None,
            current_leader_epoch=_i32(request.current_leader_epoch),
            voter_id=_i32(request.voter_id),
            voter_directory_id=request.voter_directory_id,
            listeners=_listeners(request.listeners, urv_rq.Listener),
            k_raft_version_feature=urv_rq.KRaftVersionFeature(
                min_supported_version=_i16(request.min_kraft_version),
                max_supported_version=_i16(request.max_kraft_version)),
        )
    raise TypeError(f"not a raft request: {type(request).__name__}")


# -- client side: kio response -> core response --------------------------------------------------


def response_from_kafka(request: object, body: Any) -> Any:
    """The core response for the kio answer to `request` (as request_to_kafka sent it)."""
    if isinstance(request, rm.VoteRequest):
        p = _first_partition(body.topics)
        if p is None:
            return rm.VoteResponse(error_code=int(body.error_code))
        return rm.VoteResponse(
            error_code=_merge(body.error_code, p.error_code), leader_id=int(p.leader_id),
            leader_epoch=int(p.leader_epoch), vote_granted=bool(p.vote_granted))
    if isinstance(request, rm.BeginQuorumEpochRequest):
        p = _first_partition(body.topics)
        if p is None:
            return rm.BeginQuorumEpochResponse(error_code=int(body.error_code))
        return rm.BeginQuorumEpochResponse(
            error_code=_merge(body.error_code, p.error_code), leader_id=int(p.leader_id),
            leader_epoch=int(p.leader_epoch))
    if isinstance(request, rm.EndQuorumEpochRequest):
        p = _first_partition(body.topics)
        if p is None:
            return rm.EndQuorumEpochResponse(error_code=int(body.error_code))
        return rm.EndQuorumEpochResponse(
            error_code=_merge(body.error_code, p.error_code), leader_id=int(p.leader_id),
            leader_epoch=int(p.leader_epoch))
    if isinstance(request, rm.FetchRequest):
        return _fetch_response_from_kafka(body)
    if isinstance(request, rm.FetchSnapshotRequest):
        p = _first_partition(body.topics)
        if p is None:
            return rm.FetchSnapshotResponse(error_code=int(body.error_code))
        leader_id = int(p.current_leader.leader_id)
        return rm.FetchSnapshotResponse(
            error_code=_merge(body.error_code, p.error_code),
            leader_id=leader_id, leader_epoch=int(p.current_leader.leader_epoch),
            leader_endpoint=_endpoint_of_node(leader_id, body.node_endpoints),
            snapshot_end_offset=int(p.snapshot_id.end_offset),
            snapshot_epoch=int(p.snapshot_id.epoch), size=int(p.size), position=int(p.position),
            unaligned_records=bytes(p.unaligned_records))
    if isinstance(request, rm.DescribeQuorumRequest):
        return describe_quorum_from_kafka(body)
    if isinstance(request, rm.AddRaftVoterRequest):
        return rm.AddRaftVoterResponse(error_code=int(body.error_code),
                                       error_message=body.error_message or "")
    if isinstance(request, rm.RemoveRaftVoterRequest):
        return rm.RemoveRaftVoterResponse(error_code=int(body.error_code),
                                          error_message=body.error_message or "")
    if isinstance(request, rm.UpdateRaftVoterRequest):
        leader = body.current_leader
        return rm.UpdateRaftVoterResponse(
            error_code=int(body.error_code), leader_id=int(leader.leader_id),
            leader_epoch=int(leader.leader_epoch),
            leader_endpoint=_endpoint(leader.host, int(leader.port)) if leader.host else "")
    raise TypeError(f"not a raft request: {type(request).__name__}")


def _fetch_response_from_kafka(body: Any) -> rm.FetchResponse:
    p = None
    for topic in body.responses:
        if topic.topic_id == METADATA_TOPIC_ID and topic.partitions:
            p = topic.partitions[0]
    if p is None:
        return rm.FetchResponse(error_code=int(body.error_code))
    leader_id = int(p.current_leader.leader_id)
    return rm.FetchResponse(
        error_code=_merge(body.error_code, p.error_code),
        leader_id=leader_id,
        leader_epoch=int(p.current_leader.leader_epoch),
        leader_endpoint=_endpoint_of_node(leader_id, body.node_endpoints),
        high_watermark=int(p.high_watermark),
        log_start_offset=int(p.log_start_offset),
        records=bytes(p.records or b""),
        diverging_epoch=int(p.diverging_epoch.epoch),
        diverging_end_offset=int(p.diverging_epoch.end_offset),
        snapshot_end_offset=int(p.snapshot_id.end_offset),
        snapshot_epoch=int(p.snapshot_id.epoch),
    )


def describe_quorum_from_kafka(body: Any) -> rm.DescribeQuorumResponse:
    p = _first_partition(body.topics)
    listeners = {
        int(n.node_id): {lst.name: _endpoint(lst.host, int(lst.port)) for lst in n.listeners}
        for n in body.nodes
    }
    if p is None:
        return rm.DescribeQuorumResponse(error_code=int(body.error_code),
                                         error_message=body.error_message or "")

    def state(r: Any) -> rm.ReplicaState:
        return rm.ReplicaState(int(r.replica_id), _dir(r.replica_directory_id),
                               int(r.log_end_offset), int(r.last_fetch_timestamp),
                               int(r.last_caught_up_timestamp))

    voters = [state(r) for r in p.current_voters]
    observers = [state(r) for r in p.observers]
    top = int(body.error_code)
    # Nodes are per node id (Kafka's field has no directory id): a not-yet-known voter set (an
    # error answer lists no voters) keeps the endpoints under the zero directory id.
    voter_keys = [(v.replica_id, v.replica_directory_id) for v in voters] or [
        (node_id, rm.NO_DIRECTORY_ID) for node_id in listeners]
    return rm.DescribeQuorumResponse(
        error_code=top if top else int(p.error_code),
        error_message=(body.error_message if top else p.error_message) or "",
        leader_id=int(p.leader_id), leader_epoch=int(p.leader_epoch),
        high_watermark=int(p.high_watermark),
        current_voters=voters, observers=observers,
        voter_endpoints=[rm.VoterEndpoint(i, d, dict(listeners[i]))
                         for i, d in voter_keys if i in listeners],
        observer_endpoints=[rm.VoterEndpoint(o.replica_id, o.replica_directory_id,
                                             dict(listeners[o.replica_id]))
                            for o in observers if o.replica_id in listeners],
    )


# -- server side: kio request -> core request -----------------------------------------------------


def request_from_kafka(
    api_key: ApiKey, body: Any, *, local_node_id: int,
    replica_endpoint: Callable[[int], str] = lambda _node_id: "",
) -> object:
    """The core request for a kio one; KafkaError INVALID_REQUEST for another partition."""
    if api_key == ApiKey.VOTE:
        p = _one_partition(body.topics, lambda t: t.topic_name, METADATA_TOPIC)
        return rm.VoteRequest(
            candidate_epoch=int(p.replica_epoch), candidate_id=int(p.replica_id),
            candidate_directory_id=_dir(p.replica_directory_id), voter_id=int(body.voter_id),
            voter_directory_id=_dir(p.voter_directory_id),
            last_offset_epoch=int(p.last_offset_epoch), last_offset=int(p.last_offset),
            pre_vote=bool(p.pre_vote), cluster_id=_cluster(body.cluster_id))
    if api_key == ApiKey.BEGIN_QUORUM_EPOCH:
        p = _one_partition(body.topics, lambda t: t.topic_name, METADATA_TOPIC)
        endpoint = next((_endpoint(e.host, int(e.port)) for e in body.leader_endpoints), "")
        return rm.BeginQuorumEpochRequest(
            leader_id=int(p.leader_id), leader_epoch=int(p.leader_epoch),
            leader_endpoint=endpoint, voter_id=int(body.voter_id),
            voter_directory_id=_dir(p.voter_directory_id), cluster_id=_cluster(body.cluster_id))
    if api_key == ApiKey.END_QUORUM_EPOCH:
        p = _one_partition(body.topics, lambda t: t.topic_name, METADATA_TOPIC)
        mine = next((c for c in p.preferred_candidates if int(c.candidate_id) == local_node_id),
                    None)
        return rm.EndQuorumEpochRequest(
            leader_id=int(p.leader_id), leader_epoch=int(p.leader_epoch),
            preferred_successors=[int(c.candidate_id) for c in p.preferred_candidates],
            cluster_id=_cluster(body.cluster_id),
            voter_id=-1 if mine is None else local_node_id,
            voter_directory_id=rm.NO_DIRECTORY_ID if mine is None
            else _dir(mine.candidate_directory_id))
    if api_key == ApiKey.FETCH:
        p = _one_partition(body.topics, lambda t: t.topic_id, METADATA_TOPIC_ID)
        replica_id = int(body.replica_state.replica_id)
        return rm.FetchRequest(
            replica_id=replica_id, replica_directory_id=_dir(p.replica_directory_id),
            fetch_offset=int(p.fetch_offset), last_fetched_epoch=int(p.last_fetched_epoch),
            current_leader_epoch=int(p.current_leader_epoch),
            max_wait_ms=_to_ms(body.max_wait),
            max_bytes=min(int(body.max_bytes), int(p.partition_max_bytes)),
            cluster_id=_cluster(body.cluster_id),
            replica_endpoint=replica_endpoint(replica_id) if replica_id >= 0 else "")
    if api_key == ApiKey.FETCH_SNAPSHOT:
        p = _one_partition(body.topics, lambda t: t.name, METADATA_TOPIC)
        return rm.FetchSnapshotRequest(
            replica_id=int(body.replica_id), current_leader_epoch=int(p.current_leader_epoch),
            snapshot_end_offset=int(p.snapshot_id.end_offset),
            snapshot_epoch=int(p.snapshot_id.epoch), position=int(p.position),
            max_bytes=int(body.max_bytes), replica_directory_id=_dir(p.replica_directory_id),
            cluster_id=_cluster(body.cluster_id))
    if api_key == ApiKey.DESCRIBE_QUORUM:
        _one_partition(body.topics, lambda t: t.topic_name, METADATA_TOPIC)
        return rm.DescribeQuorumRequest()
    if api_key == ApiKey.ADD_RAFT_VOTER:
        return rm.AddRaftVoterRequest(
            voter_id=int(body.voter_id), voter_directory_id=_dir(body.voter_directory_id),
            listeners={lst.name: _endpoint(lst.host, int(lst.port)) for lst in body.listeners},
            timeout_ms=_to_ms(body.timeout), cluster_id=_cluster(body.cluster_id),
            # v1 (KIP-1186); v0 has no field and always waits for the commit.
            ack_when_committed=bool(getattr(body, "ack_when_committed", True)))
    if api_key == ApiKey.REMOVE_RAFT_VOTER:
        return rm.RemoveRaftVoterRequest(
            voter_id=int(body.voter_id), voter_directory_id=_dir(body.voter_directory_id),
            timeout_ms=DEFAULT_VOTER_CHANGE_TIMEOUT_MS, cluster_id=_cluster(body.cluster_id))
    if api_key == ApiKey.UPDATE_RAFT_VOTER:
        feature = body.k_raft_version_feature
        return rm.UpdateRaftVoterRequest(
            current_leader_epoch=int(body.current_leader_epoch), voter_id=int(body.voter_id),
            voter_directory_id=_dir(body.voter_directory_id),
            listeners={lst.name: _endpoint(lst.host, int(lst.port)) for lst in body.listeners},
            min_kraft_version=int(feature.min_supported_version),
            max_kraft_version=int(feature.max_supported_version),
            cluster_id=_cluster(body.cluster_id))
    raise KafkaError(Errors.INVALID_REQUEST, f"{api_key.name} is not a raft API")


# -- server side: core response -> kio response ---------------------------------------------------


def response_to_kafka(api_key: ApiKey, version: int, response: Any) -> Any:
    """The kio response (of `version`) for a core response."""
    top, part = _split(response.error_code)
    if api_key == ApiKey.VOTE:
        return vote_rs.VoteResponse(error_code=top, topics=(vote_rs.TopicData(
            topic_name=_TOPIC, partitions=(vote_rs.PartitionData(
                partition_index=_PARTITION, error_code=part,
                leader_id=_broker_id(response.leader_id), leader_epoch=_i32(response.leader_epoch),
                vote_granted=response.vote_granted),)),))
    if api_key == ApiKey.BEGIN_QUORUM_EPOCH:
        return bqe_rs.BeginQuorumEpochResponse(error_code=top, topics=(bqe_rs.TopicData(
            topic_name=_TOPIC, partitions=(bqe_rs.PartitionData(
                partition_index=_PARTITION, error_code=part,
                leader_id=_broker_id(response.leader_id),
                leader_epoch=_i32(response.leader_epoch)),)),))
    if api_key == ApiKey.END_QUORUM_EPOCH:
        return eqe_rs.EndQuorumEpochResponse(error_code=top, topics=(eqe_rs.TopicData(
            topic_name=_TOPIC, partitions=(eqe_rs.PartitionData(
                partition_index=_PARTITION, error_code=part,
                leader_id=_broker_id(response.leader_id),
                leader_epoch=_i32(response.leader_epoch)),)),))
    if api_key == ApiKey.FETCH:
        return fetch_rs.FetchResponse(
            throttle_time=_NO_THROTTLE, error_code=top, session_id=_i32(0),
            responses=(fetch_rs.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=(
                fetch_rs.PartitionData(
                    partition_index=_PARTITION, error_code=part,
                    high_watermark=_i64(response.high_watermark),
                    last_stable_offset=_i64(response.high_watermark),
                    log_start_offset=_i64(response.log_start_offset),
                    diverging_epoch=fetch_rs.EpochEndOffset(
                        epoch=_i32(response.diverging_epoch),
                        end_offset=_i64(response.diverging_end_offset)),
                    current_leader=fetch_rs.LeaderIdAndEpoch(
                        leader_id=_broker_id(response.leader_id),
                        leader_epoch=_i32(response.leader_epoch)),
                    snapshot_id=fetch_rs.SnapshotId(
                        end_offset=_i64(response.snapshot_end_offset),
                        epoch=_i32(response.snapshot_epoch)),
                    aborted_transactions=None,
                    records=_records(response.records),
                ),)),),
            node_endpoints=_node_endpoint(response.leader_id, response.leader_endpoint,
                                          fetch_rs.NodeEndpoint),
        )
    if api_key == ApiKey.FETCH_SNAPSHOT:
        return fs_rs.FetchSnapshotResponse(
            throttle_time=_NO_THROTTLE, error_code=top,
            topics=(fs_rs.TopicSnapshot(name=_TOPIC, partitions=(fs_rs.PartitionSnapshot(
                index=_PARTITION, error_code=part,
                snapshot_id=fs_rs.SnapshotId(end_offset=_i64(response.snapshot_end_offset),
                                             epoch=_i32(response.snapshot_epoch)),
                current_leader=fs_rs.LeaderIdAndEpoch(
                    leader_id=_broker_id(response.leader_id),
                    leader_epoch=_i32(response.leader_epoch)),
                size=_i64(response.size), position=_i64(response.position),
                unaligned_records=_records(response.unaligned_records),
            ),)),),
            node_endpoints=_node_endpoint(response.leader_id, response.leader_endpoint,
                                          fs_rs.NodeEndpoint),
        )
    if api_key == ApiKey.DESCRIBE_QUORUM:
        return describe_quorum_to_kafka(response)
    if api_key == ApiKey.ADD_RAFT_VOTER:
        schema: Any = arv1_rs.AddRaftVoterResponse if version >= 1 else arv0_rs.AddRaftVoterResponse
        return schema(throttle_time=_NO_THROTTLE, error_code=error_code(response.error_code),
                      error_message=response.error_message or None)
    if api_key == ApiKey.REMOVE_RAFT_VOTER:
        return rrv_rs.RemoveRaftVoterResponse(
            throttle_time=_NO_THROTTLE, error_code=error_code(response.error_code),
            error_message=response.error_message or None)
    if api_key == ApiKey.UPDATE_RAFT_VOTER:
        hp = _host_port(response.leader_endpoint) or ("", -1)
        return urv_rs.UpdateRaftVoterResponse(
            throttle_time=_NO_THROTTLE, error_code=error_code(response.error_code),
            current_leader=urv_rs.CurrentLeader(
                leader_id=_broker_id(response.leader_id), leader_epoch=_i32(response.leader_epoch),
                host=hp[0], port=_i32(hp[1])))
    raise TypeError(f"{api_key.name} is not a raft API")


def describe_quorum_to_kafka(response: rm.DescribeQuorumResponse) -> Any:
    top, part = _split(response.error_code)

    def state(r: rm.ReplicaState) -> Any:
        return dq_rs.ReplicaState(
            replica_id=_broker_id(r.replica_id), replica_directory_id=r.replica_directory_id,
            log_end_offset=_i64(r.log_end_offset),
            last_fetch_timestamp=_i64(r.last_fetch_timestamp_ms),
            last_caught_up_timestamp=_i64(r.last_caught_up_timestamp_ms))

    nodes: dict[int, dict[str, str]] = {}
    for e in [*response.voter_endpoints, *response.observer_endpoints]:
        nodes.setdefault(e.voter_id, {}).update(e.endpoints)
    listed = tuple(
        dq_rs.Node(node_id=_broker_id(node_id), listeners=tuple(
            dq_rs.Listener(name=name, host=hp[0], port=_u16(hp[1]))
            for name, hp in ((n, _host_port(e)) for n, e in listeners.items()) if hp is not None))
        for node_id, listeners in nodes.items()
    )
    message = response.error_message or None
    return dq_rs.DescribeQuorumResponse(
        error_code=top, error_message=message if int(top) else None,
        topics=(dq_rs.TopicData(topic_name=_TOPIC, partitions=(dq_rs.PartitionData(
            partition_index=_PARTITION, error_code=part,
            error_message=message if int(part) else None,
            leader_id=_broker_id(response.leader_id), leader_epoch=_i32(response.leader_epoch),
            high_watermark=_i64(response.high_watermark),
            current_voters=tuple(state(r) for r in response.current_voters),
            observers=tuple(state(r) for r in response.observers)),)),),
        nodes=listed,
    )


def error_to_kafka(api_key: ApiKey, version: int, error: Errors, message: str) -> Any:
    """A response of `version` carrying only an error (request-level errors at the top)."""
    core: dict[ApiKey, type] = {
        ApiKey.VOTE: rm.VoteResponse,
        ApiKey.BEGIN_QUORUM_EPOCH: rm.BeginQuorumEpochResponse,
        ApiKey.END_QUORUM_EPOCH: rm.EndQuorumEpochResponse,
        ApiKey.FETCH: rm.FetchResponse,
        ApiKey.FETCH_SNAPSHOT: rm.FetchSnapshotResponse,
        ApiKey.DESCRIBE_QUORUM: rm.DescribeQuorumResponse,
        ApiKey.ADD_RAFT_VOTER: rm.AddRaftVoterResponse,
        ApiKey.REMOVE_RAFT_VOTER: rm.RemoveRaftVoterResponse,
        ApiKey.UPDATE_RAFT_VOTER: rm.UpdateRaftVoterResponse,
    }
    return response_to_kafka(api_key, version, core[api_key](error_code=int(error),
                                                            error_message=message))


# -- the controller listener's handlers -----------------------------------------------------------


class KafkaRaftApis:
    """Routes RAFT_API_KEYS on a KafkaRouter to one node's Raft replica (through its driver).
    A handler never raises into the router (that would close the caller's connection): every
    failure is an error code in the response. Given the parts it uses, not the RaftManager
    that builds the driver that imports this module (no import cycle, issue 18)."""

    def __init__(self, node_id: int, replica: RaftReplica, handle_request: RequestHandler) -> None:
        self._node_id = node_id
        self._replica = replica
        self._handle_request = handle_request

    def route(self, router: KafkaRouter) -> None:
        for api_key in RAFT_API_KEYS:
            router.route(api_key, self._handler(api_key))

    def _handler(self, api_key: ApiKey) -> Callable[[Any, int, KafkaRequestContext], Any]:
        async def handle(body: Any, version: int, ctx: KafkaRequestContext) -> Any:
            return await self.handle(api_key, body, version, ctx)

        return handle

    def _replica_endpoint(self, node_id: int) -> str:
        # Kafka's Fetch carries no endpoint: a node id the voter set knows listens there (a
        # replacement disk of a voter, seed 003); any other observer (a broker) has none.
        return self._replica.voters.endpoint(node_id) or ""

    async def handle(self, api_key: ApiKey, body: Any, version: int,
                     ctx: KafkaRequestContext) -> Any:
        try:
            request = request_from_kafka(api_key, body, local_node_id=self._node_id,
                                         replica_endpoint=self._replica_endpoint)
            source = -1 if ctx.source_node_id is None else ctx.source_node_id
            response = await self._handle_request(source, request)
            return response_to_kafka(api_key, version, response)
        except KafkaError as exc:
            return error_to_kafka(api_key, version, exc.error, exc.message)
        except Exception as exc:  # never close the caller's connection over our own failure
            log.exception("%s failed", api_key.name)
            return error_to_kafka(api_key, version, Errors.UNKNOWN_SERVER_ERROR, str(exc))
