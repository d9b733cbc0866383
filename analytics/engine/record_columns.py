"""A metadata log file's records as Arrow columns, decoded batch by batch: the audit's staging
of its replay source (analytics.audit), the same table analytics.read.datasource.iter_file_rows
gives row by row (a test compares them), at a fraction of the per-record Python work.

Per batch, the record framing is parsed once (storage.core.record_batch.decode_batch) and the
batch-level columns (position, epoch, timestamp, control flag) are repeated, not set per row.
Per record, a partition record's msgpack map gives one tuple (analytics.read.datasource.
partition_values: one C unpack and a few dict lookups); the columns are those tuples
transposed by zip when a chunk of ARROW_BATCH_ROWS rows is flushed. Every other record (control
records, brokers, topics, configs, anything that does not decode) and every damaged region
goes through the row path (analytics.read.datasource: record_row, damage_row), which is the one
definition of those rows, and is patched into the columns by index. The columns of a file's
identity (node, file, ...) are one value repeated. Memory: one chunk of columns per process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from analytics.engine.staging import ARROW_BATCH_ROWS, arrow_schema, to_arrow
from analytics.read.datasource import (
    COL,
    COLUMNS,
    KIND_SEGMENT,
    PARTITION_VALUE_COLUMNS,
    FileSpec,
    batch_base_row,
    damage_row,
    file_template,
    partition_values,
    read_file,
    record_row,
)
from analytics.read.log_scan import CORRUPT, Damage, walk_batches
from storage.core.record_batch import decode_batch

_IDENTITY = tuple(COL[c] for c in ("node", "role", "directory_id", "file", "kind",
                                   "snapshot_end_offset"))
_PER_BATCH = tuple(COL[c] for c in ("position", "epoch", "batch_timestamp_ms", "is_control"))
_OFFSET, _CORRUPT = COL["offset"], COL["corrupt"]
_FAST = PARTITION_VALUE_COLUMNS
_EMPTY = (None,) * len(_FAST)


class Chunk:
    """Columns of up to about ARROW_BATCH_ROWS rows being built."""

    def __init__(self, template: list[Any]) -> None:
        self.template = template
        self.fast: list[tuple[Any, ...]] = []  # partition_values per row (or _EMPTY)
        self.offsets: list[int] = []
        self.per_batch: list[list[Any]] = [[] for _ in _PER_BATCH]
        self.others: dict[int, tuple[Any, ...]] = {}  # row index -> full row (the row path)

    def __len__(self) -> int:
        return len(self.fast)

    def add_values(self, values: tuple[Any, ...], offset: int,
                   per_batch: tuple[int, int, int, bool]) -> None:
        """One partition record: its partition_values, offset, and its batch's (position,
        epoch, timestamp, control flag)."""
        self.fast.append(values)
        self.offsets.append(offset)
        for column, value in zip(self.per_batch, per_batch, strict=True):
            column.append(value)

    def add_other(self, row: tuple[Any, ...]) -> None:
        self.others[len(self.fast)] = row
        self.fast.append(_EMPTY)
        self.offsets.append(row[_OFFSET])
        for values, index in zip(self.per_batch, _PER_BATCH, strict=True):
            values.append(row[index])

    def to_arrow(self, schema: Any) -> Any:
        import pyarrow as pa

        n = len(self.fast)
        columns: list[Any] = [None] * len(COLUMNS)
        for index in _IDENTITY:
            columns[index] = [self.template[index]] * n
        for index, values in zip(_PER_BATCH, self.per_batch, strict=True):
            columns[index] = values
        columns[_OFFSET] = self.offsets
        # strict=False: no rows (nothing to transpose) leaves these columns null-filled below
        for index, transposed in zip(_FAST, zip(*self.fast, strict=True), strict=False):
            columns[index] = list(transposed)
        columns[_CORRUPT] = [False] * n
        for index, column in enumerate(columns):
            if column is None:
                columns[index] = [None] * n
        for position, row in self.others.items():
            for index, column in enumerate(columns):
                column[position] = row[index]
        try:
            arrays = [pa.array(column, type=field.type)
                      for column, field in zip(columns, schema, strict=True)]
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            # A value that does not fit its column: the row path makes that row corrupt.
            return to_arrow(list(zip(*columns, strict=True)), schema)
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def iter_record_columns(spec: FileSpec, schema: Any | None = None) -> Iterator[Any]:
    """The rows iter_file_rows(spec, hashes=False) gives, as Arrow RecordBatches (COLUMNS)."""
    schema = arrow_schema(COLUMNS) if schema is None else schema
    template = file_template(spec)
    chunk = Chunk(template)
    data = read_file(spec)
    if isinstance(data, str):
        chunk.add_other(damage_row(template, 0, data, CORRUPT))
        yield chunk.to_arrow(schema)
        return
    for item in walk_batches(data, spec.log_end and spec.kind == KIND_SEGMENT):
        if isinstance(item, Damage):
            chunk.add_other(damage_row(template, item.position, item.reason, item.kind))
            continue
        header, _crc = item
        if spec.control_only and not header.is_control:
            continue
        batch, _size = decode_batch(data, header.position)  # CRC already checked: cannot fail
        _add_batch(chunk, template, batch, header.position)
        if len(chunk) >= ARROW_BATCH_ROWS:
            yield chunk.to_arrow(schema)
            chunk = Chunk(template)
    if len(chunk):
        yield chunk.to_arrow(schema)


def _add_batch(chunk: Chunk, template: list[Any], batch: Any, position: int) -> None:
    """One batch's records: partition records by partition_values, the rest (control records,
    anything partition_values refuses) by the row path, one record at a time."""
    fast, offsets, others = chunk.fast, chunk.offsets, chunk.others
    count = len(batch.records)
    is_control = batch.is_control
    for values, value in zip(chunk.per_batch, (position, batch.leader_epoch,
                                               batch.timestamp_ms, is_control), strict=True):
        values.extend([value] * count)
    base: list[Any] | None = None
    for index, record in enumerate(batch.records):
        delta = record.offset_delta
        offsets.append(batch.base_offset + (index if delta is None else delta))
        decoded = None if is_control else partition_values(record.value or b"")
        if decoded is not None:
            fast.append(decoded)
            continue
        if base is None:
            base = batch_base_row(template, batch, position)
        others[len(fast)] = record_row(base, batch, index, False, try_partition=False)
        fast.append(_EMPTY)
