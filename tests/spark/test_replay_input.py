"""The partition replay's bucketed input (analytics.replay_input, issue 15): every partition in
exactly one bucket, the same replay whatever the number of buckets, and timeline points kept
only for the partitions the report can draw."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.audit import file_summary, replay_specs
from analytics.data_rules import RECOVERING
from analytics.datasource import BATCH_COLUMNS, COLUMNS, discover_files, iter_file_batches
from analytics.generate import generate_cluster_dir
from analytics.record_columns import iter_record_columns
from analytics.replay_input import (
    BUCKET_ROWS,
    ReplayPlan,
    bucket_count,
    bucket_parts,
    stage_with_buckets,
    write_side_rows,
)
from analytics.rules import (
    POINT,
    TALLY,
    TIMELINE_PARTITIONS,
    VIOLATION,
    _replay_buckets,
    choose_replay_source,
    replay_plan,
    timeline_rank,
)
from analytics.staging import Stager


def test_bucket_count_is_a_multiple_of_the_cores_and_caps_bucket_rows() -> None:
    for rows in (0, 10, BUCKET_ROWS, 2 * BUCKET_ROWS + 1, 10_000_000):
        for cores in (1, 2, 3):
            n = bucket_count(rows, cores)
            assert n % cores == 0 and n >= cores
            assert rows <= n * BUCKET_ROWS


def _stage(root: Path, work: Path, buckets: int) -> tuple[Any, ReplayPlan]:
    """Stage root as the audit does: the replay source's partition records into `buckets`."""
    files = discover_files(root)
    with Stager(work) as stager:
        batches = stager.submit("batches", files, iter_file_batches, BATCH_COLUMNS)
        stager.wait()
        source = choose_replay_source(file_summary(batches))
        assert source is not None
        plan = dataclasses.replace(replay_plan(work / "replay", source, 1, 0), buckets=buckets)
        records = stager.submit("records", replay_specs(files, source.node),
                                functools.partial(stage_with_buckets, plan, iter_record_columns),
                                COLUMNS, columnar=True)
        stager.wait()
        write_side_rows(records.directory, plan)
    return records, plan


def _replay(root: Path, work: Path, buckets: int) -> tuple[list[dict[str, Any]], list[list[Path]]]:
    _records, plan = _stage(root, work, buckets)
    replay = plan.replay_input()
    assert replay.buckets == buckets
    ids = pa.record_batch([pa.array(list(range(buckets)), pa.int64())], names=["id"])
    out = [row for batch in _replay_buckets(replay, iter([ids])) for row in batch.to_pylist()]
    return out, [replay.bucket_files(b) for b in range(buckets)]


