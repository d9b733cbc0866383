"""The sans-IO Raft replica of the metadata partition (KIP-595 KRaft, KIP-853 voter records,
KIP-996 pre-vote). The runtime feeds it requests, responses and ticks and, for every
RaftResult, does in this order: write `persist` durably, fsync the log if `flush`, call
handle_flushed, then send `send` and `response`. Nothing here waits on I/O or reads a clock.

This module is the replica's entry points; each input goes to the part whose job it is, one
module each (replica_base, leadership, membership, election, replication), and a tick goes to
the step of the role the replica holds, as etcd's raft steps by role.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from kafkawire.errors import Errors
from raft.core.control_records import snapshot_chunks
from raft.core.election import Election
from raft.core.leader_state import LeaderState
from raft.core.leadership import Leadership
from raft.core.membership import Membership
from raft.core.messages import (
    AddRaftVoterRequest,
    AddRaftVoterRequestV0,
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    VoteRequest,
    error_response,
    invalid_partition,
)
from raft.core.quorum_state import (
    NO_DEADLINE_MS,
    CandidateState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)
from raft.core.replica_base import NotLeaderError, Outbound, RaftConfig, RaftResult
from raft.core.replication import Replication
from storage.core.offset_and_epoch import SnapshotId
from storage.core.record_batch import read_header

__all__ = ["NotLeaderError", "Outbound", "RaftConfig", "RaftReplica", "RaftResult"]

# (replica, input, now_ms): the step that takes one input.
_Step = Callable[[Any, Any, int], Any]


class RaftReplica(Replication):
    # A tick goes to the step of the role held (etcd's stepLeader/stepCandidate/stepFollower).
    _TICKS: ClassVar[dict[type, _Step]] = {
        UnattachedState: Election._tick_unattached,
        ProspectiveState: Election._tick_prospective,
        CandidateState: Election._tick_candidate,
        FollowerState: Replication._tick_follower,
        LeaderState: Leadership._tick_leader,
        ResignedState: Election._tick_resigned,
    }
    # A request (Kafka's message, raft.core.messages) goes to its handler.
    _REQUESTS: ClassVar[dict[type, _Step]] = {
        VoteRequest: Election._handle_vote,
        BeginQuorumEpochRequest: Leadership._handle_begin_quorum_epoch,
        EndQuorumEpochRequest: Leadership._handle_end_quorum_epoch,
        FetchRequest: Replication._handle_fetch,
        FetchSnapshotRequest: Replication._handle_fetch_snapshot,
        DescribeQuorumRequest: lambda replica, _request, now_ms: replica.describe_quorum(now_ms),
        AddRaftVoterRequest: Membership._handle_add_voter,
        AddRaftVoterRequestV0: Membership._handle_add_voter,
        RemoveRaftVoterRequest: Membership._handle_remove_voter,
        UpdateRaftVoterRequest: Membership._handle_update_voter,
    }

    def next_deadline_ms(self) -> int:
        """The earliest time tick() has something to do."""
        deadlines = [NO_DEADLINE_MS, *self._state.deadlines(self._may_stand)]
        if self._fetches_now():
            if self._inflight_fetch is not None:
                deadlines.append(self._inflight_sent_ms + self._inflight_timeout_ms())
            elif not self._awaiting_flush:
                deadlines.append(self._next_fetch_ms)
        return min(deadlines)

    # -- inputs --------------------------------------------------------------------------------
    def handle_request(self, source_node_id: int, request: object, now_ms: int) -> RaftResult:
        step = self._REQUESTS.get(type(request))
        if step is None:
            raise TypeError(f"not a raft request: {type(request).__name__}")
        before = self._begin(now_ms)
        cluster_id = getattr(request, "cluster_id", None)
        invalid = invalid_partition(request)
        if invalid is not None:
            self._out.response = error_response(request, Errors.INVALID_REQUEST, invalid)
        # Kafka's hasValidClusterId: only a null id skips the check; an empty one is another
        # cluster's (INVARIANTS "Wire protocol": INCONSISTENT_CLUSTER_ID).
        elif (cluster_id is not None and self._config.cluster_id
                and cluster_id != self._config.cluster_id):
            self._out.response = error_response(
                request, Errors.INCONSISTENT_CLUSTER_ID,
                f'The given id "{cluster_id}" doesn\'t match the cluster id '
                f'"{self._config.cluster_id}"')
        else:
            self._out.response = step(self, request, now_ms)
        return self._finish(before, now_ms)

    def handle_response(self, dest_node_id: int, request: object, response: object | None,
                        now_ms: int) -> RaftResult:
        """response None: the request timed out or the connection failed."""
        before = self._begin(now_ms)
        if isinstance(request, VoteRequest):
            self._on_vote_response(request, response, now_ms)
        elif isinstance(request, BeginQuorumEpochRequest):
            self._on_begin_quorum_epoch_response(request, response, now_ms)
        elif isinstance(request, EndQuorumEpochRequest):
            self._on_end_quorum_epoch_response(dest_node_id, request, response, now_ms)
        elif isinstance(request, FetchRequest):
            self._on_fetch_response(request, response, now_ms)
        elif isinstance(request, FetchSnapshotRequest):
            self._on_fetch_snapshot_response(request, response, now_ms)
        elif isinstance(request, UpdateRaftVoterRequest):
            self._on_update_voter_response(request, response, now_ms)
        return self._finish(before, now_ms)

    def handle_connection_lost(self, node_id: int, now_ms: int) -> RaftResult:
        """The runtime's connection to node_id was reset, closed or refused (NETWORK_EXCEPTION,
        not a timeout): its process is most likely gone. A follower of it stands after a short
        random jitter instead of waiting out the fetch timeout, an observer looks for the leader
        again, and a candidate counts it as a voter that will not grant this round."""
        before = self._begin(now_ms)
        st = self._state
        follower = self._follower()
        if follower is not None and follower.leader_id == node_id:
            if not self._may_stand:
                self._rediscover_leader(follower, now_ms)
            elif not follower.leader_lost:
                self._lose_leader(follower, now_ms, min(follower.fetch_deadline_ms,
                                                        now_ms + self._leader_lost_jitter_ms()))
        elif isinstance(st, CandidateState):
            st.rejected |= {k for k in self._electorate_keys()
                            if k.id == node_id and k not in st.granted}
            self._maybe_back_off(st, now_ms)
        return self._finish(before, now_ms)

    def tick(self, now_ms: int) -> RaftResult:
        before = self._begin(now_ms)
        self._TICKS[type(self._state)](self, self._state, now_ms)
        return self._finish(before, now_ms)

    def append(self, records: Sequence[bytes], now_ms: int) -> tuple[RaftResult, int]:
        """Leader only: append one batch in the current epoch; returns its last offset."""
        st = self._leader()
        if st is None:
            leader = self.leader_id
            raise NotLeaderError(None if leader == self._node_id else leader, self.epoch)
        before = self._begin(now_ms)
        last = self._log.append_as_leader(list(records), st.epoch, now_ms)
        self._out.flush = True
        return self._finish(before, now_ms), last.offset

    def handle_flushed(self, now_ms: int) -> RaftResult:
        """The runtime fsync'd the log: the leader counts its new flushed offset (rule 2); a
        follower may now send the Fetch that reports it."""
        before = self._begin(now_ms)
        st = self._leader()
        if st is not None:
            st.update_local(self._log.flushed_offset(), now_ms)
            self._maybe_advance_high_watermark(st)
        if self._awaiting_flush and self._log.flushed_offset() >= self._log.end_offset():
            self._awaiting_flush = False
        return self._finish(before, now_ms)

    def resign(self, now_ms: int) -> RaftResult:
        """Graceful shutdown of a leader: EndQuorumEpoch so a successor is elected at once."""
        before = self._begin(now_ms)
        st = self._leader()
        if st is not None:
            self._become_resigned(st, now_ms)
        return self._finish(before, now_ms)

    def create_snapshot(self, end_offset: int, data_records: Sequence[bytes], now_ms: int
                        ) -> SnapshotId:
        """Write a snapshot of committed state below end_offset (a batch boundary at or below
        the high watermark), with the voter set in force there (rule 7)."""
        snapshot_id, chunks = self.prepare_snapshot(end_offset, data_records, now_ms)
        self._log.create_snapshot(snapshot_id, b"".join(chunks))
        return snapshot_id

    def prepare_snapshot(self, end_offset: int, data_records: Sequence[bytes], now_ms: int
                         ) -> tuple[SnapshotId, Iterator[bytes]]:
        """create_snapshot's checks and its raw batches, one at a time, for a runtime that
        writes them in slices (issue 35); it checks the log again before it keeps the file."""
        if end_offset > self._high_watermark or end_offset <= self._log.start_offset():
            raise ValueError(f"snapshot end {end_offset} is not committed data in the log "
                             f"[{self._log.start_offset()}, {self._high_watermark})")
        header = read_header(self._log.read(end_offset - 1, 1), 0)
        if header.last_offset != end_offset - 1:
            raise ValueError(f"snapshot end {end_offset} is not a batch boundary")
        voters = self._history.value_at(end_offset - 1)
        snapshot_id = SnapshotId(end_offset, header.leader_epoch)
        chunks = snapshot_chunks(voters.to_record().voters, data_records, now_ms,
                                 header.leader_epoch)
        return snapshot_id, chunks

    # -- plumbing ------------------------------------------------------------------------------
    def _begin(self, now_ms: int) -> tuple[int, int | None, int]:
        self._now_ms = max(self._now_ms, now_ms)
        self._out = RaftResult()
        return self.epoch, self.leader_id, self._high_watermark

    def _finish(self, before: tuple[int, int | None, int], now_ms: int) -> RaftResult:
        self._poll_fetch(now_ms)
        out = self._out
        if (self.epoch, self.leader_id) != before[:2]:
            out.leader_changed = True
        if self._high_watermark != before[2]:
            out.high_watermark_changed = True
        if self._awaiting_flush:
            out.flush = True
        self._out = RaftResult()
        return out
