"""The broker-side inputs as tables: the broker journals, ack journals, partition logs and
consumer journals handed to the stager (decoded outside Spark, analytics.engine.staging, by the
readers of analytics.read.broker_inputs), and read back as the DataFrames every broker rule's
Spark form takes (BrokerInputs), with the replicas' log bounds (rules 24, 25)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from analytics.engine.staging import Stager, Table
from analytics.read.broker_inputs import (
    ACK_JOURNALS,
    BROKER_JOURNALS,
    CONSUMER_JOURNALS,
    LOG_BOUND_COLUMNS,
    PARTITION_LOGS,
    FileKind,
    ddl,
    discover_broker_files,
    read_log_bounds,
)


@dataclass
class BrokerInputs:
    journal: DataFrame
    acks: DataFrame
    logs: DataFrame
    files: dict[str, int]
    consumers: DataFrame
    # LOG_BOUND_COLUMNS: log start and cleaner checkpoints (rules 24, 25); None if no replica
    # wrote either (no join then)
    bounds: DataFrame | None
    # replicas whose log cleaner has checkpointed a partition (rule 25); 0: no Spark job for it
    cleaned: int = 0


def stage_broker_inputs(stager: Stager, directory: str | Path) -> StagedBrokerInputs:
    """The four kinds of file handed to the stager (decoded outside Spark); a kind with no
    file becomes an empty DataFrame of its schema when read."""
    files = discover_broker_files(directory)

    def submit(kind: FileKind, specs: Sequence[Any]) -> Table:
        return stager.submit(kind.table, specs, kind.rows, kind.columns)

    return StagedBrokerInputs(
        submit(BROKER_JOURNALS, files.journals),
        submit(ACK_JOURNALS, files.acks),
        submit(PARTITION_LOGS, files.logs),
        files.counts(),
        submit(CONSUMER_JOURNALS, files.consumers),
        read_log_bounds(directory))


@dataclass
class StagedBrokerInputs:
    journal: Table
    acks: Table
    logs: Table
    files: dict[str, int]
    consumers: Table
    bounds: list[tuple[Any, ...]]

    def read(self, spark: SparkSession) -> BrokerInputs:
        return BrokerInputs(self.journal.read(spark), self.acks.read(spark),
                            self.logs.read(spark), self.files, self.consumers.read(spark),
                            spark.createDataFrame(self.bounds, ddl(LOG_BOUND_COLUMNS))
                            if self.bounds else None,
                            sum(row[-1] is not None for row in self.bounds))

