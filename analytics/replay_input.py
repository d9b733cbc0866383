"""The partition replay's input, laid out by the driver so that Spark moves no row of it
(issue 15).

The replay (rules 8, 10, 11, 13, 19: analytics.rules.replay_partition) needs each partition's
records in log order, with the min ISR configs and the ELR feature level in force interleaved.
Spark did that with four scans of the staged records, two joins, a shuffle of every partition
record and a sort, then handed each row to a Python worker through Arrow: at a million
records that JVM work cost as much CPU as the replay itself. Here one streaming pass of
pyarrow over the replay source's staged Parquet writes the partition records into `buckets`
files by a hash of (topic id, partition), and keeps the few topic, config and feature rows
aside. A Spark task then takes one bucket: it reads the file, joins the side rows in, sorts
into log order (Arrow's C++ sort) and streams the rows through the replay. Memory: one Arrow
batch in the pass; one bucket (about BUCKET_ROWS rows) per task.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PARTITION_RECORD_TYPES = ("PartitionRecord", "PartitionChangeRecord")
SIDE_RECORD_TYPES = ("TopicRecord", "ConfigRecord", "FeatureLevelRecord")
# Rows per bucket at most: a task holds one bucket's rows in memory (about 150 MB as Arrow).
BUCKET_ROWS = 750_000
_SCAN_BATCH_ROWS = 65_536
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

    def bucket_file(self, bucket: int) -> Path:
        return self.directory / f"bucket-{bucket:05d}.parquet"

    @property
    def side_file(self) -> Path:
        return self.directory / "side.parquet"


def bucket_count(partition_records: int, cores: int) -> int:
    """A multiple of the cores (every wave of tasks keeps all cores busy), enough that no
    bucket passes BUCKET_ROWS rows."""
    cores = max(1, cores)
    waves = max(1, -(-partition_records // (BUCKET_ROWS * cores)))
    return waves * cores


def _replay_filter(node: int, from_offset: int, snapshot_file: str | None) -> Any:
    """analytics.rules.replay_rows' rows as a pyarrow filter: the source node's good rows, its
    log from from_offset, and its snapshot."""
    import pyarrow.compute as pc

    in_log = (pc.field("kind") == "segment") & (pc.field("offset") >= from_offset)
    if snapshot_file is not None:
        in_log = in_log | (pc.field("file") == snapshot_file)
    wanted = pc.field("record_type").isin(list(PARTITION_RECORD_TYPES + SIDE_RECORD_TYPES))
    return (~pc.field("corrupt")) & (pc.field("offset") >= 0) & (pc.field("node") == node) \
        & in_log & wanted


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


def write_replay_input(records_directory: Path, directory: Path, node: int, from_offset: int,
                       snapshot_file: str | None, columns: list[str], cores: int,
                       partition_records: int) -> ReplayInput:
    """One pass over the staged records of the replay source: partition records into bucket
    files, topic/config/feature rows into the side file. `partition_records` sizes the
    buckets (an estimate: the staged rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    buckets = bucket_count(partition_records, cores)
    result = ReplayInput(directory, buckets, 0)
    dataset = ds.dataset(str(records_directory), format="parquet")
    needed = [c for c in columns if c not in ("seq_major", "seq_minor")]
    scan_columns = sorted(set(needed) | {"kind", "topic_name"})
    scanner = dataset.scanner(columns=scan_columns,
                              filter=_replay_filter(node, from_offset, snapshot_file),
                              batch_size=_SCAN_BATCH_ROWS, use_threads=False,
                              batch_readahead=1, fragment_readahead=1)  # bounded memory
    writers: list[Any] = []
    side: list[Any] = []
    rows = 0
    try:
        for raw in scanner.to_batches():
            if raw.num_rows == 0:
                continue
            batch = _with_sequence(raw)
            is_partition = pc.fill_null(pc.is_in(
                batch.column("record_type"), pa.array(PARTITION_RECORD_TYPES)), False)
            side_rows = batch.filter(pc.invert(is_partition))
            if side_rows.num_rows:
                side.append(side_rows)
            partition_rows = batch.filter(is_partition)
            if not partition_rows.num_rows:
                continue
            if not writers:
                writers = [pq.ParquetWriter(result.bucket_file(b), partition_rows.schema,
                                            compression="none") for b in range(buckets)]
            which = _buckets_of(partition_rows, buckets)
            for bucket in range(buckets):
                part = partition_rows.filter(pa.array(which == bucket))
                if part.num_rows:
                    writers[bucket].write_batch(part)
            rows += partition_rows.num_rows
    finally:
        for writer in writers:
            writer.close()
    if side:
        pq.write_table(pa.Table.from_batches(side), result.side_file, compression="none")
    return ReplayInput(directory, buckets if writers else 0, rows)


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

    path = replay.bucket_file(bucket)
    if not path.exists():
        return
    # One thread: a task has a core of its own (pyarrow's pool doubled the read's CPU here).
    table = pq.read_table(path, columns=columns, use_threads=False)
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
