"""Rules 20, 21, 22 and 23 (INVARIANTS.md: the broker's high watermark, leader recovery,
truncation, acked writes) on
Spark, over the broker journals, ack journals and partition logs (analytics.read.broker_inputs,
staged as tables by analytics.engine.broker_tables). Every verdict comes from
analytics.rules.replication.pure's plain functions (cogroup applyInArrow) or is the same
predicate as a column, so analytics.baseline runs the same definitions; the set-wide parts
(acked writes against the final leader's log, RECOVERING partitions) are joins. Only counts,
capped evidence and a few partitions' HWM points reach the driver.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analytics.engine.broker_tables import BrokerInputs
from analytics.engine.spark_session import cogroup_in_arrow
from analytics.rules.cleanup import spark as cleanup
from analytics.rules.replication import pure as dr
from analytics.rules.result import RuleResult, rule_result
from analytics.rules.spark_common import arrow_schema, as_reported, counts, evidence, good_rows
from broker.core.high_watermark import hwm_may_advance
from kafkawire.constants import ACKS_ALL

HWM_TIMELINE_PARTITIONS = 12
HWM_TIMELINE_POINTS = 2000
TIMELINE_EVENTS = ("HwmAdvanced", "Truncated", "RecoveryStateChanged", "RoleChanged")

R22_SCHEMA = ("topic STRING, partition INT, kind STRING, node INT, leader_epoch INT, "
              "count BIGINT, file STRING, offset BIGINT, message STRING")


def rule_20_hwm(journal: DataFrame) -> RuleResult:
    """Rule 20: no HwmAdvanced moved the HWM while the committed ISR was below min ISR."""
    advances = journal.filter(~F.col("corrupt") & (F.col("event") == "HwmAdvanced")).select(
        "file", "broker_id", "topic", "partition", "leader_epoch", "old", "new", "isr_size",
        "min_isr", "ts")
    # analytics.rules.replication.pure.hwm_violation as a column, built from the broker's own
    # predicate (a null in any operand: not a violation); tests/spark/test_rule_forms.py holds
    # the two forms equal.
    moved_below_min = (F.col("new") > F.col("old")) & ~hwm_may_advance(
        F.col("isr_size"), F.col("min_isr")
    )
    flagged = advances.withColumn("bad", F.coalesce(moved_below_min, F.lit(False)))
    checked, count = counts(flagged, F.col("bad"))
    violations = evidence(flagged.filter("bad").drop("bad"), count, ["ts", "broker_id"])
    as_reported(violations, message=dr.hwm_message, node="broker_id", offset="new")
    return rule_result(20, checked, violations, count)


def rule_21_recovering(journal: DataFrame) -> RuleResult:
    """Rule 21: no broker leading a RECOVERING partition advanced its HWM or acked a produce.
    analytics.rules.replication.pure.recovering_serves as columns: the role and recovery state
    each row follows are the last ones its broker journal set for that partition before it (a
    window in journal order); tests/spark/test_rule_forms.py holds the two forms equal."""
    rows = journal.filter(~F.col("corrupt") & F.col("event").isin(
        "RoleChanged", "RecoveryStateChanged", "HwmAdvanced", "ProduceAcked"))
    before = (Window.partitionBy("file", "topic", "partition").orderBy("position")
              .rowsBetween(Window.unboundedPreceding, -1))
    role_changed = F.col("event") == "RoleChanged"
    role = F.last(F.when(role_changed, F.coalesce(F.col("role"), F.lit(""))),
                  ignorenulls=True).over(before)
    state = F.last(
        F.when(role_changed, F.coalesce(F.col("leader_recovery_state"), F.lit(dr.UNKNOWN_STATE)))
        .when(F.col("event") == "RecoveryStateChanged", F.col("new_state")),
        ignorenulls=True).over(before)
    serving = (F.col("event") == "ProduceAcked") | (
        (F.col("event") == "HwmAdvanced") & (F.col("new") > F.col("old")))
    judged = rows.withColumn("role_now", role).withColumn("state_now", state).filter(
        F.coalesce(serving, F.lit(False)) & (F.col("role_now") == dr.LEADER)
        & F.col("state_now").isin(*dr.KNOWN_STATES))
    flagged = judged.withColumn("bad", F.col("state_now") == dr.RECOVERING)
    checked, count = counts(flagged, F.col("bad"))
    violations = evidence(
        flagged.filter("bad").select("file", "position", "event", "broker_id", "topic",
                                     "partition", "leader_epoch", "old", "new", "ts"),
        count, ["ts", "broker_id", "position"])
    as_reported(violations, message=dr.recovering_message, node="broker_id", offset="new")
    return rule_result(21, checked, violations, count)


def _rule_22_group(entries: Any, roles: Any) -> Any:
    """cogroup applyInArrow body: one data partition's log entries and role events."""
    import pyarrow as pa

    out = list(dr.check_partition_replicas(entries.to_pylist(), roles.to_pylist()))
    return pa.Table.from_pylist(out, schema=arrow_schema(R22_SCHEMA))


