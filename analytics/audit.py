"""`run_audit`: read every metadata file under a directory with Spark, check the rules, report.

Two reads: every batch of every file from its header and CRC (cheap: rule 2 and the damage
report, analytics.log_scan), then the records of one node only, the replay source (the longest
controller log), plus every node's control batches (rules 1 and 5). The decoded rows are
persisted once and every rule runs over them; only counts, evidence (capped) and a few
partitions' timelines reach the driver. Verdict: `corrupt` when a CRC or framing error has valid
data after it (bit rot), else `violations` when a rule is broken, else `clean`; a torn tail
after a crash is reported, not a finding.
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
    group_rules,
    hwm_timelines,
    no_broker_inputs,
    read_broker_inputs,
    recovering_partitions,
    rule_20_hwm,
    rule_22_replicas,
    rule_22_result,
    rule_23_acked,
)
from analytics.chaos_events import read_chaos_faults
from analytics.datasource import (
    BATCH_SOURCE_NAME,
    DATA_SOURCE_NAME,
    KIND_SEGMENT,
    SOURCE_NODE_OPTION,
    discover_files,
)
from analytics.log_scan import CORRUPT
from analytics.rules import (
    POINT,
    TALLY,
    TIMELINE_POINTS,
    VIOLATION,
    RuleResult,
    choose_replay_source,
    file_summary,
    partition_rule_results,
    replay_partitions,
    rule_1_one_leader_per_epoch,
    rule_2_committed_prefix,
    rule_5_voter_changes,
    rule_order,
)
from analytics.spark_session import DEFAULT_MASTER, build_session, register_data_sources

TIMELINE_PARTITIONS = 12
# Decoded rows take several times their size on disk once cached. Past this much input the
# rows are cached on local disk only: with a 4g driver (spark_session.DEFAULT_DRIVER_MEMORY) a
# 10M-record audit (5 GB of segments) kept in memory ran the JVM out of heap.
MEMORY_CACHE_LIMIT_BYTES = 1 << 30
MAX_CORRUPT_LISTED = 100
MAX_PARTITIONS_LISTED = 500
CLEAN, VIOLATIONS, CORRUPT_VERDICT = "clean", "violations", "corrupt"

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
    corruption: list[dict[str, Any]] = field(default_factory=list)  # bit rot: findings
    torn_tails: list[dict[str, Any]] = field(default_factory=list)  # crash tails: notes
    topic_names: dict[str, str] = field(default_factory=dict)  # topic id -> name
    elections: list[dict[str, Any]] = field(default_factory=list)  # LeaderChange per epoch
    partitions: list[dict[str, Any]] = field(default_factory=list)  # per-partition tallies
    faults: list[dict[str, Any]] = field(default_factory=list)  # chaos journal events

    @property
    def verdict(self) -> str:
        if self.corruption:
            return CORRUPT_VERDICT
        return VIOLATIONS if any(r.violation_count for r in self.rules) else CLEAN

    @property
    def clean(self) -> bool:
        return self.verdict == CLEAN

    def rule(self, number: int | str) -> RuleResult:
        return next(r for r in self.rules if r.rule == number)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "directory": self.directory,
                "corruption": self.corruption, "torn_tails": self.torn_tails,
                "rules": [r.to_json() for r in self.rules], "inputs": self.inputs,
                "partitions": self.partitions, "faults": self.faults,
                "elections": self.elections, "topic_names": self.topic_names,
                "elapsed_s": round(self.elapsed_s, 3)}


def read_metadata(spark: SparkSession, directory: str | Path,
                  source_node: int | None = None) -> DataFrame:
    """Record rows; with source_node, that node's in full and the others' control batches."""
    reader = spark.read.format(DATA_SOURCE_NAME)
    if source_node is not None:
        reader = reader.option(SOURCE_NODE_OPTION, str(source_node))
    return reader.load(str(directory))


def read_batches(spark: SparkSession, directory: str | Path) -> DataFrame:
    return spark.read.format(BATCH_SOURCE_NAME).load(str(directory))


def damage_evidence(batches: DataFrame, summary: list[dict[str, Any]]
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(corruption, torn tails): node, file, byte position, reason and the offsets around each
    damaged region; where reading did not resume in the same file, the next segment of the
    node's log (if any) says where the log goes on."""
    if not any(r["corrupt"] for r in summary):
        return [], []
    rows = [r.asDict() for r in batches.filter(F.col("damage").isNotNull()).select(
        "node", "file", "kind", "position", "damage", "damage_reason", "base_offset",
        "last_offset", "after_offset", "resumed_position", "resumed_offset")
        .orderBy("node", "file", "position").limit(MAX_CORRUPT_LISTED).collect()]
    starts = sorted((r["node"], r["first_offset"], r["file"]) for r in summary
                    if r["kind"] == KIND_SEGMENT and r["first_offset"] is not None)
    corruption: list[dict[str, Any]] = []
    torn: list[dict[str, Any]] = []
    for r in rows:
        resumed = r["resumed_offset"]
        if resumed is None and r["kind"] == KIND_SEGMENT and r["after_offset"] is not None:
            later = [first for node, first, _f in starts
                     if node == r["node"] and first > r["after_offset"]]
            resumed = min(later, default=None)
        first_bad = None if r["after_offset"] is None else r["after_offset"] + 1
        last_bad = None if resumed is None else resumed - 1
        span = f"offsets {first_bad}..{last_bad}" if last_bad is not None else (
            f"from offset {first_bad} to the log's end" if first_bad is not None else "")
        evidence = {
            "node": r["node"], "file": r["file"], "kind": r["kind"], "byte": r["position"],
            "reason": r["damage_reason"],
            "claimed_offsets": [r["base_offset"], r["last_offset"]],
            "last_good_offset": r["after_offset"], "next_good_offset": resumed,
            "next_good_byte": r["resumed_position"],
            "offsets": [first_bad, last_bad],
            "message": (f"{r['damage']}: node {r['node']} {r['file']} byte {r['position']}: "
                        f"{r['damage_reason']}; {span}"),
        }
        (corruption if r["damage"] == CORRUPT else torn).append(evidence)
    return corruption, torn


