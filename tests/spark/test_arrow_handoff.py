"""Arrow tables handed to Spark in the driver keep every row, also after an empty chunk.

pyspark 4.3's `createDataFrame(pyarrow.Table)` stops at a table's first empty chunk and drops
every row after it, silently (chunks [3, 0, 4] give 3 rows). An empty staged file (a node
whose log has no record of a kind) or an empty output batch of a rule's Python is such a
chunk; both hand-offs combine the chunks first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from analytics.engine.spark_session import PYTHON_IN_DRIVER_CONF, cogroup_in_arrow
from analytics.engine.staging import Stager


def _rows(spec: int) -> Iterator[tuple[Any, ...]]:
    yield from ((spec, i) for i in range(spec))


def test_staged_table_with_an_empty_file_reads_every_row(spark: SparkSession,
                                                         tmp_path: Path) -> None:
    with Stager(tmp_path) as stager:
        table = stager.submit("t", [3, 0, 4], _rows, [("spec", "INT"), ("i", "INT")])
        stager.wait()
    assert table.rows == 7
    assert table.read(spark).count() == 7  # an in-memory relation at this size


def _with_empty_chunk(left: Any, right: Any) -> Any:
    import pyarrow as pa

    rows = pa.concat_tables([left, right]).combine_chunks()
    return pa.Table.from_batches([rows.to_batches()[0].slice(0, 0), *rows.to_batches()])


def test_python_in_driver_output_with_an_empty_chunk_keeps_every_row(
        spark: SparkSession) -> None:
    left = spark.createDataFrame([(i % 5, i) for i in range(50)], "k int, id long")
    right = spark.createDataFrame([(5, 50)], "k int, id long")
    spark.conf.set(PYTHON_IN_DRIVER_CONF, "true")
    try:
        out = cogroup_in_arrow(left, right, ["k"], _with_empty_chunk, "k int, id long")
        assert sorted(r["id"] for r in out.collect()) == list(range(51))
    finally:
        spark.conf.set(PYTHON_IN_DRIVER_CONF, "false")
