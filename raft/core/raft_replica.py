"""The sans-IO Raft replica of the metadata partition (KIP-595 KRaft, KIP-853 voter records,
KIP-996 pre-vote). The runtime feeds it requests, responses and ticks and, for every
RaftResult, does in this order: write `persist` durably, fsync the log if `flush`, call
handle_flushed, then send `send` and `response`. Nothing here waits on I/O or reads a clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from kafkawire.errors import Errors
from raft.core import voter_changes
from raft.core.control_records import (
    KRaftVersionRecord,
    LeaderChangeRecord,
    VotersRecord,
    decode_control,
    encode_control,
    snapshot_batches,
    snapshot_voters,
)
from raft.core.leader_state import LeaderState, ReplicaProgress
from raft.core.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    ReplicaState,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoterEndpoint,
    VoteRequest,
    VoteResponse,
)
from raft.core.quorum_state import (
    CandidateState,
    ElectionState,
    EpochState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)
from raft.core.replica_key import ZERO_UUID, ReplicaKey
from raft.core.replicated_log import ReplicatedLog
from raft.core.voter_set import VoterSet, VoterSetHistory
from storage.core.offset_and_epoch import OffsetAndEpoch, SnapshotId
from storage.core.record_batch import decode_batch, read_header

_SCAN_CHUNK_BYTES = 8 * 1024 * 1024
_NO_DEADLINE_MS = 1 << 62


@dataclass(frozen=True, slots=True)
class RaftConfig:
    cluster_id: str = ""
    election_timeout_ms: int = 1000
    election_backoff_max_ms: int = 1000
    fetch_timeout_ms: int = 2000
    # minikraft.quorum.leader.lost.jitter.max.ms: a voter that lost its leader (fetch timeout or
    # a reset connection) stands after a random 0..this many ms, as etcd randomizes its election
    # timeout, so the survivors rarely stand together and split the vote.
    leader_lost_jitter_max_ms: int = 200
    fetch_max_wait_ms: int = 500
    append_linger_ms: int = 0  # used by the runtime to batch client appends
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 100
    fetch_max_bytes: int = 1024 * 1024
    fetch_snapshot_max_bytes: int = 1024 * 1024
    bootstrap_servers: list[str] = field(default_factory=list)
    add_voter_max_lag_records: int = 100  # rule 5: how near the log end a new voter must be
    default_listener_name: str = "CONTROLLER"  # names the endpoint an observer fetched with


@dataclass(frozen=True, slots=True)
class Outbound:
    """A request to send. address, when set, is where to send it ("host:port"); dest_node_id
    is -1 for a bootstrap server whose node id is not known."""

    dest_node_id: int
    request: object
    address: str | None = None


@dataclass(slots=True)
class RaftResult:
    persist: ElectionState | None = None
    send: list[Outbound] = field(default_factory=list)
    response: object | None = None
    flush: bool = False
    became_leader: bool = False
    leader_changed: bool = False
    high_watermark_changed: bool = False
    # AddRaftVoter/RemoveRaftVoter appended its VotersRecord here; the runtime answers once the
    # high watermark passes it (rule 5). -1: nothing appended.
    voters_record_offset: int = -1


class NotLeaderError(Exception):
    """append() on a replica that is not the leader; names the leader it knows, if any."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the leader of epoch {epoch} (leader: {leader_id})")
        self.leader_id = leader_id
        self.epoch = epoch