def _inputs(summary: list[dict[str, Any]], files: int, undecodable: int) -> dict[str, Any]:
    records = sum(int(r["records"] or 0) for r in summary)
    damaged = sum(int(r["corrupt"] or 0) for r in summary)
    return {"files": files, "records": records, "corrupt": damaged + undecodable,
            "damaged_regions": damaged, "undecodable_records": undecodable,
            "nodes": len({r["node"] for r in summary})}


def _names_elections_undecodable(df: DataFrame
                                 ) -> tuple[dict[str, str], list[dict[str, Any]], int]:
    """In one job: topic names by id (TopicRecords), one election per epoch (its LeaderChange
    record, the earliest seen on any node), and how many records did not decode."""
    undecodable = F.col("corrupt") & F.col("damage").isNull()
    what = F.when(undecodable, F.lit("undecodable")).otherwise(F.col("record_type"))
    rows = df.filter(undecodable | (~F.col("corrupt") & F.col("record_type").isin(
        "TopicRecord", "LeaderChangeRecord"))).groupBy(what.alias("what"), "topic_id", "epoch") \
        .agg(F.first("topic_name").alias("topic_name"), F.min("leader_id").alias("leader_id"),
             F.min("batch_timestamp_ms").alias("ts"), F.min("offset").alias("offset"),
             F.count(F.lit(1)).alias("n")).collect()
    names = {r["topic_id"]: r["topic_name"] for r in rows if r["what"] == "TopicRecord"}
    elections = sorted(({"epoch": r["epoch"], "leader": r["leader_id"], "ts_ms": r["ts"],
                         "offset": r["offset"]} for r in rows
                        if r["what"] == "LeaderChangeRecord"),
                       key=lambda e: (e["epoch"], e["ts_ms"] or 0))
    return names, elections, sum(int(r["n"]) for r in rows if r["what"] == "undecodable")


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


