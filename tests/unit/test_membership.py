"""AddRaftVoter / RemoveRaftVoter on single RaftReplica cores (INVARIANTS rules 4-6): each bad
request answers its named error and changes nothing; good ones put the new set in force on
append, and a leader that removes itself resigns once the removal commits."""

from __future__ import annotations

import uuid

from kafkawire.errors import Errors
from raft.core.control_records import VotersRecord, encode_control, iter_control_records
from raft.core.memory_log import MemoryLog
from raft.core.messages import (
    AddRaftVoterResponse,
    BeginQuorumEpochRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    RemoveRaftVoterResponse,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoteRequest,
    VoteResponse,
    add_raft_voter_request,
    begin_quorum_epoch_request,
    directory_id,
    fetch_request,
    fetch_response,
    remove_raft_voter_request,
    update_raft_voter_request,
    update_raft_voter_response,
    vote_request,
    vote_response,
)
from raft.core.raft_replica import RaftConfig, RaftReplica, RaftResult
from raft.core.replica_key import ReplicaKey
from raft.core.replicated_log import ReplicatedLog
from tests.unit.test_raft_replica import (
    CONFIG,
    DIRS,
    elect,
    flat,
    formatted_log,
    key,
    replica,
    reqs,
    voters,
)

NEW_DISK = uuid.UUID(int=2222)  # node 2's replaced disk (seed 003)


def fetch(leader: RaftReplica, node_id: int, disk: uuid.UUID, offset: int, now_ms: int
          ) -> FetchResponse:
    result = leader.handle_request(node_id, fetch_request(
        replica_id=node_id, replica_directory_id=disk, fetch_offset=offset,
        last_fetched_epoch=leader.epoch if offset > 0 else 0,
        current_leader_epoch=leader.epoch, cluster_id="c1"), now_ms)
    response = result.response
    assert isinstance(response, FetchResponse) and flat(response).error_code == 0, response
    return response


def flush(node: RaftReplica, now_ms: int) -> RaftResult:
    node._log.flush()
    return node.handle_flushed(now_ms)


def committed_leader(ids: tuple[int, ...] = (1, 2, 3), config: RaftConfig = CONFIG
                     ) -> RaftReplica:
    """Node 1 leads epoch 1 and has committed its LeaderChange (its first commit, rule 5)."""
    leader = replica(1, formatted_log(ids), config=config)
    elect(leader)
    flush(leader, 2001)
    if len(ids) > 1:
        fetch(leader, 2, DIRS[2], leader._log.end_offset(), 2002)
    assert leader.high_watermark == leader._log.end_offset()
    return leader


def add(node: RaftReplica, voter: ReplicaKey, now_ms: int, listeners: dict[str, str] | None = None
        ) -> tuple[AddRaftVoterResponse, RaftResult]:
    given = {"CONTROLLER": f"h{voter.id}:9093"} if listeners is None else listeners
    result = node.handle_request(-1, add_raft_voter_request(
        voter.id, voter.directory_id, dict(given), cluster_id="c1"), now_ms)
    assert isinstance(result.response, AddRaftVoterResponse)
    return result.response, result


def remove(node: RaftReplica, voter: ReplicaKey, now_ms: int
           ) -> tuple[RemoveRaftVoterResponse, RaftResult]:
    result = node.handle_request(-1, remove_raft_voter_request(voter.id, voter.directory_id,
                                                            cluster_id="c1"), now_ms)
    assert isinstance(result.response, RemoveRaftVoterResponse)
    return result.response, result


def voters_records(log: ReplicatedLog) -> list[tuple[int, VotersRecord]]:
    """VotersRecords written by voter changes: the first leader's copy of the bootstrap set
    (rule 7, written with its LeaderChange) is left out."""
    raw = log.read(log.start_offset(), 1 << 30)
    found = [(offset, rec) for offset, _epoch, rec in iter_control_records(raw)
             if isinstance(rec, VotersRecord)]
    return found[1:]


