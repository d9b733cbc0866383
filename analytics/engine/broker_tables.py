"""The broker-side inputs as tables: the broker journals, ack journals, partition logs and
consumer journals handed to the stager (decoded outside Spark, analytics.engine.staging, by the
readers of analytics.read.broker_inputs), and read back as the DataFrames every broker rule's
Spark form takes (BrokerInputs), with the replicas' log bounds (rules 24, 25)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from analytics.engine.staging import Stager, Table
from analytics.read.broker_inputs import (
    ACK_COLUMNS,
    CONSUMER_COLUMNS,
    JOURNAL_COLUMNS,
    LOG_BOUND_COLUMNS,
    PARTITION_LOG_COLUMNS,
    ddl,
    discover_consumer_journals,
    discover_journals,
    discover_partition_logs,
    iter_ack_rows,
    iter_consumer_rows,
    iter_journal_rows,
    iter_partition_log_rows,
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
    brokers, acks = discover_journals(directory)
    consumers = discover_consumer_journals(directory)
    logs = discover_partition_logs(directory)
    return StagedBrokerInputs(
        stager.submit("broker_journals", brokers, iter_journal_rows, JOURNAL_COLUMNS),
        stager.submit("ack_journals", acks, iter_ack_rows, ACK_COLUMNS),
        stager.submit("partition_logs", logs, iter_partition_log_rows, PARTITION_LOG_COLUMNS),
        {"broker_journals": len(brokers), "ack_journals": len(acks),
         "partition_log_segments": len(logs), "consumer_journals": len(consumers)},
        stager.submit("consumer_journals", consumers, iter_consumer_rows, CONSUMER_COLUMNS),
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

