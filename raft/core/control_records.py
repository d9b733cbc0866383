"""Raft control records, after Kafka's ControlRecordType: LeaderChange (2), SnapshotHeader (3),
SnapshotFooter (4), KRaftVersion (5), Voters (6).

Each is the value of a record in a control batch, msgpack `[type_id, version, {field: value}]`,
directory ids as Kafka's 22-char base64url. The voter set lives in every snapshot and in the
log (INVARIANTS rule 7), so a restarted replica knows it without config.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from raft.core.record_batch import decode_batch, encode_batch
from raft.core.replica_key import ReplicaKey, uuid_from_str, uuid_to_str

LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5
VOTERS = 6


class ControlRecordError(ValueError):
    """A control record value that does not decode."""


@dataclass(frozen=True, slots=True)
class LeaderChangeRecord:
    leader_id: int
    voters: tuple[ReplicaKey, ...] = ()
    granting_voters: tuple[ReplicaKey, ...] = ()
    TYPE_ID = LEADER_CHANGE


@dataclass(frozen=True, slots=True)
class SnapshotHeaderRecord:
    last_contained_log_timestamp_ms: int = 0
    TYPE_ID = SNAPSHOT_HEADER


@dataclass(frozen=True, slots=True)
class SnapshotFooterRecord:
    TYPE_ID = SNAPSHOT_FOOTER


@dataclass(frozen=True, slots=True)
class KRaftVersionRecord:
    kraft_version: int = 1
    TYPE_ID = KRAFT_VERSION


@dataclass(frozen=True, slots=True)
class Voter:
    voter_id: int
    voter_directory_id: uuid.UUID
    endpoints: dict[str, str] = field(default_factory=dict)  # listener name -> "host:port"

    @property
    def key(self) -> ReplicaKey:
        return ReplicaKey(self.voter_id, self.voter_directory_id)


@dataclass(frozen=True, slots=True)
class VotersRecord:
    """The full voter set (KIP-853): in force as soon as appended (INVARIANTS rule 5)."""

    voters: tuple[Voter, ...]
    TYPE_ID = VOTERS


ControlRecord = (
    LeaderChangeRecord | SnapshotHeaderRecord | SnapshotFooterRecord | KRaftVersionRecord
    | VotersRecord
)


def _keys_to_wire(keys: Sequence[ReplicaKey]) -> list[dict[str, Any]]:
    return [{"voter_id": k.id, "voter_directory_id": uuid_to_str(k.directory_id)} for k in keys]


def _keys_from_wire(items: Sequence[dict[str, Any]]) -> tuple[ReplicaKey, ...]:
    return tuple(ReplicaKey(int(i["voter_id"]), uuid_from_str(i["voter_directory_id"]))
                 for i in items)


def _fields_of(rec: ControlRecord) -> dict[str, Any]:
    if isinstance(rec, LeaderChangeRecord):
        return {"leader_id": rec.leader_id, "voters": _keys_to_wire(rec.voters),
                "granting_voters": _keys_to_wire(rec.granting_voters)}
    if isinstance(rec, SnapshotHeaderRecord):
        return {"last_contained_log_timestamp_ms": rec.last_contained_log_timestamp_ms}
    if isinstance(rec, SnapshotFooterRecord):
        return {}
    if isinstance(rec, KRaftVersionRecord):
        return {"kraft_version": rec.kraft_version}
    return {"voters": [{"voter_id": v.voter_id,
                        "voter_directory_id": uuid_to_str(v.voter_directory_id),
                        "endpoints": dict(v.endpoints)} for v in rec.voters]}


def encode_control(rec: ControlRecord) -> bytes:
    packed: bytes = msgpack.packb([rec.TYPE_ID, 0, _fields_of(rec)], use_bin_type=True)
    return packed


def decode_control(value: bytes) -> ControlRecord:
    try:
        type_id, _version, fields = msgpack.unpackb(value, raw=False, strict_map_key=False)
        if type_id == LEADER_CHANGE:
            return LeaderChangeRecord(int(fields["leader_id"]), _keys_from_wire(fields["voters"]),
                                      _keys_from_wire(fields.get("granting_voters", [])))
        if type_id == SNAPSHOT_HEADER:
            return SnapshotHeaderRecord(int(fields.get("last_contained_log_timestamp_ms", 0)))
        if type_id == SNAPSHOT_FOOTER:
            return SnapshotFooterRecord()
        if type_id == KRAFT_VERSION:
            return KRaftVersionRecord(int(fields["kraft_version"]))
        if type_id == VOTERS:
            return VotersRecord(tuple(
                Voter(int(v["voter_id"]), uuid_from_str(v["voter_directory_id"]),
                      {str(k): str(a) for k, a in v.get("endpoints", {}).items()})
                for v in fields["voters"]))
    except (ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
        raise ControlRecordError(f"undecodable control record: {exc}") from exc
    raise ControlRecordError(f"unknown control record type {type_id}")


def iter_control_records(raw_batches: bytes) -> Iterator[tuple[int, int, ControlRecord]]:
    """(offset, epoch, record) for every control record in raw batches; data batches skipped."""
    position = 0
    while position < len(raw_batches):
        batch, size = decode_batch(raw_batches, position)
        position += size
        if not batch.is_control:
            continue
        for index, record in enumerate(batch.records):
            yield batch.base_offset + index, batch.leader_epoch, decode_control(record.value)


def snapshot_batches(
    voters: Sequence[Voter], data_records: Sequence[bytes] = (), timestamp_ms: int = 0,
    epoch: int = 0, kraft_version: int = 1,
) -> bytes:
    """A snapshot's raw batches: header, KRaftVersion + Voters (rule 7), data, footer."""
    header = encode_control(SnapshotHeaderRecord(timestamp_ms))
    out = [encode_batch(0, epoch, timestamp_ms, [header], is_control=True),
           encode_batch(1, epoch, timestamp_ms,
                        [encode_control(KRaftVersionRecord(kraft_version)),
                         encode_control(VotersRecord(tuple(voters)))], is_control=True)]
    next_offset = 3
    if data_records:
        out.append(encode_batch(next_offset, epoch, timestamp_ms, list(data_records)))
        next_offset += len(data_records)
    out.append(encode_batch(next_offset, epoch, timestamp_ms,
                            [encode_control(SnapshotFooterRecord())], is_control=True))
    return b"".join(out)


def bootstrap_snapshot(voters: Sequence[Voter], timestamp_ms: int = 0) -> bytes:
    """The 0-0 checkpoint `storage format --initial-controllers/--standalone` writes (KIP-853)."""
    return snapshot_batches(voters, (), timestamp_ms)


def snapshot_voters(raw_batches: bytes) -> VotersRecord | None:
    """The last VotersRecord in a snapshot, or None if it holds none."""
    found: VotersRecord | None = None
    for _offset, _epoch, rec in iter_control_records(raw_batches):
        if isinstance(rec, VotersRecord):
            found = rec
    return found


def snapshot_data_records(raw_batches: bytes) -> list[bytes]:
    """The state machine's records in a snapshot, in order (control records left out)."""
    position = 0
    values: list[bytes] = []
    while position < len(raw_batches):
        batch, size = decode_batch(raw_batches, position)
        position += size
        if not batch.is_control:
            values.extend(r.value for r in batch.records)
    return values