def snapshot_of(node: RaftReplica) -> tuple[int, list[ReplicaKey], int]:
    return node._log.end_offset(), node.voters.keys(), node.high_watermark


# -- good changes -------------------------------------------------------------------------------

def test_add_caught_up_observer_in_force_on_append_then_committed_by_new_majority() -> None:
    leader = committed_leader()
    end = leader._log.end_offset()
    fetch(leader, 4, DIRS[4], end, 2100)
    response, result = add(leader, key(4), 2101, {"CONTROLLER": "h4:9093"})
    assert flat(response).error_code == 0
    assert result.voters_record_offset == end and result.flush
    # Rule 5: in force at once, before any commit; the new voter hears BeginQuorumEpoch (rule 4).
    assert leader.voters.keys() == [key(1), key(2), key(3), key(4)]
    assert leader.high_watermark == end
    assert [o.dest_node_id for o in result.send
            if isinstance(o.request, BeginQuorumEpochRequest)] == [4]
    flush(leader, 2102)
    fetch(leader, 2, DIRS[2], end + 1, 2103)
    assert leader.high_watermark == end  # 2 of 4 is not a majority of the new set
    fetch(leader, 4, DIRS[4], end + 1, 2104)
    assert leader.high_watermark == end + 1
    (offset, record), = voters_records(leader._log)
    assert offset == end and record.voters[-1].endpoints == {"CONTROLLER": "h4:9093"}


def test_the_observer_endpoint_the_leader_knows_is_in_describe_quorum() -> None:
    # Seed 003's `add-voter` reads it there and gives it as the voter's listener: Kafka's Fetch
    # names no endpoint, so the leader knows one for a new disk of a voter id (where that voter
    # listens, in Kafka's Nodes), and none for any other observer.
    leader = committed_leader()
    fetch(leader, 2, NEW_DISK, leader._log.end_offset(), 2100)
    fetch(leader, 4, DIRS[4], leader._log.end_offset(), 2100)
    described = leader.describe_quorum(2100)
    assert isinstance(described, DescribeQuorumResponse)
    assert [(o.replica_id, directory_id(o.replica_directory_id))
            for o in flat(described).observers] == [(2, NEW_DISK), (4, DIRS[4])]
    nodes = {n.node_id: {lst.name: f"{lst.host}:{lst.port}" for lst in n.listeners}
             for n in described.nodes}
    assert nodes == {1: {"CONTROLLER": "h1:9093"}, 2: {"CONTROLLER": "h2:9093"},
                     3: {"CONTROLLER": "h3:9093"}}
    response, _ = add(leader, ReplicaKey(2, NEW_DISK), 2101, nodes[2])
    assert flat(response).error_code == 0
    assert dict(leader.voters.voters[ReplicaKey(2, NEW_DISK)]) == {"CONTROLLER": "h2:9093"}


def test_add_voter_without_the_quorum_listener_is_invalid_request_before_any_other_check(
) -> None:
    # Kafka's KafkaRaftClient.handleAddVoterRequest: the listeners must name the quorum's
    # listener, checked before AddVoterHandler looks at the voter set: a duplicate key, a voter
    # that never fetched and a leader that has not committed in its epoch all get it.
    leader = committed_leader()
    uncommitted = replica(1, formatted_log())
    elect(uncommitted)
    for node, voter in ((leader, key(2)), (leader, key(4)), (uncommitted, key(4))):
        for listeners in ({}, {"PLAINTEXT": "h4:9092"}):
            before = snapshot_of(node)
            response, result = add(node, voter, 2100, listeners)
            assert flat(response).error_code == Errors.INVALID_REQUEST, (voter, listeners)
            assert "default listener CONTROLLER" in flat(response).error_message
            assert result.voters_record_offset == -1 and snapshot_of(node) == before


