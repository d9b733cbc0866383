"""What every part of the Raft replica shares: its configuration, the result it hands the
runtime, its one EpochState (raft.core.quorum_state), the read-only view, the electorate, and the
moves every role makes (persist, send, observe a newer epoch or leader).

RaftReplica (raft/core/raft_replica.py) is built up in layers, one job a module, after Kafka's
KafkaRaftClient and etcd's raft step functions: this base, then leadership.py (begin/end quorum
epoch, the high watermark), membership.py (KIP-853 voter changes), election.py (pre-vote, vote)
and replication.py (Fetch and FetchSnapshot, both sides).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkawire.constants import ZERO_UUID
from kafkawire.errors import Errors
from raft.core.leader_state import LeaderState
from raft.core.quorum_state import (
    NO_DEADLINE_MS,
    ElectionState,
    EpochState,
    FollowerState,
    ResignedState,
    UnattachedState,
)
from raft.core.replica_key import ReplicaKey
from raft.core.replicated_log import ReplicatedLog
from raft.core.voter_log import load_voter_history
from raft.core.voter_set import VoterSet
from storage.core.offset_and_epoch import SnapshotId


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
    # Kafka's followersAlwaysFlush: a controller fsyncs what it fetched before it fetches again
    # even as an observer (it may be added as a voter, and the leader counts a voter's fetch
    # offset as durable, rule 2); a broker's observer does not (Kafka's KafkaRaftManager passes
    # process.roles contains controller): its log is a copy it fetches again after a crash.
    followers_always_flush: bool = True


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


class ReplicaBase:
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
        self._history = load_voter_history(log)
        self._high_watermark = 0
        # Kafka's highWatermark() is empty until the node has heard one from a leader (or is the
        # leader that advanced it): a restarted node does not know what is committed yet.
        self._high_watermark_known = False
        self._persisted = election_state or ElectionState(0)
        self._inflight_fetch: object | None = None  # the Fetch or FetchSnapshot in flight
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
                                  es.voted_key, now_ms + config.fetch_timeout_ms, -NO_DEADLINE_MS,
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
        return self._state.leader_of(self._node_id)

    @property
    def leader_endpoint(self) -> str | None:
        leader = self.leader_id
        if leader is None:
            return None
        if leader == self._node_id:
            return self._endpoint
        follower = self._follower()
        known = follower.leader_endpoint if follower is not None else ""
        return known or self.voters.endpoint(leader)

    @property
    def role(self) -> str:
        st = self._state
        if st.observes and not self._may_stand:
            return "Observer"  # a voter whose removal is uncommitted still campaigns: not one
        return st.name

    @property
    def state(self) -> EpochState:
        return self._state

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def high_watermark_known(self) -> bool:
        """A leader's high watermark reached this node since it started (a fetch answer that
        carried one, a snapshot fetched from it) or this node advanced it as the leader."""
        return self._high_watermark_known

    @property
    def voters(self) -> VoterSet:
        return self._history.latest()

    @property
    def is_voter(self) -> bool:
        return self._key in self._history.latest()

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

    # -- the role this replica holds (Kafka's QuorumState.maybeLeaderState and friends) --------
    def _leader(self) -> LeaderState | None:
        st = self._state
        return st if isinstance(st, LeaderState) else None

    def _follower(self) -> FollowerState | None:
        st = self._state
        return st if isinstance(st, FollowerState) else None

    # -- the electorate ------------------------------------------------------------------------
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

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def _wire_cluster_id(self) -> str | None:
        """The cluster id our requests name (none configured: null, which is not checked)."""
        return self._config.cluster_id or None

    def _persist(self, state: ElectionState) -> None:
        """Rule 1: the runtime writes this before sending anything in the same result."""
        if state.epoch < self._persisted.epoch:
            raise AssertionError(f"epoch would go back from {self._persisted.epoch} to {state}")
        if state != self._persisted:
            self._persisted = state
            self._out.persist = state

    def _election_deadline(self, now_ms: int) -> int:
        timeout_ms = self._config.election_timeout_ms
        return now_ms + timeout_ms + int(self._random() * timeout_ms)

    def _leader_id_or_none(self) -> int:
        leader = self.leader_id
        return -1 if leader is None else leader

    def _address_of(self, node_id: int) -> str | None:
        follower = self._follower()
        if follower is not None and follower.leader_id == node_id and follower.leader_endpoint:
            return follower.leader_endpoint
        return self.voters.endpoint(node_id)

    def _send(self, dest_node_id: int, request: object, address: str | None = None) -> None:
        self._out.send.append(Outbound(dest_node_id, request,
                                       address if address is not None
                                       else self._address_of(dest_node_id)))

    def _error_answer(self, error: int) -> tuple[int, int, int]:
        """What an error answer starts with: the error, then the leader we know (-1: none) and
        our epoch, so that the sender catches up."""
        return error, self._leader_id_or_none(), self.epoch

    def _key_matches(self, voter_id: int, voter_directory_id: uuid.UUID) -> bool:
        """Rule 4: the request names us (a zero directory id names any of our disks)."""
        return voter_id == self._node_id and voter_directory_id in (ZERO_UUID, self._directory_id)

    def _voter_refusal(self, epoch: int, voter_id: int, voter_directory_id: uuid.UUID
                       ) -> Errors | None:
        """Why a voter refuses a request of `epoch` naming it (Vote, BeginQuorumEpoch): the
        epoch is older than ours (rule 1) or the request names another voter (rule 4)."""
        if epoch < self.epoch:
            return Errors.FENCED_LEADER_EPOCH
        if not self._key_matches(voter_id, voter_directory_id):
            return Errors.INVALID_VOTER_KEY
        return None

    def _leader_of(self, current_leader_epoch: int) -> LeaderState | Errors:
        """Our LeaderState if we lead `current_leader_epoch`; else the error a request only a
        leader serves (Fetch, FetchSnapshot, UpdateRaftVoter) is answered with."""
        st = self._leader()
        if current_leader_epoch < self.epoch:
            return Errors.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        return Errors.NOT_LEADER_OR_FOLLOWER if st is None else st

    def _log_is_up_to_date(self, last_offset_epoch: int, last_offset: int) -> bool:
        """Seed 003 / KIP-595: the candidate's (epoch, end offset) is at least ours."""
        return (last_offset_epoch, last_offset) >= (self._log.last_fetched_epoch(),
                                                    self._log.end_offset())

    def _has_live_leader(self, now_ms: int) -> bool:
        return self._state.has_live_leader(now_ms, self._config.fetch_timeout_ms)

    def _voted_key_in(self, epoch: int) -> ReplicaKey | None:
        st = self._state
        return st.voted_key_of(self._key) if st.epoch == epoch else None

    # -- moving to a newer epoch or leader (rule 1: never backwards) ---------------------------
    def _become_unattached(self, epoch: int, now_ms: int) -> None:
        """A higher epoch without a known leader; nothing voted in it yet."""
        self._state = UnattachedState(epoch, None, self._election_deadline(now_ms))
        self._persist(ElectionState(epoch, None, None))
        self._reset_fetching(now_ms)

    def _become_follower(self, epoch: int, leader_id: int, endpoint: str, now_ms: int,
                         heard_from_leader: bool = True) -> None:
        voted = self._voted_key_in(epoch)
        follower = self._follower()
        last_heard_ms = now_ms if heard_from_leader else (
            follower.last_fetch_success_ms if follower is not None else -NO_DEADLINE_MS)
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
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self._node_id:
                self._become_follower(epoch, leader_id, endpoint, now_ms, from_leader)
            else:
                self._become_unattached(epoch, now_ms)
            return True
        if leader_id < 0 or leader_id == self._node_id:
            return False
        if not self._state.accepts_leader(leader_id, endpoint, from_leader):
            return False
        self._become_follower(epoch, leader_id, endpoint, now_ms, from_leader)
        return True

