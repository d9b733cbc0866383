"""KIP-853 voter changes on the leader, after Kafka's AddVoterHandler, RemoveVoterHandler and
UpdateVoterHandler: each request is judged here against the voter set in force and the
leader's progress, and the answer is either a named error or the new voter set to append.
RaftReplica appends it (`_append_voters`: in force at once, rule 5) and answers. Rules: 4 (a
voter is its full key, id and directory id), 5 (one uncommitted change at a time, only after
the leader committed in its epoch; a new voter must be caught up)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafkawire.constants import ZERO_UUID
from kafkawire.errors import Errors
from raft.core.leader_state import LeaderState
from raft.core.messages import (
    AddRaftVoterRequest,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    directory_id,
    listeners_of,
    update_raft_voter_request,
)
from raft.core.replica_key import ReplicaKey
from raft.core.voter_set import VoterSet, VoterSetHistory

# The kraft.version this replica writes (KRaftVersionRecord 1: voters in the log, KIP-853).
KRAFT_VERSION = 1


@dataclass(frozen=True, slots=True)
class VoterChange:
    """A refused change (error, message), else the set to append (None: nothing changes)."""

    error: Errors = Errors.NONE
    message: str = ""
    new_voters: VoterSet | None = None


@dataclass(frozen=True, slots=True)
class LeaderView:
    """What the leader knows when it judges a change."""

    node_id: int
    state: LeaderState
    voters: VoterSet
    history: VoterSetHistory
    high_watermark: int
    log_end_offset: int
    default_listener_name: str


def blocked(view: LeaderView) -> str | None:
    """Why a voter change must wait (REQUEST_TIMED_OUT once the request times out), rule 5."""
    if view.high_watermark <= view.state.epoch_start_offset:
        # The fix for single-server changes: first commit an entry of our own epoch.
        return f"leader {view.node_id} has not committed in epoch {view.state.epoch} yet"
    if view.history.has_uncommitted_change(view.high_watermark):
        return (f"the voter change at offset {view.history.latest_offset()} is not "
                f"committed (high watermark {view.high_watermark})")
    return None


def add_voter(view: LeaderView, req: AddRaftVoterRequest, max_lag_records: int,
              fetched_since_ms: int) -> VoterChange:
    """Kafka's order (KafkaRaftClient.handleAddVoterRequest, then AddVoterHandler): a valid
    key, the quorum's listener among the given ones (INVALID_REQUEST before anything about
    the voter set), then wait (rule 5), duplicate, caught up."""
    key = _key(req)
    listeners = listeners_of(req)
    if key.id < 0 or key.directory_id == ZERO_UUID:
        return VoterChange(Errors.INVALID_REQUEST, "a voter needs an id and a directory id (rule 4)")
    if view.default_listener_name not in listeners:
        return VoterChange(
            Errors.INVALID_REQUEST,
            f"Add voter request didn't include the endpoint ({listeners}) for the "
            f"default listener {view.default_listener_name}")
    waiting = blocked(view)
    if waiting is not None:
        return VoterChange(Errors.REQUEST_TIMED_OUT, waiting)
    if key in view.voters:  # rule 5: judged on the full key, so a new disk of an id may join
        return VoterChange(Errors.DUPLICATE_VOTER, f"{key} is already a voter")
    st = view.state
    if not st.is_caught_up(key, view.log_end_offset, max_lag_records, fetched_since_ms):
        p = st.progress.get(key)
        where = "is not fetching" if p is None else (
            f"is at offset {p.log_end_offset}, last fetch at {p.last_fetch_ms} ms")
        return VoterChange(Errors.REQUEST_TIMED_OUT,
                           f"{key} {where}; the log end is {view.log_end_offset}: not caught up")
    return VoterChange(new_voters=view.voters.with_voter(key, listeners))


def _key(req: AddRaftVoterRequest | RemoveRaftVoterRequest | UpdateRaftVoterRequest
         ) -> ReplicaKey:
    return ReplicaKey(int(req.voter_id), directory_id(req.voter_directory_id))


def _refuse_change_of(view: LeaderView, key: ReplicaKey) -> VoterChange | None:
    """Remove and update name a voter in force, and wait for the last change (rule 5)."""
    waiting = blocked(view)
    if waiting is not None:
        return VoterChange(Errors.REQUEST_TIMED_OUT, waiting)
    if key not in view.voters:  # rule 4: the exact key
        return VoterChange(Errors.VOTER_NOT_FOUND, f"{key} is not a voter")
    return None


def remove_voter(view: LeaderView, req: RemoveRaftVoterRequest) -> VoterChange:
    key = _key(req)
    refused = _refuse_change_of(view, key)
    if refused is not None:
        return refused
    if len(view.voters) == 1:
        # Kafka's VoterSet.removeVoter refuses to empty the set and RemoveVoterHandler answers
        # that as VOTER_NOT_FOUND (rule 5: removing the last voter is refused).
        return VoterChange(Errors.VOTER_NOT_FOUND,
                           f"Cannot remove voter {key} from the set of voters {[key]}: "
                           "it is the last voter")
    return VoterChange(new_voters=view.voters.without_voter(key))


def update_voter(view: LeaderView, req: UpdateRaftVoterRequest) -> VoterChange:
    """A voter's listeners and kraft.version range replace its entry (Kafka's
    UpdateVoterHandler); unchanged listeners append nothing."""
    key = _key(req)
    refused = _refuse_change_of(view, key)
    if refused is not None:
        return refused
    listeners = listeners_of(req)
    if view.default_listener_name not in listeners:
        return VoterChange(Errors.INVALID_REQUEST,
                           f"listeners must include {view.default_listener_name}")
    feature = req.k_raft_version_feature
    low, high = int(feature.min_supported_version), int(feature.max_supported_version)
    if not low <= KRAFT_VERSION <= high:
        return VoterChange(Errors.INVALID_REQUEST,
                           f"kraft.version {KRAFT_VERSION} is outside {low}..{high}")
    if dict(view.voters.voters[key]) == listeners:
        return VoterChange()
    return VoterChange(new_voters=view.voters.with_voter(key, listeners))


def update_voter_request(voters: VoterSet, key: ReplicaKey, listener_name: str, endpoint: str,
                         epoch: int, cluster_id: str | None) -> UpdateRaftVoterRequest | None:
    """The follower's side (Kafka's, once per leader): an UpdateRaftVoter when the voter set
    has other listeners for this voter than it has; None when they match."""
    mine: Mapping[str, str] = {listener_name: endpoint}
    if dict(voters.voters[key]) == dict(mine):
        return None
    return update_raft_voter_request(epoch, key.id, key.directory_id, dict(mine), 0,
                                     KRAFT_VERSION, cluster_id)
