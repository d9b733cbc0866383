"""The partition replay (rules 8, 10, 11, 13, 19: analytics.rules.partitions.pure) run where the replay
source's log is decoded, shard by shard, before any of its rows reaches Spark (issue 15).

A shard is one process of the staging pool (analytics.engine.staging). It reads the replay source's
files in log order (its snapshot, then its segments by offset), decodes every record once, and
replays the partitions that hash to it (crc32 of the topic id, with the partition id, modulo
the shards): a partition's records all go to one shard, in log order, so no record is sorted,
grouped, written or read back for the replay. Measured at a million records (BENCHMARKS.md,
session 11): staging the partition records into Arrow and Parquet buckets, then reading,
sorting and converting them back to Python rows in Spark tasks, cost twice the replay itself.

Every shard reads the whole log: decoding a record costs about half of what replaying it
does, so each shard spends the decode on the records it does not replay, and the shards stay
independent (no process waits for another). Each also stages a share of the files (index modulo the
shards) for the Spark rules: every row of those files but the replayed partition records, and
the ones that went RECOVERING (rule 23 reads those: analytics.rules.replication.spark.
recovering_partitions).

A shard writes its output as Parquet rows of REPLAY_OUTPUT_COLUMNS: every violation, one TALLY
per partition, and the last TIMELINE_POINTS points of its TIMELINE_PARTITIONS first partitions
by timeline_rank (a superset of those the report draws). Points go to a scratch file as they
are made (PointSpill) and only the chosen partitions' are read back, so a shard's memory is its
partitions' registrations and one chunk of staged rows, whatever the log's length.
"""

from __future__ import annotations

import collections
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from analytics.engine.gc_pause import fewer_collections
from analytics.engine.record_columns import Chunk
from analytics.engine.staging import ARROW_BATCH_ROWS, ParquetFile, Table, arrow_schema
from analytics.read.datasource import (
    COL,
    COLUMNS,
    KIND_SEGMENT,
    KIND_SNAPSHOT,
    PARTITION_VALUE_COLUMNS,
    PARTITION_VALUE_NAMES,
    FileSpec,
    batch_base_row,
    damage_row,
    file_template,
    read_file,
    record_row,
    unpack_partition,
    values_of,
)
from analytics.read.log_scan import CORRUPT, Damage, walk_batches
from analytics.rules.partitions.pure import (
    SIDE_FIELDS,
    SIDE_RECORD_TYPES,
    LogReplay,
    PartitionState,
    point_row,
)
from analytics.rules.partitions.source import ReplaySource
from analytics.rules.replication.pure import RECOVERING
from metadata.transactions import TransactionHold, marker_name
from storage.core.record_batch import decode_batch

TIMELINE_PARTITIONS = 12  # partitions whose timeline the report draws
TIMELINE_POINTS = 2000  # the last points of a partition kept for the report's timeline
# The replay's output rows (analytics.rules.partitions.spark reads them as a DataFrame of this schema).
REPLAY_OUTPUT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kind", "STRING"), ("rule", "INT"), ("message", "STRING"), ("node", "INT"),
    ("file", "STRING"), ("offset", "BIGINT"), ("topic_id", "STRING"), ("partition_id", "INT"),
    ("record_type", "STRING"), ("batch_timestamp_ms", "BIGINT"), ("leader", "INT"),
    ("leader_epoch", "INT"), ("partition_epoch", "INT"), ("isr_size", "INT"),
    ("elr_size", "INT"), ("min_isr", "INT"), ("recovering", "BOOLEAN"), ("states", "BIGINT"),
    ("changes", "BIGINT"), ("unavailable_ms", "BIGINT"), ("under_min_isr_ms", "BIGINT"),
    ("leader_changes", "BIGINT"),
)
_INT32 = range(-(2**31), 2**31)
# partition_values' positions (analytics.read.datasource.PARTITION_VALUE_NAMES) of INT and
# ARRAY<INT> columns, by the columns' declared types
_INT_VALUES = tuple(i for i, c in enumerate(PARTITION_VALUE_COLUMNS) if COLUMNS[c][1] == "INT")
_LIST_VALUES = tuple(i for i, c in enumerate(PARTITION_VALUE_COLUMNS)
                     if COLUMNS[c][1] == "ARRAY<INT>")
