"""Raft control records: Kafka's control record key and message schemas in control batches."""

from __future__ import annotations

import uuid

import pytest

from kafkawire.constants import ZERO_UUID
from raft.core.control_records import (
    LEADER_CHANGE,
    SNAPSHOT_FOOTER,
    VOTERS,
    ControlRecordError,
    KRaftVersionRecord,
    LeaderChangeRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    Voter,
    VotersRecord,
    bootstrap_snapshot,
    control_key,
    decode_control,
    encode_control,
    iter_control_records,
    snapshot_batches,
    snapshot_data_records,
    snapshot_voters,
)
from raft.core.replica_key import ReplicaKey
from storage.core.record_batch import Record, iter_batches

D1 = uuid.UUID(int=1)
D2 = uuid.UUID(int=2)


@pytest.mark.parametrize("record", [
    LeaderChangeRecord(1, (ReplicaKey(1, D1), ReplicaKey(2, D2)), (ReplicaKey(1, D1),)),
    SnapshotHeaderRecord(123),
    SnapshotFooterRecord(),
    KRaftVersionRecord(1),
    VotersRecord((Voter(1, D1, {"CONTROLLER": "h1:9093"}), Voter(2, D2, {}))),
    VotersRecord((Voter(1, ZERO_UUID, {"A": "[::1]:1", "B": "b:65535"}, 0, 0),)),
])
def test_round_trip(record: object) -> None:
    assert decode_control(encode_control(record)) == record  # type: ignore[arg-type]


def test_golden_bytes() -> None:
    """Bytes derived by hand from Kafka's ControlRecordType key schema and the flexible-version
    JSON schemas (KRaftVersionRecord.json, VotersRecord.json, LeaderChangeMessage.json): int16/int32
    big-endian, compact arrays/strings as unsigned varint length + 1, an empty tagged-field
    section (0x00) after every struct."""
    kraft = encode_control(KRaftVersionRecord(1))
    assert kraft.key == bytes.fromhex("0000 0005")  # key version 0, type KRAFT_VERSION
    assert kraft.value == bytes.fromhex("0000 0001 00")  # Version 0, KRaftVersion 1, no tags
    voters = encode_control(VotersRecord((Voter(3, D1, {"C": "h:1"}),)))
    assert voters.key == bytes.fromhex("0000 0006")
    assert voters.value == bytes.fromhex(
        "0000"  # Version 0
        "02"  # Voters: one element
        "00000003" + "00" * 15 + "01"  # VoterId 3, VoterDirectoryId uuid int 1
        "02" "02" "43" "02" "68" "0001" "00"  # Endpoints: one, Name "C", Host "h", Port 1, tags
        "0000" "0001" "00"  # KRaftVersionFeature 0..1, tags
        "00"  # Voter tags
        "00"  # record tags
    )
    change = encode_control(LeaderChangeRecord(2, (ReplicaKey(2, D2),), ()))
    assert change.key == bytes.fromhex("0000 0002")
    assert change.value == bytes.fromhex(
        "0001" "00000002"  # Version 1 (has VoterDirectoryId), LeaderId 2
        "02" "00000002" + "00" * 15 + "02" "00"  # Voters: [2 @ uuid int 2], Voter tags
        "01"  # GrantingVoters: empty
        "00"
    )
    assert encode_control(SnapshotFooterRecord()).value == bytes.fromhex("0000 00")


def test_leader_change_version_0_reads_without_directory_ids() -> None:
    # Kafka before KIP-853 writes LeaderChangeMessage v0: voters without directory ids.
    value = bytes.fromhex("0000" "00000001" "02" "00000001" "00" "01" "00")
    record = decode_control(Record(control_key(LEADER_CHANGE), value))
    assert record == LeaderChangeRecord(1, (ReplicaKey(1, ZERO_UUID),), ())


def test_garbage_is_rejected() -> None:
    with pytest.raises(ControlRecordError, match="unknown control record type 99"):
        decode_control(Record(control_key(99), b"\x00\x00\x00"))
    with pytest.raises(ControlRecordError, match="undecodable"):
        decode_control(Record(control_key(VOTERS), b"\xc1"))
    with pytest.raises(ControlRecordError, match="not version int16"):
        decode_control(Record(None, b"\x00\x00\x00"))
    with pytest.raises(ControlRecordError, match="null value"):
        decode_control(Record(control_key(SNAPSHOT_FOOTER), None))
    with pytest.raises(ControlRecordError, match="not host:port"):
        encode_control(VotersRecord((Voter(1, D1, {"C": "no-port"}),)))


def test_bootstrap_snapshot_layout() -> None:
    voters = [Voter(1, D1, {"CONTROLLER": "h1:9093"}), Voter(2, D2, {"CONTROLLER": "h2:9093"})]
    raw = bootstrap_snapshot(voters)
    batches = [b for b, _size in iter_batches(raw)]
    assert all(b.is_control for b in batches)
    kinds = [type(r).__name__ for _o, _e, r in iter_control_records(raw)]
    assert kinds == ["SnapshotHeaderRecord", "KRaftVersionRecord", "VotersRecord",
                     "SnapshotFooterRecord"]
    record = snapshot_voters(raw)
    assert record is not None and [v.key for v in record.voters] == [
        ReplicaKey(1, D1), ReplicaKey(2, D2)]
    assert snapshot_data_records(raw) == []


def test_snapshot_with_data_keeps_records_in_order() -> None:
    raw = snapshot_batches([Voter(1, D1)], [b"a", b"b"], 7, 3)
    assert snapshot_data_records(raw) == [b"a", b"b"]
    offsets = [o for o, _e, _r in iter_control_records(raw)]
    assert offsets == [0, 1, 2, 5]
