"""KIP-853 voter changes on the replica: the leader answers AddRaftVoter, RemoveRaftVoter and
UpdateRaftVoter (judged by raft.core.voter_changes, appended here: in force at once, rule 5),
and a follower tells its leader its listeners once per epoch (Kafka's UpdateRaftVoter)."""

from __future__ import annotations

from kafkawire.errors import Errors
from raft.core import voter_changes
from raft.core.control_records import encode_control
from raft.core.leader_state import LeaderState
from raft.core.leadership import Leadership
from raft.core.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    add_raft_voter_response,
    error_of,
    leader_of,
    remove_raft_voter_response,
    update_raft_voter_response,
)
from raft.core.quorum_state import FollowerState
from raft.core.voter_set import VoterSet


class Membership(Leadership):
    def _not_leader(self) -> tuple[int, str]:
        return Errors.NOT_LEADER_OR_FOLLOWER, f"{self._node_id} does not lead epoch {self.epoch}"

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
        st = self._leader()
        if st is None:
            return add_raft_voter_response(*self._not_leader())
        change = voter_changes.add_voter(self._leader_view(st), req,
                                         self._config.add_voter_max_lag_records,
                                         now_ms - self._config.fetch_timeout_ms)
        self._apply_voter_change(st, change, now_ms)
        return add_raft_voter_response(int(change.error), change.message)

    def _handle_remove_voter(self, req: RemoveRaftVoterRequest, now_ms: int
                             ) -> RemoveRaftVoterResponse:
        st = self._leader()
        if st is None:
            return remove_raft_voter_response(*self._not_leader())
        change = voter_changes.remove_voter(self._leader_view(st), req)
        self._apply_voter_change(st, change, now_ms)
        return remove_raft_voter_response(int(change.error), change.message)

    def _handle_update_voter(self, req: UpdateRaftVoterRequest, now_ms: int
                             ) -> UpdateRaftVoterResponse:
        """KIP-853 as Kafka's UpdateVoterHandler (voter_changes.update_voter); the answer does
        not wait for the commit, as in Kafka."""
        st = self._leader_of(int(req.current_leader_epoch))
        if not isinstance(st, LeaderState):
            return update_raft_voter_response(*self._error_answer(st), self.leader_endpoint or "")
        change = voter_changes.update_voter(self._leader_view(st), req)
        if change.new_voters is not None:
            # Unlike add/remove, the answer names no offset to wait for (Kafka's).
            self._append_voters(st, change.new_voters, now_ms)
        return update_raft_voter_response(int(change.error), self._node_id, st.epoch,
                                          self._endpoint)

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

    # -- on a follower -------------------------------------------------------------------------
    def _maybe_update_voter(self, st: FollowerState, now_ms: int) -> None:
        """Kafka's follower, once per leader: if the voter set has other listeners for this
        voter than it has, tell the leader (UpdateRaftVoter); retried on a later fetch."""
        if (self._key not in self.voters.voters or not self._endpoint or st.updated_leader
                or now_ms < st.next_update_voter_ms):
            return
        request = voter_changes.update_voter_request(
            self.voters, self._key, self._config.default_listener_name, self._endpoint,
            st.epoch, self._wire_cluster_id)
        if request is None:
            st.updated_leader = True
            return
        st.next_update_voter_ms = now_ms + self._config.request_timeout_ms
        self._send(st.leader_id, request)

    def _on_update_voter_response(self, req: UpdateRaftVoterRequest, resp: object | None,
                                  now_ms: int) -> None:
        if not isinstance(resp, UpdateRaftVoterResponse):
            return  # lost: the next fetch after next_update_voter_ms sends it again
        if error_of(resp) != 0:
            leader_id, leader_epoch, leader_endpoint = leader_of(resp)
            self._observe_epoch(leader_epoch, leader_id, leader_endpoint, now_ms)
            return
        st = self._follower()
        if st is not None and st.epoch == req.current_leader_epoch:
            st.updated_leader = True
