"""`run_audit`: read every metadata file under a directory with Spark, check the rules, report.

The decoded rows are persisted once (decoding is the expensive part) and every rule runs over
them; only counts, evidence (capped) and a few partitions' timelines reach the driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analytics.broker_rules import (
    hwm_timelines,
    no_broker_inputs,
    read_broker_inputs,
    recovering_partitions,
    rule_20_hwm,
    rule_22_replicas,
    rule_22_result,
    rule_23_acked,
)
from analytics.datasource import DATA_SOURCE_NAME, discover_files
from analytics.rules import (
    POINT,
    TALLY,
    TIMELINE_POINTS,
    VIOLATION,
    RuleResult,
    file_summary,
    partition_rule_results,
    replay_partitions,
    rule_1_one_leader_per_epoch,
    rule_2_committed_prefix,
    rule_5_voter_changes,
)
from analytics.spark_session import DEFAULT_MASTER, build_session, register_data_sources

TIMELINE_PARTITIONS = 12
# Decoded rows take several times their size on disk once cached. Past this much input the
# rows are cached on local disk only: with a 4g driver (spark_session.DEFAULT_DRIVER_MEMORY) a
# 10M-record audit (5 GB of segments) kept in memory ran the JVM out of heap.
MEMORY_CACHE_LIMIT_BYTES = 1 << 30
MAX_CORRUPT_LISTED = 100

Progress = Callable[[str], None]


class AuditInputError(ValueError):
    """Nothing to audit: the directory holds no metadata log segment or snapshot."""


@dataclass
class AuditResult:
    directory: str
    rules: list[RuleResult]
    inputs: dict[str, Any]
    timelines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    hwm_timelines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    elapsed_s: float = 0.0
    report_dir: Path | None = None

    @property
    def verdict(self) -> str:
        return "violations" if any(r.violation_count for r in self.rules) else "clean"

    @property
    def clean(self) -> bool:
        return self.verdict == "clean"

    def rule(self, number: int) -> RuleResult:
        return next(r for r in self.rules if r.rule == number)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "directory": self.directory,
                "rules": [r.to_json() for r in self.rules], "inputs": self.inputs,
                "elapsed_s": round(self.elapsed_s, 3)}


def read_metadata(spark: SparkSession, directory: str | Path) -> DataFrame:
    return spark.read.format(DATA_SOURCE_NAME).load(str(directory))


def _inputs(df: DataFrame, summary: list[dict[str, Any]], files: int) -> dict[str, Any]:
    rows = sum(int(r["rows"]) for r in summary)
    corrupt_count = sum(int(r["corrupt"] or 0) for r in summary)
    corrupt = [] if not corrupt_count else [r.asDict() for r in df.filter("corrupt").select(
        "node", "file", "position", "offset", "corrupt_reason").orderBy("file", "position")
        .limit(MAX_CORRUPT_LISTED).collect()]
    return {"files": files, "records": rows - corrupt_count, "corrupt": corrupt_count,
            "nodes": len({r["node"] for r in summary}), "corrupt_rows": corrupt}


def _timelines(replayed: DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Points of a few partitions for the report: those with violations first, then the busiest
    (by the replay's tally); the replay already kept only each partition's last points."""
    ranked = replayed.groupBy("topic_id", "partition_id").agg(
        F.sum(F.when(F.col("kind") == VIOLATION, 1).otherwise(0)).alias("violations"),
        F.sum(F.when(F.col("kind") == TALLY, F.col("states")).otherwise(0)).alias("states"))
    chosen = ranked.orderBy(F.desc("violations"), F.desc("states"), "topic_id", "partition_id") \
        .limit(TIMELINE_PARTITIONS).select("topic_id", "partition_id")
    rows = (replayed.filter(F.col("kind") != TALLY).join(F.broadcast(chosen),
                                                         ["topic_id", "partition_id"])
            .withColumn("partition", F.concat_ws("-", "topic_id",
                                                 F.col("partition_id").cast("string")))
            .withColumn("n", F.row_number().over(
                Window.partitionBy("partition", "kind").orderBy(F.desc("offset"))))
            .filter(F.col("n") <= TIMELINE_POINTS).drop("n", "states", "changes").collect())
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["partition"], []).append(row.asDict())
    for points in out.values():
        points.sort(key=lambda p: (p["offset"], p["kind"] != POINT))
    return out


