"""`run_audit`: read every metadata file under a directory, check the rules with Spark, report.

Two reads, both outside Spark (analytics.engine.staging: the driver's process, or a forked pool while
the JVM starts), into Parquet that Spark reads natively: every batch of every file from its
header and CRC (cheap: rule 2 and the damage report, analytics.read.log_scan), then the records of
one node only, the replay source (the longest controller log, chosen from the batch headers
before Spark is up), plus every node's control batches (rules 1 and 5). The replay source's
partitions are replayed as its records decode, in shards (analytics.rules.partitions.shards: rules 8,
10, 11, 13, 19), and their findings are staged too. Every rule then runs over the Parquet
tables; only counts, evidence (capped) and a few partitions' timelines reach the driver. Verdict: `corrupt` when a CRC or framing error has valid data after it (bit rot),
else `violations` when a rule is broken, else `clean`; a torn tail after a crash is reported,
not a finding.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analytics.engine.broker_tables import StagedBrokerInputs, stage_broker_inputs
from analytics.engine.record_columns import iter_record_columns
from analytics.engine.spark_session import (
    DEFAULT_MASTER,
    PYTHON_IN_DRIVER_CONF,
    build_session,
    warm_python_workers,
)
from analytics.engine.staging import Stager, Table
from analytics.read.chaos_events import read_chaos_faults
from analytics.read.datasource import (
    BATCH_COLUMNS,
    COLUMNS,
    KIND_SEGMENT,
    FileSpec,
    discover_files,
    iter_file_batches,
)
from analytics.read.log_scan import CORRUPT
from analytics.report.audit_result import AuditResult
from analytics.rules.cleanup.spark import rule_24_log_start, rule_25_compaction
from analytics.rules.groups.spark import group_rules
from analytics.rules.partitions.pure import POINT, TALLY
from analytics.rules.partitions.shards import (
    REPLAY_OUTPUT_COLUMNS,
    TIMELINE_PARTITIONS,
    TIMELINE_POINTS,
    run_shard,
    shard_plan,
)
from analytics.rules.partitions.source import choose_replay_source
from analytics.rules.partitions.spark import (
    partition_rule_results,
    partition_summaries,
    replay_partitions,
)
from analytics.rules.quorum.spark import (
    rule_1_one_leader_per_epoch,
    rule_2_committed_prefix,
    rule_5_voter_changes,
)
from analytics.rules.replication.spark import (
    hwm_timelines,
    recovering_partitions,
    rule_20_hwm,
    rule_21_recovering,
    rule_22_replicas,
    rule_22_result,
    rule_23_acked,
)
from analytics.rules.result import RuleResult, rule_order, rule_result
from analytics.rules.spark_common import applied_rows

# Below this much metadata log the files are decoded in the driver's process (a few thousand
# records take milliseconds); above it, by a pool of forked processes while the JVM starts.
PARALLEL_DECODE_BYTES = 8 << 20
# Below this much metadata log Spark starts with the small-input settings
# (analytics.engine.spark_session.SMALL_INPUT_JAVA_OPTIONS): a demo cluster's few MiB.
SMALL_INPUT_BYTES = 32 << 20
# Below this much the JVM runs C1 and the serial collector (spark_session.LIGHT_JVM_JAVA_OPTIONS):
# a million-record audit reads about 530 MiB.
LIGHT_JVM_BYTES = 2 << 30
# Up to this many staged broker rows (the broker journals, the ack journals, the partition
# logs' entries) the broker rules' Python runs in the driver, not in Python workers
# (analytics.engine.spark_session.cogroup_in_arrow): the rows it reads are collected to the driver.
PYTHON_IN_DRIVER_ROWS = 200_000
MAX_CORRUPT_LISTED = 100
MAX_PARTITIONS_LISTED = 500

Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class StagedRecords:
    """The staged metadata rows, and the offsets of the replay source's log whose data records
    no loader applies (aborted KIP-868 transactions, or one open at the log's end:
    ShardResult.dropped): topic names and RECOVERING partitions are read without them."""

    table: Table
    node: int | None
    dropped: tuple[tuple[int, int], ...]

    def applied(self, spark: SparkSession) -> DataFrame:
        return applied_rows(self.table.read(spark), self.node, self.dropped)


class AuditInputError(ValueError):
    """Nothing to audit: the directory holds no metadata log segment or snapshot."""


def file_summary(batches: Table) -> list[dict[str, Any]]:
    """One small row per file from its staged batch rows (pyarrow, in the driver: the replay
    source is chosen from it before Spark has started): node, role, kind, first/last good
    offset, batches, records, damaged regions. Staging writes one Parquet file per input file,
    so the driver reads one file's batch rows at a time (memory bounded by the largest file's
    batches, not the input's: 2M batch rows at 10M records)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = []
    for path in sorted(batches.directory.glob("*.parquet")):
        table = pq.read_table(path, columns=[
            "node", "role", "kind", "file", "snapshot_end_offset", "base_offset", "last_offset",
            "damage"])
        if table.num_rows == 0:
            continue
        good = pc.is_null(table["damage"])
        good_rows = table.filter(good)
        first = table.slice(0, 1).to_pylist()[0]
        records = pc.sum(pc.add(pc.subtract(good_rows["last_offset"],
                                            good_rows["base_offset"]), 1)).as_py()
        out.append({"node": first["node"], "role": first["role"], "kind": first["kind"],
                    "file": first["file"], "snapshot_end_offset": first["snapshot_end_offset"],
                    "first_offset": pc.min(good_rows["base_offset"]).as_py(),
                    "last_offset": pc.max(good_rows["last_offset"]).as_py(),
                    "batches": good_rows.num_rows, "records": records or 0,
                    "corrupt": table.num_rows - good_rows.num_rows})
    return out