def rule_22_replicas(inputs: BrokerInputs) -> DataFrame:
    """Rule 22 per data partition (analytics.rules.replication.pure.
    check_partition_replicas); its reference rows name each partition's final leader, which
    rule 23 reads. The caller persists it."""
    # Rules 24/25: below any replica's log start or cleaner checkpoint, replicas differ by
    # design (analytics.rules.cleanup: removal_floor).
    entries = inputs.logs
    if inputs.bounds is not None:
        floors = cleanup.removal_floors(inputs.bounds)
        entries = (entries.join(F.broadcast(floors), ["topic", "partition"], "left")
                   .filter(F.col("corrupt") | (F.col("offset") >= F.coalesce(F.col("floor"),
                                                                              F.lit(0)))))
    entries = entries.select("node", "file", "topic", "partition", "offset", "leader_epoch",
                             "key", "corrupt")
    roles = inputs.journal.filter(~F.col("corrupt") & (F.col("event") == "RoleChanged")).select(
        "event", "broker_id", "topic", "partition", "role", "leader_epoch", "ts")
    return cogroup_in_arrow(entries, roles, ["topic", "partition"], _rule_22_group, R22_SCHEMA)


def rule_22_result(out: DataFrame) -> RuleResult:
    tallies = out.groupBy("kind").agg(F.count(F.lit(1)).alias("rows"),
                                      F.sum("count").alias("entries")).collect()
    by_kind = {r["kind"]: (int(r["rows"]), int(r["entries"] or 0)) for r in tallies}
    checked = by_kind.get(dr.CHECKED, (0, 0))[1]
    count = by_kind.get(dr.VIOLATION, (0, 0))[0]
    violations = evidence(out.filter(F.col("kind") == dr.VIOLATION), count,
                           ["topic", "partition", "node"])
    as_reported(violations)
    result = rule_result(22, checked, violations, count)
    result.notes = {"unchecked_replicas": by_kind.get(dr.UNCHECKED, (0, 0))[0],
                    "partitions": by_kind.get(dr.REFERENCE, (0, 0))[0]}
    return result


def recovering_partitions(metadata: DataFrame | None, journal: DataFrame) -> DataFrame:
    """(topic, partition) of every data partition that went RECOVERING (rule 23's excuse)."""
    from_journal = journal.filter(~F.col("corrupt") & (F.col("event") == "RecoveryStateChanged")
                                  & (F.col("new_state") == dr.RECOVERING)) \
        .select("topic", "partition")
    if metadata is None:
        return from_journal.distinct()
    rows = good_rows(metadata)
    names = rows.filter(F.col("record_type") == "TopicRecord").select(
        "topic_id", F.col("topic_name").alias("topic")).distinct()
    recovering = rows.filter(
        F.col("record_type").isin("PartitionRecord", "PartitionChangeRecord")
        & (F.col("leader_recovery_state") == dr.RECOVERING)).select(
        "topic_id", F.col("partition_id").alias("partition")).distinct()
    from_metadata = recovering.join(names, "topic_id").select("topic", "partition")
    return from_metadata.unionByName(from_journal).distinct()