class RaftReplica:
    def __init__(
        self,
        node_id: int,
        directory_id: uuid.UUID,
        log: ReplicatedLog,
        election_state: ElectionState | None,
        config: RaftConfig,
        random_source: Callable[[], float],
        now_ms: int,
        endpoint: str = "",
    ) -> None:
        self._node_id = node_id
        self._directory_id = directory_id
        self._key = ReplicaKey(node_id, directory_id)
        self._log = log
        self._config = config
        self._random = random_source
        self._endpoint = endpoint
        self._now_ms = now_ms
        self._history = self._load_voter_history()
        self._high_watermark = 0
        self._persisted = election_state or ElectionState(0)
        self._inflight_fetch: FetchRequest | FetchSnapshotRequest | None = None
        self._inflight_sent_ms = 0
        self._awaiting_flush = False
        self._snapshot_download: tuple[SnapshotId, bytearray] | None = None
        self._next_fetch_ms = now_ms
        self._bootstrap_index = 0
        self._election_retries = 0  # failed candidacies since a leader was last known
        self._out = RaftResult()
        es = self._persisted
        state: EpochState
        if es.leader_id is not None and es.leader_id != node_id:
            state = FollowerState(es.epoch, es.leader_id, self.voters.endpoint(es.leader_id) or "",
                                  es.voted_key, now_ms + config.fetch_timeout_ms, -_NO_DEADLINE_MS,
                                  now_ms)
        elif es.leader_id == node_id:
            # Kafka: a restarted leader resigns its epoch (EndQuorumEpoch on the first tick).
            state = ResignedState(es.epoch, self._election_deadline(now_ms),
                                  {k for k in self.voters if k != self._key}, [], now_ms)
        else:
            state = UnattachedState(es.epoch, es.voted_key, self._election_deadline(now_ms))
        self._state: EpochState = state

    # -- read-only view ----------------------------------------------------------------------
    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def directory_id(self) -> uuid.UUID:
        return self._directory_id

    @property
    def key(self) -> ReplicaKey:
        return self._key

    @property
    def epoch(self) -> int:
        return self._state.epoch

    @property
    def leader_id(self) -> int | None:
        st = self._state
        if isinstance(st, (LeaderState, ResignedState)):
            return self._node_id
        if isinstance(st, FollowerState):
            return st.leader_id
        return None

    @property
    def leader_endpoint(self) -> str | None:
        st = self._state
        if isinstance(st, (LeaderState, ResignedState)):
            return self._endpoint
        if isinstance(st, FollowerState):
            return st.leader_endpoint or self.voters.endpoint(st.leader_id)
        return None

    @property
    def role(self) -> str:
        st = self._state
        if isinstance(st, (UnattachedState, FollowerState)) and not self._may_stand:
            return "Observer"  # a voter whose removal is uncommitted still campaigns: not one
        return st.name

    @property
    def state(self) -> EpochState:
        return self._state

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def voters(self) -> VoterSet:
        return self._history.latest()

    @property
    def is_voter(self) -> bool:
        return self._key in self._history.latest()

    def _electorate(self) -> tuple[VoterSet, ...]:
        """The voter sets whose majorities an election of ours needs; empty: we may not stand.
        A voter of the latest set needs that set's majority (rule 4). A replica whose latest
        set is an uncommitted change removing it, but which is in the set that change replaced,
        may still stand with a majority of BOTH (joint majority): otherwise, if the leader lost
        the removal in a crash, it would need our vote while we, with the longer log, refuse it
        and never stand (no leader for ever). A joint majority meets every majority of either
        set, so rules 1 and 2 hold whichever set turns out in force (rule 5); once leader, our
        log's set excludes us: rule 6's self-removal, resigning once the removal commits."""
        latest = self._history.latest()
        if self._key in latest:
            return (latest,)
        replaced = self._history.replaced_by_uncommitted(self._high_watermark)
        if replaced is not None and self._key in replaced:
            return (replaced, latest)
        return ()

    @property
    def _may_stand(self) -> bool:
        """Whether this replica campaigns (pre-vote, then vote) when it hears no leader."""
        return bool(self._electorate())

    def _has_majority(self, keys: set[ReplicaKey]) -> bool:
        """Whether keys (granted votes) are a majority of every set of the electorate."""
        electorate = self._electorate()
        return bool(electorate) and all(voters.is_majority(keys) for voters in electorate)

    def _cannot_win(self, rejected: set[ReplicaKey]) -> bool:
        """Whether the rejections leave some set of the electorate without a majority."""
        return any(not voters.is_majority({k for k in voters if k not in rejected})
                   for voters in self._electorate())

    def _electorate_keys(self) -> list[ReplicaKey]:
        """Every voter of the electorate once, in set order: asked for, and counted as, votes."""
        keys: dict[ReplicaKey, None] = {}
        for voters in self._electorate():
            keys.update(dict.fromkeys(voters))
        return list(keys)

    @property
    def election_state(self) -> ElectionState:
        """What this replica last asked the runtime to persist (or started from)."""
        return self._persisted

    def voter_set_changes(self) -> list[tuple[int, VoterSet]]:
        """(offset, set) of every voter set this replica knows, oldest first (for checkers)."""
        return self._history.changes()

    def endpoint_of(self, node_id: int) -> str | None:
        """Where to reach node_id: the known leader endpoint, else the voter's endpoint."""
        return self._address_of(node_id)

    def next_deadline_ms(self) -> int:
        """The earliest time tick() has something to do."""
        st = self._state
        deadlines = [_NO_DEADLINE_MS]
        if isinstance(st, (UnattachedState, ProspectiveState, CandidateState)):
            if self._may_stand:
                deadlines.append(st.election_deadline_ms)
        elif isinstance(st, FollowerState):
            deadlines.append(st.fetch_deadline_ms)
        elif isinstance(st, LeaderState):
            deadlines.append(st.next_check_quorum_ms)
            deadlines.extend(st.unacked_begin_epoch.values())
        elif isinstance(st, ResignedState):
            deadlines.append(st.election_deadline_ms)
            if st.unacked_voters:
                deadlines.append(st.next_send_ms)
        if self._fetches_now():
            if self._inflight_fetch is not None:
                deadlines.append(self._inflight_sent_ms + self._inflight_timeout_ms())
            elif not self._awaiting_flush:
                deadlines.append(self._next_fetch_ms)
        return min(deadlines)

    def describe_quorum(self, now_ms: int) -> DescribeQuorumResponse:
        st = self._state
        if not isinstance(st, LeaderState):
            return DescribeQuorumResponse(
                error_code=Errors.NOT_LEADER_OR_FOLLOWER, error_message="not the quorum leader",
                leader_id=self._leader_id_or_none(), leader_epoch=self.epoch,
                voter_endpoints=self._voter_endpoints())
        voters = self.voters
        st.update_local(self._log.flushed_offset(), now_ms)

        def state_of(p: ReplicaProgress) -> ReplicaState:
            if p.key == self._key:  # Kafka's RaftUtil.toReplicaState: now for the leader
                return ReplicaState(p.key.id, p.key.directory_id, self._log.end_offset(), now_ms,
                                    now_ms)
            return ReplicaState(p.key.id, p.key.directory_id, p.log_end_offset, p.last_fetch_ms,
                                p.last_caught_up_ms)

        return DescribeQuorumResponse(
            cluster_id=self._config.cluster_id,
            leader_id=self._node_id, leader_epoch=st.epoch, high_watermark=self._high_watermark,
            current_voters=[state_of(p) for p in st.voter_progress(voters)],
            observers=[state_of(p) for p in st.described_observers(voters, now_ms)],
            voter_endpoints=self._voter_endpoints(),
            observer_endpoints=[
                VoterEndpoint(p.key.id, p.key.directory_id,
                              {self._config.default_listener_name: p.endpoint})
                for p in st.described_observers(voters, now_ms) if p.endpoint])

    def _voter_endpoints(self) -> list[VoterEndpoint]:
        return [VoterEndpoint(k.id, k.directory_id, dict(e))
                for k, e in self.voters.voters.items()]

    # -- inputs --------------------------------------------------------------------------------
    def handle_request(self, source_node_id: int, request: object, now_ms: int) -> RaftResult:
        before = self._begin(now_ms)
        cluster_id = getattr(request, "cluster_id", None)
        # Kafka's hasValidClusterId: only a null id skips the check; an empty one is another
        # cluster's (INVARIANTS "Wire protocol": INCONSISTENT_CLUSTER_ID).
        if (cluster_id is not None and self._config.cluster_id
                and cluster_id != self._config.cluster_id):
            self._out.response = _error_response(
                request, Errors.INCONSISTENT_CLUSTER_ID,
                f'The given id "{cluster_id}" doesn\'t match the cluster id '
                f'"{self._config.cluster_id}"')
        elif isinstance(request, VoteRequest):
            self._out.response = self._handle_vote(request, now_ms)
        elif isinstance(request, BeginQuorumEpochRequest):
            self._out.response = self._handle_begin_quorum_epoch(request, now_ms)
        elif isinstance(request, EndQuorumEpochRequest):
            self._out.response = self._handle_end_quorum_epoch(request, now_ms)
        elif isinstance(request, FetchRequest):
            self._out.response = self._handle_fetch(request, now_ms)
        elif isinstance(request, FetchSnapshotRequest):
            self._out.response = self._handle_fetch_snapshot(request, now_ms)
        elif isinstance(request, DescribeQuorumRequest):
            self._out.response = self.describe_quorum(now_ms)
        elif isinstance(request, AddRaftVoterRequest):
            self._out.response = self._handle_add_voter(request, now_ms)
        elif isinstance(request, RemoveRaftVoterRequest):
            self._out.response = self._handle_remove_voter(request, now_ms)
        elif isinstance(request, UpdateRaftVoterRequest):
            self._out.response = self._handle_update_voter(request, now_ms)
        else:
            raise TypeError(f"not a raft request: {type(request).__name__}")
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
        if isinstance(st, FollowerState) and st.leader_id == node_id:
            if not self._may_stand:
                self._rediscover_leader(st, now_ms)
            elif not st.leader_lost:
                self._lose_leader(st, now_ms, min(st.fetch_deadline_ms,
                                                  now_ms + self._leader_lost_jitter_ms()))
        elif isinstance(st, CandidateState):
            st.rejected |= {k for k in self._electorate_keys()
                            if k.id == node_id and k not in st.granted}
            self._maybe_back_off(st, now_ms)
        return self._finish(before, now_ms)

    def tick(self, now_ms: int) -> RaftResult:
        before = self._begin(now_ms)
        st = self._state
        if isinstance(st, UnattachedState):
            if self._may_stand and now_ms >= st.election_deadline_ms:
                self._become_prospective(now_ms)
        elif isinstance(st, (ProspectiveState, CandidateState)) and not self._may_stand:
            # Rule 4: a replica that learned it is no longer a voter stops campaigning.
            self._state = UnattachedState(st.epoch, self._voted_key_in(st.epoch),
                                          self._election_deadline(now_ms))
        elif isinstance(st, ProspectiveState):
            if now_ms >= st.election_deadline_ms:
                self._become_prospective(now_ms)
        elif isinstance(st, CandidateState):
            if now_ms >= st.election_deadline_ms:
                self._back_off(st, now_ms)  # lost or split: pre-vote again later (rule 7)
        elif isinstance(st, FollowerState):
            if now_ms >= st.fetch_deadline_ms:
                if not self._may_stand:
                    self._rediscover_leader(st, now_ms)
                elif st.leader_lost:
                    self._become_prospective(now_ms)
                else:  # the fetch timeout: stand after a random jitter
                    self._lose_leader(st, now_ms, now_ms + self._leader_lost_jitter_ms())
        elif isinstance(st, LeaderState):
            self._leader_tick(st, now_ms)
        elif isinstance(st, ResignedState):
            if now_ms >= st.election_deadline_ms:
                self._state = UnattachedState(st.epoch, self._key, now_ms)
                if self._may_stand:
                    self._become_prospective(now_ms)
            elif st.unacked_voters and now_ms >= st.next_send_ms:
                self._send_end_quorum_epoch(st, now_ms)
        return self._finish(before, now_ms)

    def append(self, records: Sequence[bytes], now_ms: int) -> tuple[RaftResult, int]:
        """Leader only: append one batch in the current epoch; returns its last offset."""
        st = self._state
        if not isinstance(st, LeaderState):
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
        st = self._state
        if isinstance(st, LeaderState):
            st.update_local(self._log.flushed_offset(), now_ms)
            self._maybe_advance_high_watermark(st)
        if self._awaiting_flush and self._log.flushed_offset() >= self._log.end_offset():
            self._awaiting_flush = False
        return self._finish(before, now_ms)

    def resign(self, now_ms: int) -> RaftResult:
        """Graceful shutdown of a leader: EndQuorumEpoch so a successor is elected at once."""
        before = self._begin(now_ms)
        st = self._state
        if isinstance(st, LeaderState):
            self._become_resigned(st, now_ms)
        return self._finish(before, now_ms)

    def create_snapshot(self, end_offset: int, data_records: Sequence[bytes], now_ms: int
                        ) -> SnapshotId:
        """Write a snapshot of committed state below end_offset (a batch boundary at or below
        the high watermark), with the voter set in force there (rule 7)."""
        if end_offset > self._high_watermark or end_offset <= self._log.start_offset():
            raise ValueError(f"snapshot end {end_offset} is not committed data in the log "
                             f"[{self._log.start_offset()}, {self._high_watermark})")
        header = read_header(self._log.read(end_offset - 1, 1), 0)
        if header.last_offset != end_offset - 1:
            raise ValueError(f"snapshot end {end_offset} is not a batch boundary")
        voters = self._history.value_at(end_offset - 1)
        snapshot_id = SnapshotId(end_offset, header.leader_epoch)
        raw = snapshot_batches(voters.to_record().voters, data_records, now_ms, header.leader_epoch)
        self._log.create_snapshot(snapshot_id, raw)
        return snapshot_id

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

    def _persist(self, state: ElectionState) -> None:
        """Rule 1: the runtime writes this before sending anything in the same result."""
        if state.epoch < self._persisted.epoch:
            raise AssertionError(f"epoch would go back from {self._persisted.epoch} to {state}")
        if state != self._persisted:
            self._persisted = state
            self._out.persist = state

    def _leader_lost_jitter_ms(self) -> int:
        return int(self._random() * self._config.leader_lost_jitter_max_ms)

    def _lose_leader(self, st: FollowerState, now_ms: int, stand_at_ms: int) -> None:
        """Rule 7: we no longer hear the leader, so we grant others' pre-votes from now on, and
        stand ourselves at stand_at_ms (a random moment, so two survivors rarely tie)."""
        st.leader_lost = True
        st.last_fetch_success_ms = -_NO_DEADLINE_MS
        st.fetch_deadline_ms = stand_at_ms
        if now_ms >= stand_at_ms:
            self._become_prospective(now_ms)

    def _rediscover_leader(self, st: FollowerState, now_ms: int) -> None:
        """An observer lost its leader: look for it again through the bootstrap servers."""
        self._state = UnattachedState(st.epoch, st.voted_key, self._election_deadline(now_ms))
        self._inflight_fetch = None
        self._next_fetch_ms = now_ms

    def _maybe_back_off(self, st: CandidateState, now_ms: int) -> None:
        """Kafka: once a majority can no longer grant, back off at once instead of waiting out
        the election timeout (a split vote is over as soon as it is known)."""
        if self._cannot_win(st.rejected):
            self._back_off(st, now_ms)

    def _back_off(self, st: CandidateState, now_ms: int) -> None:
        """A random backoff, doubling with each failed round up to the election backoff max
        (Kafka's binaryExponentialElectionBackoffMs, drawn from a continuous range so two
        candidates rarely draw the same), then pre-vote again (rule 7)."""
        self._election_retries += 1
        window_ms = min(self._config.election_backoff_max_ms,
                        self._config.retry_backoff_ms << min(self._election_retries, 20))
        self._state = UnattachedState(st.epoch, self._key,
                                      now_ms + int(self._random() * window_ms))

    def _election_deadline(self, now_ms: int) -> int:
        timeout_ms = self._config.election_timeout_ms
        return now_ms + timeout_ms + int(self._random() * timeout_ms)

    def _leader_id_or_none(self) -> int:
        leader = self.leader_id
        return -1 if leader is None else leader

    def _address_of(self, node_id: int) -> str | None:
        st = self._state
        if isinstance(st, FollowerState) and st.leader_id == node_id and st.leader_endpoint:
            return st.leader_endpoint
        return self.voters.endpoint(node_id)

    def _send(self, dest_node_id: int, request: object, address: str | None = None) -> None:
        self._out.send.append(Outbound(dest_node_id, request,
                                       address if address is not None
                                       else self._address_of(dest_node_id)))

    def _load_voter_history(self) -> VoterSetHistory:
        """Rule 7: the latest snapshot's voter set, then every VotersRecord in the log after it."""
        snapshot_id = self._log.latest_snapshot_id()
        history = VoterSetHistory(VoterSet(), -1)
        if snapshot_id is not None:
            record = snapshot_voters(self._read_whole_snapshot(snapshot_id))
            if record is not None:
                history = VoterSetHistory(VoterSet.from_record(record), snapshot_id.end_offset - 1)
        offset = self._log.start_offset()
        while offset < self._log.end_offset():
            raw = self._log.read(offset, _SCAN_CHUNK_BYTES)
            if not raw:
                break
            offset = self._scan_voters(raw, history, offset)
        return history

    def _read_whole_snapshot(self, snapshot_id: SnapshotId) -> bytes:
        chunks: list[bytes] = []
        position = 0
        while True:
            chunk, size = self._log.read_snapshot(snapshot_id, position, _SCAN_CHUNK_BYTES)
            chunks.append(chunk)
            position += len(chunk)
            if position >= size or not chunk:
                return b"".join(chunks)

    @staticmethod
    def _scan_voters(raw: bytes, history: VoterSetHistory, from_offset: int) -> int:
        """Apply VotersRecords at or above from_offset (rule 5: in force once appended);
        returns the offset after the last batch."""
        position = 0
        next_offset = from_offset
        while position < len(raw):
            header = read_header(raw, position)
            if header.is_control and header.last_offset >= from_offset:
                batch, _size = decode_batch(raw, position)
                for index, record in enumerate(batch.records):
                    offset = batch.offset_of(index)
                    if offset < from_offset or offset <= history.latest_offset():
                        continue
                    rec = decode_control(record)
                    if isinstance(rec, VotersRecord):
                        history.add_at(offset, VoterSet.from_record(rec))
            next_offset = header.last_offset + 1
            position += header.size
        return next_offset

    def _log_is_up_to_date(self, last_offset_epoch: int, last_offset: int) -> bool:
        """Seed 003 / KIP-595: the candidate's (epoch, end offset) is at least ours."""
        return (last_offset_epoch, last_offset) >= (self._log.last_fetched_epoch(),
                                                    self._log.end_offset())

    def _has_live_leader(self, now_ms: int) -> bool:
        st = self._state
        if isinstance(st, LeaderState):
            return True
        return isinstance(st, FollowerState) and (
            now_ms < st.last_fetch_success_ms + self._config.fetch_timeout_ms)

    def _voted_key_in(self, epoch: int) -> ReplicaKey | None:
        st = self._state
        if st.epoch != epoch:
            return None
        if isinstance(st, (UnattachedState, ProspectiveState, FollowerState)):
            return st.voted_key
        if isinstance(st, (CandidateState, LeaderState, ResignedState)):
            return self._key
        return None

    # -- transitions ---------------------------------------------------------------------------
    def _become_unattached(self, epoch: int, now_ms: int) -> None:
        """A higher epoch without a known leader; nothing voted in it yet."""
        self._state = UnattachedState(epoch, None, self._election_deadline(now_ms))
        self._persist(ElectionState(epoch, None, None))
        self._reset_fetching(now_ms)

    def _become_follower(self, epoch: int, leader_id: int, endpoint: str, now_ms: int,
                         heard_from_leader: bool = True) -> None:
        voted = self._voted_key_in(epoch)
        st = self._state
        last_heard_ms = now_ms if heard_from_leader else (
            st.last_fetch_success_ms if isinstance(st, FollowerState) else -_NO_DEADLINE_MS)
        self._state = FollowerState(epoch, leader_id, endpoint or self.voters.endpoint(leader_id)
                                    or "", voted, now_ms + self._config.fetch_timeout_ms,
                                    last_heard_ms, now_ms)
        self._persist(ElectionState(epoch, leader_id, voted))
        self._reset_fetching(now_ms)
        self._election_retries = 0

    def _reset_fetching(self, now_ms: int) -> None:
        self._inflight_fetch = None  # a fetch to the old leader is answered but ignored
        self._snapshot_download = None
        self._next_fetch_ms = now_ms

    def _observe_epoch(self, epoch: int, leader_id: int, endpoint: str, now_ms: int,
                       from_leader: bool = False) -> bool:
        """Move forward on a higher epoch or a newly known leader (rule 1: never backwards).
        Returns True if the state changed. Only word from the leader itself (from_leader) makes
        it count as alive for pre-votes: others may repeat a leader that is long gone."""
        if epoch < 0 or epoch < self.epoch:
            return False
        st = self._state
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self._node_id:
                self._become_follower(epoch, leader_id, endpoint, now_ms, from_leader)
            else:
                self._become_unattached(epoch, now_ms)
            return True
        if leader_id < 0 or leader_id == self._node_id:
            return False
        if isinstance(st, FollowerState) and st.leader_id == leader_id:
            if endpoint and not st.leader_endpoint:
                st.leader_endpoint = endpoint
            return False
        if isinstance(st, ProspectiveState) and st.leader_id == leader_id and not from_leader:
            return False  # KIP-996: the leader we timed out on; others may not know it yet
        if isinstance(st, (LeaderState, ResignedState)):
            return False  # another leader in our epoch would break rule 1; never follow it
        self._become_follower(epoch, leader_id, endpoint, now_ms, from_leader)
        return True

    def _become_prospective(self, now_ms: int) -> None:
        """Rule 7: ask for pre-votes at epoch + 1 without bumping or persisting our epoch."""
        st = self._state
        if not self._may_stand or isinstance(st, (LeaderState, CandidateState)):
            return
        leader = st.leader_id if isinstance(st, (FollowerState, ProspectiveState)) else None
        prospective = ProspectiveState(st.epoch, self._voted_key_in(st.epoch), leader,
                                       self._election_deadline(now_ms))
        prospective.granted.add(self._key)
        self._state = prospective
        self._inflight_fetch = None
        self._snapshot_download = None
        if self._has_majority(prospective.granted):
            self._become_candidate(now_ms)
            return
        for voter in self._electorate_keys():
            if voter != self._key:
                self._send(voter.id, self._vote_request(voter, prospective.epoch + 1, True))

    def _vote_request(self, voter: ReplicaKey, candidate_epoch: int, pre_vote: bool
                      ) -> VoteRequest:
        return VoteRequest(
            candidate_epoch=candidate_epoch, candidate_id=self._node_id,
            candidate_directory_id=self._directory_id, voter_id=voter.id,
            voter_directory_id=voter.directory_id,
            last_offset_epoch=self._log.last_fetched_epoch(), last_offset=self._log.end_offset(),
            pre_vote=pre_vote, cluster_id=self._config.cluster_id)

    def _become_candidate(self, now_ms: int) -> None:
        epoch = self.epoch + 1
        candidate = CandidateState(epoch, self._election_deadline(now_ms))
        candidate.granted.add(self._key)
        self._state = candidate
        self._persist(ElectionState(epoch, None, self._key))  # rule 1: durable before Vote
        if self._has_majority(candidate.granted):
            self._become_leader(now_ms)
            return
        for voter in self._electorate_keys():  # rule 4: only voters are asked and counted
            if voter != self._key:
                self._send(voter.id, self._vote_request(voter, epoch, False))

    def _become_leader(self, now_ms: int) -> None:
        st = self._state
        assert isinstance(st, CandidateState)
        voters = self.voters
        self._persist(ElectionState(st.epoch, self._node_id, self._key))  # rule 1
        leader = LeaderState(st.epoch, self._key, self._log.end_offset(), self._high_watermark,
                             now_ms, {k.id for k in st.granted})
        self._state = leader
        change = LeaderChangeRecord(self._node_id, tuple(voters), tuple(st.granted))
        # Rule 3: an entry of our own epoch, so the high watermark can move in this epoch.
        self._log.append_as_leader([encode_control(change)], st.epoch, now_ms, is_control=True)
        if self._history.latest_offset() < 0:
            # The set in force came only from the bootstrap checkpoint: write it into the log
            # (KIP-853, as Kafka does) so observers and replicas that never saw the checkpoint
            # learn it from the log (rule 7).
            voters_record = VotersRecord(voters.to_record().voters)
            last_offset, _epoch = self._log.append_as_leader(
                [encode_control(KRaftVersionRecord(1)), encode_control(voters_record)],
                st.epoch, now_ms, is_control=True,
            )
            self._history.add_at(last_offset, voters)
        self._out.flush = True
        self._out.became_leader = True
        leader.update_local(self._log.flushed_offset(), now_ms)
        leader.next_check_quorum_ms = now_ms + self._config.fetch_timeout_ms
        for voter in voters:
            if voter != self._key:
                leader.unacked_begin_epoch[voter] = now_ms
        self._send_begin_quorum_epochs(leader, now_ms)
        self._reset_fetching(now_ms)
        self._awaiting_flush = False
        self._election_retries = 0

    def _become_resigned(self, st: LeaderState, now_ms: int) -> None:
        voters = self.voters
        resigned = ResignedState(st.epoch, self._election_deadline(now_ms),
                                 {k for k in voters if k != self._key},
                                 st.successors_by_progress(voters), now_ms)
        self._state = resigned
        self._send_end_quorum_epoch(resigned, now_ms)

    def _send_end_quorum_epoch(self, st: ResignedState, now_ms: int) -> None:
        for voter in sorted(st.unacked_voters):
            self._send(voter.id, EndQuorumEpochRequest(
                self._node_id, st.epoch, list(st.preferred_successors), self._config.cluster_id,
                voter.id, voter.directory_id))
        st.next_send_ms = now_ms + self._config.request_timeout_ms

    def _send_begin_quorum_epochs(self, st: LeaderState, now_ms: int) -> None:
        for voter, retry_at_ms in list(st.unacked_begin_epoch.items()):
            if now_ms >= retry_at_ms:
                self._send(voter.id, BeginQuorumEpochRequest(
                    self._node_id, st.epoch, self._endpoint, voter.id, voter.directory_id,
                    self._config.cluster_id))
                # the response (or its timeout) brings the retry forward
                st.unacked_begin_epoch[voter] = now_ms + 2 * self._config.request_timeout_ms

    def _leader_tick(self, st: LeaderState, now_ms: int) -> None:
        if now_ms >= st.next_check_quorum_ms:
            since_ms = now_ms - self._config.fetch_timeout_ms
            if st.start_ms <= since_ms and not st.majority_heard_since(self.voters, since_ms):
                self._become_resigned(st, now_ms)  # Kafka's check-quorum
                return
            st.next_check_quorum_ms = now_ms + max(1, self._config.fetch_timeout_ms // 4)
        self._send_begin_quorum_epochs(st, now_ms)

    def _maybe_advance_high_watermark(self, st: LeaderState) -> None:
        # Rule 6: a leader outside the set in force is not counted (the set has no key for it).
        if st.maybe_advance_high_watermark(self.voters):
            self._high_watermark = max(self._high_watermark, st.high_watermark)
        if (not self.is_voter and self._high_watermark > self._history.latest_offset()
                and self._state is st):
            self._become_resigned(st, self._now_ms)  # rule 6: its removal committed

    # -- voter changes (rule 5) ----------------------------------------------------------------
    def _not_leader(self) -> tuple[int, str, int, int, str]:
        return (Errors.NOT_LEADER_OR_FOLLOWER, f"{self._node_id} does not lead epoch {self.epoch}",
                self._leader_id_or_none(), self.epoch, self.leader_endpoint or "")

    def _leader_view(self, st: LeaderState) -> voter_changes.LeaderView:
        return voter_changes.LeaderView(
            node_id=self._node_id, state=st, voters=self.voters, history=self._history,
            high_watermark=self._high_watermark, log_end_offset=self._log.end_offset(),
            default_listener_name=self._config.default_listener_name)

    def _apply_voter_change(self, st: LeaderState, change: voter_changes.VoterChange,
                            now_ms: int) -> None:
        if change.new_voters is not None:
            self._out.voters_record_offset = self._append_voters(st, change.new_voters, now_ms)

    def _handle_add_voter(self, req: AddRaftVoterRequest, now_ms: int) -> AddRaftVoterResponse:
        st = self._state
        if not isinstance(st, LeaderState):
            return AddRaftVoterResponse(*self._not_leader())
        change = voter_changes.add_voter(self._leader_view(st), req,
                                         self._config.add_voter_max_lag_records,
                                         now_ms - self._config.fetch_timeout_ms)
        self._apply_voter_change(st, change, now_ms)
        return AddRaftVoterResponse(int(change.error), change.message, self._node_id, st.epoch,
                                    self._endpoint)

    def _handle_remove_voter(self, req: RemoveRaftVoterRequest, now_ms: int
                             ) -> RemoveRaftVoterResponse:
        st = self._state
        if not isinstance(st, LeaderState):
            return RemoveRaftVoterResponse(*self._not_leader())
        change = voter_changes.remove_voter(self._leader_view(st), req)
        self._apply_voter_change(st, change, now_ms)
        return RemoveRaftVoterResponse(int(change.error), change.message, self._node_id, st.epoch,
                                       self._endpoint)

    def _handle_update_voter(self, req: UpdateRaftVoterRequest, now_ms: int
                             ) -> UpdateRaftVoterResponse:
        """KIP-853 as Kafka's UpdateVoterHandler (voter_changes.update_voter); the answer does
        not wait for the commit, as in Kafka."""
        error = self._leader_only_error(req.current_leader_epoch)
        st = self._state
        if error is not None or not isinstance(st, LeaderState):
            code, message = error or (Errors.NOT_LEADER_OR_FOLLOWER, "not the leader")
            return UpdateRaftVoterResponse(code, message, self._leader_id_or_none(), self.epoch,
                                           self.leader_endpoint or "")
        change = voter_changes.update_voter(self._leader_view(st), req)
        if change.new_voters is not None:
            # Unlike add/remove, the answer names no offset to wait for (Kafka's).
            self._append_voters(st, change.new_voters, now_ms)
        return UpdateRaftVoterResponse(int(change.error), change.message, self._node_id, st.epoch,
                                       self._endpoint)

    def _maybe_update_voter(self, st: FollowerState, now_ms: int) -> None:
        """Kafka's follower, once per leader: if the voter set has other listeners for this
        voter than it has, tell the leader (UpdateRaftVoter); retried on a later fetch."""
        if (self._key not in self.voters.voters or not self._endpoint or st.updated_leader
                or now_ms < st.next_update_voter_ms):
            return
        request = voter_changes.update_voter_request(
            self.voters, self._key, self._config.default_listener_name, self._endpoint,
            st.epoch, self._config.cluster_id)
        if request is None:
            st.updated_leader = True
            return
        st.next_update_voter_ms = now_ms + self._config.request_timeout_ms
        self._send(st.leader_id, request)

    def _on_update_voter_response(self, req: UpdateRaftVoterRequest, resp: object | None,
                                  now_ms: int) -> None:
        st = self._state
        if not isinstance(resp, UpdateRaftVoterResponse):
            return  # lost: the next fetch after next_update_voter_ms sends it again
        if resp.error_code != 0:
            self._observe_epoch(resp.leader_epoch, resp.leader_id, resp.leader_endpoint, now_ms)
            return
        if isinstance(st, FollowerState) and st.epoch == req.current_leader_epoch:
            st.updated_leader = True

    def _append_voters(self, st: LeaderState, new: VoterSet, now_ms: int) -> int:
        """Append the full new set; rule 5: in force at once, on the leader as everywhere."""
        old = self.voters
        last = self._log.append_as_leader([encode_control(new.to_record())], st.epoch, now_ms,
                                          is_control=True)
        self._history.add_at(last.offset, new)
        self._out.flush = True
        for key in new:
            if key not in old and key != self._key:  # rule 4: retried until it accepts
                st.unacked_begin_epoch[key] = now_ms
        self._send_begin_quorum_epochs(st, now_ms)
        self._maybe_advance_high_watermark(st)
        return last.offset

    # -- request handlers ----------------------------------------------------------------------
    def _fenced(self) -> tuple[int, str]:
        return Errors.FENCED_LEADER_EPOCH, f"epoch is stale: current epoch is {self.epoch}"

    def _key_matches(self, voter_id: int, voter_directory_id: uuid.UUID) -> bool:
        """Rule 4: the request names us (a zero directory id names any of our disks)."""
        return voter_id == self._node_id and voter_directory_id in (ZERO_UUID, self._directory_id)

    def _handle_vote(self, req: VoteRequest, now_ms: int) -> VoteResponse:
        if req.candidate_epoch < self.epoch:
            code, message = self._fenced()
            return VoteResponse(code, message, self._leader_id_or_none(), self.epoch)
        if not self._key_matches(req.voter_id, req.voter_directory_id):
            return VoteResponse(Errors.INVALID_VOTER_KEY,
                                f"vote asked of {req.voter_id} but this is {self._key}",
                                self._leader_id_or_none(), self.epoch)
        log_ok = self._log_is_up_to_date(req.last_offset_epoch, req.last_offset)
        if req.pre_vote:
            # KIP-996 as Kafka's handleVoteRequest does it: a prospective replica asks at its
            # epoch + 1 without bumping it, so the epoch it stands in is candidate_epoch - 1. If
            # that is above ours, we move to it (Unattached, rule 1: forward only), as on any
            # higher epoch; else a prospective replica left at a higher epoch by a lost election
            # would be refused for ever (shorter log, live leader) and never rejoin.
            if req.candidate_epoch - 1 > self.epoch:
                self._become_unattached(req.candidate_epoch - 1, now_ms)
            # Rule 7: refuse while a leader is alive, so a partitioned replica cannot depose it.
            granted = log_ok and not self._has_live_leader(now_ms)
            return VoteResponse(leader_id=self._leader_id_or_none(), leader_epoch=self.epoch,
                                vote_granted=granted)
        if req.candidate_epoch > self.epoch:
            self._become_unattached(req.candidate_epoch, now_ms)
        candidate = ReplicaKey(req.candidate_id, req.candidate_directory_id)
        st = self._state
        granted = False
        if isinstance(st, (UnattachedState, ProspectiveState)):
            if st.voted_key == candidate:
                granted = True
            elif st.voted_key is None and log_ok:
                granted = True
                self._state = UnattachedState(st.epoch, candidate, self._election_deadline(now_ms))
                self._persist(ElectionState(st.epoch, None, candidate))  # rule 1
        return VoteResponse(leader_id=self._leader_id_or_none(), leader_epoch=self.epoch,
                            vote_granted=granted)

    def _handle_begin_quorum_epoch(self, req: BeginQuorumEpochRequest, now_ms: int
                                   ) -> BeginQuorumEpochResponse:
        if req.leader_epoch < self.epoch:
            code, message = self._fenced()
            return BeginQuorumEpochResponse(code, message, self._leader_id_or_none(), self.epoch)
        if not self._key_matches(req.voter_id, req.voter_directory_id):
            return BeginQuorumEpochResponse(
                Errors.INVALID_VOTER_KEY,
                f"BeginQuorumEpoch for {req.voter_id} reached {self._key}",
                self._leader_id_or_none(), self.epoch)
        st = self._state
        if req.leader_epoch == self.epoch and isinstance(st, (LeaderState, ResignedState)):
            return BeginQuorumEpochResponse(Errors.INVALID_REQUEST,
                                            f"{self._node_id} leads epoch {self.epoch}",
                                            self._node_id, self.epoch)
        self._observe_epoch(req.leader_epoch, req.leader_id, req.leader_endpoint, now_ms,
                            from_leader=True)
        return BeginQuorumEpochResponse(leader_id=req.leader_id, leader_epoch=self.epoch)

    def _handle_end_quorum_epoch(self, req: EndQuorumEpochRequest, now_ms: int
                                 ) -> EndQuorumEpochResponse:
        if req.leader_epoch < self.epoch:
            code, message = self._fenced()
            return EndQuorumEpochResponse(code, message, self._leader_id_or_none(), self.epoch)
        if req.voter_id >= 0 and not self._key_matches(req.voter_id, req.voter_directory_id):
            return EndQuorumEpochResponse(
                Errors.INVALID_VOTER_KEY, f"EndQuorumEpoch for {req.voter_id} reached {self._key}",
                self._leader_id_or_none(), self.epoch)
        st = self._state
        if req.leader_epoch > self.epoch:
            self._become_unattached(req.leader_epoch, now_ms)
            st = self._state
        if isinstance(st, (UnattachedState, FollowerState)) and (
                not isinstance(st, FollowerState) or st.leader_id == req.leader_id):
            # The leader is leaving: the most caught-up successor runs first.
            if self._node_id in req.preferred_successors:
                position = req.preferred_successors.index(self._node_id)
                step_ms = self._config.election_backoff_max_ms // max(
                    1, len(req.preferred_successors))
                delay_ms = position * step_ms + int(self._random() * max(1, step_ms // 2))
            else:
                delay_ms = self._config.election_backoff_max_ms + int(
                    self._random() * self._config.election_timeout_ms)
            if isinstance(st, FollowerState):  # Kafka: cut the fetch timer short, keep the leader
                st.fetch_deadline_ms = min(st.fetch_deadline_ms, now_ms + delay_ms)
                st.last_fetch_success_ms = -_NO_DEADLINE_MS  # pre-votes may be granted now
                st.leader_lost = True  # the delay above orders the successors: no more jitter
            else:
                st.election_deadline_ms = min(st.election_deadline_ms, now_ms + delay_ms)
        return EndQuorumEpochResponse(leader_id=-1, leader_epoch=self.epoch)

    def _leader_only_error(self, current_leader_epoch: int) -> tuple[int, str] | None:
        if current_leader_epoch < self.epoch:
            return self._fenced()
        if current_leader_epoch > self.epoch:
            return Errors.UNKNOWN_LEADER_EPOCH, f"epoch {current_leader_epoch} is not known yet"
        if not isinstance(self._state, LeaderState):
            return (Errors.NOT_LEADER_OR_FOLLOWER,
                    f"{self._node_id} does not lead epoch {self.epoch}")
        return None

    def _handle_fetch(self, req: FetchRequest, now_ms: int) -> FetchResponse:
        error = self._leader_only_error(req.current_leader_epoch)
        st = self._state
        if error is not None or not isinstance(st, LeaderState):
            code, message = error or (Errors.NOT_LEADER_OR_FOLLOWER, "not the leader")
            return FetchResponse(code, message, self._leader_id_or_none(), self.epoch,
                                 self.leader_endpoint or "")
        log = self._log
        base = FetchResponse(leader_id=self._node_id, leader_epoch=st.epoch,
                             leader_endpoint=self._endpoint, log_start_offset=log.start_offset(),
                             high_watermark=self._high_watermark)
        snapshot = log.latest_snapshot_id()
        if req.fetch_offset < log.start_offset():
            st.touch(req.replica_id, req.replica_directory_id, now_ms)
            if snapshot is None:
                return replace(base, error_code=Errors.OFFSET_OUT_OF_RANGE,
                               error_message="below the log start")
            return replace(base, snapshot_end_offset=snapshot.end_offset,
                           snapshot_epoch=snapshot.epoch)
        end = log.end_offset_for_epoch(req.last_fetched_epoch)
        if end.epoch != req.last_fetched_epoch or end.offset < req.fetch_offset:
            # Rule 3: the follower's log diverges; it truncates and fetches again.
            st.touch(req.replica_id, req.replica_directory_id, now_ms)
            below_start = end.offset <= log.start_offset()
            if snapshot is not None and snapshot.end_offset > 0 and below_start:
                return replace(base, snapshot_end_offset=snapshot.end_offset,
                               snapshot_epoch=snapshot.epoch)
            return replace(base, diverging_epoch=end.epoch, diverging_end_offset=end.offset)
        st.update_replica(req.replica_id, req.replica_directory_id, req.fetch_offset,
                          log.end_offset(), now_ms, req.replica_endpoint)
        st.update_local(log.flushed_offset(), now_ms)
        self._maybe_advance_high_watermark(st)
        records = log.read(req.fetch_offset, req.max_bytes)
        return replace(base, high_watermark=self._high_watermark, records=records)

    def _handle_fetch_snapshot(self, req: FetchSnapshotRequest, now_ms: int
                               ) -> FetchSnapshotResponse:
        error = self._leader_only_error(req.current_leader_epoch)
        st = self._state
        if error is not None or not isinstance(st, LeaderState):
            code, message = error or (Errors.NOT_LEADER_OR_FOLLOWER, "not the leader")
            return FetchSnapshotResponse(code, message, self._leader_id_or_none(), self.epoch,
                                         self.leader_endpoint or "")
        snapshot_id = SnapshotId(req.snapshot_end_offset, req.snapshot_epoch)
        base = FetchSnapshotResponse(
            leader_id=self._node_id, leader_epoch=st.epoch, leader_endpoint=self._endpoint,
            snapshot_end_offset=snapshot_id.end_offset, snapshot_epoch=snapshot_id.epoch)
        try:
            chunk, size = self._log.read_snapshot(snapshot_id, max(0, req.position),
                                                  req.max_bytes)
        except KeyError:
            return replace(base, error_code=Errors.SNAPSHOT_NOT_FOUND,
                           error_message=f"no snapshot {snapshot_id}")
        if req.position < 0 or req.position > size:
            return replace(base, error_code=Errors.POSITION_OUT_OF_RANGE,
                           error_message=f"position {req.position} outside 0..{size}")
        st.touch(req.replica_id, req.replica_directory_id, now_ms)  # alive for check-quorum
        return replace(base, size=size, position=req.position, unaligned_records=chunk)

    # -- response handlers ---------------------------------------------------------------------
    def _on_vote_response(self, req: VoteRequest, resp: object | None, now_ms: int) -> None:
        if not isinstance(resp, VoteResponse):
            return  # lost: the election timer starts another round
        if self._observe_epoch(resp.leader_epoch, resp.leader_id, "", now_ms):
            return
        st = self._state
        voter = ReplicaKey(req.voter_id, req.voter_directory_id)
        if voter not in self._electorate_keys():
            return  # rule 4: only voters' votes count
        if req.pre_vote:
            if not isinstance(st, ProspectiveState) or req.candidate_epoch != st.epoch + 1:
                return
            if not resp.vote_granted and resp.leader_id == req.voter_id and (
                    resp.leader_epoch == st.epoch):
                # The leader itself refused: it is alive, fetch from it again (KIP-996). Our own
                # voter set may be stale (rule 5), so a majority of refusals may never come.
                self._become_follower(st.epoch, resp.leader_id, "", now_ms,
                                      heard_from_leader=False)
                return
            (st.granted if resp.vote_granted and resp.error_code == 0 else st.rejected).add(voter)
            if self._has_majority(st.granted):
                self._become_candidate(now_ms)
            elif st.leader_id is not None and self._cannot_win(st.rejected):
                # KIP-996: a majority still hears the leader: go back to fetching from it.
                self._become_follower(st.epoch, st.leader_id, "", now_ms, heard_from_leader=False)
            return
        if not isinstance(st, CandidateState) or req.candidate_epoch != st.epoch:
            return
        (st.granted if resp.vote_granted and resp.error_code == 0 else st.rejected).add(voter)
        if self._has_majority(st.granted):
            self._become_leader(now_ms)
        else:
            self._maybe_back_off(st, now_ms)

    def _on_begin_quorum_epoch_response(self, req: BeginQuorumEpochRequest, resp: object | None,
                                        now_ms: int) -> None:
        if isinstance(resp, BeginQuorumEpochResponse) and self._observe_epoch(
                resp.leader_epoch, resp.leader_id, "", now_ms):
            return
        st = self._state
        if not isinstance(st, LeaderState) or req.leader_epoch != st.epoch:
            return
        key = ReplicaKey(req.voter_id, req.voter_directory_id)
        if key not in st.unacked_begin_epoch:
            return
        if isinstance(resp, BeginQuorumEpochResponse) and resp.error_code == 0:
            del st.unacked_begin_epoch[key]
        else:  # rule 4: retry until the voter accepts
            st.unacked_begin_epoch[key] = now_ms + self._config.retry_backoff_ms

    def _on_end_quorum_epoch_response(self, dest_node_id: int, req: EndQuorumEpochRequest,
                                      resp: object | None, now_ms: int) -> None:
        if isinstance(resp, EndQuorumEpochResponse) and self._observe_epoch(
                resp.leader_epoch, resp.leader_id, "", now_ms):
            return
        st = self._state
        if isinstance(st, ResignedState) and isinstance(resp, EndQuorumEpochResponse) and (
                resp.error_code == 0 and req.leader_epoch == st.epoch):
            st.unacked_voters = {k for k in st.unacked_voters if k.id != dest_node_id}

    def _fetch_backoff(self, now_ms: int) -> None:
        self._next_fetch_ms = now_ms + self._config.retry_backoff_ms
        self._bootstrap_index += 1

    def _on_fetch_response(self, req: FetchRequest, resp: object | None, now_ms: int) -> None:
        if req is not self._inflight_fetch:
            if isinstance(resp, FetchResponse) and resp.error_code != 0:
                self._observe_epoch(resp.leader_epoch, resp.leader_id, resp.leader_endpoint,
                                    now_ms)
            return  # a duplicate, or an answer to a fetch from before a leader change
        self._inflight_fetch = None
        if not isinstance(resp, FetchResponse):
            self._fetch_backoff(now_ms)
            return
        if resp.error_code != 0:
            if not self._observe_epoch(resp.leader_epoch, resp.leader_id, resp.leader_endpoint,
                                       now_ms):
                self._fetch_backoff(now_ms)
            return
        if self._observe_epoch(resp.leader_epoch, resp.leader_id, resp.leader_endpoint, now_ms):
            return
        st = self._state
        if not isinstance(st, FollowerState) or (st.epoch, st.leader_id) != (
                resp.leader_epoch, resp.leader_id):
            return
        st.last_fetch_success_ms = now_ms
        st.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        st.leader_lost = False
        self._maybe_update_voter(st, now_ms)
        log = self._log
        if resp.diverging_end_offset >= 0:
            self._truncate_to_diverging(OffsetAndEpoch(resp.diverging_end_offset,
                                                       resp.diverging_epoch))
        elif resp.snapshot_end_offset >= 0:
            snapshot_id = SnapshotId(resp.snapshot_end_offset, resp.snapshot_epoch)
            self._snapshot_download = (snapshot_id, bytearray())
            self._send_fetch_snapshot(st, now_ms)
        elif resp.records:
            if req.fetch_offset != log.end_offset():
                return
            raw = self._records_from(resp.records, log.end_offset())
            if raw:
                log.append_as_follower(raw)
                self._scan_voters(raw, self._history, 0)
                self._awaiting_flush = True  # report the new offset only once durable (rule 2)
                self._out.flush = True
            self._update_follower_high_watermark(resp.high_watermark)
        else:
            self._update_follower_high_watermark(resp.high_watermark)

    @staticmethod
    def _records_from(raw: bytes, offset: int) -> bytes:
        """The batches at and after offset (a read may start with a batch below it)."""
        position = 0
        while position < len(raw):
            header = read_header(raw, position)
            if header.base_offset >= offset:
                return raw[position:] if header.base_offset == offset else b""
            position += header.size
        return b""

    def _update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        hwm = min(leader_high_watermark, self._log.end_offset())
        self._high_watermark = max(self._high_watermark, hwm)

    def _truncate_to_diverging(self, diverging: OffsetAndEpoch) -> None:
        """Rule 3, Kafka's truncateToEndOffset: cut at the end of the last epoch we share."""
        log = self._log
        local = log.end_offset_for_epoch(diverging.epoch)
        if local.epoch == diverging.epoch:
            target = min(local.offset, diverging.offset)
        else:
            target = local.offset
        target = max(target, log.start_offset())
        if target < log.end_offset():
            log.truncate_to(target)
            self._history.truncate_to(target)  # rule 5: an uncommitted voter change is undone
            self._awaiting_flush = True
            self._out.flush = True

    def _send_fetch_snapshot(self, st: FollowerState, now_ms: int) -> None:
        assert self._snapshot_download is not None
        snapshot_id, data = self._snapshot_download
        req = FetchSnapshotRequest(
            replica_id=self._node_id, current_leader_epoch=st.epoch,
            snapshot_end_offset=snapshot_id.end_offset, snapshot_epoch=snapshot_id.epoch,
            position=len(data), max_bytes=self._config.fetch_snapshot_max_bytes,
            replica_directory_id=self._directory_id, cluster_id=self._config.cluster_id)
        self._inflight_fetch = req
        self._inflight_sent_ms = now_ms
        self._send(st.leader_id, req)

    def _on_fetch_snapshot_response(self, req: FetchSnapshotRequest, resp: object | None,
                                    now_ms: int) -> None:
        if req is not self._inflight_fetch:
            return
        self._inflight_fetch = None
        if not isinstance(resp, FetchSnapshotResponse):
            self._fetch_backoff(now_ms)  # the download resumes at the same position
            return
        if resp.error_code != 0:
            self._snapshot_download = None
            if not self._observe_epoch(resp.leader_epoch, resp.leader_id, resp.leader_endpoint,
                                       now_ms):
                self._fetch_backoff(now_ms)
            return
        st = self._state
        download = self._snapshot_download
        if (not isinstance(st, FollowerState) or download is None
                or (st.epoch, st.leader_id) != (resp.leader_epoch, resp.leader_id)):
            return
        snapshot_id, data = download
        if (resp.snapshot_end_offset, resp.snapshot_epoch) != snapshot_id or (
                resp.position != len(data)):
            self._snapshot_download = None
            return
        st.last_fetch_success_ms = now_ms
        st.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        st.leader_lost = False
        self._maybe_update_voter(st, now_ms)
        data.extend(resp.unaligned_records)
        if len(data) < resp.size and resp.unaligned_records:
            self._send_fetch_snapshot(st, now_ms)
            return
        self._snapshot_download = None
        if len(data) != resp.size:
            return
        self._log.install_snapshot(snapshot_id, bytes(data))
        self._history = self._load_voter_history()
        self._high_watermark = max(self._high_watermark, snapshot_id.end_offset)
        self._awaiting_flush = True
        self._out.flush = True

    # -- fetching ------------------------------------------------------------------------------
    def _fetches_now(self) -> bool:
        st = self._state
        if isinstance(st, FollowerState):
            return True
        return isinstance(st, UnattachedState) and not self.is_voter and bool(
            self._bootstrap_addresses())

    def _bootstrap_addresses(self) -> list[str]:
        if self._config.bootstrap_servers:
            return list(self._config.bootstrap_servers)
        return [a for a in (self.voters.endpoint(k.id) for k in self.voters) if a]

    def _inflight_timeout_ms(self) -> int:
        return self._config.request_timeout_ms + self._config.fetch_max_wait_ms

    def _poll_fetch(self, now_ms: int) -> None:
        """Send the next Fetch when none is in flight and the last append is durable."""
        if not self._fetches_now():
            return
        if self._inflight_fetch is not None:
            if now_ms < self._inflight_sent_ms + self._inflight_timeout_ms():
                return
            self._inflight_fetch = None  # the runtime never answered: treat it as lost
        if self._awaiting_flush or now_ms < self._next_fetch_ms:
            return
        st = self._state
        if isinstance(st, FollowerState) and self._snapshot_download is not None:
            self._send_fetch_snapshot(st, now_ms)
            return
        req = FetchRequest(
            replica_id=self._node_id, replica_directory_id=self._directory_id,
            fetch_offset=self._log.end_offset(), last_fetched_epoch=self._log.last_fetched_epoch(),
            current_leader_epoch=self.epoch, max_wait_ms=self._config.fetch_max_wait_ms,
            max_bytes=self._config.fetch_max_bytes, cluster_id=self._config.cluster_id,
            replica_endpoint=self._endpoint)
        self._inflight_fetch = req
        self._inflight_sent_ms = now_ms
        if isinstance(st, FollowerState):
            self._send(st.leader_id, req)
        else:
            addresses = self._bootstrap_addresses()
            self._send(-1, req, addresses[self._bootstrap_index % len(addresses)])


def _error_response(request: object, code: Errors, message: str) -> object:
    kinds: dict[type, type] = {
        VoteRequest: VoteResponse, BeginQuorumEpochRequest: BeginQuorumEpochResponse,
        EndQuorumEpochRequest: EndQuorumEpochResponse, FetchRequest: FetchResponse,
        FetchSnapshotRequest: FetchSnapshotResponse, DescribeQuorumRequest: DescribeQuorumResponse,
        AddRaftVoterRequest: AddRaftVoterResponse,
        RemoveRaftVoterRequest: RemoveRaftVoterResponse,
        UpdateRaftVoterRequest: UpdateRaftVoterResponse,
    }
    return kinds[type(request)](error_code=int(code), error_message=message)
