"""The audit's readers (analytics.read) as PySpark Python DataSources, one per kind of file:
`spark.read.format("minikraft-metadata").load(dir)` (every record of every metadata log and
snapshot), "minikraft-metadata-batches" (one row per batch or damaged region), and the broker
journals, ack journals, consumer journals and partition logs. Each reads one input partition per
file and ships its rows as Arrow batches. The audit itself stages the same readers' rows as
Parquet instead (analytics.engine.staging); these serve `build_session(data_sources=True)`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from analytics.engine.staging import iter_arrow
from analytics.read.broker_inputs import (
    ACK_JOURNALS,
    BROKER_JOURNALS,
    CONSUMER_JOURNALS,
    PARTITION_LOGS,
    FileKind,
    ddl,
)
from analytics.read.datasource import (
    BATCH_SCHEMA_DDL,
    KIND_SEGMENT,
    SCHEMA_DDL,
    discover_files,
    iter_file_batches,
    iter_file_rows,
)

DATA_SOURCE_NAME = "minikraft-metadata"
BATCH_SOURCE_NAME = "minikraft-metadata-batches"
SOURCE_NODE_OPTION = "source_node"
BROKER_JOURNAL_SOURCE = "minikraft-broker-journal"
ACK_JOURNAL_SOURCE = "minikraft-ack-journal"
CONSUMER_JOURNAL_SOURCE = "minikraft-consumer-journal"
PARTITION_LOG_SOURCE = "minikraft-partition-log"


class FilePartition(InputPartition):
    """One file: Spark reads files in parallel, never one file in two tasks."""

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        self.spec = spec

class ArrowFileReader(DataSourceReader):
    """One input partition per file spec; each file's rows (a row generator in schema
    order) shipped to Spark as Arrow batches. Every minikraft data source reads this way."""

    def __init__(self, specs: Sequence[Any], rows: Callable[[Any], Iterator[tuple[Any, ...]]],
                 schema: StructType) -> None:
        self.specs = list(specs)
        self.rows = rows
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        return [FilePartition(spec) for spec in self.specs]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        if not isinstance(partition, FilePartition):
            # No file of this kind below the directory: Spark plans one InputPartition(None)
            # for an empty partitions() list, and an empty input is no rows, not an error.
            return
        yield from iter_arrow([partition.spec], self.rows, to_arrow_schema(self.schema))


class _MinikraftSource(DataSource):
    """A data source registered as SOURCE with the DDL SCHEMA; `load(dir)` passes dir as the
    "path" option."""

    SOURCE: ClassVar[str]
    SCHEMA: ClassVar[str]

    @classmethod
    def name(cls) -> str:
        return cls.SOURCE

    def schema(self) -> str:
        return self.SCHEMA

    def directory(self) -> str:
        path = self.options.get("path")
        if not path:
            raise ValueError(f"{self.SOURCE} needs a directory: .load(dir)")
        return str(path)


class MetadataLogDataSource(_MinikraftSource):
    """Every record of every metadata log and snapshot; with the "source_node" option, only
    that node's segments decoded in full (the others' control records only)."""

    SOURCE, SCHEMA = DATA_SOURCE_NAME, SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        specs = discover_files(self.directory())
        source = self.options.get(SOURCE_NODE_OPTION)
        if source is None:
            return ArrowFileReader(specs, iter_file_rows, schema)
        # Only the replay source is decoded in full; rule 2 compares the others by batch.
        specs = [dataclasses.replace(s, control_only=True)
                 if s.kind == KIND_SEGMENT and s.node != int(source) else s for s in specs]
        return ArrowFileReader(specs, functools.partial(iter_file_rows, hashes=False),
                               schema)


class MetadataBatchDataSource(_MinikraftSource):
    """One row per batch (BATCH_COLUMNS)."""

    SOURCE, SCHEMA = BATCH_SOURCE_NAME, BATCH_SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return ArrowFileReader(discover_files(self.directory()), iter_file_batches, schema)


class _BrokerFileSource(_MinikraftSource):
    """One kind of broker-side file (analytics.read.broker_inputs.FileKind) as a data source:
    `load(dir)` reads every such file below dir."""

    KIND: ClassVar[FileKind]

    def schema(self) -> str:
        return ddl(self.KIND.columns)

    def reader(self, schema: StructType) -> DataSourceReader:
        return ArrowFileReader(self.KIND.discover(self.directory()), self.KIND.rows, schema)


class BrokerJournalDataSource(_BrokerFileSource):
    SOURCE, KIND = BROKER_JOURNAL_SOURCE, BROKER_JOURNALS


class AckJournalDataSource(_BrokerFileSource):
    SOURCE, KIND = ACK_JOURNAL_SOURCE, ACK_JOURNALS


class ConsumerJournalDataSource(_BrokerFileSource):
    SOURCE, KIND = CONSUMER_JOURNAL_SOURCE, CONSUMER_JOURNALS


class PartitionLogDataSource(_BrokerFileSource):
    SOURCE, KIND = PARTITION_LOG_SOURCE, PARTITION_LOGS