def test_disk_replacement_add_new_key_of_an_existing_id_then_remove_the_old_key() -> None:
    leader = committed_leader()
    end = leader._log.end_offset()
    fetch(leader, 2, NEW_DISK, end, 2100)
    response, _ = add(leader, ReplicaKey(2, NEW_DISK), 2101)
    assert flat(response).error_code == 0  # rule 5: the full key decides, not the id
    assert leader.voters.keys() == [key(1), key(2), key(3), ReplicaKey(2, NEW_DISK)]
    flush(leader, 2102)
    fetch(leader, 3, DIRS[3], end + 1, 2103)
    fetch(leader, 2, NEW_DISK, end + 1, 2104)
    assert leader.high_watermark == end + 1
    removal, _ = remove(leader, key(2), 2105)
    assert flat(removal).error_code == 0
    assert leader.voters.keys() == [key(1), key(3), ReplicaKey(2, NEW_DISK)]


def test_remove_then_add_back_with_a_new_directory_id() -> None:
    leader = committed_leader()
    end = leader._log.end_offset()
    removal, _ = remove(leader, key(2), 2100)
    assert flat(removal).error_code == 0 and leader.voters.keys() == [key(1), key(3)]
    flush(leader, 2101)
    fetch(leader, 3, DIRS[3], end + 1, 2102)
    assert leader.high_watermark == end + 1
    fetch(leader, 2, NEW_DISK, end + 1, 2103)
    response, _ = add(leader, ReplicaKey(2, NEW_DISK), 2104)
    assert flat(response).error_code == 0
    assert leader.voters.keys() == [key(1), key(3), ReplicaKey(2, NEW_DISK)]


# -- bad requests: the named error, nothing changed ------------------------------------------------

def test_adding_an_existing_key_is_duplicate_voter() -> None:
    leader = committed_leader()
    before = snapshot_of(leader)
    response, result = add(leader, key(2), 2100, {"CONTROLLER": "h2:9093"})
    assert flat(response).error_code == Errors.DUPLICATE_VOTER
    assert result.voters_record_offset == -1 and snapshot_of(leader) == before
    assert voters_records(leader._log) == []


def test_removing_an_unknown_key_is_voter_not_found() -> None:
    leader = committed_leader()
    before = snapshot_of(leader)
    for unknown in (ReplicaKey(2, NEW_DISK), ReplicaKey(9, DIRS[1])):
        response, result = remove(leader, unknown, 2100)
        assert flat(response).error_code == Errors.VOTER_NOT_FOUND, unknown
        assert result.voters_record_offset == -1
    assert snapshot_of(leader) == before and voters_records(leader._log) == []


def test_a_second_change_while_one_is_uncommitted_is_request_timed_out() -> None:
    leader = committed_leader()
    end = leader._log.end_offset()
    for node_id in (4, 5):
        fetch(leader, node_id, DIRS[node_id], end, 2100)
    assert add(leader, key(4), 2101)[0].error_code == 0
    before = snapshot_of(leader)
    response, result = add(leader, key(5), 2102)
    assert flat(response).error_code == Errors.REQUEST_TIMED_OUT
    assert "not committed" in flat(response).error_message
    removal, result2 = remove(leader, key(3), 2103)
    assert flat(removal).error_code == Errors.REQUEST_TIMED_OUT
    assert result.voters_record_offset == result2.voters_record_offset == -1
    assert snapshot_of(leader) == before and len(voters_records(leader._log)) == 1
    # Once the first change commits, the next one goes through (one at a time, rule 5).
    flush(leader, 2104)
    fetch(leader, 2, DIRS[2], end + 1, 2105)
    fetch(leader, 4, DIRS[4], end + 1, 2106)
    fetch(leader, 5, DIRS[5], end + 1, 2106)
    assert leader.high_watermark == end + 1
    assert add(leader, key(5), 2107)[0].error_code == 0


