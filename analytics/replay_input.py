"""The partition replay's input, laid out outside Spark so that Spark moves no row of it
(issue 15).

The replay (rules 8, 10, 11, 13, 19: analytics.rules.replay_partition) needs each partition's
records in log order, with the min ISR configs and the ELR feature level in force interleaved.
Spark did that with four scans of the staged records, two joins, a shuffle of every partition
record and a sort, then handed each row to a Python worker through Arrow: at a million
records that JVM work cost as much CPU as the replay itself. Here the staging processes, as
they decode the replay source's files (analytics.staging), write its partition records into
`buckets` by a hash of (topic id, partition), a part per file (stage_with_buckets), and the
few topic, config and feature rows go aside once staging is done (write_side_rows). A Spark
task then takes one bucket: it reads its parts, joins the side rows in, sorts into log order
(Arrow's C++ sort) and streams the rows through the replay. Memory: one Arrow batch per
staging process; one bucket (about BUCKET_ROWS rows) per task.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analytics.data_rules import RECOVERING
from analytics.staging import Batches

PARTITION_RECORD_TYPES = ("PartitionRecord", "PartitionChangeRecord")
SIDE_RECORD_TYPES = ("TopicRecord", "ConfigRecord", "FeatureLevelRecord")
# Rows per bucket at most: a task holds one bucket's rows in memory (about 150 MB as Arrow).
BUCKET_ROWS = 750_000
SIDE_FILE = "side.parquet"
# Partitions are grouped by the bucket-local index of their topic id (an integer sorts faster
# than the 22-character id); the order among partitions does not matter to the replay.
_TOPIC_INDEX = "__topic_index"
_SORT_KEYS = [(_TOPIC_INDEX, "ascending"), ("partition_id", "ascending"),
              ("seq_major", "ascending"), ("seq_minor", "ascending")]


@dataclass(frozen=True)
class ReplayInput:
    """Where the bucket files and the side rows are; `rows`: partition records in all."""

    directory: Path
    buckets: int
    rows: int

    def bucket_files(self, bucket: int) -> list[Path]:
        """The bucket's parts, one per staged file that holds some of its rows."""
        return bucket_parts(self.directory, bucket)

    @property
    def side_file(self) -> Path:
        return self.directory / SIDE_FILE


def bucket_part(directory: Path, bucket: int, source: str) -> Path:
    """The part of a bucket that one staged file (`source`) wrote."""
    return directory / f"bucket-{bucket:05d}-{source}.parquet"


def bucket_parts(directory: Path, bucket: int | None = None) -> list[Path]:
    """The parts of one bucket, or of every bucket."""
    which = "*" if bucket is None else f"{bucket:05d}"
    return sorted(directory.glob(f"bucket-{which}-*.parquet"))


@dataclass(frozen=True)
class ReplayPlan:
    """Where the replay source's partition records go while its files are staged
    (stage_with_buckets): the source's rows (node, its log from from_offset, its snapshot),
    how many buckets, and the columns a bucket keeps."""

    directory: Path
    node: int
    from_offset: int
    snapshot_file: str | None
    buckets: int
    columns: tuple[str, ...]

    def replay_input(self) -> ReplayInput:
        """The buckets as staged (call once staging is done): no rows, no buckets."""
        import pyarrow.parquet as pq

        rows = sum(pq.read_metadata(path).num_rows for path in bucket_parts(self.directory))
        return ReplayInput(self.directory, self.buckets if rows else 0, rows)


