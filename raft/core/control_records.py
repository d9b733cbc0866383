"""Raft control records in Kafka's schemas, after Kafka's ControlRecordType and ControlRecordUtils.

A control record lives in a control batch (attribute bit 5). Its key is Kafka's control record
key, `version int16 (0) | type int16`: LeaderChange (2), SnapshotHeader (3), SnapshotFooter (4),
KRaftVersion (5), KRaftVoters (6). Its value is the message in Kafka's binary schema
(LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord, KRaftVersionRecord,
VotersRecord: flexible versions, compact arrays, tagged fields), written and read with kio's
generated dataclasses; kio does not ship KRaftVersionRecord, so it is declared here in kio's
style (raft.core.kraft_version_schema). Directory ids are Kafka uuids (16 bytes). The voter set lives in every snapshot and in the
log (INVARIANTS rule 7), so a restarted replica knows it without config.

The dataclasses below are the Raft layer's own view (voters keyed by ReplicaKey, endpoints as
listener -> "host:port"); encode_control/decode_control translate them to Kafka's messages.
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.leader_change_message.v0.data import LeaderChangeMessage as LeaderChangeMessageV0
from kio.schema.leader_change_message.v1.data import LeaderChangeMessage as LeaderChangeMessageV1
from kio.schema.leader_change_message.v1.data import Voter as LeaderChangeVoterV1
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord as KafkaSnapshotFooter
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord as KafkaSnapshotHeader
from kio.schema.voters_record.v0.data import Endpoint as KafkaEndpoint
from kio.schema.voters_record.v0.data import KRaftVersionFeature
from kio.schema.voters_record.v0.data import Voter as KafkaVoter
from kio.schema.voters_record.v0.data import VotersRecord as KafkaVotersRecord
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i64, u16

from kafkawire.constants import ZERO_UUID
from raft.core.kraft_version_schema import KRaftVersionRecord as KafkaKRaftVersionRecord
from raft.core.replica_key import ReplicaKey
from storage.core.record_batch import Record, decode_batch, encode_batch

LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5
VOTERS = 6  # ControlRecordType.KRAFT_VOTERS
CONTROL_KEY = struct.Struct(">hh")  # ControlRecordType's key schema v0: version, type
CONTROL_KEY_VERSION = 0
# LeaderChangeMessage v1 carries VoterDirectoryId (KIP-853); the message starts with its own
# Version field, so a reader picks the schema from it.
LEADER_CHANGE_VERSION = 1


class ControlRecordError(ValueError):
    """A control record key or value that does not decode."""


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
    min_kraft_version: int = 0  # VotersRecord's KRaftVersionFeature range
    max_kraft_version: int = 1

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


def _endpoint_to_kafka(name: str, address: str) -> KafkaEndpoint:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 0xFFFF:
        raise ControlRecordError(f"endpoint {name}={address!r} is not host:port")
    return KafkaEndpoint(name=name, host=host, port=u16(int(port)))


def _to_kafka(rec: ControlRecord) -> Any:
    if isinstance(rec, LeaderChangeRecord):
        return LeaderChangeMessageV1(
            version=i16(LEADER_CHANGE_VERSION),
            leader_id=i32(rec.leader_id),  # type: ignore[arg-type]  # BrokerId is an i32
            voters=tuple(LeaderChangeVoterV1(voter_id=i32(k.id), voter_directory_id=k.directory_id)
                         for k in rec.voters),
            granting_voters=tuple(
                LeaderChangeVoterV1(voter_id=i32(k.id), voter_directory_id=k.directory_id)
                for k in rec.granting_voters),
        )
    if isinstance(rec, SnapshotHeaderRecord):
        return KafkaSnapshotHeader(version=i16(0),
                                   last_contained_log_timestamp=i64(rec.last_contained_log_timestamp_ms))
    if isinstance(rec, SnapshotFooterRecord):
        return KafkaSnapshotFooter(version=i16(0))
    if isinstance(rec, KRaftVersionRecord):
        return KafkaKRaftVersionRecord(version=i16(0), k_raft_version=i16(rec.kraft_version))
    return KafkaVotersRecord(version=i16(0), voters=tuple(
        KafkaVoter(
            voter_id=i32(v.voter_id),  # type: ignore[arg-type]
            voter_directory_id=v.voter_directory_id,
            endpoints=tuple(_endpoint_to_kafka(n, a) for n, a in v.endpoints.items()),
            k_raft_version_feature=KRaftVersionFeature(
                min_supported_version=i16(v.min_kraft_version),
                max_supported_version=i16(v.max_kraft_version)),
        ) for v in rec.voters))


def _uuid(value: uuid.UUID | None) -> uuid.UUID:
    return ZERO_UUID if value is None else value  # kio reads Kafka's zero uuid as None


def _keys(voters: Sequence[Any]) -> tuple[ReplicaKey, ...]:
    return tuple(ReplicaKey(int(v.voter_id), _uuid(getattr(v, "voter_directory_id", None)))
                 for v in voters)


def control_key(type_id: int) -> bytes:
    return CONTROL_KEY.pack(CONTROL_KEY_VERSION, type_id)


def control_type(key: bytes | None) -> int:
    """The ControlRecordType id in a control record's key."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise ControlRecordError(f"control record key {key!r} is not version int16 + type int16")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version != CONTROL_KEY_VERSION:
        raise ControlRecordError(f"unknown control record key version {version}")
    return int(type_id)


