"""Single RaftReplica cores driven by hand: elections, pre-vote, divergence, snapshots,
observers, and the error codes of INVARIANTS rules 1-4."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any, TypeVar

import pytest

from kafkawire.errors import Errors
from raft.core.control_records import (
    LeaderChangeRecord,
    Voter,
    VotersRecord,
    bootstrap_snapshot,
    decode_control,
    encode_control,
    snapshot_batches,
)
from raft.core.memory_log import MemoryLog
from raft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
    add_raft_voter_request,
    answered_partition,
    begin_quorum_epoch_request,
    describe_quorum_request,
    directory_id,
    end_quorum_epoch_request,
    error_of,
    fetch_request,
    fetch_response,
    fetch_snapshot_request,
    leader_of,
    remove_raft_voter_request,
    the_partition,
    update_raft_voter_request,
    vote_request,
    vote_response,
)
from raft.core.quorum_state import ElectionState
from raft.core.raft_replica import NotLeaderError, Outbound, RaftConfig, RaftReplica, RaftResult
from raft.core.replica_key import ReplicaKey
from storage.core.offset_and_epoch import SnapshotId
from storage.core.record_batch import decode_batch

DIRS = {i: uuid.UUID(int=1000 + i) for i in range(1, 6)}
T = TypeVar("T")
CONFIG = RaftConfig(cluster_id="c1", election_timeout_ms=1000, fetch_timeout_ms=2000)

# A new leader of a bootstrapped log writes LeaderChange, KRaftVersion and Voters (rule 7).
START_OF_EPOCH_RECORDS = 3


def key(node_id: int) -> ReplicaKey:
    return ReplicaKey(node_id, DIRS[node_id])


def voters(ids: Iterable[int] = (1, 2, 3)) -> list[Voter]:
    return [Voter(i, DIRS[i], {"CONTROLLER": f"h{i}:9093"}) for i in ids]


def formatted_log(ids: Iterable[int] = (1, 2, 3)) -> MemoryLog:
    log = MemoryLog()
    log.create_snapshot(SnapshotId(0, 0), bootstrap_snapshot(voters(ids)))
    return log


def replica(node_id: int, log: MemoryLog | None = None, state: ElectionState | None = None,
            config: RaftConfig = CONFIG, now_ms: int = 0, rand: float = 0.0) -> RaftReplica:
    return RaftReplica(node_id, DIRS[node_id], log or formatted_log(), state, config,
                       lambda: rand, now_ms, f"h{node_id}:9093")


def sent(result: RaftResult, kind: type) -> list[Outbound]:
    return [o for o in result.send if isinstance(o.request, kind)]


def reqs(result: RaftResult, kind: type[T]) -> list[T]:
    return [o.request for o in result.send if isinstance(o.request, kind)]


def flat(message: Any) -> SimpleNamespace:
    """A raft message's values in one namespace, for assertions: its top-level fields and its
    one partition's (Kafka's names), Kafka's nested ids spread out (diverging_end_offset,
    snapshot_end_offset, ...) and, for an answer, its error (the top level's, else the
    partition's) and the leader it names (leader_id, leader_epoch, leader_endpoint)."""
    values = {f.name: getattr(message, f.name) for f in dataclasses.fields(message)}
    response = type(message).__name__.endswith("Response")
    part = answered_partition(message) if response else (
        the_partition(message) if "topics" in values else None)
    if part is not None:
        values.update({f.name: getattr(part, f.name) for f in dataclasses.fields(part)})
    if "replica_state" in values:
        values["replica_id"] = int(values["replica_state"].replica_id)
    if "leader_endpoints" in values:
        values["leader_endpoint"] = next(
            (f"{e.host}:{e.port}" for e in values["leader_endpoints"]), "")
    if "diverging_epoch" in values:
        diverging = values["diverging_epoch"]
        values["diverging_epoch"] = int(diverging.epoch)
        values["diverging_end_offset"] = int(diverging.end_offset)
    if "snapshot_id" in values:
        values["snapshot_end_offset"] = int(values["snapshot_id"].end_offset)
        values["snapshot_epoch"] = int(values["snapshot_id"].epoch)
    for name in ("records", "unaligned_records"):
        if name in values:
            values[name] = bytes(values[name] or b"")
    for name in ("voter_directory_id", "replica_directory_id", "candidate_directory_id"):
        if name in values:
            values[name] = directory_id(values[name])
    if response:
        values["error_code"] = error_of(message)
        leader = leader_of(message)
        values.update(leader_id=leader.id, leader_epoch=leader.epoch,
                      leader_endpoint=leader.endpoint)
    return SimpleNamespace(**values)


def elect(node: RaftReplica, now_ms: int = 2000) -> RaftResult:
    """Drive node through pre-vote and vote, every other voter granting."""
    result = node.tick(now_ms)
    pending = sent(result, VoteRequest)
    while pending and node.role != "Leader":
        out = pending.pop(0)
        r = node.handle_response(out.dest_node_id, out.request,
                                 vote_response(leader_epoch=node.epoch, vote_granted=True), now_ms)
        pending.extend(sent(r, VoteRequest))
        if r.became_leader:
            result = r
    assert node.role == "Leader"
    return result


def append_epochs(log: MemoryLog, epochs: Iterable[int], prefix: str = "v") -> None:
    for index, epoch in enumerate(epochs):
        log.append_as_leader([f"{prefix}{index}".encode()], epoch, 0)
    log.flush()


# -- elections (rules 1, 7) --------------------------------------------------------------------

def test_election_prevote_then_vote_then_leader() -> None:
    node = replica(1)
    assert node.role == "Unattached" and node.epoch == 0
    result = node.tick(999)
    assert result.send == []  # the election timeout (1000 ms + jitter) has not passed
    result = node.tick(2000)
    assert node.role == "Prospective" and node.epoch == 0
    assert result.persist is None  # rule 7: a pre-vote persists nothing
    pre_votes = sent(result, VoteRequest)
    assert sorted(o.dest_node_id for o in pre_votes) == [2, 3]
    assert all(flat(r).pre_vote and flat(r).replica_epoch == 1 for r in reqs(result, VoteRequest))
    assert {o.address for o in pre_votes} == {"h2:9093", "h3:9093"}
    result = node.handle_response(2, pre_votes[0].request,
                                  vote_response(leader_epoch=0, vote_granted=True), 2001)
    assert node.role == "Candidate" and node.epoch == 1
    assert result.persist == ElectionState(1, None, key(1))  # rule 1: durable before Vote
    votes = sent(result, VoteRequest)
    assert len(votes) == 2 and not any(flat(r).pre_vote for r in reqs(result, VoteRequest))
    result = node.handle_response(3, votes[1].request,
                                  vote_response(leader_epoch=1, vote_granted=True), 2002)
    assert result.became_leader and result.leader_changed and result.flush
    assert result.persist == ElectionState(1, 1, key(1))
    assert node.role == "Leader" and node.leader_id == 1
    begins = sent(result, BeginQuorumEpochRequest)
    assert sorted(o.dest_node_id for o in begins) == [2, 3]
    assert flat(reqs(result, BeginQuorumEpochRequest)[0]).leader_endpoint == "h1:9093"
    # Rule 3: the leader's first entry in its epoch is a LeaderChange control record.
    batch, _ = decode_batch(node._log.read(0, 1 << 20))
    assert batch.is_control and batch.leader_epoch == 1
    change = decode_control(batch.records[0])
    assert isinstance(change, LeaderChangeRecord) and change.leader_id == 1


def test_single_voter_elects_itself() -> None:
    node = replica(1, formatted_log([1]))
    result = node.tick(2000)
    assert result.became_leader and node.role == "Leader" and node.epoch == 1
    node._log.flush()
    result = node.handle_flushed(2001)
    # LeaderChange, then KRaftVersion + Voters copied from the bootstrap checkpoint (rule 7).
    assert node.high_watermark == START_OF_EPOCH_RECORDS and result.high_watermark_changed
    result, last_offset = node.append([b"a", b"b"], 2002)
    assert last_offset == START_OF_EPOCH_RECORDS + 1
    assert result.flush and node.high_watermark == START_OF_EPOCH_RECORDS
    node._log.flush()
    node.handle_flushed(2003)
    assert node.high_watermark == START_OF_EPOCH_RECORDS + 2  # rule 2: the flushed offset only


def test_prevote_refused_while_leader_is_alive() -> None:
    node = replica(2)
    node.handle_request(1, begin_quorum_epoch_request(1, 5, "h1:9093", 2, DIRS[2], "c1"), 100)
    assert node.role == "Follower" and node.leader_id == 1 and node.epoch == 5
    pre_vote = vote_request(6, 3, DIRS[3], 2, DIRS[2], 5, 100, pre_vote=True, cluster_id="c1")
    response = node.handle_request(3, pre_vote, 200).response
    assert isinstance(response, VoteResponse)
    assert not flat(response).vote_granted and flat(response).leader_id == 1 and flat(response).leader_epoch == 5
    assert node.epoch == 5  # a pre-vote moves nobody's epoch
    # After the fetch timeout without word from the leader, the pre-vote is granted.
    response = node.handle_request(3, pre_vote, 100 + CONFIG.fetch_timeout_ms).response
    assert isinstance(response, VoteResponse) and flat(response).vote_granted
    assert node.epoch == 5


def test_end_quorum_epoch_lets_followers_grant_prevotes_at_once() -> None:
    node = replica(2)
    node.handle_request(1, begin_quorum_epoch_request(1, 5, "h1:9093", 2, DIRS[2], "c1"), 100)
    node.handle_request(1, end_quorum_epoch_request(1, 5, [2, 3], "c1"), 150)
    pre_vote = vote_request(6, 3, DIRS[3], 2, DIRS[2], 5, 100, pre_vote=True, cluster_id="c1")
    response = node.handle_request(3, pre_vote, 160).response
    assert isinstance(response, VoteResponse) and flat(response).vote_granted
    result = node.tick(160)  # first preferred successor: no backoff
    assert node.role == "Prospective"
    assert sorted(o.dest_node_id for o in sent(result, VoteRequest)) == [1, 3]


# -- losing the leader fast, without splitting the vote (issue 19) ----------------------------

def follower_of_1(node_id: int = 2, rand: float = 0.5, at_ms: int = 100) -> RaftReplica:
    node = replica(node_id, rand=rand)
    node.handle_request(1, begin_quorum_epoch_request(1, 5, "h1:9093", node_id, DIRS[node_id], "c1"),
                        at_ms)
    assert node.role == "Follower" and node.leader_id == 1 and node.epoch == 5
    return node


def test_reset_leader_connection_starts_prevote_well_before_the_fetch_timeout() -> None:
    node = follower_of_1(rand=0.5)  # jitter: 0.5 * leader_lost_jitter_max_ms
    jitter_ms = CONFIG.leader_lost_jitter_max_ms // 2
    assert node.next_deadline_ms() == 100 + CONFIG.fetch_timeout_ms
    result = node.handle_connection_lost(3, 200)  # not the leader: nothing changes
    assert node.role == "Follower" and node.next_deadline_ms() == 100 + CONFIG.fetch_timeout_ms
    result = node.handle_connection_lost(1, 200)  # the leader's process died
    assert node.role == "Follower" and sent(result, VoteRequest) == []
    assert node.next_deadline_ms() == 200 + jitter_ms  # stands after the jitter only
    # It no longer hears the leader, so it grants another survivor's pre-vote meanwhile.
    pre_vote = vote_request(6, 3, DIRS[3], 2, DIRS[2], 5, 100, pre_vote=True, cluster_id="c1")
    response = node.handle_request(3, pre_vote, 210).response
    assert isinstance(response, VoteResponse) and flat(response).vote_granted and node.epoch == 5
    node.handle_connection_lost(1, 250)  # a refused reconnect does not push the stand back
    assert node.next_deadline_ms() == 200 + jitter_ms
    result = node.tick(200 + jitter_ms)
    assert node.role == "Prospective" and node.epoch == 5 and result.persist is None
    assert sorted(o.dest_node_id for o in sent(result, VoteRequest)) == [1, 3]
    assert 200 + jitter_ms < 100 + CONFIG.fetch_timeout_ms // 4


def test_reset_with_zero_jitter_stands_in_the_same_step() -> None:
    node = follower_of_1(rand=0.0)
    result = node.handle_connection_lost(1, 200)
    assert node.role == "Prospective"
    assert all(flat(r).pre_vote and flat(r).replica_epoch == 6 for r in reqs(result, VoteRequest))


def test_fetch_timeout_stands_after_a_random_jitter() -> None:
    """Two followers fed by the same fetch cycle time out together; the jitter parts them."""
    early, late = follower_of_1(2, rand=0.1), follower_of_1(3, rand=0.9)
    deadline = 100 + CONFIG.fetch_timeout_ms
    for node in (early, late):
        node.tick(deadline)
        assert node.role == "Follower"
    assert early.next_deadline_ms() == deadline + CONFIG.leader_lost_jitter_max_ms // 10
    assert late.next_deadline_ms() == deadline + CONFIG.leader_lost_jitter_max_ms * 9 // 10
    early.tick(early.next_deadline_ms())
    assert early.role == "Prospective" and late.role == "Follower"


def test_prevote_refused_by_a_voter_that_heard_the_leader() -> None:
    """Rule 7 keeps a live leader safe: a follower whose connection was reset stands, but a
    voter that heard from the leader within the fetch timeout refuses, and the leader itself
    refusing sends the prospective back to it."""
    lost = follower_of_1(2, rand=0.0)
    hearing = follower_of_1(3, rand=0.0, at_ms=150)
    result = lost.handle_connection_lost(1, 200)
    pre_votes = {o.dest_node_id: o.request for o in sent(result, VoteRequest)}
    response = hearing.handle_request(2, pre_votes[3], 201).response
    assert isinstance(response, VoteResponse) and not flat(response).vote_granted
    assert flat(response).leader_id == 1 and flat(response).leader_epoch == 5 and hearing.epoch == 5
    lost.handle_response(3, pre_votes[3], response, 202)
    assert lost.role == "Prospective" and lost.epoch == 5  # no candidacy, no epoch bump
    leader_says = vote_response(leader_id=1, leader_epoch=5, vote_granted=False)
    result = lost.handle_response(1, pre_votes[1], leader_says, 203)
    assert lost.role == "Follower" and lost.leader_id == 1 and lost.epoch == 5
    assert [o.dest_node_id for o in sent(result, FetchRequest)] == [1]


def test_split_vote_backs_off_as_soon_as_no_majority_can_grant() -> None:
    """Kafka's gridlock rule: a candidate refused by one survivor, with the dead leader's
    connection refused, backs off at once instead of waiting out the election timeout."""
    node = follower_of_1(2, rand=0.5)
    result = node.handle_connection_lost(1, 200)
    result = node.tick(node.next_deadline_ms())
    pre_vote = next(o.request for o in sent(result, VoteRequest) if o.dest_node_id == 3)
    now_ms = node.next_deadline_ms() - 1
    result = node.handle_response(3, pre_vote, vote_response(leader_epoch=5, vote_granted=True),
                                  now_ms)
    assert node.role == "Candidate" and node.epoch == 6
    vote = next(o.request for o in sent(result, VoteRequest) if o.dest_node_id == 3)
    node.handle_response(3, vote, vote_response(leader_epoch=6, vote_granted=False), now_ms + 1)
    assert node.role == "Candidate"  # node 1 has not answered yet
    node.handle_connection_lost(1, now_ms + 2)
    assert node.role == "Unattached" and node.epoch == 6
    assert node.election_state == ElectionState(6, None, key(2))  # still voted for itself
    # Backoff: half of min(election backoff max, retry backoff doubled once).
    window_ms = min(CONFIG.election_backoff_max_ms, CONFIG.retry_backoff_ms * 2)
    assert node.next_deadline_ms() == now_ms + 2 + window_ms // 2


def test_prevote_at_a_higher_epoch_moves_the_receiver_to_it() -> None:
    """SIM_SEED=10790: node 1 lost an election in epoch 5 and stands again with a shorter log,
    while node 2 leads epoch 4. The pre-vote (at epoch 5 + 1) is refused for the log, but the
    receiver moves to epoch 5 (Kafka's handleVoteRequest), so node 1 is not shut out for ever."""
    log = formatted_log()
    append_epochs(log, [1, 3, 3, 3])
    leader = replica(2, log, ElectionState(3, None, key(2)))
    elect(leader, now_ms=5000)
    assert leader.epoch == 4 and leader.role == "Leader"
    # Node 1, Prospective at epoch 5, asks at 5 + 1 with a log ending at offset 2 in epoch 1.
    pre_vote = vote_request(6, 1, DIRS[1], 2, DIRS[2], 1, 2, pre_vote=True, cluster_id="c1")
    result = leader.handle_request(1, pre_vote, 5100)
    response = result.response
    assert isinstance(response, VoteResponse) and not flat(response).vote_granted  # shorter log
    assert flat(response).leader_epoch == 5 and leader.epoch == 5 and leader.role == "Unattached"
    assert result.persist == ElectionState(5, None, None)  # rule 1: durable, forward only
    result = leader.handle_request(1, pre_vote, 5101)  # a retry moves nothing further
    assert leader.epoch == 5 and result.persist is None
    # Node 2, with the longer log, now stands at epoch 5 and wins epoch 6.
    elect(leader, now_ms=leader.next_deadline_ms())
    assert leader.epoch == 6 and leader.role == "Leader"


def test_observer_looks_for_the_leader_again_when_its_connection_resets() -> None:
    config = RaftConfig(cluster_id="c1", bootstrap_servers=["h1:9093", "h2:9093"])
    observer = RaftReplica(9, uuid.UUID(int=9), MemoryLog(), None, config, lambda: 0.0, 0,
                           "h9:9093")
    fetch = sent(observer.tick(0), FetchRequest)[0]
    observer.handle_response(-1, fetch.request,
                             fetch_response(Errors.NOT_LEADER_OR_FOLLOWER, 2, 3, "h2:9093"), 5)
    assert observer.leader_id == 2
    result = observer.handle_connection_lost(2, 10)
    assert observer.leader_id is None and observer.role == "Observer" and observer.epoch == 3
    # It asks the bootstrap servers at once, and never runs for election.
    assert [o.dest_node_id for o in sent(result, FetchRequest)] == [-1]
    assert sent(result, VoteRequest) == [] and result.persist is None


def test_vote_granted_once_per_epoch_and_persisted() -> None:
    node = replica(2)
    vote_1 = vote_request(3, 1, DIRS[1], 2, DIRS[2], 0, 0, cluster_id="c1")
    result = node.handle_request(1, vote_1, 10)
    assert isinstance(result.response, VoteResponse) and flat(result.response).vote_granted
    assert result.persist == ElectionState(3, None, key(1))  # rule 1
    vote_3 = vote_request(3, 3, DIRS[3], 2, DIRS[2], 0, 0, cluster_id="c1")
    result = node.handle_request(3, vote_3, 11)
    assert isinstance(result.response, VoteResponse) and not flat(result.response).vote_granted
    result = node.handle_request(1, vote_1, 12)  # a retried request gets the same answer
    assert isinstance(result.response, VoteResponse) and flat(result.response).vote_granted
    assert result.persist is None


def test_vote_refused_when_candidate_log_is_behind() -> None:
    log = formatted_log()
    append_epochs(log, [1, 1, 2])
    node = replica(2, log, ElectionState(2, None, None))
    response = node.handle_request(1, vote_request(3, 1, DIRS[1], 2, DIRS[2], 1, 5, cluster_id="c1"),
                                   10).response
    assert isinstance(response, VoteResponse) and not flat(response).vote_granted
    assert node.epoch == 3  # the higher epoch is still adopted
    response = node.handle_request(3, vote_request(3, 3, DIRS[3], 2, DIRS[2], 2, 3, cluster_id="c1"),
                                   11).response
    assert isinstance(response, VoteResponse) and flat(response).vote_granted


def test_invalid_voter_key() -> None:
    node = replica(2)
    wrong = uuid.UUID(int=77)
    response = node.handle_request(1, vote_request(1, 1, DIRS[1], 2, wrong, 0, 0, cluster_id="c1"),
                                   0).response
    assert isinstance(response, VoteResponse)
    assert flat(response).error_code == Errors.INVALID_VOTER_KEY and not flat(response).vote_granted
    response = node.handle_request(1, begin_quorum_epoch_request(1, 1, "h1:9093", 2, wrong, "c1"),
                                   0).response
    assert isinstance(response, BeginQuorumEpochResponse)
    assert flat(response).error_code == Errors.INVALID_VOTER_KEY
    response = node.handle_request(1, end_quorum_epoch_request(1, 1, [2], "c1", 2, wrong), 0).response
    assert isinstance(response, EndQuorumEpochResponse)
    assert flat(response).error_code == Errors.INVALID_VOTER_KEY
    assert node.role == "Unattached"


def test_fenced_leader_epoch_and_not_leader() -> None:
    node = replica(2, state=ElectionState(4, 1, None))
    assert node.role == "Follower" and node.leader_id == 1
    response = node.handle_request(3, vote_request(3, 3, DIRS[3], 2, DIRS[2], 9, 9, cluster_id="c1"),
                                   0).response
    assert isinstance(response, VoteResponse)
    assert flat(response).error_code == Errors.FENCED_LEADER_EPOCH
    assert (flat(response).leader_id, flat(response).leader_epoch) == (1, 4)
    fetch = fetch_request(3, DIRS[3], 0, 0, 4)
    response = node.handle_request(3, fetch, 0).response
    assert isinstance(response, FetchResponse)
    assert flat(response).error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert (flat(response).leader_id, flat(response).leader_epoch, flat(response).leader_endpoint) == (
        1, 4, "h1:9093")
    response = node.handle_request(3, fetch_request(3, DIRS[3], 0, 0, 2), 0).response
    assert isinstance(response, FetchResponse)
    assert flat(response).error_code == Errors.FENCED_LEADER_EPOCH


def test_inconsistent_cluster_id() -> None:
    node = replica(2)
    response = node.handle_request(1, vote_request(1, 1, DIRS[1], 2, DIRS[2], 0, 0,
                                                  cluster_id="other"), 0).response
    assert isinstance(response, VoteResponse)
    assert flat(response).error_code == Errors.INCONSISTENT_CLUSTER_ID


def test_an_empty_cluster_id_is_inconsistent_only_none_skips_the_check() -> None:
    # Kafka's KafkaRaftClient.hasValidClusterId: null is not checked, any other id (an empty
    # one included) must be ours, on every raft RPC that carries one, before anything else.
    def requests(cluster_id: str | None) -> list[object]:
        return [
            vote_request(9, 3, DIRS[3], 1, DIRS[1], 9, 9, cluster_id=cluster_id),
            begin_quorum_epoch_request(3, 9, "h3:9093", 1, DIRS[1], cluster_id),
            end_quorum_epoch_request(3, 9, [1], cluster_id, 1, DIRS[1]),
            fetch_request(2, DIRS[2], 0, 0, 1, cluster_id=cluster_id),
            fetch_snapshot_request(2, 1, 0, 0, 0, replica_directory_id=DIRS[2],
                                 cluster_id=cluster_id),
            add_raft_voter_request(4, DIRS[4], {"CONTROLLER": "h4:9093"}, cluster_id=cluster_id),
            remove_raft_voter_request(3, DIRS[3], cluster_id=cluster_id),
            update_raft_voter_request(1, 2, DIRS[2], {"CONTROLLER": "h2:9093"}, 0, 1, cluster_id),
        ]

    for cluster_id in ("", "other"):
        for request in requests(cluster_id):
            node = replica(1)
            elect(node)
            epoch = node.epoch
            response = node.handle_request(3, request, 2100).response
            assert response is not None and flat(response).error_code == (
                Errors.INCONSISTENT_CLUSTER_ID), (cluster_id, request)
            assert (node.role, node.epoch) == ("Leader", epoch)  # nothing else happened
    for request in requests(None):
        node = replica(1)
        elect(node)
        response = node.handle_request(3, request, 2100).response
        assert response is not None
        assert flat(response).error_code != Errors.INCONSISTENT_CLUSTER_ID, request


def test_higher_epoch_in_a_response_moves_a_candidate_to_follower() -> None:
    node = replica(1)
    result = node.tick(2000)
    pre_vote = sent(result, VoteRequest)[0]
    result = node.handle_response(2, pre_vote.request,
                                  vote_response(leader_id=3, leader_epoch=7), 2001)
    assert node.role == "Follower" and node.leader_id == 3 and node.epoch == 7
    assert result.persist == ElectionState(7, 3, None) and result.leader_changed
    fetches = sent(result, FetchRequest)
    assert [o.dest_node_id for o in fetches] == [3]


def test_restarted_leader_resigns_its_epoch() -> None:
    node = replica(1, state=ElectionState(4, 1, key(1)))
    assert node.role == "Resigned"
    result = node.tick(1)
    ends = sent(result, EndQuorumEpochRequest)
    assert sorted(o.dest_node_id for o in ends) == [2, 3]
    with pytest.raises(NotLeaderError):
        node.append([b"x"], 2)


# -- replication, high watermark, divergence (rules 2, 3) ----------------------------------------

def leader_with_followers() -> tuple[RaftReplica, RaftReplica, RaftReplica]:
    leader = replica(1)
    elect(leader)
    leader._log.flush()
    leader.handle_flushed(2000)
    followers = []
    for node_id in (2, 3):
        f = replica(node_id)
        f.handle_request(1, begin_quorum_epoch_request(1, leader.epoch, "h1:9093", node_id,
                                                    DIRS[node_id], "c1"), 2000)
        followers.append(f)
    return leader, followers[0], followers[1]


def pump_fetch(leader: RaftReplica, follower: RaftReplica, now_ms: int) -> RaftResult:
    """One fetch round trip; flush the follower like the runtime does."""
    fetch = follower._inflight_fetch
    assert isinstance(fetch, FetchRequest)
    response = leader.handle_request(follower.node_id, fetch, now_ms).response
    result = follower.handle_response(1, fetch, response, now_ms)
    if result.flush:
        follower._log.flush()
        follower.handle_flushed(now_ms)
    return result


def test_replication_and_high_watermark() -> None:
    leader, f2, f3 = leader_with_followers()
    assert leader.high_watermark == 0
    # Kafka's highWatermark() is empty until known: what a broker's loader waits for.
    assert not f2.high_watermark_known and not f3.high_watermark_known
    _result, last = leader.append([b"a"], 2100)
    assert last == START_OF_EPOCH_RECORDS
    leader._log.flush()
    leader.handle_flushed(2100)
    assert leader.high_watermark == 0  # no follower has acknowledged yet
    end = START_OF_EPOCH_RECORDS + 1
    result = pump_fetch(leader, f2, 2101)  # f2 appends everything up to `end` and flushes
    assert f2._log.end_offset() == end and result.flush
    pump_fetch(leader, f2, 2102)  # reports fetch offset `end`: a majority has it
    assert leader.high_watermark == end and leader.high_watermark_known
    pump_fetch(leader, f2, 2103)
    assert f2.high_watermark == end  # follower HWM = min(leader HWM, own end)
    assert f2.high_watermark_known and not f3.high_watermark_known
    assert f3.high_watermark == 0
    describe = leader.handle_request(99, describe_quorum_request(), 2104).response
    assert isinstance(describe, DescribeQuorumResponse)
    assert flat(describe).leader_id == 1 and flat(describe).high_watermark == end
    ends = {s.replica_id: s.log_end_offset for s in flat(describe).current_voters}
    assert ends == {1: end, 2: end, 3: -1}
    assert [n.node_id for n in describe.nodes] == [1, 2, 3]  # Kafka's Nodes: the voters' listeners


def f2_fetch_answered() -> tuple[RaftReplica, FetchRequest, Any]:
    """leader_with_followers() after the leader appended one record: (follower 2, its in-flight
    fetch, the leader's answer to it)."""
    leader, f2, _f3 = leader_with_followers()
    leader.append([b"a"], 2100)
    fetch = f2._inflight_fetch
    assert isinstance(fetch, FetchRequest)
    return f2, fetch, leader.handle_request(2, fetch, 2101).response


def test_follower_fetches_again_only_after_flush() -> None:
    f2, fetch, response = f2_fetch_answered()
    result = f2.handle_response(1, fetch, response, 2101)
    assert result.flush and sent(result, FetchRequest) == []  # rule 2: not before the fsync
    f2._log.flush()
    result = f2.handle_flushed(2102)
    assert [flat(r).fetch_offset for r in reqs(result, FetchRequest)] == [START_OF_EPOCH_RECORDS + 1]


def observer_appends(followers_always_flush: bool) -> tuple[RaftReplica, RaftResult]:
    """An observer (node 4: not a voter) that found the leader through its bootstrap server,
    after its Fetch brought the leader's start-of-epoch records and one more."""
    leader, _f2, _f3 = leader_with_followers()
    leader.append([b"a"], 2100)
    config = dataclasses.replace(CONFIG, bootstrap_servers=["h1:9093"],
                                 followers_always_flush=followers_always_flush)
    observer = replica(4, config=config)
    assert observer.role == "Observer"
    fetch = sent(observer.tick(2100), FetchRequest)[0].request
    found = observer.handle_response(
        -1, fetch, leader.handle_request(4, fetch, 2101).response, 2101)
    fetch = sent(found, FetchRequest)[0].request
    result = observer.handle_response(
        1, fetch, leader.handle_request(4, fetch, 2102).response, 2102)
    assert observer._log.end_offset() == START_OF_EPOCH_RECORDS + 1
    return observer, result


def test_a_brokers_observer_fetches_again_without_an_fsync() -> None:
    # Kafka's KafkaRaftClient.appendAsFollower flushes only on a voter or with
    # followersAlwaysFlush, which KafkaRaftManager sets for controllers alone.
    observer, result = observer_appends(followers_always_flush=False)
    assert not result.flush
    assert [flat(r).fetch_offset for r in reqs(result, FetchRequest)] == [
        START_OF_EPOCH_RECORDS + 1]
    assert observer._log.flushed_offset() == 0  # nothing was fsync'd


def test_a_controllers_observer_fetches_again_only_after_its_fsync() -> None:
    observer, result = observer_appends(followers_always_flush=True)
    assert result.flush and sent(result, FetchRequest) == []  # it may be added as a voter
    observer._log.flush()
    result = observer.handle_flushed(2103)
    assert [flat(r).fetch_offset for r in reqs(result, FetchRequest)] == [
        START_OF_EPOCH_RECORDS + 1]


def test_leader_hwm_waits_for_an_entry_of_its_epoch() -> None:
    log = formatted_log()
    append_epochs(log, [1, 1, 1])
    leader = replica(1, log, ElectionState(1, None, None))
    elect(leader)  # epoch 2; LeaderChange at offset 3
    leader._log.flush()
    leader.handle_flushed(2000)
    fetch = fetch_request(2, DIRS[2], 3, 1, leader.epoch)
    leader.handle_request(2, fetch, 2001)
    assert leader.high_watermark == 0  # offsets of epoch 1 alone do not commit (rule 3)
    leader.handle_request(2, fetch_request(2, DIRS[2], 4, 2, leader.epoch), 2002)
    assert leader.high_watermark == 4


def test_diverging_follower_truncates_and_refetches() -> None:
    leader_log = formatted_log()
    append_epochs(leader_log, [1, 1, 3, 3], "L")
    follower_log = formatted_log()
    append_epochs(follower_log, [1, 1], "L")
    append_epochs(follower_log, [2, 2, 2], "F")  # epoch 2 was never committed
    leader = replica(1, leader_log, ElectionState(3, None, None))
    elect(leader)
    follower = replica(2, follower_log, ElectionState(4, 1, None))
    result = follower.tick(1)
    fetch = reqs(result, FetchRequest)[0]
    assert (flat(fetch).fetch_offset, flat(fetch).last_fetched_epoch) == (5, 2)
    answer = leader.handle_request(2, fetch, 2).response
    assert isinstance(answer, FetchResponse)
    assert (flat(answer).diverging_epoch, flat(answer).diverging_end_offset) == (1, 2)
    result = follower.handle_response(1, fetch, answer, 3)
    assert follower_log.end_offset() == 2 and result.flush  # rule 3: truncated to epoch 1's end
    follower_log.flush()
    result = follower.handle_flushed(4)
    fetch = reqs(result, FetchRequest)[0]
    assert (flat(fetch).fetch_offset, flat(fetch).last_fetched_epoch) == (2, 1)
    response = leader.handle_request(2, fetch, 5).response
    follower.handle_response(1, fetch, response, 5)
    assert follower_log.entries() == leader_log.entries()


def test_stale_and_duplicate_fetch_responses_are_ignored() -> None:
    f2, fetch, response = f2_fetch_answered()
    f2.handle_response(1, fetch, response, 2101)
    end = f2._log.end_offset()
    f2.handle_response(1, fetch, response, 2102)  # duplicated by the network
    assert f2._log.end_offset() == end


# -- snapshots -----------------------------------------------------------------------------------

def test_follower_loads_snapshot_in_chunks() -> None:
    config = RaftConfig(cluster_id="c1", fetch_snapshot_max_bytes=64)
    leader_log = formatted_log()
    leader = replica(1, leader_log, config=config)
    elect(leader)
    leader.append([b"x" * 10, b"y" * 10], 2001)
    leader_log.flush()
    leader.handle_flushed(2001)
    leader.handle_request(2, fetch_request(2, DIRS[2], leader_log.end_offset(), leader.epoch,
                                          leader.epoch), 2002)
    assert leader.high_watermark == START_OF_EPOCH_RECORDS + 2
    end = START_OF_EPOCH_RECORDS + 2
    snapshot_id = leader.create_snapshot(end, [b"state"], 2003)
    assert snapshot_id == SnapshotId(end, leader.epoch)
    leader_log.delete_before_snapshot()
    assert leader_log.start_offset() == end
    follower = replica(3, MemoryLog(), ElectionState(leader.epoch, 1, None), config=config,
                       now_ms=2004)
    assert not follower.is_voter  # an empty disk knows no voters yet
    result = follower.tick(2004)
    fetch = reqs(result, FetchRequest)[0]
    response = leader.handle_request(3, fetch, 2005).response
    assert isinstance(response, FetchResponse) and flat(response).snapshot_end_offset == end
    result = follower.handle_response(1, fetch, response, 2005)
    assert not follower.high_watermark_known  # known once the snapshot is in
    chunks = 0
    while (out := sent(result, FetchSnapshotRequest)):
        request = out[0].request
        response = leader.handle_request(3, request, 2006).response
        assert isinstance(response, FetchSnapshotResponse) and flat(response).error_code == 0
        chunks += 1
        result = follower.handle_response(1, request, response, 2006)
    assert chunks > 1
    assert follower._log.latest_snapshot_id() == snapshot_id
    assert follower._log.end_offset() == end and follower.high_watermark == end
    assert follower.high_watermark_known
    assert follower.is_voter  # rule 7: the snapshot carries the voter set
    follower._log.flush()
    result = follower.handle_flushed(2007)
    assert flat(reqs(result, FetchRequest)[0]).fetch_offset == end


def test_fetch_snapshot_errors() -> None:
    leader = replica(1, formatted_log([1]))
    leader.tick(2000)
    response = leader.handle_request(2, fetch_snapshot_request(2, leader.epoch, 9, 1, 0), 2001)
    assert isinstance(response.response, FetchSnapshotResponse)
    assert flat(response.response).error_code == Errors.SNAPSHOT_NOT_FOUND
    response = leader.handle_request(2, fetch_snapshot_request(2, leader.epoch, 0, 0, 10_000), 2001)
    assert isinstance(response.response, FetchSnapshotResponse)
    assert flat(response.response).error_code == Errors.POSITION_OUT_OF_RANGE


# -- observers ----------------------------------------------------------------------------------

def test_observer_finds_the_leader_through_bootstrap_servers() -> None:
    config = RaftConfig(cluster_id="c1", bootstrap_servers=["h1:9093", "h2:9093"])
    observer = RaftReplica(9, uuid.UUID(int=9), MemoryLog(), None, config, lambda: 0.0, 0,
                           "h9:9093")
    assert observer.role == "Observer" and not observer.is_voter
    result = observer.tick(0)
    fetches = sent(result, FetchRequest)
    assert [(o.dest_node_id, o.address) for o in fetches] == [(-1, "h1:9093")]
    response = fetch_response(Errors.NOT_LEADER_OR_FOLLOWER, 2, 3, "h2:9093")
    result = observer.handle_response(-1, fetches[0].request, response, 5)
    assert observer.leader_id == 2 and observer.epoch == 3 and observer.role == "Observer"
    assert [(o.dest_node_id, o.address) for o in sent(result, FetchRequest)] == [(2, "h2:9093")]
    # An observer never runs for election, however long it waits.
    for now_ms in range(10, 20_000, 500):
        result = observer.tick(now_ms)
        assert sent(result, VoteRequest) == []
        assert result.persist is None
    assert observer.role == "Observer"


def test_replaced_disk_is_an_observer() -> None:
    node = RaftReplica(2, uuid.UUID(int=4242), formatted_log(), None, CONFIG, lambda: 0.0, 0)
    assert not node.is_voter  # rule 4: same id, new directory id
    assert sent(node.tick(10_000), VoteRequest) == []


# -- MemoryLog durability model ------------------------------------------------------------------

def test_memory_log_crash_drops_unflushed_appends_and_undoes_truncation() -> None:
    log = MemoryLog()
    log.append_as_leader([b"a", b"b"], 1, 0)
    log.flush()
    log.append_as_leader([b"c"], 1, 0)
    assert (log.end_offset(), log.flushed_offset()) == (3, 2)
    log.crash()
    assert log.end_offset() == 2
    log.truncate_to(0)
    assert log.flushed_offset() == 0
    log.append_as_leader([b"z"], 2, 0)
    log.crash()  # the truncation was never flushed: the old entries are back
    assert [v for _o, _e, v in log.entries()] == [b"a", b"b"]
    assert log.end_offset_for_epoch(1) == (2, 1)
    assert log.end_offset_for_epoch(0) == (0, 0)


def test_uncommitted_voters_record_is_undone_by_truncation() -> None:
    follower_log = formatted_log()
    follower_log.append_as_leader([b"a"], 1, 0)
    new_set = VotersRecord(tuple(voters([1, 2, 3, 4])))
    follower_log.append_as_leader([encode_control(new_set)], 2, 0, is_control=True)
    follower_log.flush()
    node = replica(4, follower_log, ElectionState(3, 1, None))
    assert node.is_voter and len(node.voters) == 4  # rule 5: in force once appended
    leader_log = formatted_log()
    leader_log.append_as_leader([b"a"], 1, 0)
    leader = replica(1, leader_log, ElectionState(2, None, None))
    elect(leader)
    assert leader.epoch == 3
    fetch = reqs(node.tick(1), FetchRequest)[0]
    response = leader.handle_request(4, fetch, 2001).response
    assert isinstance(response, FetchResponse) and flat(response).diverging_end_offset == 1
    node.handle_response(1, fetch, response, 2001)
    assert follower_log.end_offset() == 1
    assert not node.is_voter and len(node.voters) == 3  # rule 5: the old set is back


def test_snapshot_batches_carry_voters() -> None:
    raw = snapshot_batches(voters([1]), [b"d"], 5, 2)
    batch, _ = decode_batch(raw)
    assert batch.is_control and batch.leader_epoch == 2
