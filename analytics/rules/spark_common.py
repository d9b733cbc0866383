"""Spark helpers every family's spark.py shares: capped evidence and its rows as reported, counts
in one job, the undamaged rows, and the Arrow schema of an applyInArrow body's output."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics.rules.result import MAX_EVIDENCE


def evidence(bad: DataFrame, count: int, order: list[Any]) -> list[dict[str, Any]]:
    """Up to MAX_EVIDENCE violation rows; no Spark job at all when there are none."""
    if not count:
        return []
    return [r.asDict(recursive=True) for r in bad.orderBy(*order).limit(MAX_EVIDENCE).collect()]


def as_reported(
    violations: list[dict[str, Any]],
    *,
    message: Callable[[dict[str, Any]], str] | None = None,
    node: str | None = None,
    offset: str | None = None,
    partition_id: bool = False,
) -> list[dict[str, Any]]:
    """Evidence rows as the audit reports them, in place: the rule's `message` for the row,
    `node` and `offset` copied from the named columns, `partition` as topic-partition (its
    number kept as partition_id where the report links to the partition's timeline). The keys
    are added in this order, which the audit's JSON shows."""
    for v in violations:
        if message is not None:
            v["message"] = message(v)
        if node is not None:
            v["node"] = v[node]
        if partition_id:
            v["partition_id"] = v["partition"]
        v["partition"] = f"{v['topic']}-{v['partition']}"
        if offset is not None:
            v["offset"] = v[offset]
    return violations


def counts(df: DataFrame, violation: Any) -> tuple[int, int]:
    """(rows checked, rows violating) in one job."""
    row = df.agg(F.count(F.lit(1)).alias("checked"),
                 F.sum(F.when(violation, 1).otherwise(0)).alias("bad")).collect()[0]
    return int(row["checked"] or 0), int(row["bad"] or 0)


def good_rows(df: DataFrame) -> DataFrame:
    return df.filter(~F.col("corrupt") & (F.col("offset") >= 0))


def applied_rows(df: DataFrame, node: int | None, dropped: Sequence[tuple[int, int]]
                 ) -> DataFrame:
    """Metadata rows without the data records of `node`'s log that no loader applies: those
    of a KIP-868 transaction aborted or open at the log's end, (first, last) offsets each
    (metadata.transactions). Control records (Raft's) and undecodable ones stay. No filter at
    all when there is none."""
    if node is None or not dropped:
        return df
    inside = functools.reduce(operator.or_, (F.col("offset").between(first, last)
                                             for first, last in dropped))
    return df.filter(~((F.col("node") == node) & (F.col("kind") == "segment")
                       & ~F.col("is_control") & ~F.col("corrupt") & inside))



_ARROW_TYPES = {"STRING": "string", "INT": "int32", "BIGINT": "int64", "BOOLEAN": "bool_"}


def arrow_schema(schema_ddl: str) -> Any:
    """The pyarrow schema of a flat DDL string (no SparkSession needed on executors)."""
    import pyarrow as pa

    fields = [part.strip().split() for part in schema_ddl.split(",")]
    return pa.schema([pa.field(name, getattr(pa, _ARROW_TYPES[kind])()) for name, kind in fields])