_TOPIC_VALUE, _LRS_VALUE = (PARTITION_VALUE_NAMES.index(name)
                            for name in ("topic_id", "leader_recovery_state"))
_SIDE_COLUMNS = tuple(COL[c] for c in SIDE_FIELDS)


def timeline_rank(violations: int, states: int, topic_id: str, partition_id: int
                  ) -> tuple[int, int, str, int]:
    """The report's order for timelines: most violations, then most states (the audit's
    _timelines sorts the same way in Spark)."""
    return -violations, -states, topic_id, partition_id


def shard_of(topic_id: bytes, partition_id: int, shards: int) -> int:
    """The shard that replays a partition (topic id as its 16 bytes): the same in every
    process (crc32, not hash())."""
    return (zlib.crc32(topic_id) * 31 + partition_id) % shards


def fits_columns(values: tuple[Any, ...]) -> bool:
    """partition_values' values fit their columns (INT, ARRAY<INT> of non-null ints): what
    staging's Arrow conversion accepts. A record that does not is staged as a corrupt row
    (analytics.engine.staging.fit_row) and not replayed, as when it went through Arrow."""
    for index in _INT_VALUES:
        value = values[index]
        if value is not None and (type(value) is not int or value not in _INT32):
            return False
    for index in _LIST_VALUES:
        value = values[index]
        if value is not None and (type(value) is not list or not all(
                type(v) is int and v in _INT32 for v in value)):
            return False
    return True


@dataclass(frozen=True)
class ShardPlan:
    """The replay source (node, its log from from_offset, its snapshot), its files, how many
    shards, where staged rows go (records_dir) and where replay output goes (output_dir)."""

    node: int
    from_offset: int
    snapshot_file: str | None
    specs: tuple[FileSpec, ...]
    shards: int
    records_dir: Path
    output_dir: Path

    def log_order(self) -> list[tuple[int, FileSpec, bool]]:
        """(index, spec, replayed) of every file, the replayed ones in log order first: the
        snapshot, then the segments by base offset (their names); then other snapshots,
        staged only. index: the file's place in `specs`, which picks its staging shard."""
        indexed = list(enumerate(self.specs))
        snapshot = [(i, s, True) for i, s in indexed if s.file == self.snapshot_file]
        segments = sorted(((i, s, True) for i, s in indexed if s.kind == KIND_SEGMENT),
                          key=lambda item: Path(item[1].file).name)
        others = [(i, s, False) for i, s in indexed
                  if s.kind != KIND_SEGMENT and s.file != self.snapshot_file]
        return snapshot + segments + others


def shard_plan(source: ReplaySource, files: Iterable[FileSpec], shards: int, records: Table,
               output: Table) -> ShardPlan:
    """The replay source's files, replayed in `shards` shards that stage their rows into the
    records table and their output into the output table."""
    return ShardPlan(source.node, source.from_offset, source.snapshot_file,
                     tuple(f for f in files if f.node == source.node), max(1, shards),
                     records.directory, output.directory)


@dataclass(frozen=True)
class ShardResult:
    staged_rows: int  # rows this shard wrote to the staged records table
    replayed: int  # partition records this shard replayed
    output_rows: int
    # (first, last) offsets of the source's KIP-868 transactions never applied (aborted, or
    # open at the log's end), read from its whole log: its staged rows there are not state
    # (analytics.rules.spark_common.applied_rows). Every shard finds the same.
    dropped: tuple[tuple[int, int], ...] = ()