def test_removing_the_last_voter_is_voter_not_found() -> None:
    # Kafka's VoterSet.removeVoter refuses to empty the set; RemoveVoterHandler answers
    # VOTER_NOT_FOUND (KafkaRaftClientReconfigTest.testRemoveVoterToEmptyVoterSet).
    leader = committed_leader(ids=(1,))
    before = snapshot_of(leader)
    response, result = remove(leader, key(1), 2100)
    assert flat(response).error_code == Errors.VOTER_NOT_FOUND
    assert "last voter" in flat(response).error_message
    assert result.voters_record_offset == -1 and snapshot_of(leader) == before


def test_adding_a_voter_far_behind_or_not_fetching_is_request_timed_out() -> None:
    leader = committed_leader(config=RaftConfig(cluster_id="c1", add_voter_max_lag_records=5))
    for index in range(20):
        leader.append([f"r{index}".encode()], 2100)
    flush(leader, 2101)
    fetch(leader, 2, DIRS[2], leader._log.end_offset(), 2102)
    assert leader.high_watermark == leader._log.end_offset() == 23  # 3 start-of-epoch records
    before = snapshot_of(leader)
    response, _ = add(leader, key(4), 2103, {"CONTROLLER": "h4:9093"})  # never fetched
    assert flat(response).error_code == Errors.REQUEST_TIMED_OUT and "not fetching" in (
        flat(response).error_message)
    fetch(leader, 4, DIRS[4], 3, 2104)  # 20 records behind
    response, result = add(leader, key(4), 2105)
    assert flat(response).error_code == Errors.REQUEST_TIMED_OUT and "caught up" in (
        flat(response).error_message)
    assert result.voters_record_offset == -1 and snapshot_of(leader) == before
    fetch(leader, 4, DIRS[4], 19, 2106)  # within 5 of the log end now
    assert add(leader, key(4), 2107)[0].error_code == 0


def test_no_change_before_the_leader_commits_in_its_epoch() -> None:
    leader = replica(1, formatted_log())
    elect(leader)
    fetch(leader, 4, DIRS[4], 0, 2001)
    response, result = add(leader, key(4), 2002)
    assert flat(response).error_code == Errors.REQUEST_TIMED_OUT and "committed in epoch" in (
        flat(response).error_message)
    assert result.voters_record_offset == -1 and key(4) not in leader.voters


def test_a_non_leader_answers_not_leader_and_changes_nothing() -> None:
    # Kafka's AddRaftVoter/RemoveRaftVoter answers name no leader: the CLI asks DescribeQuorum.
    follower = replica(2)
    follower.handle_request(1, begin_quorum_epoch_request(1, 1, "h1:9093", 2, DIRS[2], "c1"), 100)
    response, result = add(follower, key(4), 101, {"CONTROLLER": "h4:9093"})
    assert flat(response).error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert "does not lead" in flat(response).error_message
    response2, _ = remove(follower, key(3), 102)
    assert flat(response2).error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert result.voters_record_offset == -1 and follower.voters.keys() == [key(1), key(2), key(3)]


# -- rule 6: the leader removes itself ------------------------------------------------------------

def test_leader_removing_itself_stops_counting_serves_fetches_and_resigns_on_commit() -> None:
    leader = committed_leader()
    end = leader._log.end_offset()
    response, _ = remove(leader, key(1), 2100)
    assert flat(response).error_code == 0 and not leader.is_voter
    flush(leader, 2101)
    assert leader.high_watermark == end  # the leader's own flush does not count any more
    served = fetch(leader, 2, DIRS[2], end + 1, 2102)  # still serves Fetch
    assert flat(served).leader_id == 1 and leader.role == "Leader"
    assert leader.high_watermark == end  # 1 of the 2 remaining voters
    result = leader.handle_request(3, fetch_request(
        replica_id=3, replica_directory_id=DIRS[3], fetch_offset=end + 1, last_fetched_epoch=1,
        current_leader_epoch=1, cluster_id="c1"), 2103)
    assert leader.high_watermark == end + 1
    assert leader.role == "Resigned"  # the removal committed on a majority of the new set
    ends = [o.dest_node_id for o in result.send if isinstance(o.request, EndQuorumEpochRequest)]
    assert sorted(ends) == [2, 3]
    # Later it is an observer: it never campaigns again (rule 4).
    leader.tick(10_000)
    assert leader.role == "Observer"
    assert reqs(leader.tick(20_000), VoteRequest) == []


