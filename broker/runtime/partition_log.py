"""A partition replica's storage: `<log.dir>/<topic>-<partition>/` (ARCHITECTURE.md "On disk").

Segments are raft's DiskLog (CRC32C-checked batches of the one record batch format; opening
cuts a torn or corrupt tail with a WARNING). Next to them, `leader-epoch-checkpoint` holds the
leader epoch cache in Kafka's text format (version line, count line, `epoch start_offset`
lines), rewritten atomically whenever the cache changes. `<offset>.snapshot` files hold the
idempotent producers' state (storage/core/producer_state.py) as of that offset: written when a
segment rolls and on close, so opening loads the newest one and replays only the log after it;
a truncation drops the snapshots past the cut and rebuilds the state the same way. Per log
directory, `recovery-point-offset-checkpoint`, `replication-offset-checkpoint` (the HWM) and
`log-start-offset-checkpoint` (the log start offset DeleteRecords advanced) use Kafka's format with
`topic partition offset` lines; the runtime writes them with `write_offset_checkpoint`.

The log start offset may sit above the first segment (DeleteRecords, KIP-107): offsets below it
are no longer served (OFFSET_OUT_OF_RANGE, ListOffsets earliest). Retention
(storage/core/log_retention.py, run by broker/runtime/log_manager.py) removes whole segments below
the high watermark and moves the log start offset to the next segment's base, as Kafka does; the
segments DeleteRecords left wholly below the start go at the same time. Removed segments are
renamed `.deleted` and unlinked file.delete.delay.ms later. The log cleaner
(storage/core/log_cleaner.py) swaps cleaned segments in (`.cleaned` -> `.swap` -> `.log`), which
leaves offset gaps: the log accepts batches whose base offset is past the previous batch's end.

Flush policy (`flush.messages`): None (the default) fsyncs every acks=all append and every
follower append before the follower reports its new end in its next Fetch, so an acked acks=all
write is durable on every ISR member that counted toward the HWM (rule 20); N > 0 fsyncs once N
messages are unflushed, whatever the acks.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from broker.core.topic_write_configs import (
    TopicWriteConfig,
    check_decompressed_sizes,
    check_timestamps,
    stored_batch,
)
from kafkawire.clock import now_ms
from kafkawire.constants import ACKS_ALL
from kafkawire.errors import Errors, KafkaError
from raft.core.replica_key import uuid_from_str, uuid_to_str
from storage.core.compression import UnsupportedCompressionError
from storage.core.leader_epoch_cache import EpochEndOffset, EpochEntry, LeaderEpochCache
from storage.core.log_retention import (
    Deletion,
    RetentionConfig,
    SegmentView,
    segments_to_delete,
    should_roll_by_time,
)
from storage.core.producer_state import (
    CorruptSnapshotError,
    ProducerBatch,
    ProducerStateManager,
    parse_snapshot_file_name,
    snapshot_file_name,
)
from storage.core.record_batch import (
    HEADER_SIZE,
    MAX_BATCH_SIZE_BYTES,
    BatchHeader,
    CorruptBatchError,
    MessageTooLargeError,
    UnsupportedMagicError,
    read_header,
    validated_batch,
)
from storage.core.record_validation import RecordValidationError, keyless_record_errors
from storage.runtime.closing import ClosedOnExit
from storage.runtime.disk_log import DEFAULT_SEGMENT_BYTES, DiskLog
from storage.runtime.fsutil import fsync_dir, remove_stale_temp_files, storage_errors, write_atomic
from storage.runtime.power_loss import POWER_LOSS_SIM, default_disk_mode
from storage.runtime.segment import Segment

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CHECKPOINT_VERSION = 0
_SCAN_CHUNK_BYTES = 1 << 20
PRODUCER_SNAPSHOTS_RETAINED = 2
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"

_log = logging.getLogger("minikraft.broker")


_DEFAULT_RETENTION = RetentionConfig()


class CheckpointError(ValueError):
    """A checkpoint file that does not parse; says which file and line."""


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def _dir_name_with_suffix(topic: str, partition: int, suffix: str) -> str:
    """Kafka's logDirNameWithSuffixCappedLength: `<topic>-<p>.<uuid hex><suffix>`, the topic
    cut so the name stays within 255 bytes."""
    full_suffix = f"-{partition}.{uuid.uuid4().hex}{suffix}"
    return topic[: max(0, 255 - len(full_suffix))] + full_suffix


def delete_dir_name(topic: str, partition: int) -> str:
    """Where a deleted topic's partition waits for file.delete.delay.ms (Kafka's -delete)."""
    return _dir_name_with_suffix(topic, partition, DELETE_DIR_SUFFIX)


def stray_dir_name(topic: str, partition: int) -> str:
    """Where a stray log is moved aside, kept for an operator (Kafka's -stray)."""
    return _dir_name_with_suffix(topic, partition, STRAY_DIR_SUFFIX)


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id in `partition.metadata` (Kafka's PartitionMetadataFile: `version: 0` and
    `topic_id: <base64>` lines); None if the file is missing or unreadable."""
    path = directory / PARTITION_METADATA_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    try:
        if int(fields.get("version", "-1").strip()) != PARTITION_METADATA_VERSION:
            return None
        return uuid_from_str(fields["topic_id"])
    except (KeyError, ValueError):
        return None


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    write_atomic(
        directory / PARTITION_METADATA_FILE,
        f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {uuid_to_str(topic_id)}\n".encode(),
    )


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    match = _PARTITION_DIR.match(name)
    return (match.group(1), int(match.group(2))) if match else None


# ---- Kafka's checkpoint text files ----


def _parse_checkpoint(path: Path, fields: int) -> list[list[str]]:
    with storage_errors(f"read {path}"):
        lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: missing version or count line")
    try:
        version, count = int(lines[0]), int(lines[1])
    except ValueError as exc:
        raise CheckpointError(f"{path}: bad header: {exc}") from exc
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unknown version {version}")
    body = [line for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise CheckpointError(f"{path}: {count} entries announced, {len(body)} found")
    rows = []
    for number, line in enumerate(body, start=3):
        parts = line.split()
        if len(parts) != fields:
            raise CheckpointError(f"{path} line {number}: expected {fields} fields: {line!r}")
        rows.append(parts)
    return rows


def _render_checkpoint(rows: Sequence[str]) -> bytes:
    return ("\n".join([str(CHECKPOINT_VERSION), str(len(rows)), *rows]) + "\n").encode("utf-8")


def read_leader_epoch_checkpoint(path: Path) -> list[EpochEntry]:
    """The entries in a leader-epoch-checkpoint; [] if the file does not exist."""
    if not path.exists():
        return []
    entries = []
    for epoch, offset in _parse_checkpoint(path, 2):
        try:
            entries.append(EpochEntry(int(epoch), int(offset)))
        except ValueError as exc:
            raise CheckpointError(f"{path}: bad entry {epoch} {offset}") from exc
    return entries


def write_leader_epoch_checkpoint(path: Path, entries: Sequence[EpochEntry]) -> None:
    write_atomic(path, _render_checkpoint([f"{e.epoch} {e.start_offset}" for e in entries]))


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """`topic partition offset` lines (recovery points or HWMs); {} if the file is missing."""
    if not path.exists():
        return {}
    offsets: dict[tuple[str, int], int] = {}
    for topic, partition, offset in _parse_checkpoint(path, 3):
        try:
            offsets[(topic, int(partition))] = int(offset)
        except ValueError as exc:
            raise CheckpointError(f"{path}: bad entry {topic} {partition} {offset}") from exc
    return offsets


def write_offset_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    rows = [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    write_atomic(path, _render_checkpoint(rows))


class LogDirCheckpoints:
    """The per-log-dir checkpoints. A file that does not parse is logged and read as empty:
    HWMs are then relearned from the leaders, and recovery always CRC-checks every batch."""

    def __init__(self, log_dir: Path, logger: logging.Logger | None = None) -> None:
        self.log_dir = Path(log_dir)
        self._logger = logger or _log

    @property
    def recovery_point_path(self) -> Path:
        return self.log_dir / RECOVERY_POINT_CHECKPOINT

    @property
    def high_watermark_path(self) -> Path:
        return self.log_dir / REPLICATION_OFFSET_CHECKPOINT

    def _read(self, path: Path) -> dict[tuple[str, int], int]:
        try:
            return read_offset_checkpoint(path)
        except CheckpointError as exc:
            self._logger.warning("Ignoring corrupt checkpoint: %s", exc)
            return {}

    @property
    def log_start_offset_path(self) -> Path:
        return self.log_dir / LOG_START_OFFSET_CHECKPOINT

    def read_log_start_offsets(self) -> dict[tuple[str, int], int]:
        return self._read(self.log_start_offset_path)

    def write_log_start_offsets(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_offset_checkpoint(self.log_start_offset_path, offsets)

    def read_recovery_points(self) -> dict[tuple[str, int], int]:
        return self._read(self.recovery_point_path)

    def read_high_watermarks(self) -> dict[tuple[str, int], int]:
        return self._read(self.high_watermark_path)

    def write_recovery_points(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_offset_checkpoint(self.recovery_point_path, offsets)

    def write_high_watermarks(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_offset_checkpoint(self.high_watermark_path, offsets)


# ---- the partition log ----


@dataclass(frozen=True, slots=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    record_count: int
    log_append_time_ms: int = -1  # the broker's append time on a LogAppendTime topic

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def producer_batch(header: BatchHeader, base_offset: int | None = None) -> ProducerBatch:
    """The producer fields of a batch header, at base_offset if the leader is assigning it."""
    base = header.base_offset if base_offset is None else base_offset
    return ProducerBatch(
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        base,
        base + header.last_offset_delta,
        header.max_timestamp_ms,
    )


def _max_timestamp_of(raw_batches: bytes) -> int:
    """The largest maxTimestamp of the batches (Kafka's appendInfo.maxTimestamp)."""
    position, largest = 0, -1
    while position + HEADER_SIZE <= len(raw_batches):
        header = read_header(raw_batches, position)
        largest = max(largest, header.max_timestamp_ms)
        position += header.size
    return largest


def _stamp(raw: bytes, position: int, base_offset: int, leader_epoch: int) -> bytes:
    """The batch at position with the leader's offset and epoch (neither is under the CRC)."""
    header = bytearray(raw[position : position + 16])
    struct.pack_into(">q", header, 0, base_offset)
    struct.pack_into(">i", header, 12, leader_epoch)
    return bytes(header)


class PartitionLog(ClosedOnExit):
    """Segments plus the leader epoch cache of one partition replica. Single-threaded, except
    that `flush()` may run in a worker thread while the event loop appends (DiskLog's rule)."""

    def __init__(
        self,
        log_dir: Path,
        topic: str,
        partition: int,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        flush_messages: int | None = None,
        preallocate: bool = False,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        topic_id: uuid.UUID | None = None,
        logger: logging.Logger | None = None,
        lazy: bool = False,
        new: bool = False,
    ) -> None:
        """`lazy`: a new log creates its segment file, and checkpoints its first leader
        epoch, at its first append: a broker opening 10,000 new partitions pays no fsync and
        holds no descriptor for them until they get data (issue 35). `new` (with `lazy`):
        the caller knows nothing of it is on disk, not even its directory (DiskLog)."""
        if flush_messages is not None and flush_messages < 1:
            raise ValueError(f"flush.messages must be positive, got {flush_messages}")
        self.topic = topic
        self.partition = partition
        self.name = partition_dir_name(topic, partition)
        # The log dir holding this partition (a rename stays in it): the checkpoints group
        # partitions by it without building a parent path per partition (issue 35).
        self.log_dir = log_dir if isinstance(log_dir, Path) else Path(log_dir)
        self.flush_messages = flush_messages
        self._logger = logger or _log
        # A new lazy log has nothing on disk: its path and its DiskLog (segment, index, the
        # path joins) are built at their first use (`_log`, `directory`), and its views answer
        # an empty log's offsets without them. A restarted broker opened its 100,000 empty
        # partitions at about 20 us each, a third of its first publish, and most stay empty
        # (issue 35). Not under the power-loss simulation, whose segments are never lazy.
        self._disk_options = (segment_bytes, preallocate)
        self._directory: Path | None = None
        self._disk: DiskLog | None = None
        if not (lazy and new and default_disk_mode() != POWER_LOSS_SIM):
            self._directory = self.log_dir / self.name
            self._disk = DiskLog(
                self._directory, segment_bytes=segment_bytes, logger=self._logger,
                preallocate=preallocate, allow_offset_gaps=True, lazy=lazy, new=new,
            )
        # segment.ms and the rest of retention; the runtime sets the topic's (log_manager).
        # Kafka's defaults until then, one shared frozen instance: a frozen dataclass of seven
        # fields built for each of a restarted broker's 100,000 new logs, each replaced at
        # once by its topic's (issue 35).
        self.retention = _DEFAULT_RETENTION
        # A new empty log's first epoch is checkpointed with its first append (issue 35).
        self._epoch_checkpoint_deferred = False
        self._unflushed_messages = 0
        self.epoch_cache = LeaderEpochCache()
        self.producer_state = ProducerStateManager()
        self._segment_count = 1 if self._disk is None else self._disk.segment_count()
        # Kafka's partition.metadata (which topic this log is of) is flushed before the first
        # append (UnifiedLog.maybeFlushMetadataFile): a new lazy log has no directory yet, so
        # it is written with the directory by the first append (issue 35: a write and two
        # fsyncs for each of 10,000 new partitions held the broker's loop for minutes).
        self._metadata_file_pending = False
        if self._disk is None or self._disk.directory_pending:
            self.topic_id = topic_id
            self._metadata_file_pending = topic_id is not None
            self._start_offset = 0
            return
        self.topic_id = read_partition_metadata(self.directory)
        if topic_id is not None and self.topic_id is None:
            write_partition_metadata(self.directory, topic_id)
            self.topic_id = topic_id
        # DeleteRecords' start, checkpointed; never past the log end (recovery may cut a tail).
        self._start_offset = min(log_start_offset or 0, self._log.end_offset())
        self._load_epoch_cache(recovery_point)
        self._load_producer_state()

    # ---- the DiskLog and the directory, built at their first use ----

    @property
    def _log(self) -> DiskLog:
        disk = self._disk
        if disk is None:
            segment_bytes, preallocate = self._disk_options
            disk = self._disk = DiskLog(
                self.directory, segment_bytes=segment_bytes, logger=self._logger,
                preallocate=preallocate, allow_offset_gaps=True, lazy=True, new=True,
            )
        return disk

    @property
    def directory(self) -> Path:
        directory = self._directory
        if directory is None:
            directory = self._directory = self.log_dir / self.name
        return directory

    @directory.setter
    def directory(self, directory: Path) -> None:
        self._directory = directory
        if self._disk is not None:
            self._disk.directory = directory

    # ---- recovery ----

    @property
    def epoch_checkpoint_path(self) -> Path:
        return self.directory / LEADER_EPOCH_CHECKPOINT

    def _load_epoch_cache(self, recovery_point: int | None) -> None:
        remove_stale_temp_files(self.directory, LEADER_EPOCH_CHECKPOINT)
        scan_from = self._log.start_offset()
        try:
            entries = read_leader_epoch_checkpoint(self.epoch_checkpoint_path)
            if entries and recovery_point is not None:
                scan_from = max(scan_from, min(recovery_point, entries[-1].start_offset))
            self.epoch_cache = LeaderEpochCache(entries)
        except (CheckpointError, ValueError) as exc:
            self._logger.warning(
                "Partition %s: rebuilding the leader epoch cache from the log (%s)", self.name, exc
            )
            self.epoch_cache = LeaderEpochCache()
        end = self._log.end_offset()
        before = self.epoch_cache.entries()
        # Recovery may have cut a torn tail: epochs that started past the end go (Kafka does too).
        self.epoch_cache.truncate_from_end(end)
        self.epoch_cache.truncate_from_start(self._log.start_offset())
        self._scan_epochs(scan_from, end)
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        if self.epoch_cache.entries() != before:
            self._logger.info(
                "Partition %s: leader epoch cache %s -> %s after loading a log ending at %d",
                self.name, list(before), list(self.epoch_cache.entries()), end,
            )
            self._write_epoch_checkpoint()

    def _scan_epochs(self, start: int, end: int) -> None:
        """Assign the epoch of every batch in [start, end) the cache does not know yet."""
        for header in self._headers(start, end):
            if header.leader_epoch > self.epoch_cache.latest_epoch():
                self.epoch_cache.assign(header.leader_epoch, header.base_offset)

    def _headers(self, start: int, end: int) -> Iterator[BatchHeader]:
        """The header of every batch from the one holding `start` on, below `end`, read a chunk
        at a time (loading a log reads no record twice into memory)."""
        offset = start
        while offset < end:
            raw = self._log.read(offset, _SCAN_CHUNK_BYTES)
            if not raw:
                return
            position = 0
            while position < len(raw):
                header = read_header(raw, position)
                yield header
                position += header.size
                offset = header.last_offset + 1

    def _snapshot_offsets(self) -> list[int]:
        offsets = (parse_snapshot_file_name(p.name) for p in self.directory.iterdir())
        return sorted(o for o in offsets if o is not None)

    def _load_producer_state(self) -> None:
        """The newest usable snapshot, then every batch after it (Kafka's loadProducerState).
        Snapshots past the log end (a cut tail, a truncation) or unreadable ones are deleted."""
        remove_stale_temp_files(self.directory, ".snapshot")
        start, end = self.log_start_offset, self.log_end_offset
        state = ProducerStateManager(map_end_offset=start)
        for offset in reversed(self._snapshot_offsets()):
            path = self.directory / snapshot_file_name(offset)
            if offset > end or offset < start:
                path.unlink(missing_ok=True)
                continue
            try:
                with storage_errors(f"read {path}"):
                    data = path.read_bytes()
                state = ProducerStateManager.decode_snapshot(data, offset)
                break
            except CorruptSnapshotError as exc:
                self._logger.warning("Partition %s: deleting %s: %s", self.name, path.name, exc)
                path.unlink(missing_ok=True)
        for header in self._headers(state.map_end_offset, end):
            if header.last_offset >= state.map_end_offset and not header.is_control:
                state.replay(producer_batch(header))
        state.update_map_end_offset(end)
        self.producer_state = state

    def take_producer_snapshot(self) -> None:
        """Write the producer state as of the log end (Kafka: at roll and clean shutdown);
        keeps the newest PRODUCER_SNAPSHOTS_RETAINED files."""
        end = self.log_end_offset
        path = self.directory / snapshot_file_name(end)
        if path.exists():
            return
        write_atomic(path, self.producer_state.encode_snapshot())
        for old in self._snapshot_offsets()[:-PRODUCER_SNAPSHOTS_RETAINED]:
            (self.directory / snapshot_file_name(old)).unlink(missing_ok=True)

    def _before_append(self) -> None:
        """A new lazy log's directory and partition.metadata, before its first data: a log
        found without a topic id at start-up is a stray (Kafka's isStrayKraftReplica), so
        the file is durable first. The log dir is fsync'd for the new directory's entry."""
        if not self._log.directory_pending:  # builds a new log's DiskLog: it gets data now
            return
        self._log.ensure_directory()
        if self._metadata_file_pending and self.topic_id is not None:
            write_partition_metadata(self.directory, self.topic_id)
        self._metadata_file_pending = False
        fsync_dir(self.directory.parent)

    def _after_append(self) -> None:
        if self._epoch_checkpoint_deferred:
            self._write_epoch_checkpoint()
        count = self._log.segment_count()
        if count != self._segment_count:
            self._segment_count = count
            self.take_producer_snapshot()

    def _write_epoch_checkpoint(self) -> None:
        if self._disk is None or self._disk.directory_pending:
            self._epoch_checkpoint_deferred = True  # written with the first append
            return
        self._epoch_checkpoint_deferred = False
        write_leader_epoch_checkpoint(self.epoch_checkpoint_path, self.epoch_cache.entries())

    # ---- views ----

    @property
    def log_start_offset(self) -> int:
        disk = self._disk
        return self._start_offset if disk is None else max(disk.start_offset(), self._start_offset)

    @property
    def log_end_offset(self) -> int:
        disk = self._disk
        return 0 if disk is None else disk.end_offset()

    @property
    def flushed_offset(self) -> int:
        """The recovery point: everything below is fsync'd."""
        disk = self._disk
        return 0 if disk is None else disk.flushed_offset()

    def latest_epoch(self) -> int:
        """The last leader epoch written to this log (-1 if none): GetReplicaLogInfo."""
        return self.epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        """The OffsetsForLeaderEpoch answer for `epoch` (rule 22)."""
        return self.epoch_cache.end_offset_for_epoch(epoch, self.log_end_offset)

    def reconfigure(self, segment_bytes: int, preallocate: bool) -> None:
        """A topic's segment.bytes and preallocate changed: they apply from the next roll (as
        in Kafka, the active segment keeps its size)."""
        if self._disk is None:
            self._disk_options = (segment_bytes, preallocate)
        else:
            self._disk.reconfigure(segment_bytes, preallocate)

    # ---- retention and rolls ----

    def segments(self) -> list[Segment]:
        """The segments, oldest first, the active one last (retention's and the cleaner's view)."""
        return self._log.segments()

    def segment_views(self) -> list[SegmentView]:
        views = []
        for segment in self._log.segments():
            largest = segment.largest_timestamp_ms()
            if largest < 0:
                largest = segment.last_modified_ms()
            views.append(SegmentView(segment.base_offset, segment.size_bytes, largest))
        return views

    @property
    def segment_bytes(self) -> int:
        return self._disk_options[0] if self._disk is None else self._disk.segment_bytes

    def replace_segments(self, cleaned: Segment, old: list[Segment]) -> list[Segment]:
        """The log cleaner's swap (DiskLog.replace_segments)."""
        return self._log.replace_segments(cleaned, old)

    def size_bytes(self) -> int:
        if self._disk is None:
            return 0
        return sum(segment.size_bytes for segment in self._log.segments())

    def delete_old_segments(self, high_watermark: int, now_ms: int) -> tuple[Deletion, list[Segment]]:
        """Kafka's deleteOldSegments with self.retention: the log start offset moves to the
        first kept segment (rule 24: never past the high watermark), then the deleted segments
        leave the log, renamed `.deleted`; the caller unlinks them after file.delete.delay.ms.
        A new log never written has one empty active segment, which retention keeps (Kafka's
        deletableSegments stops at an empty last segment)."""
        if self._disk is None:
            return Deletion(0), []
        deletion = segments_to_delete(
            self.segment_views(),
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
            high_watermark=high_watermark,
            config=self.retention,
            now_ms=now_ms,
        )
        if not deletion.count:
            return deletion, []
        if deletion.roll_first:
            self.roll()
        segments = self._log.segments()
        new_start = segments[min(deletion.count, len(segments) - 1)].base_offset
        self.advance_log_start_offset(new_start)
        removed = self._log.remove_oldest_segments(deletion.count)
        for offset in self._snapshot_offsets():
            if offset < self.log_start_offset and offset != self._snapshot_offsets()[-1]:
                (self.directory / snapshot_file_name(offset)).unlink(missing_ok=True)
        self._logger.info(
            "Partition %s: deleting %d segment(s) (%s); log start offset %d",
            self.name, len(removed), ", ".join(deletion.reasons), self.log_start_offset,
        )
        return deletion, removed

    def roll(self) -> None:
        """Start a new active segment (a snapshot of the producer state at its base, as Kafka
        takes at every roll)."""
        self._log.roll()
        self._after_append()

    def _maybe_roll_by_time(self, incoming_max_timestamp_ms: int) -> None:
        """segment.ms: Kafka checks it before each append (maybeRoll)."""
        first = self._log.active_first_timestamp_ms()
        if first is None:
            return
        created, now = (0, 0) if first >= 0 else (self._log.active_modified_ms(), now_ms())
        if should_roll_by_time(first, incoming_max_timestamp_ms, created, now, self.retention):
            self.roll()

    # ---- writes ----

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> bool:
        """A new leader's epoch starts at its log end (checkpointed before it serves, rule 21)."""
        changed = self.epoch_cache.assign(epoch, start_offset)
        if changed:
            if self._disk is None:
                self._epoch_checkpoint_deferred = True  # nothing on disk yet (see below)
            elif self._log.unwritten and (
                self._log.directory_pending or not self.epoch_checkpoint_path.exists()
            ):
                # An empty lazy log: nothing on disk the epoch could describe yet; a crash
                # before the first append loses nothing (the epoch is assigned again). One
                # with no directory yet has no checkpoint to look for.
                self._epoch_checkpoint_deferred = True
            else:
                self._write_epoch_checkpoint()
        return changed

    def advance_log_start_offset(self, offset: int) -> bool:
        """Kafka's maybeIncrementLogStartOffset: move the start up to `offset` (never down,
        never past the log end); the epoch cache forgets epochs wholly below it. True if moved;
        the caller checkpoints it."""
        offset = min(offset, self.log_end_offset)
        if offset <= self.log_start_offset:
            return False
        self._start_offset = offset
        self.producer_state.on_log_start_offset_incremented(offset)
        if self.epoch_cache.truncate_from_start(offset):
            self._write_epoch_checkpoint()
        self._logger.info("Partition %s: log start offset advanced to %d", self.name, offset)
        return True

    def append_as_leader(
        self,
        raw_batches: bytes,
        leader_epoch: int,
        max_batch_bytes: int | None = None,
        *,
        compacted: bool = False,
        write_config: TopicWriteConfig | None = None,
        now_ms: int = 0,
    ) -> AppendInfo:
        """Validate a producer's batches (CRC; for a compacted topic, a key on every record),
        give them our offsets and epoch, append. `write_config`: the topic's data configs
        (broker.core.topic_write_configs: size, timestamps, compression, LogAppendTime),
        applied at `now_ms`."""
        if write_config is not None:
            max_batch_bytes = write_config.max_message_bytes
        if not raw_batches:
            raise KafkaError(Errors.INVALID_RECORD, "produce request without record batches")
        view = memoryview(raw_batches)
        base_offset = self.log_end_offset
        next_offset = base_offset
        stamped: list[bytes] = []
        produced: list[ProducerBatch] = []
        max_timestamp_ms = -1
        position = 0
        try:
            while position < len(view):
                # Kafka's LogValidator for v2: magic, size, CRC, records, a codec we can read.
                limit = MAX_BATCH_SIZE_BYTES if max_batch_bytes is None else max_batch_bytes
                header, batch = validated_batch(view, position, limit)
                if compacted:
                    record_errors = keyless_record_errors(batch.records, self.topic, self.partition)
                    if record_errors:
                        raise RecordValidationError(Errors.INVALID_RECORD, record_errors)
                if header.is_control:
                    raise KafkaError(Errors.INVALID_RECORD, "producers may not send control batches")
                if header.is_transactional:
                    # No transactions (issue 16): Kafka's answer to a transactional batch
                    # outside a transaction the coordinator knows.
                    raise KafkaError(Errors.INVALID_TXN_STATE, "transactions are not supported")
                produced.append(producer_batch(header, next_offset))
                max_timestamp_ms = max(max_timestamp_ms, header.max_timestamp_ms)
                count = header.last_offset - header.base_offset + 1
                if write_config is not None:
                    check_decompressed_sizes(batch, write_config, self.name)
                    check_timestamps(batch, write_config, now_ms, self.name)
                if write_config is None or not write_config.rewrites(batch):
                    stamped.append(_stamp(raw_batches, position, next_offset, leader_epoch))
                    stamped.append(bytes(view[position + 16 : position + header.size]))
                else:
                    raw = bytes(view[position : position + header.size])
                    stored = stored_batch(raw, batch, write_config, now_ms)
                    if len(stored) > write_config.max_message_bytes:
                        raise MessageTooLargeError(
                            position, len(stored), write_config.max_message_bytes
                        )
                    stamped.append(_stamp(stored, 0, next_offset, leader_epoch))
                    stamped.append(stored[16:])
                next_offset += count
                position += header.size
            producers = self.producer_state.check_client_batches(produced)
            if producers.duplicate is not None:
                # A retried batch already in the log: answer with its offsets, append nothing.
                dup = producers.duplicate
                self._logger.info(
                    "Partition %s: duplicate batch (producer sequences %d..%d) answered with its"
                    " offsets %d..%d", self.name, dup.first_seq, dup.last_seq,
                    dup.first_offset, dup.last_offset,
                )
                return AppendInfo(dup.first_offset, dup.last_offset, 0)
            if write_config is not None and write_config.log_append_time:
                max_timestamp_ms = now_ms  # what the stored batches carry
            self._before_append()
            self._maybe_roll_by_time(max_timestamp_ms)
            # validate_batch checked each CRC above; the stamped offset and epoch are outside it.
            self._log.append_batches(b"".join(stamped), crc_checked=True)
        except UnsupportedMagicError as exc:
            raise KafkaError(Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, str(exc)) from exc
        except CorruptBatchError as exc:
            raise KafkaError(Errors.CORRUPT_MESSAGE, str(exc)) from exc
        except MessageTooLargeError as exc:
            raise KafkaError(Errors.MESSAGE_TOO_LARGE, str(exc)) from exc
        except UnsupportedCompressionError as exc:
            raise KafkaError(Errors.UNSUPPORTED_COMPRESSION_TYPE, str(exc)) from exc
        self.producer_state.commit(producers, next_offset)
        if leader_epoch > self.epoch_cache.latest_epoch():
            self.assign_leader_epoch(leader_epoch, base_offset)
        count = next_offset - base_offset
        self._unflushed_messages += count
        self._after_append()
        append_time = now_ms if write_config is not None and write_config.log_append_time else -1
        return AppendInfo(base_offset, next_offset - 1, count, append_time)

    def append_as_follower(self, raw_batches: bytes) -> AppendInfo:
        """Append fetched batches as they are; each new epoch enters the cache (Kafka)."""
        base_offset = self.log_end_offset
        try:
            self._before_append()
            self._maybe_roll_by_time(_max_timestamp_of(raw_batches))
            headers = self._log.append_batches(raw_batches)
        except CorruptBatchError as exc:
            raise KafkaError(Errors.CORRUPT_MESSAGE, str(exc)) from exc
        changed = False
        for header in headers:
            if header.leader_epoch > self.epoch_cache.latest_epoch():
                changed |= self.epoch_cache.assign(header.leader_epoch, header.base_offset)
            if not header.is_control:
                # Followers keep the same producer state, so a new leader dedups retries.
                self.producer_state.replay(producer_batch(header))
        self.producer_state.update_map_end_offset(self.log_end_offset)
        if changed:
            self._write_epoch_checkpoint()
        count = self.log_end_offset - base_offset
        self._unflushed_messages += count
        self._after_append()
        return AppendInfo(base_offset, self.log_end_offset - 1, count)

    def truncate_to(self, offset: int) -> int:
        """Cut the log at offset (rounded down to a batch start); returns the new log end."""
        offset = max(self.log_start_offset, min(offset, self.log_end_offset))
        if self._disk is None:
            # A new log never written: nothing to cut, only epochs past its end (0).
            if self.epoch_cache.truncate_from_end(offset):
                self._write_epoch_checkpoint()
            return 0
        if offset < self.log_end_offset:
            raw = self._log.read(offset, 1)
            if raw:
                offset = min(offset, read_header(raw, 0).base_offset)
        old_end = self.log_end_offset
        self._log.truncate_to(offset)
        if self.epoch_cache.truncate_from_end(offset):
            self._write_epoch_checkpoint()
        if offset < old_end:
            self._logger.info(
                "Partition %s: truncated from %d to %d", self.name, old_end, offset
            )
            # Kafka's truncateAndReload: the newest snapshot at or below the cut, then replay.
            self._segment_count = self._log.segment_count()
            self._load_producer_state()
        self._unflushed_messages = max(0, self.log_end_offset - self.flushed_offset)
        return self.log_end_offset

    # ---- flush ----

    def flush_due(self, acks: int | None) -> bool:
        """Whether to fsync now: acks of the produce just appended, None for follower appends."""
        if self._unflushed_messages == 0:
            return False
        if self.flush_messages is not None:
            return self._unflushed_messages >= self.flush_messages
        return acks is None or acks == ACKS_ALL

    def flush(self) -> int:
        """fsync everything appended; returns the new flushed offset."""
        if self._disk is None:
            return 0  # never written: nothing to fsync
        pending = self._unflushed_messages
        self._log.flush()
        self._unflushed_messages = max(0, self._unflushed_messages - pending)
        return self.flushed_offset

    # ---- reads ----

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int, *, min_one_message: bool = True
    ) -> bytes:
        """Whole batches from the one holding fetch_offset, each ending below max_offset (the
        HWM for consumers, the log end for followers), at most max_bytes in all; with
        min_one_message the first batch comes whatever its size (Kafka's LocalLog.read)."""
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise KafkaError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"offset {fetch_offset} outside [{self.log_start_offset}, {self.log_end_offset}]"
                f" of {self.name}",
            )
        if fetch_offset >= max_offset:
            return b""
        raw = self._log.read(fetch_offset, max_bytes, min_one_batch=min_one_message)
        if max_offset >= self.log_end_offset:
            return raw  # every batch in the log ends below its end: a follower's read
        position = 0
        while position < len(raw):
            header = read_header(raw, position)
            if header.last_offset >= max_offset:
                break
            position += header.size
        return raw[:position]

    def close(self, *, take_snapshot: bool = True) -> None:
        if self._disk is None:
            return  # never built: no file or descriptor to close
        if take_snapshot and self._log.end_offset() > self.log_start_offset:
            self.take_producer_snapshot()  # a clean shutdown: the next open replays nothing
        self._log.close()

    @property
    def has_directory(self) -> bool:
        """False for a new lazy log not yet written: nothing of it on disk."""
        disk = self._disk
        return disk is not None and not disk.directory_pending

    def rename_dir(self, name: str) -> Path:
        """Move the partition directory to `name` in its log dir (Kafka's renameDir: the open
        files stay valid; later path operations follow the new name). Returns the new path."""
        target = self.directory.parent / name
        if not self.has_directory:
            # Never written: no directory to move (issue 35's lazy logs).
            self.directory = target
            return target
        with storage_errors(f"rename {self.directory} to {target}"):
            os.rename(self.directory, target)
            fsync_dir(target.parent)
        self.directory = target
        return target

