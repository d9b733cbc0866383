"""DiskLog on real files: segments, recovery, epochs, truncation, follower appends, snapshots."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from raft.core.replicated_log import ReplicatedLog
from storage.core.offset_and_epoch import OffsetAndEpoch, SnapshotId
from storage.core.record_batch import CorruptBatchError, encode_batch, iter_batches
from storage.runtime.disk_log import DiskLog
from storage.runtime.fsutil import StorageError
from storage.runtime.snapshot_file import snapshot_path

SMALL_SEGMENT_BYTES = 400


def records(count: int, tag: str = "r") -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(count)]


def fill(log: DiskLog, batches: int, epoch: int = 1, per_batch: int = 3) -> None:
    for i in range(batches):
        log.append_as_leader(records(per_batch, f"e{epoch}b{i}"), epoch, 1_000 + i)


def flushed_log(directory: Path, *batches: int, **kwargs: Any) -> DiskLog:
    """A new log with `batches[0]` batches of epoch 1, then `batches[1]` of epoch 2, ...; flushed."""
    log = DiskLog(directory, **kwargs)
    for epoch, count in enumerate(batches, start=1):
        fill(log, count, epoch=epoch)
    log.flush()
    return log


def reopened_warning(directory: Path, caplog: pytest.LogCaptureFixture, **kwargs: Any) -> DiskLog:
    """The log opened again, its recovery's WARNING lines in caplog."""
    with caplog.at_level(logging.WARNING):
        return DiskLog(directory, **kwargs)


def offsets_of(raw: bytes) -> list[tuple[int, int]]:
    return [(batch.base_offset, batch.last_offset) for batch, _ in iter_batches(raw)]


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.log"))


def test_disk_log_satisfies_the_protocol(tmp_path: Path) -> None:
    log: ReplicatedLog = DiskLog(tmp_path / "log")
    assert (log.start_offset(), log.end_offset(), log.flushed_offset()) == (0, 0, 0)
    assert log.last_fetched_epoch() == 0
    assert log.read(0, 1024) == b""


def test_append_read_flush_across_segment_rolls(tmp_path: Path) -> None:
    directory = tmp_path / "__cluster_metadata-0"
    log = DiskLog(directory, segment_bytes=SMALL_SEGMENT_BYTES)
    assert log.append_as_leader(records(3), 1, 1_000) == OffsetAndEpoch(2, 1)
    fill(log, 19)
    assert log.end_offset() == 60
    assert log.flushed_offset() == 0
    files = segment_files(directory)
    assert len(files) > 2
    assert files[0] == "00000000000000000000.log"
    assert all(len(name) == len("00000000000000000000.log") for name in files)
    assert all(p.stat().st_size <= SMALL_SEGMENT_BYTES for p in directory.glob("*.log"))
    log.flush()
    assert log.flushed_offset() == 60

    everything = log.read(0, 1 << 20)
    assert offsets_of(everything) == [(i, i + 2) for i in range(0, 60, 3)]
    # The first batch holds the start offset even mid-batch, and crossing segments works.
    assert offsets_of(log.read(31, 1 << 20))[0] == (30, 32)
    assert offsets_of(log.read(31, 1 << 20))[-1] == (57, 59)
    # At least one batch even if it exceeds max_bytes; otherwise whole batches within it.
    assert offsets_of(log.read(4, 1)) == [(3, 5)]
    two_sizes = len(log.read(0, 1)) + len(log.read(3, 1))
    assert offsets_of(log.read(0, two_sizes)) == [(0, 2), (3, 5)]
    assert offsets_of(log.read(0, two_sizes - 1)) == [(0, 2)]
    assert log.read(60, 1024) == b""
    log.close()