def bucket_count(partition_records: int, cores: int) -> int:
    """A multiple of the cores (every wave of tasks keeps all cores busy), enough that no
    bucket passes BUCKET_ROWS rows."""
    cores = max(1, cores)
    waves = max(1, -(-partition_records // (BUCKET_ROWS * cores)))
    return waves * cores


def _replayed(batch: Any, plan: ReplayPlan, record_types: tuple[str, ...]) -> Any:
    """analytics.rules' replay rows of record_types as a boolean mask: the source node's good
    rows, its log from from_offset, and its snapshot."""
    import pyarrow as pa
    import pyarrow.compute as pc

    in_log = pc.and_(pc.equal(batch.column("kind"), "segment"),
                     pc.greater_equal(batch.column("offset"), plan.from_offset))
    if plan.snapshot_file is not None:
        in_log = pc.or_(in_log, pc.equal(batch.column("file"), plan.snapshot_file))
    good = pc.and_(pc.invert(batch.column("corrupt")), pc.greater_equal(batch.column("offset"), 0))
    wanted = pc.is_in(batch.column("record_type"), pa.array(record_types))
    return pc.fill_null(pc.and_(pc.and_(good, pc.equal(batch.column("node"), plan.node)),
                                pc.and_(in_log, wanted)), False)


def _with_sequence(batch: Any) -> Any:
    """seq_major/seq_minor, the log order (analytics.rules.replay_rows): a snapshot's records
    first, by their position in it, then the log's by offset."""
    import pyarrow as pa
    import pyarrow.compute as pc

    snapshot = pc.equal(batch.column("kind"), "snapshot")
    offset = batch.column("offset")
    major = pc.if_else(snapshot, pa.scalar(-1, pa.int64()), offset)
    minor = pc.if_else(snapshot, offset, pa.scalar(0, pa.int64()))
    return batch.append_column("seq_major", major).append_column("seq_minor", minor)


def _buckets_of(batch: Any, buckets: int) -> Any:
    """Each row's bucket: a stable hash of its topic id (crc32, the same in every process)
    and its partition id, modulo buckets (numpy)."""
    import numpy as np
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(batch.column("topic_id"))
    topic_hash = np.array([zlib.crc32((value or "").encode()) for value in
                           encoded.dictionary.to_pylist()], dtype=np.int64)
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    partition = batch.column("partition_id").fill_null(0).to_numpy(zero_copy_only=False)
    return (topic_hash[indices] * 31 + partition.astype(np.int64)) % buckets


def stage_with_buckets(plan: ReplayPlan, reader: Batches, spec: Any, schema: Any
                       ) -> Iterator[Any]:
    """reader's batches of one staged file (analytics.staging), less the partition records the
    replay reads: those go to this file's part of their bucket instead (bucket-NNNNN-<node>-
    <file>.parquet), sorted into log order later by the task that replays the bucket. A
    partition record that went RECOVERING also stays in the staged table (rule 23 reads those:
    analytics.broker_rules.recovering_partitions). So the replay's million rows are bucketed
    by the staging processes, in the pass that decodes them, and the Spark jobs over the
    staged records (names, elections, rules 1 and 5) scan the few thousand others."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if spec.node != plan.node:
        yield from reader(spec, schema)
        return
    writers: dict[int, Any] = {}
    try:
        for batch in reader(spec, schema):
            replayed = _replayed(batch, plan, PARTITION_RECORD_TYPES)
            if not pc.any(replayed).as_py():
                yield batch
                continue
            recovering = pc.fill_null(
                pc.equal(batch.column("leader_recovery_state"), RECOVERING), False)
            kept = batch.filter(pc.or_(pc.invert(replayed), recovering))
            if kept.num_rows:
                yield kept
            rows = _with_sequence(batch.filter(replayed)).select(list(plan.columns))
            which = _buckets_of(rows, plan.buckets)
            for bucket in np.unique(which).tolist():
                writer = writers.get(bucket)
                if writer is None:
                    part = bucket_part(plan.directory, bucket,
                                       f"{spec.node}-{Path(spec.file).name}")
                    writer = writers[bucket] = pq.ParquetWriter(part, rows.schema,
                                                                compression="none")
                writer.write_batch(rows.filter(pa.array(which == bucket)))
    finally:
        for writer in writers.values():
            writer.close()


def write_side_rows(records_directory: Path, plan: ReplayPlan) -> None:
    """The replay's topic, config and feature rows (its source's, as the partition records)
    from the staged records into the side file, which every bucket's task reads."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    columns = [c for c in plan.columns if c not in ("seq_major", "seq_minor")]
    table = ds.dataset(str(records_directory), format="parquet").to_table(
        columns=sorted(set(columns) | {"kind", "corrupt", "topic_name"}),
        filter=ds.field("record_type").isin(list(SIDE_RECORD_TYPES)))
    side = table.filter(_replayed(table, plan, SIDE_RECORD_TYPES))
    if side.num_rows:
        side = _with_sequence(side).select([*plan.columns, "topic_name"])
        pq.write_table(side.combine_chunks(), plan.directory / SIDE_FILE, compression="none")


def _distinct_partitions(table: Any) -> Any:
    return table.group_by(["topic_id", "partition_id"]).aggregate([])


def _config_rows(side: Any, partitions: Any, schema: Any, min_isr_name: str,
                 elr_feature: str, topic_resource: int, broker_resource: int) -> list[Any]:
    """The min ISR configs and ELR feature rows, one copy per partition they govern (what
    analytics.rules used to join in Spark): a topic's config for each of its partitions (by
    the topic's name), the cluster default and the feature level for every partition."""
    import pyarrow as pa
    import pyarrow.compute as pc

    record_type, name = side.column("record_type"), side.column("name")
    topics = side.filter(pc.equal(record_type, "TopicRecord")).select(
        ["topic_id", "topic_name"]).group_by(["topic_id", "topic_name"]).aggregate([])
    configs = pc.and_(pc.equal(record_type, "ConfigRecord"), pc.equal(name, min_isr_name))
    resource_type = side.column("resource_type")
    topic_configs = side.filter(pc.and_(configs, pc.equal(resource_type, topic_resource)))
    cluster = pc.or_(
        pc.and_(pc.and_(configs, pc.equal(resource_type, broker_resource)),
                pc.equal(side.column("resource"), "")),
        pc.and_(pc.equal(record_type, "FeatureLevelRecord"), pc.equal(name, elr_feature)))
    cluster_rows = side.filter(pc.fill_null(cluster, False))
    # Arrow's joins carry no list columns: a config row's replica lists are null anyway.
    keep = [f.name for f in schema if f.name not in ("topic_id", "partition_id")
            and not pa.types.is_list(f.type)]
    out = []
    if topic_configs.num_rows and topics.num_rows:
        named = topic_configs.select(keep).join(
            topics, keys="resource", right_keys="topic_name", join_type="inner")
        out.append(named.join(partitions, keys="topic_id", join_type="inner"))
    if cluster_rows.num_rows:
        key = "__all"
        left = cluster_rows.select(keep).append_column(
            key, pa.array([0] * cluster_rows.num_rows, pa.int8()))
        right = partitions.append_column(key, pa.array([0] * partitions.num_rows, pa.int8()))
        out.append(left.join(right, keys=key, join_type="inner").drop_columns([key]))
    return [pa.table([t.column(f.name).cast(f.type) if f.name in t.column_names
                      else pa.nulls(t.num_rows, f.type) for f in schema], schema=schema)
            for t in out]


def bucket_rows(replay: ReplayInput, bucket: int, columns: list[str], min_isr_name: str,
                elr_feature: str, topic_resource: int, broker_resource: int
                ) -> Iterator[dict[str, Any]]:
    """One bucket's rows, config rows joined in, grouped by (topic, partition), each group in
    log order: what analytics.rules.replay_summary reads, group after group."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    paths = replay.bucket_files(bucket)
    if not paths:
        return
    # One thread: a task has a core of its own (pyarrow's pool doubled the read's CPU here).
    table = pa.concat_tables([pq.read_table(path, columns=columns, use_threads=False)
                              for path in paths])
    if table.num_rows == 0:
        return
    parts = [table]
    if replay.side_file.exists():
        side = pq.read_table(replay.side_file, use_threads=False)
        parts += _config_rows(side, _distinct_partitions(table), table.schema, min_isr_name,
                              elr_feature, topic_resource, broker_resource)
    rows = pa.concat_tables(parts)
    topic_index = pc.dictionary_encode(rows.column("topic_id")).combine_chunks().indices
    order = pc.sort_indices(rows.append_column(_TOPIC_INDEX, topic_index), sort_keys=_SORT_KEYS)
    ordered = rows.take(order)
    for batch in ordered.to_batches(max_chunksize=8192):
        yield from batch.to_pylist()
