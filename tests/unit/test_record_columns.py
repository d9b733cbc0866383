"""analytics.engine.record_columns gives exactly the table analytics.read.datasource's row path gives
(iter_file_rows, hashes off, through analytics.engine.staging.to_arrow), on every shape of input:
generated logs with a snapshot, control-only specs, a flipped byte, a torn tail, a partition
record with a wrongly typed field, an unknown record type, an unreadable file."""

from __future__ import annotations

import dataclasses
import functools
import shutil
import uuid
from pathlib import Path

import msgpack
import pytest

pa = pytest.importorskip("pyarrow")

from analytics.engine.record_columns import iter_record_columns  # noqa: E402
from analytics.engine.staging import ARROW_BATCH_ROWS, arrow_schema, iter_arrow  # noqa: E402
from analytics.generate import NodeLog, generate_cluster_dir, partition_dir, write_node  # noqa: E402
from analytics.read.datasource import (  # noqa: E402
    COLUMNS,
    KIND_SEGMENT,
    FileSpec,
    discover_files,
    iter_file_rows,
)
from metadata.records import NoOpRecord, PartitionChangeRecord, encode_record  # noqa: E402
from storage.core.record_batch import encode_batch, read_header  # noqa: E402

SCHEMA = arrow_schema(COLUMNS)


def _row_path(spec: FileSpec) -> object:
    batches = list(iter_arrow([spec], functools.partial(iter_file_rows, hashes=False), SCHEMA))
    return pa.Table.from_batches(batches, schema=SCHEMA)


def _columnar(spec: FileSpec) -> object:
    return pa.Table.from_batches(list(iter_record_columns(spec, SCHEMA)), schema=SCHEMA)


def _assert_same(spec: FileSpec) -> int:
    expected, got = _row_path(spec), _columnar(spec)
    for name in expected.column_names:  # type: ignore[attr-defined]
        assert got[name].to_pylist() == expected[name].to_pylist(), (spec.file, name)  # type: ignore[index]
    return int(got.num_rows)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("columns") / "cluster"
    generate_cluster_dir(root, 12_000, seed=3, topics=3, partitions_per_topic=3,
                         segment_records=5_000, snapshot_at=6_000)
    return root


def test_generated_logs_and_snapshots(generated: Path) -> None:
    specs = discover_files(generated)
    assert {s.kind for s in specs} == {"segment", "snapshot"}
    rows = sum(_assert_same(spec) for spec in specs)
    assert rows > 3 * 12_000 > 2 * ARROW_BATCH_ROWS  # several chunks per file


def test_control_only_specs(generated: Path) -> None:
    spec = next(s for s in discover_files(generated) if s.kind == KIND_SEGMENT and s.node == 2)
    only = dataclasses.replace(spec, control_only=True)
    rows = _columnar(only)
    assert 0 < rows.num_rows < _columnar(spec).num_rows  # type: ignore[attr-defined]
    assert set(rows["is_control"].to_pylist()) == {True}  # type: ignore[index]
    _assert_same(only)


def test_flipped_byte_and_torn_tail(generated: Path, tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    shutil.copytree(generated, root)
    specs = [s for s in discover_files(root) if s.kind == KIND_SEGMENT and s.node == 1]
    first, last = specs[0], specs[-1]
    data = bytearray(Path(first.file).read_bytes())
    position = 0
    for _ in range(7):
        position += read_header(bytes(data), position).size
    data[position + read_header(bytes(data), position).size - 3] ^= 0xFF
    Path(first.file).write_bytes(bytes(data))
    torn = encode_batch(10**6, 1, 5, [b"half"])
    Path(last.file).write_bytes(Path(last.file).read_bytes() + torn[: len(torn) // 2])
    for spec in (first, last):
        _assert_same(spec)
    damage = _columnar(first).filter(pa.compute.is_valid(_columnar(first)["damage"]))  # type: ignore[index]
    assert damage["damage"].to_pylist() == ["corrupt"] and damage["offset"].to_pylist() == [-1]
    tail = _columnar(last)
    assert tail["damage"].to_pylist()[-1] == "torn"  # type: ignore[index]


def test_odd_records_take_the_row_path(tmp_path: Path) -> None:
    topic = bytes(range(16))
    wrong_type = msgpack.packb([PartitionChangeRecord.TYPE_ID, 1,
                                {"partition_id": 0, "topic_id": topic, "isr": ["one", 2]}],
                               use_bin_type=True)
    unknown = msgpack.packb([250, 0, {}], use_bin_type=True)
    good = encode_record(PartitionChangeRecord(0, uuid.UUID(bytes=topic), isr=(1, 2),
                                               leader=3))
    node = NodeLog(1, uuid.UUID(int=7), segment_records=100)
    node.append_raw(0, encode_batch(0, 1, 5, [good, wrong_type, encode_record(NoOpRecord()),
                                              unknown, b"", good]), 6)
    write_node(tmp_path, node)
    spec = FileSpec(1, "controller", None, str(partition_dir(tmp_path, 1) / f"{0:020d}.log"),
                    KIND_SEGMENT, log_end=True)
    assert _assert_same(spec) == 6
    rows = _columnar(spec).to_pylist()  # type: ignore[attr-defined]
    assert [r["corrupt"] for r in rows] == [False, True, False, True, True, False]
    assert rows[0]["isr"] == [1, 2] and rows[0]["leader"] == 3 and rows[0]["replicas"] is None
    assert "does not fit" in rows[1]["corrupt_reason"] and rows[1]["isr"] is None
    assert rows[2]["record_type"] == "NoOpRecord" and rows[5]["offset"] == 5
    missing = dataclasses.replace(spec, file=str(tmp_path / "gone.log"))
    assert _assert_same(missing) == 1
    assert _columnar(missing)["corrupt_reason"].to_pylist()[0].startswith("unreadable")  # type: ignore[index]
