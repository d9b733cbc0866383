"""VoterSet keyed by (id, directory id) and its history over offsets (INVARIANTS rules 4, 5)."""

from __future__ import annotations

import uuid

import pytest

from raft.core.control_records import Voter
from raft.core.replica_key import ReplicaKey
from raft.core.voter_set import VoterSet, VoterSetHistory

D = {i: uuid.UUID(int=i) for i in range(1, 8)}


def vset(*ids: int) -> VoterSet:
    return VoterSet.of(Voter(i, D[i], {"CONTROLLER": f"h{i}:1"}) for i in ids)


def test_majority_and_membership_use_the_full_key() -> None:
    voters = vset(1, 2, 3)
    assert voters.majority_size == 2 and len(vset(1, 2, 3, 4)) == 4
    assert vset(1, 2, 3, 4).majority_size == 3
    assert ReplicaKey(1, D[1]) in voters
    assert ReplicaKey(1, D[7]) not in voters  # a replaced disk is not the voter (rule 4)
    assert voters.is_majority([ReplicaKey(1, D[1]), ReplicaKey(2, D[2])])
    assert not voters.is_majority([ReplicaKey(1, D[1]), ReplicaKey(2, D[7])])
    assert voters.endpoint(2) == "h2:1" and voters.endpoint(9) is None


def test_same_id_with_two_directory_ids_during_disk_replacement() -> None:
    voters = VoterSet.of([Voter(1, D[1]), Voter(1, D[7]), Voter(2, D[2])])
    assert len(voters) == 3 and voters.majority_size == 2
    assert voters.is_majority([ReplicaKey(1, D[1]), ReplicaKey(1, D[7])])
    assert voters.key_for_id(1) == ReplicaKey(1, D[1])


def test_record_round_trip() -> None:
    voters = vset(1, 2)
    assert VoterSet.from_record(voters.to_record()) == voters


def test_history_latest_in_force_and_truncation_restores() -> None:
    history = VoterSetHistory(vset(1, 2, 3), -1)
    history.add_at(10, vset(1, 2, 3, 4))
    history.add_at(20, vset(1, 2, 4))
    assert history.latest() == vset(1, 2, 4)
    assert history.value_at(15) == vset(1, 2, 3, 4)
    assert history.value_at(5) == vset(1, 2, 3)
    assert history.has_uncommitted_change(high_watermark=20)
    assert not history.has_uncommitted_change(high_watermark=21)
    history.truncate_to(20)  # rule 5: truncating a voter record restores the previous set
    assert history.latest() == vset(1, 2, 3, 4)
    history.truncate_to(0)
    assert history.latest() == vset(1, 2, 3)
    history.truncate_to(-5)  # the snapshot's base set is never truncated
    assert history.latest() == vset(1, 2, 3)


def test_history_rejects_out_of_order_sets() -> None:
    history = VoterSetHistory(vset(1), 4)
    with pytest.raises(ValueError):
        history.add_at(4, vset(1, 2))


def test_set_replaced_by_an_uncommitted_change() -> None:
    """Rule 5: the set truncation would restore, only while the latest change is uncommitted."""
    history = VoterSetHistory(vset(1, 2), -1)
    assert history.replaced_by_uncommitted(0) is None  # the base set replaced nothing
    history.add_at(5, vset(2))
    assert history.replaced_by_uncommitted(5) == vset(1, 2)  # HWM 5: offset 5 not committed
    assert history.replaced_by_uncommitted(6) is None  # committed: {1, 2} cannot come back
