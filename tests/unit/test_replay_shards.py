"""The partition replay run in shards while the replay source's log is decoded
(analytics.rules.partitions.shards, issue 15): every partition replayed by exactly one shard, the same
violations and tallies whatever the number of shards, every staged row kept (the replayed
partition records aside, RECOVERING ones staged too), a record whose fields do not fit their
columns staged once as corrupt and not replayed, and the timeline points of the partitions the
report can draw read back from the spill."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import msgpack
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from analytics.audit import read_batch_headers, replay_specs  # noqa: E402
from analytics.engine.record_columns import iter_record_columns  # noqa: E402
from analytics.engine.staging import Stager, Table  # noqa: E402
from analytics.generate import NodeLog, generate_cluster_dir, partition_dir, write_node  # noqa: E402
from analytics.read.datasource import COLUMNS, KIND_SEGMENT, FileSpec, discover_files  # noqa: E402
from analytics.rules.partitions.pure import PARTITION_RECORD_TYPES, POINT, TALLY, VIOLATION  # noqa: E402
from analytics.rules.partitions.shards import (  # noqa: E402
    REPLAY_OUTPUT_COLUMNS,
    TIMELINE_PARTITIONS,
    PointSpill,
    ShardPlan,
    run_shard,
    shard_plan,
    timeline_rank,
)
from analytics.rules.partitions.source import ReplaySource, choose_replay_source  # noqa: E402
from analytics.rules.replication.pure import RECOVERING  # noqa: E402
from metadata.records import PartitionChangeRecord, PartitionRecord, encode_record  # noqa: E402
from storage.core.record_batch import encode_batch  # noqa: E402


def _source(root: Path, work: Path) -> tuple[list[FileSpec], ReplaySource]:
    files = discover_files(root)
    with Stager(work) as stager:
        _batches, summary = read_batch_headers(stager, files)
    source = choose_replay_source(summary)
    assert source is not None
    return files, source


def _run(files: list[FileSpec], source: ReplaySource, work: Path, shards: int
         ) -> tuple[ShardPlan, list[dict[str, Any]], Any, int]:
    """Every shard of a plan, one after the other: (plan, output rows, staged table, records
    replayed)."""
    records, output = Table("records", work / "records", COLUMNS), \
        Table("replayed", work / "replayed", REPLAY_OUTPUT_COLUMNS)
    records.directory.mkdir(parents=True)
    output.directory.mkdir(parents=True)
    plan = shard_plan(source, files, shards, records, output)
    results = [run_shard(plan, shard) for shard in range(shards)]
    rows = [row for path in sorted(output.directory.glob("*.parquet"))
            for row in pq.read_table(path).to_pylist()]
    assert sum(r.output_rows for r in results) == len(rows)
    staged = pa.concat_tables([pq.read_table(p) for p in sorted(
        records.directory.glob("*.parquet"))])
    assert sum(r.staged_rows for r in results) == staged.num_rows
    assert not list(output.directory.glob("*.bin"))  # the point spills are gone
    return plan, rows, staged, sum(r.replayed for r in results)


def test_shards_split_partitions_and_replay_the_same(tmp_path: Path) -> None:
    # 5 topics x 6 partitions, min ISR changes and a snapshot: configs must reach every shard.
    generate_cluster_dir(tmp_path / "logs", 3000, seed=3, topics=5, partitions_per_topic=6,
                         segment_records=800, snapshot_at=1000)
    files, source = _source(tmp_path / "logs", tmp_path / "w")
    assert source.snapshot_file is not None
    _plan, one, _staged, replayed_one = _run(files, source, tmp_path / "one", 1)
    _plan, four, _staged, replayed_four = _run(files, source, tmp_path / "four", 4)

    tallies = [r for r in four if r["kind"] == TALLY]
    assert Counter((t["topic_id"], t["partition_id"]) for t in tallies).most_common(1)[0][1] == 1
    assert len(tallies) == 30 and sum(r["states"] for r in tallies) > 1500
    assert replayed_one == replayed_four == sum(t["states"] for t in tallies)

    def without_points(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted(tuple(sorted((k, str(v)) for k, v in r.items()))
                      for r in rows if r["kind"] != POINT)

    # Violations and tallies (min ISR in force included) do not depend on the shards.
    assert without_points(one) == without_points(four)
    assert not [r for r in one if r["kind"] == VIOLATION]
    # The cluster default (2) and the topics' own min ISR changes reached the replay.
    assert len({r["min_isr"] for r in four if r["kind"] == POINT}) >= 2

    # Points: a shard keeps only its TIMELINE_PARTITIONS first partitions by timeline_rank;
    # with four shards every partition of the global first ones still has its points, the
    # same points as with one shard.
    ranked = sorted(tallies, key=lambda t: timeline_rank(0, t["states"], t["topic_id"],
                                                         t["partition_id"]))
    first = {(t["topic_id"], t["partition_id"]) for t in ranked[:TIMELINE_PARTITIONS]}
    with_points_one = {(r["topic_id"], r["partition_id"]) for r in one if r["kind"] == POINT}
    with_points_four = {(r["topic_id"], r["partition_id"]) for r in four if r["kind"] == POINT}
    assert with_points_one == first
    assert first <= with_points_four and len(with_points_four) <= 4 * TIMELINE_PARTITIONS
    points_of = [sorted((r["offset"], r["leader"], r["isr_size"], r["min_isr"]) for r in rows
                        if r["kind"] == POINT and (r["topic_id"], r["partition_id"]) in first)
                 for rows in (one, four)]
    assert points_of[0] == points_of[1] and points_of[0]


def test_staged_rows_are_all_but_the_replayed_ones(tmp_path: Path) -> None:
    # Every row the plain staging gives is staged by exactly one shard, unless the replay
    # reads it; a replayed partition record that went RECOVERING is staged too (rule 23).
    generate_cluster_dir(tmp_path / "logs", 3000, seed=5, topics=4, partitions_per_topic=5,
                         segment_records=700, snapshot_at=900)
    files, source = _source(tmp_path / "logs", tmp_path / "w")
    with Stager(tmp_path / "plain") as stager:
        plain = stager.submit("records", [s for s in replay_specs(files, source.node)
                                          if s.node == source.node],
                              iter_record_columns, COLUMNS, columnar=True)
        stager.wait()
    everything = pa.concat_tables([pq.read_table(p) for p in sorted(
        plain.directory.glob("*.parquet"))]).to_pylist()
    plan, _rows, staged, replayed = _run(files, source, tmp_path / "split", 3)

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return row["node"], row["file"], row["offset"], row["record_type"]

    def is_replayed(row: dict[str, Any]) -> bool:
        in_log = (row["kind"] == KIND_SEGMENT and row["offset"] >= plan.from_offset) or (
            row["file"] == plan.snapshot_file)
        return (row["record_type"] in PARTITION_RECORD_TYPES and not row["corrupt"] and in_log
                and row["offset"] >= 0)

    expected = Counter(key(r) for r in everything
                       if not is_replayed(r) or r["leader_recovery_state"] == RECOVERING)
    assert Counter(key(r) for r in staged.to_pylist()) == expected
    assert replayed == sum(1 for r in everything if is_replayed(r)) > 1000
    # The staged rows are the plain staging's rows, value for value.
    plain_rows = {key(r): r for r in everything}
    for row in staged.to_pylist():
        assert row == plain_rows[key(row)]


def test_a_record_that_does_not_fit_is_staged_once_as_corrupt_and_not_replayed(
        tmp_path: Path) -> None:
    topic = uuid.UUID(bytes=bytes(range(16)))
    full = encode_record(PartitionRecord(0, topic, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1,
                                         leader_epoch=0, partition_epoch=0))
    wrong = msgpack.packb([PartitionChangeRecord.TYPE_ID, 1, {
        "partition_id": 0, "topic_id": topic.bytes, "leader": "two"}], use_bin_type=True)
    bad_id = msgpack.packb([PartitionChangeRecord.TYPE_ID, 1, {
        "partition_id": [0], "topic_id": topic.bytes, "isr": [1]}], use_bin_type=True)
    good = encode_record(PartitionChangeRecord(0, topic, isr=(1, 2)))
    node = NodeLog(1, uuid.UUID(int=7), segment_records=100)
    node.append_raw(0, encode_batch(0, 1, 5, [full, wrong, bad_id, good]), 4)
    write_node(tmp_path / "logs", node)
    spec = FileSpec(1, "controller", None,
                    str(partition_dir(tmp_path / "logs", 1) / f"{0:020d}.log"), KIND_SEGMENT,
                    log_end=True)
    for shards in (1, 2, 3):
        _plan, rows, staged, replayed = _run([spec], ReplaySource(1, None, 0),
                                             tmp_path / f"s{shards}", shards)
        assert replayed == 2  # the full record and the good change
        corrupt = staged.filter(staged.column("corrupt")).to_pylist()
        assert sorted(r["offset"] for r in corrupt) == [1, 2], shards
        assert all("does not fit" in r["corrupt_reason"] for r in corrupt)
        tally = [r for r in rows if r["kind"] == TALLY]
        assert len(tally) == 1 and tally[0]["states"] == 2 and tally[0]["changes"] == 1


def test_point_spill_reads_back_the_last_points_of_chosen_partitions(tmp_path: Path) -> None:
    spill = PointSpill(tmp_path / "points.bin")
    for i in range(30_000):  # past the spill's buffer: several writes
        partition = i % 3
        spill.add(partition, f"file-{i % 2}", (i, 1000 + i, i % 2, 1, 2, 3, 3, 0, 2, 0))
    found = spill.last_points({0, 2}, 2000)
    spill.close()
    assert set(found) == {0, 2}
    for partition, points in found.items():
        offsets = [point[0] for _file, point in points]
        expected = [i for i in range(30_000) if i % 3 == partition][-2000:]
        assert offsets == expected
        assert all(file == f"file-{point[0] % 2}" for file, point in points)
    assert not (tmp_path / "points.bin").exists()
