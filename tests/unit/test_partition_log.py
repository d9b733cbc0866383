"""broker.runtime.partition_log on real files: checkpoints, appends, recovery of torn and
corrupt tails with the epoch cache reset past them."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.runtime import partition_log
from broker.runtime.partition_log import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    LogDirCheckpoints,
    PartitionLog,
    parse_partition_dir_name,
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
    read_partition_metadata,
    write_leader_epoch_checkpoint,
    write_offset_checkpoint,
)
from kafkawire.errors import Errors, KafkaError
from storage.core.leader_epoch_cache import EpochEndOffset, EpochEntry
from storage.core.log_retention import Deletion, RetentionConfig
from storage.core.record_batch import Record, encode_batch, iter_batches


def batch(values: list[bytes], epoch: int = 0, base_offset: int = 0) -> bytes:
    return encode_batch(base_offset, epoch, 1_000, [Record(None, v) for v in values])


def test_leader_epoch_checkpoint_is_kafkas_text_format(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    write_leader_epoch_checkpoint(path, [EpochEntry(0, 0), EpochEntry(3, 42)])
    assert path.read_text() == "0\n2\n0 0\n3 42\n"
    assert read_leader_epoch_checkpoint(path) == [EpochEntry(0, 0), EpochEntry(3, 42)]
    path.write_text("0\n3\n0 0\n")
    with pytest.raises(CheckpointError, match="3 entries announced"):
        read_leader_epoch_checkpoint(path)


def test_offset_checkpoints_round_trip(tmp_path: Path) -> None:
    checkpoints = LogDirCheckpoints(tmp_path)
    assert checkpoints.read_high_watermarks() == {}
    checkpoints.write_high_watermarks({("foo", 1): 7, ("foo", 0): 12, ("bar", 2): 0})
    checkpoints.write_recovery_points({("foo", 0): 20})
    assert checkpoints.high_watermark_path.read_text() == "0\n3\nbar 2 0\nfoo 0 12\nfoo 1 7\n"
    assert checkpoints.read_high_watermarks() == {("foo", 1): 7, ("foo", 0): 12, ("bar", 2): 0}
    assert read_offset_checkpoint(checkpoints.recovery_point_path) == {("foo", 0): 20}


def test_corrupt_offset_checkpoint_reads_as_empty_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_offset_checkpoint(tmp_path / "replication-offset-checkpoint", {("foo", 0): 5})
    (tmp_path / "replication-offset-checkpoint").write_text("0\n1\nfoo zero 5\n")
    with caplog.at_level(logging.WARNING):
        assert LogDirCheckpoints(tmp_path).read_high_watermarks() == {}
    assert "corrupt checkpoint" in caplog.text


def test_partition_directory_names() -> None:
    assert parse_partition_dir_name("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir_name("__cluster_metadata") is None


def test_leader_append_assigns_offsets_and_epoch(tmp_path: Path) -> None:
    with PartitionLog(tmp_path, "foo", 0) as log:
        assert log.directory == tmp_path / "foo-0"
        log.assign_leader_epoch(3, 0)
        # The producer's offsets and epoch are replaced by the leader's.
        first = log.append_as_leader(batch([b"a", b"b"], epoch=99, base_offset=500), 3)
        second = log.append_as_leader(batch([b"c"]) + batch([b"d", b"e"]), 3)
        assert (first.base_offset, first.last_offset) == (0, 1)
        assert (second.base_offset, second.last_offset, second.record_count) == (2, 4, 3)
        raw = log.read(0, 1 << 20, max_offset=log.log_end_offset)
        batches = [b for b, _ in iter_batches(raw)]
        assert [(b.base_offset, b.leader_epoch) for b in batches] == [(0, 3), (2, 3), (3, 3)]
        assert [r.value for b in batches for r in b.records] == [b"a", b"b", b"c", b"d", b"e"]


def test_leader_append_rejects_corrupt_and_oversize_batches(tmp_path: Path) -> None:
    with PartitionLog(tmp_path, "foo", 0) as log:
        good = batch([b"x" * 100])
        bad = bytearray(good)
        bad[-3] ^= 0xFF
        with pytest.raises(KafkaError) as corrupt:
            log.append_as_leader(bytes(bad), 0)
        assert corrupt.value.error is Errors.CORRUPT_MESSAGE
        with pytest.raises(KafkaError) as too_large:
            log.append_as_leader(good, 0, max_batch_bytes=50)
        assert too_large.value.error is Errors.MESSAGE_TOO_LARGE
        assert log.log_end_offset == 0  # nothing of a refused request is written


def test_read_stops_below_the_high_watermark(tmp_path: Path) -> None:
    with PartitionLog(tmp_path, "foo", 0) as log:
        for value in (b"a", b"b", b"c"):
            log.append_as_leader(batch([value]), 0)
        consumer = [b.base_offset for b, _ in iter_batches(log.read(0, 1 << 20, max_offset=2))]
        assert consumer == [0, 1]
        assert log.read(2, 1 << 20, max_offset=2) == b""
        with pytest.raises(KafkaError) as out_of_range:
            log.read(9, 100, max_offset=9)
        assert out_of_range.value.error is Errors.OFFSET_OUT_OF_RANGE


def test_follower_append_learns_epochs_and_checkpoints_them(tmp_path: Path) -> None:
    with PartitionLog(tmp_path, "foo", 0) as log:
        fetched = batch([b"a", b"b"], epoch=1, base_offset=0) + batch([b"c"], epoch=4,
                                                                      base_offset=2)
        info = log.append_as_follower(fetched)
        assert (info.base_offset, info.last_offset) == (0, 2)
        assert log.epoch_cache.entries() == (EpochEntry(1, 0), EpochEntry(4, 2))
        assert read_leader_epoch_checkpoint(log.epoch_checkpoint_path) == [
            EpochEntry(1, 0), EpochEntry(4, 2)
        ]
        assert log.end_offset_for_epoch(1) == EpochEndOffset(1, 2)
        assert log.end_offset_for_epoch(4) == EpochEndOffset(4, 3)
        assert log.latest_epoch() == 4


def test_truncation_resets_the_epoch_cache(tmp_path: Path) -> None:
    with PartitionLog(tmp_path, "foo", 0) as log:
        log.append_as_follower(batch([b"a", b"b"], 1, 0) + batch([b"c", b"d"], 2, 2))
        assert log.truncate_to(3) == 2  # inside the second batch: rounds down to its start
        assert log.epoch_cache.entries() == (EpochEntry(1, 0),)
        assert read_leader_epoch_checkpoint(log.epoch_checkpoint_path) == [EpochEntry(1, 0)]


def test_reopen_keeps_everything_flushed(tmp_path: Path) -> None:
    with PartitionLog(tmp_path, "foo", 0) as log:
        log.assign_leader_epoch(2, 0)
        log.append_as_leader(batch([b"a"]), 2)
        log.flush()
        assert log.flushed_offset == 1
    with PartitionLog(tmp_path, "foo", 0, recovery_point=1) as log:
        assert log.log_end_offset == 1
        assert log.epoch_cache.entries() == (EpochEntry(2, 0),)


def test_torn_tail_is_cut_and_the_epoch_cache_reset_past_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with PartitionLog(tmp_path, "foo", 0) as log:
        log.append_as_follower(batch([b"a"], 1, 0) + batch([b"b"], 5, 1))
        log.flush()
        segment = log.directory / f"{0:020d}.log"
    data = segment.read_bytes()
    segment.write_bytes(data[:-10])  # the second batch is torn
    with caplog.at_level(logging.WARNING), PartitionLog(tmp_path, "foo", 0) as log:
        assert log.log_end_offset == 1
        assert log.epoch_cache.entries() == (EpochEntry(1, 0),)
        assert read_leader_epoch_checkpoint(log.epoch_checkpoint_path) == [EpochEntry(1, 0)]
    assert "truncating" in caplog.text


def test_corrupt_batch_on_disk_truncates_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with PartitionLog(tmp_path, "foo", 0) as log:
        for epoch, value in ((1, b"first"), (2, b"second"), (2, b"third")):
            log.append_as_follower(batch([value], epoch, log.log_end_offset))
        log.flush()
        segment = log.directory / f"{0:020d}.log"
        second_end = len(batch([b"first"], 1, 0)) + len(batch([b"second"], 2, 1))
    data = bytearray(segment.read_bytes())
    data[second_end - 2] ^= 0xFF  # a payload byte of the second batch
    segment.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING), PartitionLog(tmp_path, "foo", 0) as log:
        assert log.log_end_offset == 1
        assert log.latest_epoch() == 1
    assert "CRC32C mismatch" in caplog.text


def test_missing_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    with PartitionLog(tmp_path, "foo", 0) as log:
        log.append_as_follower(batch([b"a"], 1, 0) + batch([b"b"], 3, 1) + batch([b"c"], 3, 2))
        log.flush()
    (tmp_path / "foo-0" / LEADER_EPOCH_CHECKPOINT).write_text("garbage")
    with PartitionLog(tmp_path, "foo", 0) as log:
        assert log.epoch_cache.entries() == (EpochEntry(1, 0), EpochEntry(3, 1))


def test_flush_policy(tmp_path: Path) -> None:
    with PartitionLog(tmp_path, "foo", 0) as log:
        log.append_as_leader(batch([b"a"]), 0)
        assert not log.flush_due(1)
        assert log.flush_due(-1)
        assert log.flush_due(None)  # follower appends flush before the next fetch
        log.flush()
        assert not log.flush_due(-1)
    with PartitionLog(tmp_path, "bar", 0, flush_messages=3) as log:
        log.append_as_leader(batch([b"a", b"b"]), 0)
        assert not log.flush_due(-1)
        log.append_as_leader(batch([b"c"]), 0)
        assert log.flush_due(1)
        assert log.flush() == 3


def test_a_new_lazy_log_touches_the_disk_at_its_first_append_metadata_file_first(
    tmp_path: Path,
) -> None:
    """Issue 35: a broker becoming a replica of 10,000 partitions creates no directory, no
    partition.metadata and no checkpoint for them (one write and two fsyncs each held its loop
    for minutes); the first append writes partition.metadata before any data, as Kafka's
    UnifiedLog.maybeFlushMetadataFile (a log without it is a stray at start-up), then the
    deferred leader epoch checkpoint. A log never written leaves nothing behind."""
    topic_id = uuid.UUID(int=5)
    plog = PartitionLog(tmp_path, "t", 0, topic_id=topic_id, lazy=True)
    plog.assign_leader_epoch(3, 0)
    plog.truncate_to(0)
    assert plog.topic_id == topic_id and plog.log_end_offset == 0
    assert list(tmp_path.iterdir()) == []
    moved = plog.rename_dir("t-0.x-delete")
    assert moved.name == "t-0.x-delete" and list(tmp_path.iterdir()) == []
    plog.close()
    assert list(tmp_path.iterdir()) == []

    plog = PartitionLog(tmp_path, "t", 1, topic_id=topic_id, lazy=True)
    plog.assign_leader_epoch(3, 0)
    plog.append_as_follower(batch([b"a", b"b"], epoch=3))
    plog.flush()
    assert read_partition_metadata(tmp_path / "t-1") == topic_id
    assert read_leader_epoch_checkpoint(tmp_path / "t-1" / LEADER_EPOCH_CHECKPOINT) == [
        EpochEntry(3, 0)
    ]
    plog.close()
    reopened = PartitionLog(tmp_path, "t", 1, lazy=True)
    assert reopened.topic_id == topic_id and reopened.log_end_offset == 2
    assert list(reopened.epoch_cache.entries()) == [EpochEntry(3, 0)]
    reopened.close()


def test_new_logs_share_one_default_retention_until_given_their_topics(tmp_path: Path) -> None:
    """Issue 35: every new log built a RetentionConfig of Kafka's defaults (a frozen dataclass
    of seven fields), which the broker replaces with its topic's at once: 100,000 of them in
    a restarted broker's first publish. New logs share one; each is given its own as before."""
    first = PartitionLog(tmp_path, "t", 0, lazy=True, new=True)
    second = PartitionLog(tmp_path, "t", 1, lazy=True, new=True)
    assert first.retention is second.retention
    assert first.retention == RetentionConfig()
    second.retention = RetentionConfig(retention_ms=5)
    assert first.retention == RetentionConfig() and second.retention.retention_ms == 5
    first.close()
    second.close()