# -- rule 4: a replaced disk neither votes nor counts --------------------------------------------

def test_a_replaced_disk_gets_invalid_voter_key_and_its_fetches_do_not_commit() -> None:
    replaced = RaftReplica(2, NEW_DISK, MemoryLog(), None,
                           RaftConfig(cluster_id="c1", bootstrap_servers=["h1:9093"]),
                           lambda: 0.0, 0, "h2:9093")
    assert replaced.role == "Observer"
    result = replaced.handle_request(3, vote_request(5, 3, DIRS[3], 2, DIRS[2], 0, 0), 10)
    vote = result.response
    assert isinstance(vote, VoteResponse) and flat(vote).error_code == Errors.INVALID_VOTER_KEY
    assert not flat(vote).vote_granted and replaced.election_state.voted_key is None
    leader = committed_leader()
    leader.append([b"x"], 2100)
    flush(leader, 2101)
    end = leader._log.end_offset()
    fetch(leader, 2, NEW_DISK, end, 2102)
    assert leader.high_watermark == end - 1  # the new disk's key is not a voter
    fetch(leader, 3, DIRS[3], end, 2103)
    assert leader.high_watermark == end


# -- rules 4-6: a removal only the removed voter kept (sim seeds 12130, 12479) --------------------

def exchange(src: RaftReplica, dst: RaftReplica, request: object, now_ms: int) -> RaftResult:
    """Deliver request from src to dst and dst's answer back to src; flush src like a runtime."""
    response = dst.handle_request(src.node_id, request, now_ms).response
    result = src.handle_response(dst.node_id, request, response, now_ms)
    if result.flush:
        flush(src, now_ms)
    return result


def next_fetch(node: RaftReplica) -> FetchRequest:
    request = node._inflight_fetch
    assert isinstance(request, FetchRequest)
    return request


