"""Input files decoded outside Spark, into Parquet that Spark reads natively.

The audit's readers (analytics.read.datasource, analytics.read.broker_inputs) are plain Python row
generators. Run through a Python DataSource, every `load()` costs Spark a Python worker round
trip to plan it and every row crosses from a Python worker into the JVM as it is read; here the
same generators run in the driver's process (or, for large inputs, a pool of forked processes,
one file per task) while the JVM starts, and each file's rows become one Parquet file of Arrow
columns in a scratch directory. Spark then reads Parquet with no Python at all. Memory stays
bounded by one file's Arrow batch (ARROW_BATCH_ROWS rows at a time) per process, whatever the
input size. The scratch directory must be visible to the executors: true for `local[N]` and for
a standalone cluster on this machine (the audit's own data sources have the same requirement:
they read the cluster's files by path).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from analytics.engine.gc_pause import fewer_collections

ARROW_BATCH_ROWS = 8192
# A staged table this small becomes an in-memory relation (Table.read).
LOCAL_TABLE_ROWS = 20_000
_STRUCT_FIELD = re.compile(r"\s*(\w+)\s*:\s*(.+)\s*")

Columns = Sequence[tuple[str, str]]
Rows = Callable[[Any], Iterator[tuple[Any, ...]]]
# A reader that builds Arrow columns itself (analytics.engine.record_columns): (spec, schema) -> batches
Batches = Callable[[Any, Any], Iterator[Any]]


def arrow_type(ddl_type: str) -> Any:
    """The pyarrow type of a Spark DDL type (the few the readers use), with no JVM needed."""
    import pyarrow as pa

    kind = ddl_type.strip()
    scalars = {"STRING": pa.string(), "INT": pa.int32(), "BIGINT": pa.int64(),
               "BOOLEAN": pa.bool_()}
    if kind.upper() in scalars:
        return scalars[kind.upper()]
    if kind.upper().startswith("ARRAY<") and kind.endswith(">"):
        return pa.list_(arrow_type(kind[6:-1]))
    if kind.upper().startswith("STRUCT<") and kind.endswith(">"):
        fields = []
        for part in kind[7:-1].split(","):
            match = _STRUCT_FIELD.fullmatch(part)
            if match is None:
                raise ValueError(f"unsupported struct field {part!r}")
            fields.append(pa.field(match.group(1), arrow_type(match.group(2))))
        return pa.struct(fields)
    raise ValueError(f"unsupported DDL type {ddl_type!r}")


def arrow_schema(columns: Columns) -> Any:
    import pyarrow as pa

    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in columns])


def ddl(columns: Columns) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in columns)


def to_arrow(rows: list[tuple[Any, ...]], schema: Any) -> Any:
    """Rows (tuples in schema order) as one RecordBatch; a row with a value that does not fit
    its column becomes a corrupt row (fit_row) instead of failing all."""
    import pyarrow as pa

    try:
        columns = list(zip(*rows, strict=True))
        arrays = [pa.array(col, type=field.type) for col, field in
                  zip(columns, schema, strict=True)]
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return to_arrow([fit_row(row, schema) for row in rows], schema)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def iter_arrow(specs: Iterable[Any], rows: Rows, schema: Any) -> Iterator[Any]:
    """The rows of every spec as Arrow batches of at most ARROW_BATCH_ROWS rows."""
    batch: list[tuple[Any, ...]] = []
    for spec in specs:
        for row in rows(spec):
            batch.append(row)
            if len(batch) >= ARROW_BATCH_ROWS:
                yield to_arrow(batch, schema)
                batch = []
    if batch:
        yield to_arrow(batch, schema)


class ParquetFile:
    """Record batches into one Parquet file at path, written under a temporary name and moved
    into place by close (Spark lists *.parquet only: never a half-written file). The file is
    created by the first batch, or by close when `empty_ok` (an empty file of the schema)."""

    def __init__(self, path: Path, schema: Any, empty_ok: bool = False) -> None:
        self.path = path
        self.schema = schema
        self.rows = 0
        self._empty_ok = empty_ok
        self._writer: Any = None

    def _open(self) -> Any:
        if self._writer is None:
            import pyarrow.parquet as pq

            self._writer = pq.ParquetWriter(self.path.with_suffix(".tmp"), self.schema,
                                            compression="none")
        return self._writer

    def write(self, batch: Any) -> None:
        self._open().write_batch(batch)
        self.rows += batch.num_rows

    def close(self) -> int:
        """The file in place (if any row came, or empty_ok); how many rows it holds."""
        writer = self._open() if self._empty_ok else self._writer
        if writer is not None:
            writer.close()
            os.replace(self.path.with_suffix(".tmp"), self.path)
        return self.rows

    def __enter__(self) -> ParquetFile:
        return self

    def __exit__(self, failed: type[BaseException] | None, *_exc: object) -> None:
        """On an exception: the temporary file closed, never moved into place."""
        if failed is not None and self._writer is not None:
            self._writer.close()


def write_parquet(path: Path, specs: Sequence[Any], rows: Rows | Batches, columns: Columns,
                  columnar: bool = False) -> int:
    """The rows of specs into one Parquet file at path; how many rows. columnar: rows is a
    Batches reader (Arrow batches per spec), else a row generator."""
    schema = arrow_schema(columns)
    batches: Iterator[Any] = (
        (batch for spec in specs for batch in rows(spec, schema))  # type: ignore[call-arg]
        if columnar else iter_arrow(specs, rows, schema))  # type: ignore[arg-type]
    with fewer_collections(), ParquetFile(path, schema, empty_ok=True) as out:
        for batch in batches:
            out.write(batch)
    return out.close()


@dataclass
class Table:
    """One staged table: a directory of Parquet files and its columns."""

    name: str
    directory: Path
    columns: Columns
    rows: int = 0

    def read(self, spark: Any) -> Any:
        """The table as a DataFrame: up to LOCAL_TABLE_ROWS rows an in-memory relation (read
        here with pyarrow: every query over it then skips Spark's file listing and Parquet
        readers, most of a demo-size audit's per-query work), else Spark's Parquet scan."""
        if not any(self.directory.glob("*.parquet")):
            return spark.createDataFrame([], ddl(self.columns))
        if self.rows <= LOCAL_TABLE_ROWS:
            import pyarrow.dataset as ds

            table = ds.dataset(str(self.directory), format="parquet",
                               schema=arrow_schema(self.columns)).to_table()
            # One chunk: pyspark 4.3's createDataFrame(pyarrow.Table) drops every row after
            # the first empty chunk, and an empty staged file is one (tests/spark/
            # test_arrow_handoff.py).
            return spark.createDataFrame(table.combine_chunks(), schema=ddl(self.columns))
        return spark.read.schema(ddl(self.columns)).parquet(str(self.directory))


class Stager:
    """Writes tables under workdir, one Parquet file per input file, inline or in a pool of
    forked processes (`processes` > 1); `submit` returns at once, `wait` collects."""

    def __init__(self, workdir: Path, processes: int = 1) -> None:
        self.workdir = workdir
        self.processes = max(1, processes)
        self._pool: ProcessPoolExecutor | None = (
            ProcessPoolExecutor(processes, mp_context=get_context("fork")) if processes > 1
            else None)
        self._pending: list[tuple[Table, Future[int] | int]] = []

    def table(self, name: str, columns: Columns) -> Table:
        """An empty table under workdir, for a function run by `start` to write parts into."""
        table = Table(name, self.workdir / name, columns)
        table.directory.mkdir(parents=True, exist_ok=True)
        return table

    def submit(self, name: str | Table, specs: Sequence[Any], rows: Rows | Batches,
               columns: Columns, per_file: bool = True, columnar: bool = False) -> Table:
        """specs' rows into a new table `name` (or into a table from `table`), one Parquet
        part per spec (per_file) or one for all."""
        table = name if isinstance(name, Table) else self.table(name, columns)
        groups = [[spec] for spec in specs] if per_file else ([list(specs)] if specs else [])
        for index, group in enumerate(groups):
            path = table.directory / f"part-{index:05d}.parquet"
            if self._pool is None:
                self._pending.append(
                    (table, write_parquet(path, group, rows, columns, columnar)))
            else:
                self._pending.append(
                    (table, self._pool.submit(write_parquet, path, group, rows, columns,
                                             columnar)))
        return table

    def start(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """fn(*args) in a pool process, queued behind what was submitted before (inline
        without a pool: run now); its result or exception from the future."""
        if self._pool is not None:
            return self._pool.submit(fn, *args)
        done: Future[Any] = Future()
        done.set_result(fn(*args))
        return done

    def wait(self) -> None:
        """Every submitted file written (a worker's exception is raised here)."""
        pending, self._pending = self._pending, []
        for table, result in pending:
            table.rows += result if isinstance(result, int) else result.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Stager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_IDENTITY_COLUMNS = frozenset(("node", "role", "directory_id", "file", "kind",
                               "snapshot_end_offset", "position", "offset", "epoch",
                               "batch_timestamp_ms", "is_control", "record_type"))


def fit_row(row: tuple[Any, ...], arrow_schema: Any) -> tuple[Any, ...]:
    """A row whose values fit the Arrow schema, or, when one does not (a record whose fields
    have the wrong types), the row as corrupt with those values dropped."""
    import pyarrow as pa

    try:
        for value, field in zip(row, arrow_schema, strict=True):
            pa.array([value], type=field.type)
        return row
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        names = arrow_schema.names
        if "corrupt" not in names:
            raise
        fixed = [v if n in _IDENTITY_COLUMNS else None for v, n in zip(row, names, strict=True)]
        fixed[names.index("corrupt")] = True
        fixed[names.index("corrupt_reason")] = f"a field does not fit its column: {exc}"
        return tuple(fixed)
