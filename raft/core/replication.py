"""Replication of the metadata log (KIP-595's pull model, rules 2-3 and 7): the leader answers
Fetch (records, a diverging epoch to truncate to, or a snapshot to fetch) and FetchSnapshot; a
follower, or an observer through the bootstrap servers, keeps one Fetch in flight, appends what
comes back once it is durable, truncates on divergence and downloads snapshots; and the tick of
a follower (the fetch timeout)."""

from __future__ import annotations

from typing import Any

from kafkawire.errors import Errors
from raft.core.election import Election
from raft.core.leader_state import LeaderState
from raft.core.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    answered_partition,
    directory_id,
    error_of,
    fetch_request,
    fetch_response,
    fetch_snapshot_request,
    fetch_snapshot_response,
    leader_of,
    the_partition,
)
from raft.core.quorum_state import FollowerState, UnattachedState
from raft.core.voter_log import load_voter_history, scan_voters
from storage.core.offset_and_epoch import OffsetAndEpoch, SnapshotId
from storage.core.record_batch import read_header


class Replication(Election):
    def _tick_follower(self, st: FollowerState, now_ms: int) -> None:
        if now_ms >= st.fetch_deadline_ms:
            if not self._may_stand:
                self._rediscover_leader(st, now_ms)
            elif st.leader_lost:
                self._become_prospective(now_ms)
            else:  # the fetch timeout: stand after a random jitter
                self._lose_leader(st, now_ms, now_ms + self._leader_lost_jitter_ms())

    def _rediscover_leader(self, st: FollowerState, now_ms: int) -> None:
        """An observer lost its leader: look for it again through the bootstrap servers."""
        self._state = UnattachedState(st.epoch, st.voted_key, self._election_deadline(now_ms))
        self._inflight_fetch = None
        self._next_fetch_ms = now_ms

    # -- the leader's side ---------------------------------------------------------------------
    def _handle_fetch(self, req: FetchRequest, now_ms: int) -> FetchResponse:
        p = the_partition(req)
        st = self._leader_of(int(p.current_leader_epoch))
        if not isinstance(st, LeaderState):
            return fetch_response(*self._error_answer(st), self.leader_endpoint or "")
        log = self._log
        replica_id = int(req.replica_state.replica_id)
        replica_directory_id = directory_id(p.replica_directory_id)
        fetch_offset, last_fetched_epoch = int(p.fetch_offset), int(p.last_fetched_epoch)
        base: dict[str, Any] = dict(
            leader_id=self._node_id, leader_epoch=st.epoch, leader_endpoint=self._endpoint,
            log_start_offset=log.start_offset(), high_watermark=self._high_watermark)
        snapshot = log.latest_snapshot_id()
        if fetch_offset < log.start_offset():
            st.touch(replica_id, replica_directory_id, now_ms)
            if snapshot is None:
                return fetch_response(Errors.OFFSET_OUT_OF_RANGE, **base)
            return fetch_response(snapshot_end_offset=snapshot.end_offset,
                                  snapshot_epoch=snapshot.epoch, **base)
        end = log.end_offset_for_epoch(last_fetched_epoch)
        if end.epoch != last_fetched_epoch or end.offset < fetch_offset:
            # Rule 3: the follower's log diverges; it truncates and fetches again.
            st.touch(replica_id, replica_directory_id, now_ms)
            below_start = end.offset <= log.start_offset()
            if snapshot is not None and snapshot.end_offset > 0 and below_start:
                return fetch_response(snapshot_end_offset=snapshot.end_offset,
                                      snapshot_epoch=snapshot.epoch, **base)
            return fetch_response(diverging_epoch=end.epoch, diverging_end_offset=end.offset,
                                  **base)
        # Kafka's Fetch names no endpoint: a node id the voter set knows listens there (a
        # replacement disk of a voter, seed 003); any other observer (a broker) has none.
        replica_endpoint = (self.voters.endpoint(replica_id) or "") if replica_id >= 0 else ""
        st.update_replica(replica_id, replica_directory_id, fetch_offset, log.end_offset(),
                          now_ms, replica_endpoint)
        st.update_local(log.flushed_offset(), now_ms)
        self._maybe_advance_high_watermark(st)
        records = log.read(fetch_offset, min(int(req.max_bytes), int(p.partition_max_bytes)))
        base["high_watermark"] = self._high_watermark
        return fetch_response(records=records, **base)

    def _handle_fetch_snapshot(self, req: FetchSnapshotRequest, now_ms: int
                               ) -> FetchSnapshotResponse:
        p = the_partition(req)
        st = self._leader_of(int(p.current_leader_epoch))
        if not isinstance(st, LeaderState):
            return fetch_snapshot_response(*self._error_answer(st), self.leader_endpoint or "")
        snapshot_id = SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch))
        position = int(p.position)
        base: dict[str, Any] = dict(
            leader_id=self._node_id, leader_epoch=st.epoch, leader_endpoint=self._endpoint,
            snapshot_end_offset=snapshot_id.end_offset, snapshot_epoch=snapshot_id.epoch)
        try:
            chunk, size = self._log.read_snapshot(snapshot_id, max(0, position),
                                                  int(req.max_bytes))
        except KeyError:
            return fetch_snapshot_response(Errors.SNAPSHOT_NOT_FOUND, **base)
        if position < 0 or position > size:
            return fetch_snapshot_response(Errors.POSITION_OUT_OF_RANGE, **base)
        # alive for check-quorum
        st.touch(int(req.replica_id), directory_id(p.replica_directory_id), now_ms)
        return fetch_snapshot_response(size=size, position=position, unaligned_records=chunk,
                                       **base)

    def _fetch_backoff(self, now_ms: int) -> None:
        self._next_fetch_ms = now_ms + self._config.retry_backoff_ms
        self._bootstrap_index += 1

    def _on_fetch_response(self, req: FetchRequest, resp: object | None, now_ms: int) -> None:
        if req is not self._inflight_fetch:
            if isinstance(resp, FetchResponse) and error_of(resp) != 0:
                self._observe_leader_of(resp, now_ms)
            return  # a duplicate, or an answer to a fetch from before a leader change
        self._inflight_fetch = None
        if not isinstance(resp, FetchResponse):
            self._fetch_backoff(now_ms)
            return
        if error_of(resp) != 0:
            if not self._observe_leader_of(resp, now_ms):
                self._fetch_backoff(now_ms)
            return
        if self._observe_leader_of(resp, now_ms):
            return
        st = self._follower()
        answer = answered_partition(resp)
        if st is None or answer is None or not self._from_my_leader(st, resp):
            return
        st.last_fetch_success_ms = now_ms
        st.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        st.leader_lost = False
        self._maybe_update_voter(st, now_ms)
        log = self._log
        diverging, snapshot, records = answer.diverging_epoch, answer.snapshot_id, answer.records
        if diverging.end_offset >= 0:
            self._truncate_to_diverging(OffsetAndEpoch(int(diverging.end_offset),
                                                       int(diverging.epoch)))
        elif snapshot.end_offset >= 0:
            snapshot_id = SnapshotId(int(snapshot.end_offset), int(snapshot.epoch))
            self._snapshot_download = (snapshot_id, bytearray())
            self._send_fetch_snapshot(st, now_ms)
        elif records:
            if the_partition(req).fetch_offset != log.end_offset():
                return
            raw = self._records_from(bytes(records), log.end_offset())
            if raw:
                log.append_as_follower(raw)
                scan_voters(raw, self._history, 0)
                if self.is_voter or self._config.followers_always_flush:
                    # Report the new offset only once durable (rule 2); Kafka's appendAsFollower.
                    self._awaiting_flush = True
                    self._out.flush = True
            self._update_follower_high_watermark(int(answer.high_watermark))
        else:
            self._update_follower_high_watermark(int(answer.high_watermark))

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
        if leader_high_watermark < 0:
            return  # a new leader that does not know it yet (Kafka: an empty high watermark)
        hwm = min(leader_high_watermark, self._log.end_offset())
        self._high_watermark = max(self._high_watermark, hwm)
        self._high_watermark_known = True

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
        req = fetch_snapshot_request(
            self._node_id, st.epoch, snapshot_id.end_offset, snapshot_id.epoch, len(data),
            self._config.fetch_snapshot_max_bytes, self._directory_id, self._wire_cluster_id)
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
        if error_of(resp) != 0:
            self._snapshot_download = None
            if not self._observe_leader_of(resp, now_ms):
                self._fetch_backoff(now_ms)
            return
        st = self._follower()
        download = self._snapshot_download
        answer = answered_partition(resp)
        if (st is None or download is None or answer is None
                or not self._from_my_leader(st, resp)):
            return
        snapshot_id, data = download
        chunk = bytes(answer.unaligned_records or b"")
        size = int(answer.size)
        if (int(answer.snapshot_id.end_offset), int(answer.snapshot_id.epoch)) != snapshot_id or (
                answer.position != len(data)):
            self._snapshot_download = None
            return
        st.last_fetch_success_ms = now_ms
        st.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        st.leader_lost = False
        self._maybe_update_voter(st, now_ms)
        data.extend(chunk)
        if len(data) < size and chunk:
            self._send_fetch_snapshot(st, now_ms)
            return
        self._snapshot_download = None
        if len(data) != size:
            return
        self._log.install_snapshot(snapshot_id, bytes(data))
        self._history = load_voter_history(self._log)
        self._high_watermark = max(self._high_watermark, snapshot_id.end_offset)
        self._high_watermark_known = True
        self._awaiting_flush = True
        self._out.flush = True

    def _observe_leader_of(self, resp: FetchResponse | FetchSnapshotResponse, now_ms: int
                           ) -> bool:
        leader = leader_of(resp)
        return self._observe_epoch(leader.epoch, leader.id, leader.endpoint, now_ms)

    @staticmethod
    def _from_my_leader(st: FollowerState, resp: FetchResponse | FetchSnapshotResponse) -> bool:
        leader = leader_of(resp)
        return (st.epoch, st.leader_id) == (leader.epoch, leader.id)

    # -- fetching ------------------------------------------------------------------------------
    def _fetches_now(self) -> bool:
        if self._follower() is not None:
            return True
        return isinstance(self._state, UnattachedState) and not self.is_voter and bool(
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
        st = self._follower()
        if st is not None and self._snapshot_download is not None:
            self._send_fetch_snapshot(st, now_ms)
            return
        req = fetch_request(
            self._node_id, self._directory_id, self._log.end_offset(),
            self._log.last_fetched_epoch(), self.epoch, self._config.fetch_max_wait_ms,
            self._config.fetch_max_bytes, self._wire_cluster_id)
        self._inflight_fetch = req
        self._inflight_sent_ms = now_ms
        if st is not None:
            self._send(st.leader_id, req)
        else:
            addresses = self._bootstrap_addresses()
            self._send(-1, req, addresses[self._bootstrap_index % len(addresses)])