def test_removed_voter_with_the_only_copy_of_its_uncommitted_removal_stands_and_resigns() -> None:
    """{1, 2}; leader 2 appends the removal of 1, node 1 saves it, 2 crashes before its fsync.
    Node 2 now needs 1's vote and 1 (longer log) refuses it; unless 1 stands, with a majority of
    both the old {1, 2} and its log's new {2}, there is no leader for ever."""
    n2 = replica(2, formatted_log((1, 2)))
    elect(n2)
    flush(n2, 2000)
    n1 = replica(1, formatted_log((1, 2)))
    n1.handle_request(2, begin_quorum_epoch_request(2, 1, "h2:9093", 1, DIRS[1], "c1"), 2000)
    exchange(n1, n2, next_fetch(n1), 2001)  # n1 copies the epoch's first records
    exchange(n1, n2, next_fetch(n1), 2002)  # and acknowledges them: committed
    end = n2._log.end_offset()
    assert n2.high_watermark == end and n1._log.end_offset() == end
    response, _ = remove(n2, key(1), 2003)
    assert flat(response).error_code == 0 and n2.voters.keys() == [key(2)]
    exchange(n1, n2, next_fetch(n1), 2004)  # n1 saves the removal durably; n2 never fsyncs it
    assert n1._log.flushed_offset() == end + 1 and n1.voters.keys() == [key(2)]
    assert not n1.is_voter and n1.high_watermark == end  # the removal is not committed
    n2._log.crash()
    n2 = RaftReplica(2, DIRS[2], n2._log, n2.election_state, CONFIG, lambda: 0.0, 2010,
                     "h2:9093")
    assert n2._log.end_offset() == end and n2.voters.keys() == [key(1), key(2)]
    assert n2.role == "Resigned"  # a restarted leader resigns its epoch

    # n1 loses its leader and stands: it asks node 2 only (both sets' other voters).
    result = n1.handle_connection_lost(2, 2011)
    assert n1.role == "Prospective"
    pre_votes = reqs(result, VoteRequest)
    assert [(r.voter_id, flat(r).pre_vote) for r in pre_votes] == [(2, True)]
    result = exchange(n1, n2, pre_votes[0], 2012)
    assert n1.role == "Candidate" and n1.epoch == 2  # {1, 2} granted: both majorities
    votes = reqs(result, VoteRequest)
    assert [(r.voter_id, flat(r).pre_vote) for r in votes] == [(2, False)]
    # Node 2's own campaign would need node 1, whose longer log refuses it.
    refused = n1.handle_request(2, vote_request(2, 2, DIRS[2], 1, DIRS[1], 1, end), 2012).response
    assert isinstance(refused, VoteResponse) and not flat(refused).vote_granted
    result = exchange(n1, n2, votes[0], 2013)
    assert result.became_leader and n1.role == "Leader" and n1.epoch == 2
    assert n2.election_state.voted_key == key(1)  # rule 1: n2's vote is durable
    begins = reqs(result, BeginQuorumEpochRequest)
    assert [r.voter_id for r in begins] == [2]  # its log's set: {2}

    # Rule 6: n1 leads while removing itself; its own flush does not count.
    hwm = n1.high_watermark
    flush(n1, 2014)
    assert n1.high_watermark == hwm and n1.role == "Leader"
    n2.handle_request(1, begins[0], 2015)
    assert n2.leader_id == 1
    exchange(n2, n1, next_fetch(n2), 2016)  # n2 copies the removal and n1's LeaderChange
    assert n2.voters.keys() == [key(2)] and n2._log.end_offset() == n1._log.end_offset()
    assert n1.role == "Leader"
    fetch_request = next_fetch(n2)
    answer = n1.handle_request(2, fetch_request, 2017)
    assert n1.high_watermark == n1._log.end_offset() > end  # committed on {2}
    assert n1.role == "Resigned"
    ends = reqs(answer, EndQuorumEpochRequest)
    assert [[c.candidate_id for c in flat(r).preferred_candidates] for r in ends] == [[2]]
    assert [o.dest_node_id for o in answer.send if o.request in ends] == [2]
    n2.handle_response(1, fetch_request, answer.response, 2017)
    n2.handle_request(1, ends[0], 2018)

    # Node 2 then leads alone, and node 1 is an observer that never stands again.
    n2.tick(n2.next_deadline_ms())
    assert n2.role == "Leader" and n2.epoch == 3 and n2.voters.keys() == [key(2)]
    n1.tick(n1.next_deadline_ms())
    assert n1.role == "Observer" and reqs(n1.tick(30_000), VoteRequest) == []


def test_a_removed_voter_standing_needs_a_majority_of_both_the_old_and_the_new_set() -> None:
    """{1, 2, 3} -> {2, 3} uncommitted in node 1's log: {1, 2} is a majority of the old set but
    not of the new one, so node 1 needs 3's vote too (joint majority, rules 1-2)."""
    log = formatted_log((1, 2, 3))
    log.append_as_leader([encode_control(VotersRecord(tuple(voters((2, 3)))))], 1, 0,
                         is_control=True)
    log.flush()
    n1 = replica(1, log)
    assert not n1.is_voter and n1.high_watermark == 0
    pre_votes = reqs(n1.tick(2000), VoteRequest)
    assert n1.role == "Prospective" and sorted(r.voter_id for r in pre_votes) == [2, 3]
    by_voter = {r.voter_id: r for r in pre_votes}
    n1.handle_response(2, by_voter[2], vote_response(leader_epoch=0, vote_granted=True), 2001)
    assert n1.role == "Prospective"  # {1, 2}: a majority of {1, 2, 3} only
    result = n1.handle_response(3, by_voter[3], vote_response(leader_epoch=0, vote_granted=True),
                                2002)
    assert n1.role == "Candidate" and n1.epoch == 1
    votes = {r.voter_id: r for r in reqs(result, VoteRequest)}
    assert sorted(votes) == [2, 3]
    n1.handle_response(2, votes[2], vote_response(leader_epoch=1, vote_granted=True), 2003)
    assert n1.role == "Candidate"
    n1.handle_response(3, votes[3], vote_response(leader_epoch=1, vote_granted=False), 2004)
    assert n1.role == "Unattached"  # {2, 3} can no longer grant a majority: back off

    # Once the removal is known committed, node 1 is an observer and never stands.
    committed = replica(1, log)
    committed._update_follower_high_watermark(log.end_offset())
    assert committed.role == "Observer" and reqs(committed.tick(5000), VoteRequest) == []


