"""A leader's epoch (KIP-595): taking it (the LeaderChange record, BeginQuorumEpoch until every
voter accepts, rule 4), holding it (check-quorum, the high watermark, rules 2-3, 6) and leaving
it (EndQuorumEpoch naming the successors, Kafka's ResignedState); and the other side of both
messages, on a voter."""

from __future__ import annotations

from kafkawire.errors import Errors
from raft.core.control_records import (
    KRaftVersionRecord,
    LeaderChangeRecord,
    VotersRecord,
    encode_control,
)
from raft.core.leader_state import LeaderState, ReplicaProgress
from raft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ReplicaState,
    begin_quorum_epoch_request,
    begin_quorum_epoch_response,
    describe_quorum_response,
    directory_id,
    end_quorum_epoch_request,
    end_quorum_epoch_response,
    endpoint,
    error_of,
    leader_of,
    replica_state,
    the_partition,
)
from raft.core.quorum_state import CandidateState, ElectionState, ResignedState
from raft.core.replica_base import ReplicaBase
from raft.core.replica_key import ReplicaKey


class Leadership(ReplicaBase):
    def describe_quorum(self, now_ms: int) -> DescribeQuorumResponse:
        st = self._leader()
        if st is None:
            return describe_quorum_response(
                Errors.NOT_LEADER_OR_FOLLOWER, "not the quorum leader",
                leader_id=self._leader_id_or_none(), leader_epoch=self.epoch,
                endpoints=self._voter_endpoints())
        voters = self.voters
        st.update_local(self._log.flushed_offset(), now_ms)

        def state_of(p: ReplicaProgress) -> ReplicaState:
            if p.key == self._key:  # Kafka's RaftUtil.toReplicaState: now for the leader
                return replica_state(p.key.id, p.key.directory_id, self._log.end_offset(),
                                     now_ms, now_ms)
            return replica_state(p.key.id, p.key.directory_id, p.log_end_offset,
                                 p.last_fetch_ms, p.last_caught_up_ms)

        observers = st.described_observers(voters, now_ms)
        return describe_quorum_response(
            leader_id=self._node_id, leader_epoch=st.epoch, high_watermark=self._high_watermark,
            current_voters=[state_of(p) for p in st.voter_progress(voters)],
            observers=[state_of(p) for p in observers],
            endpoints=[*self._voter_endpoints(), *(
                (p.key.id, {self._config.default_listener_name: p.endpoint})
                for p in observers if p.endpoint)])

    def _voter_endpoints(self) -> list[tuple[int, dict[str, str]]]:
        return [(k.id, dict(e)) for k, e in self.voters.voters.items()]

    # -- taking the epoch ----------------------------------------------------------------------
    def _become_leader(self, st: CandidateState, now_ms: int) -> None:
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

    def _send_begin_quorum_epochs(self, st: LeaderState, now_ms: int) -> None:
        for voter, retry_at_ms in list(st.unacked_begin_epoch.items()):
            if now_ms >= retry_at_ms:
                self._send(voter.id, begin_quorum_epoch_request(
                    self._node_id, st.epoch, self._endpoint, voter.id, voter.directory_id,
                    self._wire_cluster_id, self._config.default_listener_name))
                # the response (or its timeout) brings the retry forward
                st.unacked_begin_epoch[voter] = now_ms + 2 * self._config.request_timeout_ms

    def _on_begin_quorum_epoch_response(self, req: BeginQuorumEpochRequest, resp: object | None,
                                        now_ms: int) -> None:
        answered = isinstance(resp, BeginQuorumEpochResponse)
        if answered:
            leader_id, leader_epoch, _ = leader_of(resp)
            if self._observe_epoch(leader_epoch, leader_id, "", now_ms):
                return
        st = self._leader()
        p = the_partition(req)
        if st is None or p.leader_epoch != st.epoch:
            return
        key = ReplicaKey(req.voter_id, directory_id(p.voter_directory_id))
        if key not in st.unacked_begin_epoch:
            return
        if answered and error_of(resp) == 0:
            del st.unacked_begin_epoch[key]
        else:  # rule 4: retry until the voter accepts
            st.unacked_begin_epoch[key] = now_ms + self._config.retry_backoff_ms

    # -- holding it ----------------------------------------------------------------------------
    def _tick_leader(self, st: LeaderState, now_ms: int) -> None:
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
            self._high_watermark_known = True
        if (not self.is_voter and self._high_watermark > self._history.latest_offset()
                and self._state is st):
            self._become_resigned(st, self._now_ms)  # rule 6: its removal committed

    # -- leaving it ----------------------------------------------------------------------------
    def _become_resigned(self, st: LeaderState, now_ms: int) -> None:
        voters = self.voters
        resigned = ResignedState(st.epoch, self._election_deadline(now_ms),
                                 {k for k in voters if k != self._key},
                                 st.successors_by_progress(voters), now_ms)
        self._state = resigned
        self._send_end_quorum_epoch(resigned, now_ms)

    def _send_end_quorum_epoch(self, st: ResignedState, now_ms: int) -> None:
        for voter in sorted(st.unacked_voters):
            self._send(voter.id, end_quorum_epoch_request(
                self._node_id, st.epoch, list(st.preferred_successors), self._wire_cluster_id,
                voter.id, voter.directory_id))
        st.next_send_ms = now_ms + self._config.request_timeout_ms

    def _on_end_quorum_epoch_response(self, dest_node_id: int, req: EndQuorumEpochRequest,
                                      resp: object | None, now_ms: int) -> None:
        if not isinstance(resp, EndQuorumEpochResponse):
            return
        leader_id, leader_epoch, _ = leader_of(resp)
        if self._observe_epoch(leader_epoch, leader_id, "", now_ms):
            return
        st = self._state
        if isinstance(st, ResignedState) and error_of(resp) == 0 and (
                the_partition(req).leader_epoch == st.epoch):
            st.unacked_voters = {k for k in st.unacked_voters if k.id != dest_node_id}

    # -- on a voter ---------------------------------------------------------------------------
    def _handle_begin_quorum_epoch(self, req: BeginQuorumEpochRequest, now_ms: int
                                   ) -> BeginQuorumEpochResponse:
        p = the_partition(req)
        leader_id, leader_epoch = int(p.leader_id), int(p.leader_epoch)
        refused = self._voter_refusal(leader_epoch, req.voter_id,
                                      directory_id(p.voter_directory_id))
        if refused is not None:
            return begin_quorum_epoch_response(*self._error_answer(refused))
        if leader_epoch == self.epoch and self.leader_id == self._node_id:
            # Another leader of our own epoch: rule 1 says there is none.
            return begin_quorum_epoch_response(Errors.INVALID_REQUEST, self._node_id,
                                               self.epoch)
        leader_endpoint = next((endpoint(e.host, int(e.port)) for e in req.leader_endpoints), "")
        self._observe_epoch(leader_epoch, leader_id, leader_endpoint, now_ms, from_leader=True)
        return begin_quorum_epoch_response(leader_id=leader_id, leader_epoch=self.epoch)

    def _handle_end_quorum_epoch(self, req: EndQuorumEpochRequest, now_ms: int
                                 ) -> EndQuorumEpochResponse:
        p = the_partition(req)
        leader_id, leader_epoch = int(p.leader_id), int(p.leader_epoch)
        if leader_epoch < self.epoch:
            return end_quorum_epoch_response(*self._error_answer(Errors.FENCED_LEADER_EPOCH))
        # Kafka's names no receiver: we find our own key among the preferred candidates, and
        # check it (rule 4) only there, as Kafka's handleEndQuorumEpochRequest does.
        successors = [int(c.candidate_id) for c in p.preferred_candidates]
        mine = next((c for c in p.preferred_candidates if int(c.candidate_id) == self._node_id),
                    None)
        if mine is not None and not self._key_matches(
                self._node_id, directory_id(mine.candidate_directory_id)):
            return end_quorum_epoch_response(*self._error_answer(Errors.INVALID_VOTER_KEY))
        if leader_epoch > self.epoch:
            self._become_unattached(leader_epoch, now_ms)

        def delay_ms() -> int:
            # The leader is leaving: the most caught-up successor runs first.
            if self._node_id in successors:
                step_ms = self._config.election_backoff_max_ms // max(1, len(successors))
                return (successors.index(self._node_id) * step_ms
                        + int(self._random() * max(1, step_ms // 2)))
            return self._config.election_backoff_max_ms + int(
                self._random() * self._config.election_timeout_ms)

        self._state.stand_by_for_successor(leader_id, now_ms, delay_ms)
        return end_quorum_epoch_response(leader_id=-1, leader_epoch=self.epoch)
