"""The partition replay's bucketed input (analytics.replay_input, issue 15): every partition in
exactly one bucket, the same replay whatever the number of buckets, and timeline points kept
only for the partitions the report can draw."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.audit import file_summary, replay_specs
from analytics.datasource import BATCH_COLUMNS, COLUMNS, discover_files, iter_file_batches
from analytics.generate import generate_cluster_dir
from analytics.record_columns import iter_record_columns
from analytics.replay_input import BUCKET_ROWS, bucket_count
from analytics.rules import (
    POINT,
    TALLY,
    TIMELINE_PARTITIONS,
    VIOLATION,
    _replay_buckets,
    choose_replay_source,
    timeline_rank,
    write_replay_buckets,
)
from analytics.staging import Stager


def test_bucket_count_is_a_multiple_of_the_cores_and_caps_bucket_rows() -> None:
    for rows in (0, 10, BUCKET_ROWS, 2 * BUCKET_ROWS + 1, 10_000_000):
        for cores in (1, 2, 3):
            n = bucket_count(rows, cores)
            assert n % cores == 0 and n >= cores
            assert rows <= n * BUCKET_ROWS


def _stage(root: Path, work: Path) -> tuple[Any, Any]:
    files = discover_files(root)
    with Stager(work) as stager:
        batches = stager.submit("batches", files, iter_file_batches, BATCH_COLUMNS)
        stager.wait()
        source = choose_replay_source(file_summary(batches))
        assert source is not None
        records = stager.submit("records", replay_specs(files, source.node),
                                iter_record_columns, COLUMNS, columnar=True)
        stager.wait()
    return records, source


def _replay(records: Any, source: Any, work: Path, buckets: int,
            monkeypatch: Any) -> tuple[list[dict[str, Any]], list[Path]]:
    monkeypatch.setattr("analytics.replay_input.bucket_count", lambda _rows, _cores: buckets)
    replay = write_replay_buckets(records.directory, work, source, 1, records.rows)
    assert replay.buckets == buckets
    ids = pa.record_batch([pa.array(list(range(buckets)), pa.int64())], names=["id"])
    out = [row for batch in _replay_buckets(replay, iter([ids])) for row in batch.to_pylist()]
    return out, [replay.bucket_file(b) for b in range(buckets)]


def test_buckets_split_partitions_and_replay_the_same(tmp_path: Path, monkeypatch: Any) -> None:
    # 5 topics x 6 partitions, min ISR changes and a snapshot: configs must reach every bucket.
    generate_cluster_dir(tmp_path / "logs", 3000, seed=3, topics=5, partitions_per_topic=6,
                         segment_records=800, snapshot_at=1000)
    records, source = _stage(tmp_path / "logs", tmp_path / "stage")
    one, _ = _replay(records, source, tmp_path / "one", 1, monkeypatch)
    four, files = _replay(records, source, tmp_path / "four", 4, monkeypatch)

    owners: Counter[tuple[str, int]] = Counter()
    for path in files:
        table = pq.read_table(path, columns=["topic_id", "partition_id"])
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
