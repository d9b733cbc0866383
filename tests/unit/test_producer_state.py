"""storage.core.producer_state: Kafka's idempotent producer rules (ProducerAppendInfo /
ProducerStateEntry), and the partition log keeping that state across appends, restarts,
follower appends and truncation."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from broker.runtime.partition_log import PartitionLog
from kafkawire.errors import Errors, KafkaError
from storage.core.producer_state import (
    INT32_MAX,
    NUM_BATCHES_TO_RETAIN,
    CorruptSnapshotError,
    ProducerBatch,
    ProducerStateManager,
    increment_sequence,
    parse_snapshot_file_name,
    snapshot_file_name,
)
from storage.core.record_batch import encode_batch, iter_batches

PID = 4000


def pb(seq: int, count: int = 1, *, offset: int = 0, epoch: int = 0, pid: int = PID) -> ProducerBatch:
    return ProducerBatch(pid, epoch, seq, offset, offset + count - 1)


def append(state: ProducerStateManager, batch: ProducerBatch) -> int:
    """A client append: the offset the answer names (the original one for a duplicate)."""
    result = state.check_client_batches([batch])
    if result.duplicate is not None:
        return result.duplicate.first_offset
    state.commit(result, batch.last_offset + 1)
    return batch.base_offset


def error_of(state: ProducerStateManager, batch: ProducerBatch) -> Errors:
    with pytest.raises(KafkaError) as info:
        state.check_client_batches([batch])
    return info.value.error


def test_in_sequence_batches_append_and_a_gap_is_out_of_order() -> None:
    state = ProducerStateManager()
    assert append(state, pb(0, 3, offset=0)) == 0
    assert append(state, pb(3, 2, offset=3)) == 3
    assert error_of(state, pb(6, 1, offset=5)) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error_of(state, pb(4, 1, offset=5)) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    entry = state.entry(PID)
    assert entry is not None and entry.last_seq == 4  # the refused batches changed nothing


def test_a_duplicate_among_the_last_five_is_answered_with_the_original_offset() -> None:
    state = ProducerStateManager()
    for n in range(7):
        append(state, pb(2 * n, 2, offset=100 + 2 * n))
    entry = state.entry(PID)
    assert entry is not None and len(entry.batches) == NUM_BATCHES_TO_RETAIN
    # Batches 2..6 (sequences 4..13) are retained: a retry of any is a duplicate.
    for n in range(2, 7):
        result = state.check_client_batches([pb(2 * n, 2, offset=999)])
        assert result.duplicate is not None
        assert (result.duplicate.first_offset, result.duplicate.last_offset) == (
            100 + 2 * n,
            101 + 2 * n,
        )
        assert not result.updates
    # Older than the last five: not recognised, and out of order (Kafka).
    assert error_of(state, pb(2, 2, offset=999)) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    # Same first sequence but another range is not a duplicate.
    assert error_of(state, pb(12, 1, offset=999)) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epochs_older_is_invalid_newer_must_start_at_zero() -> None:
    state = ProducerStateManager()
    append(state, pb(0, 5, epoch=3))
    assert error_of(state, pb(5, 1, epoch=2)) is Errors.INVALID_PRODUCER_EPOCH
    assert error_of(state, pb(5, 1, epoch=4)) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(state, pb(0, 1, epoch=4, offset=5)) == 5
    entry = state.entry(PID)
    assert entry is not None and entry.producer_epoch == 4 and len(entry.batches) == 1
    # A retry from the old epoch is no longer a duplicate: it is fenced.
    assert error_of(state, pb(0, 5, epoch=3)) is Errors.INVALID_PRODUCER_EPOCH


def test_an_unknown_producer_is_accepted_at_any_sequence() -> None:
    state = ProducerStateManager()
    assert append(state, pb(42, 2, offset=7)) == 7  # Kafka: no UNKNOWN_PRODUCER_ID any more
    assert error_of(state, pb(45, 1, offset=9)) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_producers_wholly_below_a_new_log_start_are_forgotten() -> None:
    state = ProducerStateManager()
    append(state, pb(0, 2, offset=0, pid=1))
    append(state, pb(0, 2, offset=2, pid=2))
    state.on_log_start_offset_incremented(3)  # DeleteRecords up to offset 3
    assert state.entry(1) is None and state.entry(2) is not None
    assert append(state, pb(9, 1, offset=4, pid=1)) == 4  # unknown again: any sequence


def test_sequences_wrap_at_int_max() -> None:
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    state = ProducerStateManager()
    append(state, pb(INT32_MAX - 1, 2, offset=0))  # INT32_MAX-1, INT32_MAX
    assert append(state, pb(0, 1, offset=2)) == 2
    # A batch spanning the wrap is found as a duplicate by its wrapped range.
    state = ProducerStateManager()
    append(state, pb(INT32_MAX, 3, offset=10))  # INT32_MAX, 0, 1
    result = state.check_client_batches([pb(INT32_MAX, 3, offset=99)])
    assert result.duplicate is not None and result.duplicate.first_offset == 10
    assert append(state, pb(2, 1, offset=13)) == 13


def test_several_batches_in_one_request_are_checked_in_order() -> None:
    state = ProducerStateManager()
    result = state.check_client_batches([pb(0, 2, offset=0), pb(2, 2, offset=2)])
    state.commit(result, 4)
    assert state.entry(PID) is not None and state.entry(PID).last_seq == 3  # type: ignore[union-attr]
    with pytest.raises(KafkaError) as info:
        state.check_client_batches([pb(4, 1, offset=4), pb(9, 1, offset=5)])
    assert info.value.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.entry(PID).last_seq == 3  # type: ignore[union-attr]


def test_replay_equals_incremental_and_snapshot_round_trips() -> None:
    rng = random.Random(7)
    incremental = ProducerStateManager()
    log: list[ProducerBatch] = []
    sequences = {pid: 0 for pid in range(5)}
    offset = 0
    for _ in range(200):
        pid = rng.randrange(5)
        count = rng.randint(1, 4)
        batch = pb(sequences[pid], count, offset=offset, pid=pid)
        if rng.random() < 0.2 and log:  # a retry of a recent batch: no append
            again = log[-1]
            assert incremental.check_client_batches([again]).duplicate is not None
            continue
        append(incremental, batch)
        log.append(batch)
        sequences[pid] += count
        offset += count
    replayed = ProducerStateManager()
    for batch in log:
        replayed.replay(batch)
    assert replayed.producers == incremental.producers
    restored = ProducerStateManager.decode_snapshot(incremental.encode_snapshot(), offset)
    assert restored.producers == incremental.producers
    assert restored.map_end_offset == offset


def test_snapshot_names_and_corruption() -> None:
    assert snapshot_file_name(42) == "00000000000000000042.snapshot"
    assert parse_snapshot_file_name("00000000000000000042.snapshot") == 42
    assert parse_snapshot_file_name("00000000000000000042.log") is None
    state = ProducerStateManager()
    append(state, pb(0, 2))
    data = bytearray(state.encode_snapshot())
    data[-1] ^= 0xFF
    with pytest.raises(CorruptSnapshotError, match="CRC"):
        ProducerStateManager.decode_snapshot(bytes(data), 2)


# ---- the partition log keeps it ----


def produced(seq: int, count: int, *, epoch: int = 0, pid: int = PID) -> bytes:
    return encode_batch(
        0, 0, 1_000, [b"v%d" % (seq + i) for i in range(count)],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
    )


def values(plog: PartitionLog) -> list[bytes]:
    raw = plog.read(0, 1 << 20, plog.log_end_offset)
    return [r.value or b"" for b, _ in iter_batches(raw) for r in b.records]


def test_partition_log_dedups_refuses_gaps_and_rebuilds_on_open(tmp_path: Path) -> None:
    with PartitionLog(tmp_path, "t", 0) as plog:
        assert plog.append_as_leader(produced(0, 2), 1).base_offset == 0
        assert plog.append_as_leader(produced(2, 2), 1).base_offset == 2
        again = plog.append_as_leader(produced(0, 2), 1)
        assert (again.base_offset, again.last_offset, again.record_count) == (0, 1, 0)
        with pytest.raises(KafkaError) as info:
            plog.append_as_leader(produced(7, 1), 1)
        assert info.value.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert plog.log_end_offset == 4
    # Clean close wrote a snapshot at the log end; without it the log is replayed: same state.
    assert (tmp_path / "t-0" / snapshot_file_name(4)).exists()
    with PartitionLog(tmp_path, "t", 0) as plog:
        assert plog.append_as_leader(produced(2, 2), 2).base_offset == 2
        expected = dict(plog.producer_state.producers)
    (tmp_path / "t-0" / snapshot_file_name(4)).unlink()
    with PartitionLog(tmp_path, "t", 0) as plog:
        assert plog.producer_state.producers == expected
        assert plog.append_as_leader(produced(4, 1), 2).base_offset == 4
        assert values(plog) == [b"v0", b"v1", b"v2", b"v3", b"v4"]


def test_follower_state_lets_a_new_leader_dedup_and_truncation_trims_it(tmp_path: Path) -> None:
    with PartitionLog(tmp_path / "a", "t", 0) as leader, PartitionLog(
        tmp_path / "b", "t", 0
    ) as follower:
        for seq in (0, 2, 4):
            leader.append_as_leader(produced(seq, 2), 1)
        follower.append_as_follower(leader.read(0, 1 << 20, leader.log_end_offset))
        # The follower becomes leader: a retry of the last batch is a duplicate.
        assert follower.append_as_leader(produced(4, 2), 2).base_offset == 4
        assert follower.log_end_offset == 6
        # Truncating the last batch away forgets it: its retry is appended again.
        follower.truncate_to(4)
        entry = follower.producer_state.entry(PID)
        assert entry is not None and entry.last_seq == 3
        assert follower.append_as_leader(produced(4, 2), 3).base_offset == 4
        assert follower.log_end_offset == 6


def test_transactional_batches_are_refused(tmp_path: Path) -> None:
    raw = encode_batch(
        0, 0, 1_000, [b"x"], producer_id=PID, producer_epoch=0, base_sequence=0,
        is_transactional=True,
    )
    with PartitionLog(tmp_path, "t", 0) as plog:
        with pytest.raises(KafkaError) as info:
            plog.append_as_leader(raw, 1)
        assert info.value.error is Errors.INVALID_TXN_STATE
        assert plog.log_end_offset == 0


def test_a_segment_roll_writes_a_snapshot_and_an_unclean_reopen_replays_only_the_tail(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    plog = PartitionLog(tmp_path, "t", 0, segment_bytes=400)
    for seq in range(0, 40, 2):
        plog.append_as_leader(produced(seq, 2), 1)
    plog.flush()
    snapshots = sorted(p.name for p in directory.glob("*.snapshot"))
    assert 1 <= len(snapshots) <= 2  # the newest two are kept
    newest = int(snapshots[-1].split(".")[0])
    assert 0 < newest < plog.log_end_offset
    expected = dict(plog.producer_state.producers)
    # No close(): an unclean stop. The snapshot plus the log after it give the same state.
    reopened = PartitionLog(tmp_path, "t", 0, segment_bytes=400)
    try:
        assert reopened.producer_state.producers == expected
        assert reopened.append_as_leader(produced(38, 2), 2).base_offset == 38
        # A corrupt snapshot is deleted and the state rebuilt from the whole log.
        (directory / snapshots[-1]).write_bytes(b"junk")
    finally:
        reopened._log.close()
    plog._log.close()
    again = PartitionLog(tmp_path, "t", 0, segment_bytes=400)
    try:
        assert again.producer_state.producers == expected
        assert not (directory / snapshots[-1]).exists()
    finally:
        again.close()
