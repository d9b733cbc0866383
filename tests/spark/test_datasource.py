"""The minikraft-metadata data source: every file of every node, one input partition per file,
typed columns decoded by the project's own code, corrupt batches as rows rather than crashes."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analytics.generate import generate_cluster_dir
from analytics.read.datasource import COLUMN_NAMES, FileSpec, discover_files, iter_file_rows
from storage.core.record_batch import read_header

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("generated")
    generate_cluster_dir(root, 600, seed=3, topics=2, partitions_per_topic=3,
                         segment_records=250, snapshot_at=300)
    return root


@pytest.fixture(scope="module")
def rows(spark: SparkSession, generated: Path) -> list[dict[str, Any]]:
    df = spark.read.format("minikraft-metadata").load(str(generated))
    return [r.asDict(recursive=True) for r in df.withColumn("task", F.spark_partition_id())
            .collect()]


def test_reads_every_file_with_one_partition_each(
    spark: SparkSession, generated: Path, rows: list[dict[str, Any]]
) -> None:
    specs = discover_files(generated)
    df = spark.read.format("minikraft-metadata").load(str(generated))
    assert tuple(df.columns) == COLUMN_NAMES
    assert df.rdd.getNumPartitions() == len(specs)
    files_per_task: dict[int, set[str]] = {}
    for row in rows:
        files_per_task.setdefault(row["task"], set()).add(row["file"])
    assert all(len(files) == 1 for files in files_per_task.values())
    assert len(files_per_task) == len(specs)
    assert len(rows) == sum(1 for spec in specs for _row in iter_file_rows(spec))
    assert {r["node"] for r in rows} == {1, 2, 3}
    assert {r["kind"] for r in rows} == {"segment", "snapshot"}
    assert not any(r["corrupt"] for r in rows)


def _first(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert found, match
    return min(found, key=lambda r: r["offset"])


def test_typed_columns(rows: list[dict[str, Any]]) -> None:
    log = [r for r in rows if r["node"] == 1 and r["kind"] == "segment"]
    first_change = _first(log, record_type="LeaderChangeRecord")
    assert (first_change["offset"], first_change["epoch"], first_change["leader_id"]) == (0, 1, 1)
    # LeaderChangeMessage v1: the version with VoterDirectoryId (KIP-853).
    assert first_change["is_control"] and first_change["version"] == 1
    voters = _first(log, record_type="VotersRecord")
    assert [v["id"] for v in voters["voters"]] == [1, 2, 3]
    assert all(len(v["directory_id"]) == 22 for v in voters["voters"])
    partition = _first(log, record_type="PartitionRecord")
    assert len(partition["replicas"]) == 3 and partition["partition_epoch"] == 0
    assert partition["version"] == 1 and len(partition["topic_id"]) == 22
    # A PartitionChangeRecord leaves unchanged fields null (seed 001 conventions).
    isr_only = next(r for r in log if r["record_type"] == "PartitionChangeRecord"
                and r["leader"] is None and r["isr"] is not None)
    assert isr_only["leader_epoch"] is None and isr_only["partition_epoch"] is None
    assert isr_only["leader_recovery_state"] is None
    broker = _first(log, record_type="RegisterBrokerRecord")
    assert broker["broker_id"] == 4 and broker["broker_epoch"] == broker["offset"]
    assert broker["fenced"] is True
    assert _first(log, record_type="UnfenceBrokerRecord")["fenced"] is False
    config = _first(log, record_type="ConfigRecord")
    assert (config["resource_type"], config["resource"], config["name"], config["value"]) == (
        4, "", "min.insync.replicas", "2")
    snapshot = [r for r in rows if r["kind"] == "snapshot" and r["snapshot_end_offset"] > 0]
    assert {r["record_type"] for r in snapshot} >= {"SnapshotHeaderRecord", "VotersRecord",
                                                    "PartitionRecord", "SnapshotFooterRecord"}


def test_corrupt_byte_gives_a_corrupt_row(spark: SparkSession, generated: Path,
                                          tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    shutil.copytree(generated, root)
    segment = sorted((root / "controller-2").rglob("*.log"))[0]
    original = segment.read_bytes()
    position = 0
    for _ in range(5):  # flip a byte inside the sixth batch's records: its CRC fails
        position += read_header(original, position).size
    bad = read_header(original, position)
    data = bytearray(original)
    data[position + bad.size - 3] ^= 0xFF
    segment.write_bytes(bytes(data))

    df = spark.read.format("minikraft-metadata").load(str(root)).cache()
    corrupt = df.filter("corrupt").collect()
    assert len(corrupt) == 1
    row = corrupt[0]
    assert row["file"] == str(segment) and row["offset"] == -1 and row["position"] == position
    assert "CRC" in row["corrupt_reason"] and row["damage"] == "corrupt"  # valid data after it
    in_file = df.filter((F.col("file") == str(segment)) & ~F.col("corrupt"))
    offsets = {r["offset"] for r in in_file.select("offset").collect()}
    # Only the bad batch is missing: reading resumed at the next valid batch.
    assert not offsets & set(range(bad.base_offset, bad.last_offset + 1))
    assert bad.base_offset - 1 in offsets and bad.last_offset + 1 in offsets
    other = sorted((root / "controller-1").rglob("*.log"))[0]
    intact = FileSpec(1, "controller", None, str(other), "segment")
    assert df.filter(F.col("file") == str(other)).count() == sum(
        1 for _row in iter_file_rows(intact))


def test_partition_record_with_wrongly_typed_field_is_a_corrupt_row(
        spark: SparkSession, tmp_path: Path) -> None:
    """The fast partition-record path leaves type checks to the Arrow columns: a field of the
    wrong type makes that row corrupt (as decode_record would), its neighbours stay intact."""
    import msgpack

    from analytics.generate import NodeLog, partition_dir, write_node
    from metadata.records import NoOpRecord, PartitionChangeRecord, encode_record
    from storage.core.record_batch import encode_batch

    topic = bytes(range(16))
    bad = msgpack.packb([PartitionChangeRecord.TYPE_ID, 1,
                         {"partition_id": 0, "topic_id": topic, "isr": ["one", 2]}],
                        use_bin_type=True)
    good = encode_record(PartitionChangeRecord(0, uuid.UUID(bytes=topic),
                                               isr=(1, 2)))
    node = NodeLog(1, uuid.UUID(int=7), segment_records=100)
    node.append_raw(0, encode_batch(0, 1, 5, [good, bad, encode_record(NoOpRecord())]), 3)
    write_node(tmp_path, node)
    segment = partition_dir(tmp_path, 1) / f"{0:020d}.log"
    rows = {r["offset"]: r for r in spark.read.format("minikraft-metadata").load(
        str(tmp_path)).filter(F.col("file") == str(segment)).collect()}
    assert not rows[0]["corrupt"] and rows[0]["isr"] == [1, 2]
    assert rows[1]["corrupt"] and "does not fit" in rows[1]["corrupt_reason"]
    assert rows[1]["isr"] is None and rows[1]["record_type"] == "PartitionChangeRecord"
    assert not rows[2]["corrupt"] and rows[2]["record_type"] == "NoOpRecord"


@pytest.mark.parametrize("source", ["minikraft-metadata", "minikraft-metadata-batches",
                                    "minikraft-broker-journal", "minikraft-ack-journal",
                                    "minikraft-consumer-journal", "minikraft-partition-log"])
def test_a_directory_without_such_files_reads_as_no_rows(
    spark: SparkSession, tmp_path: Path, source: str
) -> None:
    """Spark plans one partition without a file for an empty list: that is zero rows (it used
    to fail the task), so a cluster directory without, say, consumer journals still reads."""
    assert spark.read.format(source).load(str(tmp_path)).count() == 0