def _broker_rules(spark: SparkSession, directory: str | Path, metadata: DataFrame
                  ) -> tuple[list[RuleResult], dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Rules 20, 22, 23 and the HWM timelines; the journal and the rule-22 output are small and
    read twice, so they are persisted, the partition logs are not."""
    inputs = read_broker_inputs(spark, directory)
    if not any(inputs.files.values()):
        return no_broker_inputs(), {}, inputs.files
    journal = inputs.journal.persist(StorageLevel.MEMORY_AND_DISK)
    inputs.journal = journal
    try:
        rules = [rule_20_hwm(journal)]
        replicas = rule_22_replicas(inputs).persist(StorageLevel.MEMORY_AND_DISK)
        rules.append(rule_22_result(replicas))
        rules.append(rule_23_acked(inputs, replicas, recovering_partitions(metadata, journal)))
        replicas.unpersist()
        points = hwm_timelines(journal)
    finally:
        journal.unpersist()
    return rules, points, inputs.files


def run_audit(
    directory: str | Path,
    master: str = DEFAULT_MASTER,
    report_dir: str | Path | None = None,
    spark: SparkSession | None = None,
    progress: Progress | None = None,
    memory_cache_limit_bytes: int = MEMORY_CACHE_LIMIT_BYTES,
) -> AuditResult:
    """Audit every metadata segment and snapshot under directory (INVARIANTS rules 1, 2, 5, 8,
    10, 11, 13, 19) and the broker journals, ack journals and partition logs (rules 20, 22,
    23); writes audit.json and index.html to report_dir when given."""
    started = time.monotonic()
    say = progress or (lambda _message: None)
    files = discover_files(directory)
    if not files:
        raise AuditInputError(f"no metadata log segments or snapshots under {directory}")
    own_session = spark is None
    if spark is None:
        say(f"starting Spark ({master})")
        spark = build_session(master)
    else:
        register_data_sources(spark)
    try:
        input_bytes = sum(Path(f.file).stat().st_size for f in files)
        level = (StorageLevel.MEMORY_AND_DISK if input_bytes <= memory_cache_limit_bytes
                 else StorageLevel.DISK_ONLY)
        say(f"reading {len(files)} files ({input_bytes / 2**20:,.0f} MiB)")
        df = read_metadata(spark, directory).persist(level)
        summary = file_summary(df)
        inputs = _inputs(df, summary, len(files))
        say(f"read {inputs['records']} records; rule 1: one leader per epoch")
        # Rules 1 and 5 read only the few Raft control records: one scan picks them out.
        control = df.filter(F.col("record_type").isin("LeaderChangeRecord", "VotersRecord")) \
            .persist(StorageLevel.MEMORY_AND_DISK)
        rules = [rule_1_one_leader_per_epoch(control)]
        say("rule 5: voter changes")
        rules.append(rule_5_voter_changes(control))
        control.unpersist()
        say("rule 2: committed-prefix agreement")
        rules.append(rule_2_committed_prefix(df))
        say("rules 8, 10, 11, 13, 19: replaying partitions")
        replayed = replay_partitions(df, summary)
        if replayed is not None:
            replayed = replayed.persist(StorageLevel.MEMORY_AND_DISK)
        rules += partition_rule_results(replayed)
        timelines = _timelines(replayed) if replayed is not None else {}
        if replayed is not None:
            replayed.unpersist()
        say("rules 20, 22, 23: broker journals, ack journals, partition logs")
        broker_rules, hwm_points, broker_files = _broker_rules(spark, directory, df)
        rules += broker_rules
        inputs.update(broker_files)
        df.unpersist()
    finally:
        if own_session:
            spark.stop()
    rules.sort(key=lambda r: r.rule)
    result = AuditResult(str(directory), rules, inputs, timelines, hwm_points,
                         time.monotonic() - started)
    if report_dir is not None:
        from analytics.report import write_report

        say("writing the report")
        result.report_dir = write_report(result, report_dir)
    return result