class PointSpill:
    """A shard's timeline points on disk, a fixed-size record each, in the order they were
    made; `last_points` reads back the last few of chosen partitions."""

    _RECORD = struct.Struct("<iiqqbiiiiiib")  # partition, file index, then log_replay's point
    _FLUSH = 1 << 20

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO = path.open("wb")
        self._buffer = bytearray()
        self._files: dict[str, int] = {}
        self._pack = self._RECORD.pack

    def add(self, partition: int, file: str, point: tuple[int, ...]) -> None:
        index = self._files.get(file)
        if index is None:
            index = self._files[file] = len(self._files)
        self._buffer += self._pack(partition, index, *point)
        if len(self._buffer) >= self._FLUSH:
            self._file.write(self._buffer)
            self._buffer.clear()

    def last_points(self, partitions: set[int], keep: int
                    ) -> dict[int, collections.deque[tuple[str, tuple[int, ...]]]]:
        """The last `keep` points (file, point) of each of `partitions`, oldest first."""
        self._file.write(self._buffer)
        self._buffer.clear()
        self._file.close()
        names = {index: name for name, index in self._files.items()}
        found: dict[int, collections.deque[tuple[str, tuple[int, ...]]]] = {
            p: collections.deque(maxlen=keep) for p in partitions}
        size = self._RECORD.size
        with self.path.open("rb") as spill:
            while chunk := spill.read(size * 65536):
                for record in self._RECORD.iter_unpack(chunk):
                    points = found.get(record[0])
                    if points is not None:
                        points.append((names[record[1]], record[2:]))
        return found

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        self.path.unlink(missing_ok=True)


class _Staged:
    """Staged rows (analytics.engine.record_columns.Chunk) into one Parquet file, chunk by chunk; no
    file when no row comes."""

    def __init__(self, spec: FileSpec, path: Path, schema: Any) -> None:
        self.template = file_template(spec)
        self.chunk = Chunk(self.template)
        self._file = ParquetFile(path, schema)

    def flush_if_full(self) -> None:
        if len(self.chunk) >= ARROW_BATCH_ROWS:
            self._write()

    def _write(self) -> None:
        self._file.write(self.chunk.to_arrow(self._file.schema))
        self.chunk = Chunk(self.template)

    def close(self) -> int:
        if len(self.chunk):
            self._write()
        return self._file.close()


def run_shard(plan: ShardPlan, shard: int) -> ShardResult:
    """Shard `shard` of plan: stage its share of the files, replay its partitions, write its
    output (see the module doc)."""
    spill = PointSpill(plan.output_dir / f"points-{shard:05d}.bin")
    replay = LogReplay(plan.node, spill.add)
    transactions: TransactionHold[None] = TransactionHold()  # the whole log's, from its start
    out = _OutputWriter(plan.output_dir / f"replay-{shard:05d}.parquet")
    staged_rows = replayed = 0
    schema = arrow_schema(COLUMNS)
    # This shard's records that do not fit their columns, in files another shard stages.
    misfits = _Staged(plan.specs[0], plan.records_dir / f"source-misfits-{shard:05d}.parquet",
                      schema)
    try:
        with fewer_collections():  # analytics.engine.gc_pause: a million small objects live here
            for index, spec, in_replay in plan.log_order():
                staged = (_Staged(spec, plan.records_dir / f"source-{index:05d}.parquet",
                                  schema) if index % plan.shards == shard else None)
                if staged is None and not in_replay:
                    continue
                replayed += _walk_file(plan, shard, spec, in_replay, replay, staged, misfits,
                                       out, transactions)
                if staged is not None:
                    staged_rows += staged.close()
            staged_rows += misfits.close()
            chosen = _chosen_partitions(replay)
            points = spill.last_points({s.index for s in chosen}, TIMELINE_POINTS)
            for tally in replay.tallies():
                out.add(tally)
            for state in chosen:
                for file, point in points[state.index]:
                    out.add(point_row(plan.node, state, file, point))
    finally:
        spill.close()
    transactions.clear()
    return ShardResult(staged_rows, replayed, out.close(), tuple(transactions.dropped))


def _chosen_partitions(replay: LogReplay) -> list[PartitionState]:
    states = [s for s in replay.partitions.values() if s.states]
    states.sort(key=lambda s: timeline_rank(s.violations, s.states, s.topic_id, s.partition_id))
    return states[:TIMELINE_PARTITIONS]