def control_version(value: bytes | None) -> int | None:
    """The Version field every Raft control message starts with (int16), None if absent."""
    if value is None or len(value) < 2:
        return None
    return int(struct.unpack_from(">h", value)[0])


def encode_control(rec: ControlRecord) -> Record:
    """The control record (key and value) to put in a control batch."""
    buffer = io.BytesIO()
    message = _to_kafka(rec)
    entity_writer(type(message))(buffer, message)
    return Record(control_key(rec.TYPE_ID), buffer.getvalue())


def decode_control(record: Record) -> ControlRecord:
    """A record of a control batch as its Raft control record."""
    type_id = control_type(record.key)
    value = record.value
    if value is None:
        raise ControlRecordError(f"control record type {type_id} has a null value")
    try:
        if type_id == LEADER_CHANGE:
            (version,) = struct.unpack_from(">h", value)
            change: LeaderChangeMessageV0 | LeaderChangeMessageV1
            if version >= 1:
                change, _ = entity_reader(LeaderChangeMessageV1)(value, 0)
            else:
                change, _ = entity_reader(LeaderChangeMessageV0)(value, 0)
            return LeaderChangeRecord(int(change.leader_id), _keys(change.voters),
                                      _keys(change.granting_voters))
        if type_id == SNAPSHOT_HEADER:
            header, _ = entity_reader(KafkaSnapshotHeader)(value, 0)
            return SnapshotHeaderRecord(int(header.last_contained_log_timestamp))
        if type_id == SNAPSHOT_FOOTER:
            entity_reader(KafkaSnapshotFooter)(value, 0)
            return SnapshotFooterRecord()
        if type_id == KRAFT_VERSION:
            kraft, _ = entity_reader(KafkaKRaftVersionRecord)(value, 0)
            return KRaftVersionRecord(int(kraft.k_raft_version))
        if type_id == VOTERS:
            voters, _ = entity_reader(KafkaVotersRecord)(value, 0)
            return VotersRecord(tuple(
                Voter(int(v.voter_id), _uuid(v.voter_directory_id),
                      {e.name: f"{e.host}:{e.port}" for e in v.endpoints},
                      int(v.k_raft_version_feature.min_supported_version),
                      int(v.k_raft_version_feature.max_supported_version))
                for v in voters.voters))
    except ControlRecordError:
        raise
    except Exception as exc:  # kio raises BufferUnderflow, ValueError, struct.error, ...
        raise ControlRecordError(f"undecodable control record type {type_id}: {exc}") from exc
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
            yield batch.offset_of(index), batch.leader_epoch, decode_control(record)


# Data records per batch of a snapshot: a snapshot of 100,000 partitions is written (and read)
# as 50 batches, one slice each, rather than one 24 MB batch (issue 35).
SNAPSHOT_BATCH_RECORDS = 2000


def snapshot_batches(
    voters: Sequence[Voter], data_records: Sequence[bytes] = (), timestamp_ms: int = 0,
    epoch: int = 0, kraft_version: int = 1,
) -> bytes:
    """A snapshot's raw batches: header, KRaftVersion + Voters (rule 7), data, footer."""
    return b"".join(snapshot_chunks(voters, data_records, timestamp_ms, epoch, kraft_version))


def snapshot_chunks(
    voters: Sequence[Voter], data_records: Sequence[bytes] = (), timestamp_ms: int = 0,
    epoch: int = 0, kraft_version: int = 1,
) -> Iterator[bytes]:
    """snapshot_batches one raw batch at a time, the data in batches of at most
    SNAPSHOT_BATCH_RECORDS records: its writer gives its loop back between them."""
    header = encode_control(SnapshotHeaderRecord(timestamp_ms))
    yield encode_batch(0, epoch, timestamp_ms, [header], is_control=True)
    yield encode_batch(1, epoch, timestamp_ms,
                       [encode_control(KRaftVersionRecord(kraft_version)),
                        encode_control(VotersRecord(tuple(voters)))], is_control=True)
    next_offset = 3
    for start in range(0, len(data_records), SNAPSHOT_BATCH_RECORDS):
        chunk = list(data_records[start:start + SNAPSHOT_BATCH_RECORDS])
        yield encode_batch(next_offset, epoch, timestamp_ms, chunk)
        next_offset += len(chunk)
    yield encode_batch(next_offset, epoch, timestamp_ms,
                       [encode_control(SnapshotFooterRecord())], is_control=True)


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
            values.extend(r.value for r in batch.records if r.value is not None)
    return values
