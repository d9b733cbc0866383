"""Raft control records: msgpack [type_id, version, {fields}] in control batches."""

from __future__ import annotations

import uuid

import msgpack
import pytest

from raft.core.control_records import (
    ControlRecordError,
    KRaftVersionRecord,
    LeaderChangeRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    Voter,
    VotersRecord,
    bootstrap_snapshot,
    decode_control,
    encode_control,
    iter_control_records,
    snapshot_batches,
    snapshot_data_records,
    snapshot_voters,
)
from raft.core.record_batch import iter_batches
from raft.core.replica_key import ReplicaKey

D1 = uuid.UUID(int=1)
D2 = uuid.UUID(int=2)


@pytest.mark.parametrize("record", [
    LeaderChangeRecord(1, (ReplicaKey(1, D1), ReplicaKey(2, D2)), (ReplicaKey(1, D1),)),
    SnapshotHeaderRecord(123),
    SnapshotFooterRecord(),
    KRaftVersionRecord(1),
    VotersRecord((Voter(1, D1, {"CONTROLLER": "h1:9093"}), Voter(2, D2, {}))),
])
def test_round_trip(record: object) -> None:
    assert decode_control(encode_control(record)) == record  # type: ignore[arg-type]


def test_golden_bytes() -> None:
    assert encode_control(KRaftVersionRecord(1)) == b"\x93\x05\x00\x81\xadkraft_version\x01"
    voters = msgpack.unpackb(encode_control(VotersRecord((Voter(3, D1, {"C": "h:1"}),))))
    assert voters == [6, 0, {"voters": [{"voter_id": 3,
                                         "voter_directory_id": "AAAAAAAAAAAAAAAAAAAAAQ",
                                         "endpoints": {"C": "h:1"}}]}]


def test_garbage_is_rejected() -> None:
    with pytest.raises(ControlRecordError):
        decode_control(msgpack.packb([99, 0, {}]))
    with pytest.raises(ControlRecordError):
        decode_control(b"\xc1")


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