def _walk_file(plan: ShardPlan, shard: int, spec: FileSpec, in_replay: bool,
               replay: LogReplay, staged: _Staged | None, misfits: _Staged,
               out: _OutputWriter, transactions: TransactionHold[None]) -> int:
    """One file: its replayed records into `replay` (this shard's partitions), its staged rows
    into `staged` (when this shard stages it; else this shard's records that do not fit their
    columns into `misfits`, as corrupt rows), a segment's transaction markers into
    `transactions` and the replay. How many records this shard replayed."""
    data = read_file(spec)
    if isinstance(data, str):
        if staged is not None:
            staged.chunk.add_other(damage_row(staged.template, 0, data, CORRUPT))
        return 0
    in_snapshot = spec.kind == KIND_SNAPSHOT
    in_segment = spec.kind == KIND_SEGMENT
    from_offset = -1 if in_snapshot else plan.from_offset
    shards = plan.shards
    mine: dict[tuple[bytes, int], bool] = {}  # partition (topic id's bytes) -> this shard's
    template = staged.template if staged is not None else file_template(spec)
    replayed = 0
    for item in walk_batches(data, spec.log_end and spec.kind == KIND_SEGMENT):
        if isinstance(item, Damage):
            if staged is not None:
                staged.chunk.add_other(damage_row(template, item.position, item.reason,
                                                  item.kind))
            continue
        header, _crc = item
        if spec.control_only and not header.is_control:
            continue
        batch, _size = decode_batch(data, header.position)  # CRC already checked
        base: list[Any] | None = None
        per_batch = (header.position, batch.leader_epoch, batch.timestamp_ms, batch.is_control)
        for index, record in enumerate(batch.records):
            offset = batch.offset_of(index)
            unpacked = None if batch.is_control else unpack_partition(record.value or b"")
            replaying = in_replay and offset >= from_offset
            marker = None if unpacked is not None or batch.is_control or not in_segment \
                else marker_name(record.value)
            if marker is not None:
                transactions.marker(marker, offset)
                if replaying:
                    for violation in replay.transaction_marker(marker, offset):
                        out.add(violation)
            ours = False
            if unpacked is not None:
                if replaying:
                    partition_id = unpacked[2].get("partition_id")
                    if type(partition_id) is not int:
                        ours = shard == 0  # fails fits_columns: staged once, as corrupt
                    else:
                        key = (unpacked[3], partition_id)
                        known = mine.get(key)
                        if known is None:
                            known = mine[key] = shard_of(key[0], key[1], shards) == shard
                        ours = known
                # Another shard's partition needs its values only to stage the record: one
                # outside the replay, or one that went RECOVERING (rule 23).
                values = values_of(unpacked) if ours or (staged is not None and (
                    not replaying or unpacked[2].get("leader_recovery_state") == RECOVERING)
                ) else None
                if values is not None and fits_columns(values):
                    if ours:
                        replayed += 1
                        for violation in replay.partition_record(
                                values, spec.file, offset, batch.timestamp_ms, in_snapshot):
                            out.add(violation)
                    if staged is not None and (not replaying or values[_LRS_VALUE] == RECOVERING):
                        staged.chunk.add_values(values, offset, per_batch)
                        staged.flush_if_full()
                    continue
                if values is None:
                    continue  # another shard's partition, in a file another shard stages
            elif staged is None and not replaying:
                continue
            if base is None:
                base = batch_base_row(template, batch, header.position)
            row = record_row(base, batch, index, False, try_partition=unpacked is not None)
            into = staged if staged is not None else misfits if ours else None
            if into is not None:
                into.chunk.add_other(row)
                into.flush_if_full()
            if replaying and not row[_CORRUPT] and row[_RECORD_TYPE] in SIDE_RECORD_TYPES:
                replay.side_record(*(row[i] for i in _SIDE_COLUMNS))
    return replayed


_CORRUPT, _RECORD_TYPE = COL["corrupt"], COL["record_type"]


class _OutputWriter:
    """Replay output rows into one Parquet file, ARROW_BATCH_ROWS at a time."""

    def __init__(self, path: Path) -> None:
        self._file = ParquetFile(path, arrow_schema(REPLAY_OUTPUT_COLUMNS))
        self._rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        self._rows.append(row)
        if len(self._rows) >= ARROW_BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        self._file.write(pa.RecordBatch.from_pylist(self._rows, schema=self._file.schema))
        self._rows = []

    def close(self) -> int:
        if self._rows:
            self._flush()
        return self._file.close()