def test_reopen_recovers_everything(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = flushed_log(directory, 10, 10, segment_bytes=SMALL_SEGMENT_BYTES)
    before = log.read(0, 1 << 20)
    log.close()

    reopened = DiskLog(directory, segment_bytes=SMALL_SEGMENT_BYTES)
    assert reopened.end_offset() == 60
    assert reopened.flushed_offset() == 60
    assert reopened.start_offset() == 0
    assert reopened.last_fetched_epoch() == 2
    assert reopened.end_offset_for_epoch(1) == OffsetAndEpoch(30, 1)
    assert reopened.read(0, 1 << 20) == before
    assert reopened.append_as_leader(records(1), 2, 5_000) == OffsetAndEpoch(60, 2)
    reopened.close()


def test_torn_tail_is_truncated_at_last_whole_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    flushed_log(directory, 5).close()
    segment = directory / "00000000000000000000.log"
    size = segment.stat().st_size
    with segment.open("r+b") as handle:
        handle.truncate(size - 7)

    reopened = reopened_warning(directory, caplog)
    assert reopened.end_offset() == 12
    assert reopened.flushed_offset() == 12
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(segment) in m and "torn" in m and "byte" in m for m in warnings), warnings
    assert offsets_of(reopened.read(0, 1 << 20))[-1] == (9, 11)
    # The file was cut back, so the next append follows the last whole batch.
    reopened.append_as_leader(records(3), 1, 9_000)
    reopened.close()
    assert DiskLog(directory).end_offset() == 15


def test_flipped_byte_in_middle_batch_truncates_there_and_drops_later_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    log = flushed_log(directory, 20, segment_bytes=SMALL_SEGMENT_BYTES)
    # The second batch (offsets 3..5) of the first segment, which holds more than two.
    victim_position = len(log.read(0, 1))
    victim_size = len(log.read(3, 1))
    log.close()
    assert len(segment_files(directory)) > 2
    segment = directory / "00000000000000000000.log"
    assert segment.stat().st_size > victim_position + victim_size
    data = bytearray(segment.read_bytes())
    data[victim_position + victim_size - 2] ^= 0xFF  # inside the CRC-covered payload
    segment.write_bytes(bytes(data))

    reopened = reopened_warning(directory, caplog, segment_bytes=SMALL_SEGMENT_BYTES)
    assert reopened.end_offset() == 3
    assert segment_files(directory) == ["00000000000000000000.log"]
    assert segment.stat().st_size == victim_position
    message = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert f"at byte {victim_position}" in message and "CRC32C mismatch" in message
    reopened.close()