# -- UpdateRaftVoter (KIP-853: a voter's listeners) ------------------------------------------------

def update(node: RaftReplica, voter: ReplicaKey, listeners: dict[str, str], now_ms: int,
           epoch: int | None = None, kraft: tuple[int, int] = (0, 1)
           ) -> tuple[UpdateRaftVoterResponse, RaftResult]:
    result = node.handle_request(voter.id, update_raft_voter_request(
        node.epoch if epoch is None else epoch, voter.id, voter.directory_id, listeners,
        kraft[0], kraft[1], "c1"), now_ms)
    assert isinstance(result.response, UpdateRaftVoterResponse)
    return result.response, result


def test_update_voter_rewrites_its_listeners_and_answers_before_the_commit() -> None:
    leader = committed_leader()
    end = leader._log.end_offset()
    response, result = update(leader, key(2), {"CONTROLLER": "h2:19093"}, 2100)
    assert flat(response).error_code == 0 and flat(response).leader_id == 1
    # Rule 5: in force once appended; Kafka answers without waiting for the commit.
    assert result.flush and result.voters_record_offset == -1
    assert leader.voters.voters[key(2)] == {"CONTROLLER": "h2:19093"}
    assert leader.endpoint_of(2) == "h2:19093"
    (offset, record), = voters_records(leader._log)
    assert offset == end and record.voters[1].endpoints == {"CONTROLLER": "h2:19093"}
    # The same listeners again change nothing: nothing appended.
    flush(leader, 2101)
    fetch(leader, 2, DIRS[2], end + 1, 2102)
    response, result = update(leader, key(2), {"CONTROLLER": "h2:19093"}, 2103)
    assert flat(response).error_code == 0 and leader._log.end_offset() == end + 1


def test_update_voter_refusals_name_kafkas_errors_and_change_nothing() -> None:
    leader = committed_leader()
    end = leader._log.end_offset()
    cases = [
        (update(leader, ReplicaKey(2, NEW_DISK), {"CONTROLLER": "h2:1"}, 2100)[0],
         Errors.VOTER_NOT_FOUND),  # rule 4: the exact key
        (update(leader, key(2), {"OTHER": "h2:1"}, 2100)[0], Errors.INVALID_REQUEST),
        (update(leader, key(2), {"CONTROLLER": "h2:1"}, 2100, kraft=(0, 0))[0],
         Errors.INVALID_REQUEST),  # kraft.version 1 is outside its range
        (update(leader, key(2), {"CONTROLLER": "h2:1"}, 2100, epoch=leader.epoch - 1)[0],
         Errors.FENCED_LEADER_EPOCH),
    ]
    for response, error in cases:
        assert flat(response).error_code == error, response
    follower = replica(2)
    response, _ = update(follower, key(2), {"CONTROLLER": "h2:1"}, 100, epoch=0)
    assert flat(response).error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert leader._log.end_offset() == end and voters_records(leader._log) == []