def test_a_new_log_builds_its_disk_log_at_its_first_append_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a restarted broker opens 100,000 new partition logs in its first publish and
    most stay empty; building each one's DiskLog, segment and paths was a third of that
    publish. A new lazy log answers an empty log's offsets, takes a leader epoch, a
    truncation to 0 (a follower's), a reconfiguration, retention, a flush, a rename and a close without one,
    and builds it at its first append, with the configs it was given meanwhile."""
    built: list[Path] = []

    class CountingDiskLog(partition_log.DiskLog):
        def __init__(self, directory: Path, **kwargs: Any) -> None:
            built.append(directory)
            super().__init__(directory, **kwargs)

    monkeypatch.setattr(partition_log, "DiskLog", CountingDiskLog)
    topic_id = uuid.UUID(int=5)
    plog = PartitionLog(tmp_path, "t", 0, topic_id=topic_id, lazy=True, new=True)
    assert (plog.log_start_offset, plog.log_end_offset, plog.flushed_offset) == (0, 0, 0)
    assert plog.truncate_to(0) == 0
    plog.assign_leader_epoch(3, 0)
    assert plog.latest_epoch() == 3
    plog.reconfigure(4096, False)
    plog.retention = RetentionConfig(retention_ms=0, retention_bytes=0)
    assert plog.delete_old_segments(high_watermark=0, now_ms=10**13) == (Deletion(0), [])
    assert plog.size_bytes() == 0 and plog.flush() == 0 and not plog.has_directory
    assert plog.segment_bytes == 4096 and plog.directory == tmp_path / "t-0"
    assert plog.rename_dir("t-0.x-delete") == tmp_path / "t-0.x-delete"
    plog.close()
    assert built == [] and list(tmp_path.iterdir()) == []

    plog = PartitionLog(tmp_path, "t", 1, topic_id=topic_id, lazy=True, new=True)
    plog.reconfigure(4096, False)
    plog.assign_leader_epoch(3, 0)
    assert built == []
    plog.append_as_follower(batch([b"a", b"b"], epoch=3))
    assert built == [tmp_path / "t-1"] and plog.segment_bytes == 4096
    assert plog.log_end_offset == 2 and plog.flush() == 2 and plog.has_directory
    assert read_leader_epoch_checkpoint(tmp_path / "t-1" / LEADER_EPOCH_CHECKPOINT) == [
        EpochEntry(3, 0)
    ]
    plog.close()
