"""The voter sets a replica's log and snapshot hold (KIP-853, INVARIANTS rules 5 and 7): the
latest snapshot's set, then every VotersRecord after it, each in force from its offset."""

from __future__ import annotations

from raft.core.control_records import VotersRecord, decode_control, snapshot_voters
from raft.core.replicated_log import ReplicatedLog
from raft.core.voter_set import VoterSet, VoterSetHistory
from storage.core.offset_and_epoch import SnapshotId
from storage.core.record_batch import decode_batch, read_header

SCAN_CHUNK_BYTES = 8 * 1024 * 1024


def load_voter_history(log: ReplicatedLog) -> VoterSetHistory:
    """Rule 7: the latest snapshot's voter set, then every VotersRecord in the log after it."""
    snapshot_id = log.latest_snapshot_id()
    history = VoterSetHistory(VoterSet(), -1)
    if snapshot_id is not None:
        record = snapshot_voters(read_whole_snapshot(log, snapshot_id))
        if record is not None:
            history = VoterSetHistory(VoterSet.from_record(record), snapshot_id.end_offset - 1)
    offset = log.start_offset()
    while offset < log.end_offset():
        raw = log.read(offset, SCAN_CHUNK_BYTES)
        if not raw:
            break
        offset = scan_voters(raw, history, offset)
    return history


def read_whole_snapshot(log: ReplicatedLog, snapshot_id: SnapshotId) -> bytes:
    chunks: list[bytes] = []
    position = 0
    while True:
        chunk, size = log.read_snapshot(snapshot_id, position, SCAN_CHUNK_BYTES)
        chunks.append(chunk)
        position += len(chunk)
        if position >= size or not chunk:
            return b"".join(chunks)


def scan_voters(raw: bytes, history: VoterSetHistory, from_offset: int) -> int:
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
