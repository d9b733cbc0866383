"""Elections (KIP-595, KIP-996 pre-vote, rules 1, 4 and 7): when a voter stands, the pre-vote
and vote rounds on both sides, backing off after a lost or split round; and the tick of each
role that waits for an election (Unattached, Prospective, Candidate, Resigned)."""

from __future__ import annotations

from raft.core.membership import Membership
from raft.core.messages import (
    VoteRequest,
    VoteResponse,
    answered_partition,
    directory_id,
    error_of,
    leader_of,
    the_partition,
    vote_request,
    vote_response,
)
from raft.core.quorum_state import (
    NO_DEADLINE_MS,
    CandidateState,
    ElectionState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)
from raft.core.replica_key import ReplicaKey


class Election(Membership):
    # -- the tick of each role that waits for an election --------------------------------------
    def _tick_unattached(self, st: UnattachedState, now_ms: int) -> None:
        if self._may_stand and now_ms >= st.election_deadline_ms:
            self._become_prospective(now_ms)

    def _tick_prospective(self, st: ProspectiveState, now_ms: int) -> None:
        if not self._may_stand:
            self._stop_campaigning(st, now_ms)
        elif now_ms >= st.election_deadline_ms:
            self._become_prospective(now_ms)

    def _tick_candidate(self, st: CandidateState, now_ms: int) -> None:
        if not self._may_stand:
            self._stop_campaigning(st, now_ms)
        elif now_ms >= st.election_deadline_ms:
            self._back_off(st, now_ms)  # lost or split: pre-vote again later (rule 7)

    def _tick_resigned(self, st: ResignedState, now_ms: int) -> None:
        if now_ms >= st.election_deadline_ms:
            self._state = UnattachedState(st.epoch, self._key, now_ms)
            if self._may_stand:
                self._become_prospective(now_ms)
        elif st.unacked_voters and now_ms >= st.next_send_ms:
            self._send_end_quorum_epoch(st, now_ms)

    def _stop_campaigning(self, st: ProspectiveState | CandidateState, now_ms: int) -> None:
        """Rule 4: a replica that learned it is no longer a voter stops campaigning."""
        self._state = UnattachedState(st.epoch, self._voted_key_in(st.epoch),
                                      self._election_deadline(now_ms))

    # -- standing ------------------------------------------------------------------------------
    def _leader_lost_jitter_ms(self) -> int:
        return int(self._random() * self._config.leader_lost_jitter_max_ms)

    def _lose_leader(self, st: FollowerState, now_ms: int, stand_at_ms: int) -> None:
        """Rule 7: we no longer hear the leader, so we grant others' pre-votes from now on, and
        stand ourselves at stand_at_ms (a random moment, so two survivors rarely tie)."""
        st.leader_lost = True
        st.last_fetch_success_ms = -NO_DEADLINE_MS
        st.fetch_deadline_ms = stand_at_ms
        if now_ms >= stand_at_ms:
            self._become_prospective(now_ms)

    def _become_prospective(self, now_ms: int) -> None:
        """Rule 7: ask for pre-votes at epoch + 1 without bumping or persisting our epoch."""
        st = self._state
        if not self._may_stand or not st.may_pre_vote:
            return
        prospective = ProspectiveState(st.epoch, self._voted_key_in(st.epoch),
                                       st.last_leader_id(), self._election_deadline(now_ms))
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
        return vote_request(
            candidate_epoch, self._node_id, self._directory_id, voter.id, voter.directory_id,
            self._log.last_fetched_epoch(), self._log.end_offset(), pre_vote,
            self._wire_cluster_id)

    def _become_candidate(self, now_ms: int) -> None:
        epoch = self.epoch + 1
        candidate = CandidateState(epoch, self._election_deadline(now_ms))
        candidate.granted.add(self._key)
        self._state = candidate
        self._persist(ElectionState(epoch, None, self._key))  # rule 1: durable before Vote
        if self._has_majority(candidate.granted):
            self._become_leader(candidate, now_ms)
            return
        for voter in self._electorate_keys():  # rule 4: only voters are asked and counted
            if voter != self._key:
                self._send(voter.id, self._vote_request(voter, epoch, False))

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

    # -- the voter's side ----------------------------------------------------------------------
    def _handle_vote(self, req: VoteRequest, now_ms: int) -> VoteResponse:
        p = the_partition(req)
        candidate_epoch = int(p.replica_epoch)
        refused = self._voter_refusal(candidate_epoch, req.voter_id,
                                      directory_id(p.voter_directory_id))
        if refused is not None:
            return vote_response(*self._error_answer(refused))
        log_ok = self._log_is_up_to_date(p.last_offset_epoch, p.last_offset)
        if p.pre_vote:
            # KIP-996 as Kafka's handleVoteRequest does it: a prospective replica asks at its
            # epoch + 1 without bumping it, so the epoch it stands in is candidate_epoch - 1. If
            # that is above ours, we move to it (Unattached, rule 1: forward only), as on any
            # higher epoch; else a prospective replica left at a higher epoch by a lost election
            # would be refused for ever (shorter log, live leader) and never rejoin.
            if candidate_epoch - 1 > self.epoch:
                self._become_unattached(candidate_epoch - 1, now_ms)
            # Rule 7: refuse while a leader is alive, so a partitioned replica cannot depose it.
            granted = log_ok and not self._has_live_leader(now_ms)
            return vote_response(leader_id=self._leader_id_or_none(), leader_epoch=self.epoch,
                                 vote_granted=granted)
        if candidate_epoch > self.epoch:
            self._become_unattached(candidate_epoch, now_ms)
        candidate = ReplicaKey(int(p.replica_id), directory_id(p.replica_directory_id))
        st = self._state
        granted = False
        # Only a replica that knows no leader and is not itself standing in this epoch votes.
        if isinstance(st, (UnattachedState, ProspectiveState)):
            if st.voted_key == candidate:
                granted = True
            elif st.voted_key is None and log_ok:
                granted = True
                self._state = UnattachedState(st.epoch, candidate, self._election_deadline(now_ms))
                self._persist(ElectionState(st.epoch, None, candidate))  # rule 1
        return vote_response(leader_id=self._leader_id_or_none(), leader_epoch=self.epoch,
                             vote_granted=granted)

    # -- the candidate's side ------------------------------------------------------------------
    def _on_vote_response(self, req: VoteRequest, resp: object | None, now_ms: int) -> None:
        if not isinstance(resp, VoteResponse):
            return  # lost: the election timer starts another round
        leader_id, leader_epoch, _ = leader_of(resp)
        if self._observe_epoch(leader_epoch, leader_id, "", now_ms):
            return
        p = the_partition(req)
        voter = ReplicaKey(int(req.voter_id), directory_id(p.voter_directory_id))
        if voter not in self._electorate_keys():
            return  # rule 4: only voters' votes count
        answer = answered_partition(resp)
        vote_granted = answer is not None and bool(answer.vote_granted)
        granted = vote_granted and error_of(resp) == 0
        st = self._state
        if p.pre_vote:
            if isinstance(st, ProspectiveState) and p.replica_epoch == st.epoch + 1:
                if not vote_granted and leader_id == voter.id and leader_epoch == st.epoch:
                    # The leader itself refused: it is alive, fetch from it again (KIP-996).
                    # Our own voter set may be stale (rule 5): a majority may never refuse.
                    self._become_follower(st.epoch, leader_id, "", now_ms,
                                          heard_from_leader=False)
                else:
                    self._on_pre_vote_response(st, voter, granted, now_ms)
            return
        if not isinstance(st, CandidateState) or p.replica_epoch != st.epoch:
            return
        (st.granted if granted else st.rejected).add(voter)
        if self._has_majority(st.granted):
            self._become_leader(st, now_ms)
        else:
            self._maybe_back_off(st, now_ms)

    def _on_pre_vote_response(self, st: ProspectiveState, voter: ReplicaKey, granted: bool,
                              now_ms: int) -> None:
        (st.granted if granted else st.rejected).add(voter)
        if self._has_majority(st.granted):
            self._become_candidate(now_ms)
        elif st.leader_id is not None and self._cannot_win(st.rejected):
            # KIP-996: a majority still hears the leader: go back to fetching from it.
            self._become_follower(st.epoch, st.leader_id, "", now_ms, heard_from_leader=False)