def _partition_tallies(replayed: DataFrame, topic_names: dict[str, str]
                       ) -> list[dict[str, Any]]:
    """Per partition, worst first: violations, time without a leader, time under min ISR,
    leader changes (the report's index). Capped at MAX_PARTITIONS_LISTED rows."""
    per = replayed.groupBy("topic_id", "partition_id").agg(
        F.sum(F.when(F.col("kind") == VIOLATION, 1).otherwise(0)).alias("violations"),
        F.sum("unavailable_ms").alias("unavailable_ms"),
        F.sum("under_min_isr_ms").alias("under_min_isr_ms"),
        F.sum("leader_changes").alias("leader_changes"), F.sum("states").alias("states"))
    rows = per.orderBy(F.desc("violations"), F.desc("unavailable_ms"),
                       F.desc("under_min_isr_ms"), "topic_id", "partition_id") \
        .limit(MAX_PARTITIONS_LISTED).collect()
    out = []
    for r in rows:
        item = {k: (int(v) if isinstance(v, int) else v) for k, v in r.asDict().items()}
        name = topic_names.get(r["topic_id"], r["topic_id"])
        item["topic"], item["partition"] = name, f"{name}-{r['partition_id']}"
        item["key"] = f"{r['topic_id']}-{r['partition_id']}"
        out.append(item)
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
        rules += group_rules(inputs, replicas)
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
    23), and consumer journals when there are some (analytics.group_rules' named checks);
    writes audit.json and index.html to report_dir when given."""
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
        say(f"reading batch headers of {len(files)} files ({input_bytes / 2**20:,.0f} MiB)")
        batches = read_batches(spark, directory).persist(StorageLevel.MEMORY_AND_DISK)
        summary = file_summary(batches)
        corruption, torn = damage_evidence(batches, summary)
        source = choose_replay_source(summary)
        # Only the replay source's records are decoded and cached (about a third of the input
        # with three controllers).
        level = (StorageLevel.MEMORY_AND_DISK if input_bytes <= 3 * memory_cache_limit_bytes
                 else StorageLevel.DISK_ONLY)
        say(f"decoding node {source.node if source else '-'}'s log")
        df = read_metadata(spark, directory, source.node if source else None).persist(level)
        topic_names, elections, undecodable = _names_elections_undecodable(df)
        inputs = _inputs(summary, len(files), undecodable)
        say(f"read {inputs['records']} records; rule 1: one leader per epoch")
        # Rules 1 and 5 read only the few Raft control records: one scan picks them out.
        control = df.filter(F.col("record_type").isin("LeaderChangeRecord", "VotersRecord")) \
            .persist(StorageLevel.MEMORY_AND_DISK)
        rules = [rule_1_one_leader_per_epoch(control)]
        say("rule 5: voter changes")
        rules.append(rule_5_voter_changes(control))
        control.unpersist()
        say("rule 2: committed-prefix agreement, batch by batch")
        rules.append(rule_2_committed_prefix(batches))
        batches.unpersist()
        say("rules 8, 10, 11, 13, 19: replaying partitions")
        replayed = replay_partitions(df, summary)
        if replayed is not None:
            replayed = replayed.persist(StorageLevel.MEMORY_AND_DISK)
        rules += partition_rule_results(replayed)
        timelines = _timelines(replayed) if replayed is not None else {}
        partitions = _partition_tallies(replayed, topic_names) if replayed is not None else []
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
    rules.sort(key=rule_order)
    result = AuditResult(str(directory), rules, inputs, timelines, hwm_points,
                         time.monotonic() - started, corruption=corruption, torn_tails=torn,
                         topic_names=topic_names, elections=elections, partitions=partitions,
                         faults=read_chaos_faults(directory))
    if report_dir is not None:
        from analytics.report import write_report

        say("writing the report")
        result.report_dir = write_report(result, report_dir)
    return result