def test_offset_gap_between_segments_is_corruption(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = flushed_log(directory, 20, segment_bytes=SMALL_SEGMENT_BYTES)
    second = log.segment_paths()[1]
    log.close()
    second.unlink()  # the third segment now starts past the end of the first
    reopened = DiskLog(directory, segment_bytes=SMALL_SEGMENT_BYTES)
    assert reopened.end_offset() == int(second.name[:20])
    assert segment_files(directory) == ["00000000000000000000.log"]
    reopened.close()


def test_end_offset_for_epoch_follows_kafka(tmp_path: Path) -> None:
    log = DiskLog(tmp_path / "log", segment_bytes=SMALL_SEGMENT_BYTES)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(0, 0)  # empty log
    fill(log, 2, epoch=1)  # offsets 0..5
    fill(log, 3, epoch=3)  # offsets 6..14
    fill(log, 1, epoch=5)  # offsets 15..17
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(6, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(15, 3)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(18, 5)
    # Not present: the largest epoch below it, ending where the next one starts.
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(6, 1)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(15, 3)
    # Larger than all: the log end offset and the last epoch.
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(18, 5)
    # Smaller than all: the start offset, epoch 0 (no snapshot).
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    assert log.last_fetched_epoch() == 5
    with pytest.raises(ValueError, match="epoch 4 after epoch 5"):
        log.append_as_leader(records(1), 4, 0)
    log.close()


def test_truncate_to_then_append(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    # Epoch 2 starts at 30.
    log = flushed_log(directory, 10, 10, segment_bytes=SMALL_SEGMENT_BYTES)
    segments_before = len(segment_files(directory))
    with pytest.raises(ValueError, match="batch boundary"):
        log.truncate_to(31)
    log.truncate_to(24)
    assert log.end_offset() == 24
    assert log.flushed_offset() == 24
    assert log.last_fetched_epoch() == 1
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(24, 1)
    assert len(segment_files(directory)) < segments_before
    assert log.append_as_leader(records(2), 3, 7_000) == OffsetAndEpoch(25, 3)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(24, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(26, 3)
    log.truncate_to(99)  # at or past the end: nothing to do
    assert log.end_offset() == 26
    log.flush()
    log.close()
    reopened = DiskLog(directory, segment_bytes=SMALL_SEGMENT_BYTES)
    assert offsets_of(reopened.read(21, 1 << 20)) == [(21, 23), (24, 25)]
    reopened.truncate_to(0)
    assert (reopened.start_offset(), reopened.end_offset()) == (0, 0)
    assert segment_files(directory) == ["00000000000000000000.log"]
    assert reopened.last_fetched_epoch() == 0
    reopened.close()


def test_append_as_follower_validates_input(tmp_path: Path) -> None:
    log = DiskLog(tmp_path / "log", segment_bytes=SMALL_SEGMENT_BYTES)
    fill(log, 1, epoch=2)  # offsets 0..2
    good = encode_batch(3, 2, 10, records(2)) + encode_batch(5, 3, 11, records(4))

    corrupt = bytearray(good)
    corrupt[-1] ^= 0x01
    with pytest.raises(CorruptBatchError):
        log.append_as_follower(bytes(corrupt))
    assert log.end_offset() == 3  # nothing of a rejected fetch is appended

    with pytest.raises(ValueError, match="expected 3"):
        log.append_as_follower(encode_batch(4, 2, 10, records(1)))
    with pytest.raises(ValueError, match="expected 5"):
        log.append_as_follower(encode_batch(3, 2, 10, records(2)) + encode_batch(6, 2, 10, [b"x"]))
    with pytest.raises(ValueError, match="epoch 1 after epoch 2"):
        log.append_as_follower(encode_batch(3, 1, 10, records(1)))
    assert log.end_offset() == 3

    assert log.append_as_follower(good) == 9
    assert log.append_as_follower(b"") == 9
    assert log.last_fetched_epoch() == 3
    assert log.read(3, 1 << 20) == good
    log.close()


def test_read_committed_yields_whole_batches_below_to_offset(tmp_path: Path) -> None:
    log = DiskLog(tmp_path / "log", segment_bytes=SMALL_SEGMENT_BYTES)
    fill(log, 10)
    batches = list(log.read_committed(4, 15))
    assert [(b.base_offset, b.last_offset) for b in batches] == [(3, 5), (6, 8), (9, 11), (12, 14)]
    assert batches[0].records[0].value == b"e1b1-0"
    assert [b.base_offset for b in log.read_committed(15, 16)] == []
    assert [b.base_offset for b in log.read_committed(27, 100)] == [27]
    log.close()


def test_committed_batches_are_read_at_the_call_and_decoded_as_they_are_taken(
    tmp_path: Path,
) -> None:
    """The Raft applier decodes committed batches one at a time, giving its loop back between
    them (issue 35): a snapshot installed meanwhile (FetchSnapshot) replaces the segments, and
    the batches still come from the bytes read at the call."""
    log = DiskLog(tmp_path / "log", segment_bytes=SMALL_SEGMENT_BYTES)
    fill(log, 10)
    batches = log.read_committed(0, 30)
    first = next(batches)
    log.install_snapshot(SnapshotId(40, 4), encode_batch(0, 4, 1, [b"newer"]))
    rest = list(batches)
    assert [b.base_offset for b in [first, *rest]] == list(range(0, 30, 3))
    assert rest[-1].records[0].value == b"e1b9-0"
    log.close()


def test_snapshot_create_read_clean_and_reopen(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = flushed_log(directory, 10, 10, segment_bytes=SMALL_SEGMENT_BYTES)
    snapshot = encode_batch(0, 2, 1, [b"state-a", b"state-b"], is_control=False)
    with pytest.raises(ValueError, match="epoch"):
        log.create_snapshot(SnapshotId(45, 1), snapshot)  # entry 44 is from epoch 2
    with pytest.raises(ValueError, match="past the log end"):
        log.create_snapshot(SnapshotId(61, 2), snapshot)
    log.create_snapshot(SnapshotId(45, 2), snapshot)
    assert (directory / "00000000000000000045-0000000002.checkpoint").read_bytes() == snapshot
    assert log.latest_snapshot_id() == SnapshotId(45, 2)
    assert log.start_offset() == 0  # creating a snapshot does not clean the log

    chunk, total = log.read_snapshot(SnapshotId(45, 2), 0, 10)
    rest, _ = log.read_snapshot(SnapshotId(45, 2), 10, 1 << 20)
    assert total == len(snapshot) and chunk + rest == snapshot
    with pytest.raises(KeyError):
        log.read_snapshot(SnapshotId(44, 2), 0, 10)

    segments_before = len(segment_files(directory))
    log.delete_before_snapshot()
    assert log.start_offset() == 45
    assert len(segment_files(directory)) < segments_before
    assert int(segment_files(directory)[0][:20]) <= 45
    with pytest.raises(ValueError, match="below the log start offset"):
        log.read(10, 100)
    assert offsets_of(log.read(45, 1))[0] == (45, 47)
    # Epochs below the start are clamped to it; older ones answer the snapshot's id.
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(45, 2)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(60, 2)
    with pytest.raises(ValueError, match="below"):
        log.truncate_to(30)
    log.close()

    reopened = DiskLog(directory, segment_bytes=SMALL_SEGMENT_BYTES)
    assert reopened.start_offset() == 45
    assert reopened.end_offset() == 60
    assert reopened.latest_snapshot_id() == SnapshotId(45, 2)
    reopened.close()


def test_only_the_latest_two_snapshots_below_the_start_are_kept(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = DiskLog(directory, segment_bytes=SMALL_SEGMENT_BYTES)
    fill(log, 20, epoch=1)
    payload = encode_batch(0, 1, 1, [b"s"])
    for end in (12, 24, 36, 48):
        log.create_snapshot(SnapshotId(end, 1), payload)
    assert len(list(directory.glob("*.checkpoint"))) == 4  # the log still starts at 0
    log.delete_before_snapshot()
    assert log.snapshot_ids() == [SnapshotId(36, 1), SnapshotId(48, 1)]
    assert sorted(p.name[:20] for p in directory.glob("*.checkpoint")) == [
        "00000000000000000036", "00000000000000000048",
    ]
    log.close()


def test_install_snapshot_restarts_the_log(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = DiskLog(directory, segment_bytes=SMALL_SEGMENT_BYTES)
    fill(log, 12, epoch=1)
    snapshot = encode_batch(0, 4, 1, [b"leader-state"])
    log.install_snapshot(SnapshotId(100, 4), snapshot)
    assert (log.start_offset(), log.end_offset(), log.flushed_offset()) == (100, 100, 100)
    assert log.last_fetched_epoch() == 4
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(100, 4)
    assert log.end_offset_for_epoch(7) == OffsetAndEpoch(100, 4)
    assert segment_files(directory) == ["00000000000000000100.log"]
    assert log.read(100, 1024) == b""
    log.append_as_follower(encode_batch(100, 5, 1, records(2)))
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(100, 4)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(102, 5)
    log.flush()
    log.close()
    reopened = DiskLog(directory)
    assert (reopened.start_offset(), reopened.end_offset()) == (100, 102)
    assert reopened.read_snapshot(SnapshotId(100, 4), 0, 1 << 20) == (snapshot, len(snapshot))
    reopened.close()


def test_snapshot_written_before_a_crash_mid_install_wins_on_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    flushed_log(directory, 4).close()
    # A follower wrote the fetched snapshot, then crashed before emptying its log.
    snapshot_path(directory, SnapshotId(50, 3)).write_bytes(encode_batch(0, 3, 1, [b"x"]))
    reopened = reopened_warning(directory, caplog)
    assert (reopened.start_offset(), reopened.end_offset()) == (50, 50)
    assert reopened.last_fetched_epoch() == 3
    assert "behind snapshot" in caplog.text
    reopened.close()


def test_corrupt_snapshot_is_skipped_for_the_previous_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    log = flushed_log(directory, 10)
    payload = encode_batch(0, 1, 1, [b"older"])
    log.create_snapshot(SnapshotId(15, 1), payload)
    log.create_snapshot(SnapshotId(24, 1), encode_batch(0, 1, 1, [b"newer"]))
    log.close()
    newest = snapshot_path(directory, SnapshotId(24, 1))
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0x55
    newest.write_bytes(bytes(data))
    reopened = reopened_warning(directory, caplog)
    assert reopened.latest_snapshot_id() == SnapshotId(15, 1)
    assert reopened.start_offset() == 15
    assert reopened.read_snapshot(SnapshotId(15, 1), 0, 1 << 20)[0] == payload
    assert str(newest) in caplog.text and "CRC32C mismatch" in caplog.text
    reopened.close()


def test_closed_log_refuses_appends(tmp_path: Path) -> None:
    log = DiskLog(tmp_path / "log")
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.append_as_leader(records(1), 1, 0)


def test_failed_fsync_takes_the_log_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    log = DiskLog(tmp_path / "log")
    log.append_as_leader(records(1), 1, 0)

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(StorageError, match="EIO") as first:
        log.flush()
    assert log.flushed_offset() == 0
    monkeypatch.undo()
    with pytest.raises(StorageError) as second:
        log.append_as_leader(records(1), 1, 0)
    assert second.value is first.value
    log.close()


def test_measure_append_and_flush_of_one_small_batch(tmp_path: Path) -> None:
    log = DiskLog(tmp_path / "log")
    rounds = 50
    started = time.perf_counter()
    for i in range(rounds):
        log.append_as_leader([b"k" * 16, b"v" * 64], 1, i)
        log.flush()
    elapsed_ms = (time.perf_counter() - started) * 1000 / rounds
    print(f"\nDiskLog append+flush of one 2-record batch: {elapsed_ms:.3f} ms per round")
    assert log.flushed_offset() == 2 * rounds
    log.close()


def test_a_lazy_new_log_has_no_segment_file_until_its_first_append(tmp_path: Path) -> None:
    # Issue 35: a broker opening 10,000 new partitions pays no fsync and holds no descriptor.
    directory = tmp_path / "lazy"
    log = DiskLog(directory, lazy=True)
    assert log.unwritten and not directory.exists()  # not even the directory (issue 35)
    assert log.read(0, 1024) == b"" and log.end_offset() == 0
    log.flush()
    assert segment_files(directory) == []
    fill(log, 2)
    log.flush()
    assert not log.unwritten and segment_files(directory) == ["00000000000000000000.log"]
    log.close()
    reopened = DiskLog(directory, lazy=True)
    assert reopened.end_offset() == 6 and offsets_of(reopened.read(0, 1 << 20)) == [(0, 2), (3, 5)]
    reopened.close()
    # Reopened before any append: still nothing on disk, and it works as a log.
    empty = DiskLog(tmp_path / "empty", lazy=True)
    empty.close()
    again = DiskLog(tmp_path / "empty", lazy=True)
    fill(again, 1)
    assert again.end_offset() == 3
    again.close()


def test_a_snapshot_written_in_slices_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    """create_snapshot_steps (issue 35): one yield per chunk, nothing visible until the last
    chunk is fsync'd and renamed, the same file as create_snapshot's; a snapshot as new
    installed meanwhile (fetched from the leader) wins and the slices leave no file; a corrupt
    chunk writes nothing."""
    directory = tmp_path / "log"
    log = flushed_log(directory, 10)
    chunks = [encode_batch(0, 1, 1, [b"a", b"b"]), encode_batch(2, 1, 1, [b"c"])]
    steps = log.create_snapshot_steps(SnapshotId(15, 1), iter(chunks))
    next(steps)
    assert log.latest_snapshot_id() is None and list(directory.glob("*.checkpoint")) == []
    assert list(steps) == [None]
    whole = b"".join(chunks)
    assert log.read_snapshot(SnapshotId(15, 1), 0, 1 << 20) == (whole, len(whole))

    racing = log.create_snapshot_steps(SnapshotId(24, 1), iter(chunks))
    next(racing)
    log.install_snapshot(SnapshotId(40, 2), encode_batch(0, 2, 1, [b"leader"]))
    list(racing)
    assert log.latest_snapshot_id() == SnapshotId(40, 2)
    assert not snapshot_path(directory, SnapshotId(24, 1)).exists()

    corrupt = bytearray(chunks[1])
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptBatchError):
        list(log.create_snapshot_steps(SnapshotId(40, 2), iter([chunks[0], bytes(corrupt)])))
    assert sorted(p.name for p in directory.iterdir() if p.name.startswith(".")) == []
    log.close()