def leader_1_answer() -> FetchResponse:
    """Leader 1's answer (epoch 1, nothing new) to a fetch of node 2."""
    return fetch_response(leader_id=1, leader_epoch=1, leader_endpoint="h1:9093",
                          high_watermark=0, log_start_offset=0)


def following_leader_1(follower: RaftReplica) -> RaftResult:
    """Node 2 told of leader 1 (BeginQuorumEpoch, epoch 1), its first fetch answered."""
    result = follower.handle_request(1, begin_quorum_epoch_request(1, 1, "h1:9093", 2, DIRS[2],
                                                                "c1"), 10)
    (fetch_out,) = reqs(result, FetchRequest)
    return follower.handle_response(1, fetch_out, leader_1_answer(), 12)


def test_a_voter_whose_listener_moved_tells_the_leader_once_per_leader() -> None:
    # Node 2 now listens on another port than the voter set says (a restarted process).
    follower = RaftReplica(2, DIRS[2], formatted_log(), None, CONFIG, lambda: 0.0, 0, "h2:19093")
    result = following_leader_1(follower)
    (sent_update,) = reqs(result, UpdateRaftVoterRequest)
    assert sent_update == update_raft_voter_request(1, 2, DIRS[2], {"CONTROLLER": "h2:19093"}, 0,
                                                 1, "c1")
    (fetch_again,) = reqs(result, FetchRequest)
    follower.handle_response(1, sent_update, update_raft_voter_response(leader_id=1,
                                                                     leader_epoch=1), 13)
    # Answered: not again in this epoch, though the VotersRecord has not reached it yet, even
    # after the retry spacing has passed.
    result = follower.handle_response(1, fetch_again, leader_1_answer(),
                                      12 + 2 * CONFIG.request_timeout_ms)
    assert reqs(result, UpdateRaftVoterRequest) == []


def test_a_voter_whose_listener_matches_sends_no_update() -> None:
    follower = replica(2)
    result = following_leader_1(follower)
    assert reqs(result, UpdateRaftVoterRequest) == []


def test_a_lost_update_voter_is_sent_again_after_the_request_timeout() -> None:
    follower = RaftReplica(2, DIRS[2], formatted_log(), None, CONFIG, lambda: 0.0, 0, "h2:19093")
    result = following_leader_1(follower)
    answer = leader_1_answer()
    (lost,) = reqs(result, UpdateRaftVoterRequest)
    follower.handle_response(1, lost, None, 13)  # timed out: no answer
    result = follower.handle_response(1, reqs(result, FetchRequest)[0], answer, 14)
    assert reqs(result, UpdateRaftVoterRequest) == []  # spaced by the request timeout
    result = follower.handle_response(1, reqs(result, FetchRequest)[0], answer,
                                      12 + CONFIG.request_timeout_ms)
    assert reqs(result, UpdateRaftVoterRequest) == [lost]


def test_describe_quorum_lists_a_removed_voter_that_fetches_until_its_session_times_out(
) -> None:
    # Kafka's LeaderState moves a removed voter's state to its observers and DescribeQuorum
    # drops an observer after OBSERVER_SESSION_TIMEOUT_MS (300 s) without a fetch.
    leader = committed_leader()
    end = leader._log.end_offset()
    removal, _ = remove(leader, key(3), 2100)
    assert flat(removal).error_code == 0
    flush(leader, 2101)
    fetch(leader, 2, DIRS[2], end + 1, 2102)
    fetch(leader, 3, DIRS[3], end + 1, 2103)  # the removed voter keeps fetching
    described = leader.describe_quorum(2104)
    assert isinstance(described, DescribeQuorumResponse)
    assert [o.replica_id for o in flat(described).current_voters] == [1, 2]
    assert [(o.replica_id, o.replica_directory_id, o.log_end_offset)
            for o in flat(described).observers] == [(3, DIRS[3], end + 1)]
    later = leader.describe_quorum(2103 + 300_000)
    assert isinstance(later, DescribeQuorumResponse) and flat(later).observers == ()
