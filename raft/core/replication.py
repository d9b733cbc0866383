"""Replication of the metadata log (KIP-595's pull model, rules 2-3 and 7): the leader answers
Fetch (records, a diverging epoch to truncate to, or a snapshot to fetch) and FetchSnapshot; a
follower, or an observer through the bootstrap servers, keeps one Fetch in flight, appends what
comes back once it is durable, truncates on divergence and downloads snapshots; and the tick of
a follower (the fetch timeout)."""

from __future__ import annotations

from dataclasses import replace

from kafkawire.errors import Errors
from raft.core.election import Election
from raft.core.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
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
        error = self._leader_only_error(req.current_leader_epoch)
        st = self._leader()
        if error is not None or st is None:
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
        st = self._leader()
        if error is not None or st is None:
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
        st = self._follower()
        if st is None or (st.epoch, st.leader_id) != (resp.leader_epoch, resp.leader_id):
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
                scan_voters(raw, self._history, 0)
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
        st = self._follower()
        download = self._snapshot_download
        if (st is None or download is None
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
        self._history = load_voter_history(self._log)
        self._high_watermark = max(self._high_watermark, snapshot_id.end_offset)
        self._awaiting_flush = True
        self._out.flush = True

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
        req = FetchRequest(
            replica_id=self._node_id, replica_directory_id=self._directory_id,
            fetch_offset=self._log.end_offset(), last_fetched_epoch=self._log.last_fetched_epoch(),
            current_leader_epoch=self.epoch, max_wait_ms=self._config.fetch_max_wait_ms,
            max_bytes=self._config.fetch_max_bytes, cluster_id=self._config.cluster_id,
            replica_endpoint=self._endpoint)
        self._inflight_fetch = req
        self._inflight_sent_ms = now_ms
        if st is not None:
            self._send(st.leader_id, req)
        else:
            addresses = self._bootstrap_addresses()
            self._send(-1, req, addresses[self._bootstrap_index % len(addresses)])