def read_batch_headers(stager: Stager, files: list[FileSpec]) -> tuple[Table, list[dict[str, Any]]]:
    """The audit's first pass: every file's batch headers staged, and file_summary's row per
    file, from which the replay source is chosen."""
    staged = stager.submit("batches", files, iter_file_batches, BATCH_COLUMNS)
    stager.wait()
    return staged, file_summary(staged)


def replay_specs(files: list[FileSpec], source_node: int | None) -> list[FileSpec]:
    """What is decoded: the replay source's files in full, the other nodes' segments for their
    control batches only (rules 1 and 5); rule 2 compares them batch by batch."""
    if source_node is None:
        return files
    return [dataclasses.replace(s, control_only=True)
            if s.kind == KIND_SEGMENT and s.node != source_node else s for s in files]


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


def _replay(spark: SparkSession, output: Table | None
            ) -> tuple[list[RuleResult], dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """The replay's output, persisted while its rule results, the timelines and the partition
    tallies are read from it."""
    replayed = replay_partitions(spark, output)
    if replayed is None:
        return partition_rule_results(None, None), {}, []
    replayed = replayed.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        summaries = partition_summaries(replayed)
        return (partition_rule_results(replayed, summaries), _timelines(replayed, summaries),
                _partition_tallies(summaries))
    finally:
        replayed.unpersist()


def _timelines(replayed: DataFrame, summaries: Any) -> dict[str, list[dict[str, Any]]]:
    """Points of a few partitions for the report: those with violations first, then the busiest
    (rules.timeline_rank's order over partition_summaries); the replay already kept only the
    last points of each task's first partitions in that order."""
    import pyarrow.compute as pc

    ranked = summaries.select(["topic_id", "partition_id", "violations"]).append_column(
        "states", pc.fill_null(summaries["states"], 0))
    chosen = ranked.sort_by([("violations", "descending"), ("states", "descending"),
                             ("topic_id", "ascending"), ("partition_id", "ascending")]
                            ).slice(0, TIMELINE_PARTITIONS).to_pylist()
    if not chosen:
        return {}
    wanted = functools.reduce(operator.or_, (
        (F.col("topic_id") == c["topic_id"]) & (F.col("partition_id") == c["partition_id"])
        for c in chosen))
    rows = (replayed.filter((F.col("kind") != TALLY) & wanted)
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


def _partition_tallies(summaries: Any) -> list[dict[str, Any]]:
    """Per partition, worst first: violations, time without a leader, time under min ISR,
    leader changes (the report's index). Capped at MAX_PARTITIONS_LISTED rows."""
    worst = summaries.sort_by([
        ("violations", "descending"), ("unavailable_ms", "descending"),
        ("under_min_isr_ms", "descending"), ("leader_changes", "descending"),
        ("topic_id", "ascending"),
        ("partition_id", "ascending")]).slice(0, MAX_PARTITIONS_LISTED)
    return worst.select(["topic_id", "partition_id", "violations", "unavailable_ms",
                         "under_min_isr_ms", "leader_changes", "states"]).to_pylist()


def _named_tallies(tallies: list[dict[str, Any]], topic_names: dict[str, str]
                   ) -> list[dict[str, Any]]:
    """The report's index rows: each tally with its topic's name."""
    out = []
    for item in tallies:
        name = topic_names.get(item["topic_id"], item["topic_id"])
        out.append({**item, "topic": name, "partition": f"{name}-{item['partition_id']}",
                    "key": f"{item['topic_id']}-{item['partition_id']}"})
    return out


def no_broker_inputs() -> list[RuleResult]:
    """Rules 20-25 when there is no journal and no partition log (a metadata-only
    audit): what the Spark path reports on empty inputs, without the Spark jobs that would say
    so."""
    rule22 = rule_result(22, 0, [])
    rule22.notes = {"unchecked_replicas": 0, "partitions": 0}
    rule25 = rule_result(25, 0, [])
    rule25.notes = {"keys": 0, "cleaner_checkpoints": 0, "attributed": 0}
    return [rule_result(20, 0, []), rule_result(21, 0, []), rule22, rule_result(23, 0, []),
            rule_result(24, 0, []), rule25]


def _broker_rules(spark: SparkSession, staged: StagedBrokerInputs, staged_records: StagedRecords
                  ) -> tuple[list[RuleResult], dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Rules 20-25, the group checks and the HWM timelines; the journal and the rule-22 output are small and
    read twice, so they are persisted, the partition logs are not."""
    if not any(staged.files.values()):
        return no_broker_inputs(), {}, staged.files
    inputs = staged.read(spark)
    journal = inputs.journal.persist(StorageLevel.MEMORY_AND_DISK)
    inputs.journal = journal
    try:
        rules = [rule_20_hwm(journal), rule_21_recovering(journal)]
        replicas = rule_22_replicas(inputs).persist(StorageLevel.MEMORY_AND_DISK)
        rules.append(rule_22_result(replicas))
        metadata = staged_records.applied(spark)
        recovering = recovering_partitions(metadata, journal)
        if inputs.cleaned:  # rules 23 and 25 both read it
            recovering = recovering.persist(StorageLevel.MEMORY_AND_DISK)
        rules.append(rule_23_acked(inputs, replicas, recovering))
        rules.append(rule_24_log_start(inputs))
        rules.append(rule_25_compaction(inputs, replicas, recovering))
        if inputs.cleaned:
            recovering.unpersist()
        rules += group_rules(inputs, replicas)
        replicas.unpersist()
        points = hwm_timelines(journal)
    finally:
        journal.unpersist()
    return rules, points, inputs.files


def decode_processes(input_bytes: int) -> int:
    """Processes decoding the input: one (in the driver's own) for a small input, where forking
    costs more than it saves; else one per core, with the JVM starting alongside."""
    return 1 if input_bytes < PARALLEL_DECODE_BYTES else max(1, os.cpu_count() or 1)


def run_audit(
    directory: str | Path,
    master: str = DEFAULT_MASTER,
    report_dir: str | Path | None = None,
    spark: SparkSession | None = None,
    progress: Progress | None = None,
    on_session: Callable[[SparkSession], None] | None = None,
    python_in_driver: bool | None = None,
) -> AuditResult:
    """Audit every metadata segment and snapshot under directory (INVARIANTS rules 1, 2, 5, 8,
    10, 11, 13, 19) and the broker journals, ack journals, partition logs and checkpoints (rules
    20-25), and consumer journals when there are some (analytics.rules.groups' checks);
    writes audit.json and index.html to report_dir when given. Without a session, one is
    started (and stopped) here, while the files are decoded; on_session sees it first.
    python_in_driver: run the rules' Python in the driver, not in Python workers
    (analytics.engine.spark_session.PYTHON_IN_DRIVER_CONF); None: up to PYTHON_IN_DRIVER_ROWS."""
    started = time.monotonic()
    say = progress or (lambda _message: None)
    files = discover_files(directory)
    if not files:
        raise AuditInputError(f"no metadata log segments or snapshots under {directory}")
    input_bytes = sum(Path(f.file).stat().st_size for f in files)
    own_session = spark is None
    small = input_bytes < SMALL_INPUT_BYTES
    with tempfile.TemporaryDirectory(prefix="minikraft-audit-") as scratch, \
            Stager(Path(scratch), decode_processes(input_bytes)) as stager:
        say(f"reading batch headers of {len(files)} files ({input_bytes / 2**20:,.0f} MiB)")
        staged_batches, summary = read_batch_headers(stager, files)
        source = choose_replay_source(summary)
        say(f"decoding node {source.node if source else '-'}'s log and replaying its "
            f"partitions in {stager.processes} shard(s)")
        replayed, shards = None, []
        staged_records = stager.table("records", COLUMNS)
        if source is not None:
            # First in the pool's queue: the shards are the long tasks.
            replayed = stager.table("replayed", REPLAY_OUTPUT_COLUMNS)
            plan = shard_plan(source, files, stager.processes, staged_records, replayed)
            shards = [stager.start(run_shard, plan, shard) for shard in range(plan.shards)]
        stager.submit(staged_records, [s for s in replay_specs(
            files, source.node if source else None) if source is None or s.node != source.node],
            iter_record_columns, COLUMNS, columnar=True)
        staged_broker = stage_broker_inputs(stager, directory)
        if spark is None:
            say(f"starting Spark ({master})")
            spark = build_session(master, small_input=small,
                                  light_jvm=input_bytes < LIGHT_JVM_BYTES,
                                  shuffle_partitions=2 if small else 8,
                                  data_sources=False)  # read from staged Parquet instead
        if on_session is not None:
            on_session(spark)
        # The broker rules' Python may run in Python workers: start them while the input
        # stages (a large input with broker files only: the replay needs no worker).
        warming = (None if small or not any(staged_broker.files.values())
                   else warm_python_workers(spark, ["analytics.rules.replication.spark",
                                                    "analytics.rules.groups.spark"]))
        try:
            say("staging and replaying (Spark is up)")
            stager.wait()
            dropped: tuple[tuple[int, int], ...] = ()
            for shard in shards:
                done = shard.result()
                staged_records.rows += done.staged_rows
                dropped = done.dropped  # the same in every shard
                if replayed is not None:
                    replayed.rows += done.output_rows
            staged_rows = sum(
                t.rows for t in (staged_broker.journal, staged_broker.acks, staged_broker.logs))
            in_driver = (staged_rows <= PYTHON_IN_DRIVER_ROWS if python_in_driver is None
                         else python_in_driver)
            spark.conf.set(PYTHON_IN_DRIVER_CONF, "true" if in_driver else "false")
            records = StagedRecords(staged_records, source.node if source else None, dropped)
            result = _audit(spark, say, directory, files, summary, staged_batches, records,
                            staged_broker, replayed)
        finally:
            if warming is not None:
                warming.join()
            if own_session:
                spark.stop()
    result.elapsed_s = time.monotonic() - started
    if report_dir is not None:
        from analytics.report.render import write_report

        say("writing the report")
        result.report_dir = write_report(result, report_dir)
    return result


def _audit(spark: SparkSession, say: Progress, directory: str | Path, files: list[FileSpec],
           summary: list[dict[str, Any]], staged_batches: Table, staged_records: StagedRecords,
           staged_broker: StagedBrokerInputs, replayed: Table | None) -> AuditResult:
    """Every rule over the staged tables and the replay's output (Spark reads them as
    Parquet), on three threads: the partition rules' counts, evidence and timelines from the
    replay's output, and the broker rules, each from a thread of their own while this one runs
    the set-wide rules (small JVM jobs that leave cores idle between their stages: Spark's
    per-job work dominates)."""
    with ThreadPoolExecutor(2, thread_name_prefix="audit-rules") as pool:
        say("rules 1, 2, 5, the replay's findings (rules 8, 10, 11, 13, 19) and the broker "
            "rules (20-25)")
        replaying = pool.submit(_replay, spark, replayed)
        brokers = pool.submit(_broker_rules, spark, staged_broker, staged_records)
        batches = staged_batches.read(spark)
        corruption, torn = damage_evidence(batches, summary)
        df = staged_records.applied(spark)
        topic_names, elections, undecodable = _names_elections_undecodable(df)
        inputs = _inputs(summary, len(files), undecodable)
        # Rules 1 and 5 read only the few Raft control records: one scan picks them out.
        control = df.filter(F.col("record_type").isin("LeaderChangeRecord", "VotersRecord")) \
            .persist(StorageLevel.MEMORY_AND_DISK)
        rules = [rule_1_one_leader_per_epoch(control), rule_5_voter_changes(control)]
        control.unpersist()
        rules.append(rule_2_committed_prefix(batches))
        partition_rules, timelines, tallies = replaying.result()
        broker_rules, hwm_points, broker_files = brokers.result()
    rules += partition_rules
    partitions = _named_tallies(tallies, topic_names)
    rules += broker_rules
    inputs.update(broker_files)
    rules.sort(key=rule_order)
    return AuditResult(str(directory), rules, inputs, timelines, hwm_points, 0.0,
                       corruption=corruption, torn_tails=torn, topic_names=topic_names,
                       elections=elections, partitions=partitions,
                       faults=read_chaos_faults(directory))