def test_buckets_split_partitions_and_replay_the_same(tmp_path: Path) -> None:
    # 5 topics x 6 partitions, min ISR changes and a snapshot: configs must reach every bucket.
    generate_cluster_dir(tmp_path / "logs", 3000, seed=3, topics=5, partitions_per_topic=6,
                         segment_records=800, snapshot_at=1000)
    one, _ = _replay(tmp_path / "logs", tmp_path / "one", 1)
    four, buckets = _replay(tmp_path / "logs", tmp_path / "four", 4)

    owners: Counter[tuple[str, int]] = Counter()
    for parts in buckets:
        assert parts  # a bucket's part per staged file that holds some of its partitions
        table = pa.concat_tables(pq.read_table(p, columns=["topic_id", "partition_id"])
                                 for p in parts)
        owners.update(set(zip(table.column("topic_id").to_pylist(),
                              table.column("partition_id").to_pylist(), strict=True)))
    assert len(owners) == 30 and set(owners.values()) == {1}  # each partition in one bucket

    def without_points(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted(tuple(sorted((k, str(v)) for k, v in r.items()))
                      for r in rows if r["kind"] != POINT)

    # Violations and tallies (min ISR in force included) do not depend on the buckets.
    assert without_points(one) == without_points(four)
    tallies = [r for r in one if r["kind"] == TALLY]
    assert len(tallies) == 30 and sum(r["states"] for r in tallies) > 1500
    assert not [r for r in one if r["kind"] == VIOLATION]
    # The cluster default (2) and the topics' own min ISR changes reached the replay.
    assert len({r["min_isr"] for r in four if r["kind"] == POINT}) >= 2

    # Points: one task keeps only its TIMELINE_PARTITIONS first partitions by timeline_rank; with
    # four tasks every partition of the global first ones still has its points.
    ranked = sorted(tallies, key=lambda t: timeline_rank(0, t["states"], t["topic_id"],
                                                         t["partition_id"]))
    first = {(t["topic_id"], t["partition_id"]) for t in ranked[:TIMELINE_PARTITIONS]}
    with_points_one = {(r["topic_id"], r["partition_id"]) for r in one if r["kind"] == POINT}
    with_points_four = {(r["topic_id"], r["partition_id"]) for r in four if r["kind"] == POINT}
    assert with_points_one == first
    assert first <= with_points_four and len(with_points_four) <= 4 * TIMELINE_PARTITIONS


def test_staging_moves_the_replayed_records_into_buckets_and_loses_none(tmp_path: Path) -> None:
    # Every row the plain staging gives is either still in the staged table or in one bucket;
    # the buckets hold only the source's partition records, and a RECOVERING one is in both
    # (rule 23 reads those from the staged table).
    generate_cluster_dir(tmp_path / "logs", 3000, seed=5, topics=4, partitions_per_topic=5,
                         segment_records=700, snapshot_at=900)
    files = discover_files(tmp_path / "logs")
    with Stager(tmp_path / "plain") as stager:
        batches = stager.submit("batches", files, iter_file_batches, BATCH_COLUMNS)
        stager.wait()
        source = choose_replay_source(file_summary(batches))
        assert source is not None
        plain = stager.submit("records", replay_specs(files, source.node), iter_record_columns,
                              COLUMNS, columnar=True)
        stager.wait()
    kept, plan = _stage(tmp_path / "logs", tmp_path / "split", 3)

    def keys(table: Any) -> Counter[tuple[Any, ...]]:
        return Counter(zip(*(table.column(c).to_pylist()
                             for c in ("node", "file", "offset", "record_type")), strict=True))

    everything = pa.concat_tables(pq.read_table(p) for p in sorted(
        plain.directory.glob("*.parquet")))
    staged = pa.concat_tables(pq.read_table(p) for p in sorted(kept.directory.glob("*.parquet")))
    bucketed = pa.concat_tables(pq.read_table(p) for p in bucket_parts(plan.directory))
    assert bucketed.num_rows > 1000
    assert set(bucketed.column("record_type").to_pylist()) <= {"PartitionRecord",
                                                              "PartitionChangeRecord"}
    assert set(bucketed.column("node").to_pylist()) == {source.node}
    both = keys(staged) & keys(bucketed)
    assert keys(staged) + keys(bucketed) - both == keys(everything)
    in_both = staged.filter(pa.array([k in both for k in zip(*(
        staged.column(c).to_pylist() for c in ("node", "file", "offset", "record_type")),
        strict=True)]))
    assert set(in_both.column("leader_recovery_state").to_pylist()) <= {RECOVERING}
    # A partition record still staged and not recovering is one the replay does not read:
    # in the log before the snapshot it starts from, or in another snapshot.
    partition_rows = staged.filter(pa.compute.is_in(staged.column("record_type"), pa.array(
        ["PartitionRecord", "PartitionChangeRecord"]))).to_pylist()
    assert partition_rows
    for row in partition_rows:
        assert row["leader_recovery_state"] == RECOVERING or (
            row["kind"] == "segment" and row["offset"] < plan.from_offset) or (
            row["kind"] == "snapshot" and row["file"] != plan.snapshot_file), row