def rule_23_acked(inputs: BrokerInputs, replicas: DataFrame,
                  recovering: DataFrame) -> RuleResult:
    """Rule 23: each acked acks=all write is in its partition's final leader log exactly once;
    a missing one on a RECOVERING partition is listed as attributed, not as a violation, and a
    non-idempotent producer's duplicate is counted in the notes, not as a violation."""
    acked = inputs.acks.filter(
        ~F.col("corrupt") & (F.col("event") == "ack") & (F.col("acks") == ACKS_ALL)
        & (F.col("error") == dr.ACK_OK) & F.col("key").isNotNull()).select(
        "topic", "partition", "key", "offset", "leader_epoch", "file", "idempotent") \
        .dropDuplicates(["topic", "partition", "key"])
    reference = replicas.filter(F.col("kind") == dr.REFERENCE).select("topic", "partition",
                                                                      "node")
    counts = (inputs.logs.filter(~F.col("corrupt") & (F.col("offset") >= 0))
              .join(F.broadcast(reference), ["topic", "partition", "node"])
              .groupBy("topic", "partition", "key").agg(F.count(F.lit(1)).alias("count")))
    joined = (acked.join(counts, ["topic", "partition", "key"], "left")
              .join(F.broadcast(recovering.withColumn("recovered", F.lit(True))),
                    ["topic", "partition"], "left"))
    if inputs.bounds is not None:
        reference_bounds = reference.join(inputs.bounds, ["topic", "partition", "node"]).select(
            "topic", "partition", "log_start", "cleaned_to")
        joined = joined.join(F.broadcast(reference_bounds), ["topic", "partition"], "left")
    else:
        joined = joined.withColumn("log_start", F.lit(None).cast("bigint")).withColumn(
            "cleaned_to", F.lit(None).cast("bigint"))
    # analytics.rules.replication.pure.classify_acked as a column: an idempotent producer's duplicate (or
    # one whose journal does not say: null) is a violation, a missing write on a partition that
    # went RECOVERING is attributed.
    count_in_log = F.coalesce(F.col("count"), F.lit(0))
    # Retention or the cleaner took it (rules 24, 25: analytics.rules.cleanup's removed_below).
    removed = cleanup.removed_below(F.col("offset"), F.col("log_start"), F.col("cleaned_to"))
    outcome = (F.when((count_in_log == 0) & F.coalesce(removed, F.lit(False)), dr.REMOVED)
               .when(count_in_log == 1, dr.PRESENT)
               .when(count_in_log > 1, F.when(F.col("idempotent") == F.lit(False),
                                              dr.DUPLICATED_COUNTED).otherwise(dr.DUPLICATED))
               .when(F.coalesce(F.col("recovered"), F.lit(False)), dr.ATTRIBUTED)
               .otherwise(dr.LOST))
    classified = joined.select("topic", "partition", "key", "offset", "leader_epoch", "file",
                               count_in_log.alias("count"), outcome.alias("outcome"))
    tallies = {r["outcome"]: int(r["n"]) for r in
               classified.groupBy("outcome").agg(F.count(F.lit(1)).alias("n")).collect()}
    count = tallies.get(dr.LOST, 0) + tallies.get(dr.DUPLICATED, 0)
    bad = classified.filter(F.col("outcome").isin(dr.LOST, dr.DUPLICATED))
    violations = evidence(bad, count, ["topic", "partition", "offset", "key"])
    attributed = evidence(classified.filter(F.col("outcome") == dr.ATTRIBUTED),
                           tallies.get(dr.ATTRIBUTED, 0), ["topic", "partition", "offset", "key"])
    for v in violations + attributed:
        v["message"] = dr.acked_message(v["outcome"], v)
        v["partition_id"] = v["partition"]
        v["partition"] = f"{v['topic']}-{v['partition']}"
    result = rule_result(23, sum(tallies.values()), violations, count)
    result.attributed = attributed
    result.attributed_count = tallies.get(dr.ATTRIBUTED, 0)
    result.notes = {"duplicates_counted": tallies.get(dr.DUPLICATED_COUNTED, 0),
                    "removed_by_retention_or_compaction": tallies.get(dr.REMOVED, 0)}
    return result


def hwm_timelines(journal: DataFrame) -> dict[str, list[dict[str, Any]]]:
    """The last HWM_TIMELINE_POINTS journal events of the busiest data partitions."""
    events = journal.filter(~F.col("corrupt") & F.col("event").isin(*TIMELINE_EVENTS)
                            & F.col("topic").isNotNull())
    busiest = (events.groupBy("topic", "partition").count()
               .orderBy(F.desc("count"), "topic", "partition").limit(HWM_TIMELINE_PARTITIONS)
               .select("topic", "partition"))
    window = Window.partitionBy("topic", "partition").orderBy(F.desc("ts"))
    rows = (events.join(F.broadcast(busiest), ["topic", "partition"])
            .withColumn("n", F.row_number().over(window)).filter(F.col("n") <= HWM_TIMELINE_POINTS)
            .select("topic", "partition", "event", "broker_id", "ts", "old", "new", "isr_size",
                    "min_isr", "role", "leader_epoch", "from_offset", "to_offset", "new_state")
            .collect())
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(f"{row['topic']}-{row['partition']}", []).append(row.asDict())
    for points in out.values():
        points.sort(key=lambda p: (p["ts"] or 0))
    return out
