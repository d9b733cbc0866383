"""Rules 24 and 25 (INVARIANTS.md: retention and compaction) on Spark, over the replicas' log
start and cleaner checkpoints (analytics.read.broker_inputs.read_log_bounds), the broker
journals, and for rule 25 the ack journals' keyed writes and the final leader's record keys of
the compacted partitions: the predicates of analytics.rules.cleanup.pure as columns, and its
check_compacted_partition per partition (cogroup applyInArrow). removal_floors and
removed_below are the floors rules 22 and 23 (analytics.rules.replication.spark) respect. An
audit with no cleaner checkpoint runs no Spark job for rule 25.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analytics.engine.broker_tables import BrokerInputs
from analytics.engine.spark_session import cogroup_in_arrow
from analytics.rules.cleanup import pure as cl
from analytics.rules.replication import pure as dr
from analytics.rules.result import RuleResult, rule_result
from analytics.rules.spark_common import arrow_schema, as_reported, counts, evidence
from kafkawire.constants import ACKS_ALL

R25_SCHEMA = ("topic STRING, partition INT, node INT, kind STRING, record_key STRING, "
              "offset BIGINT, held_offset BIGINT, count BIGINT, message STRING")


def removal_floors(bounds: DataFrame) -> DataFrame:
    """(topic, partition, floor): analytics.rules.cleanup.pure.removal_floor per partition, the
    highest log start or cleaner checkpoint of any replica; below it replicas differ by design."""
    return bounds.groupBy("topic", "partition").agg(F.max(F.greatest(
        F.coalesce(F.col("log_start"), F.lit(0)), F.coalesce(F.col("cleaned_to"), F.lit(0))
    )).alias("floor"))


def removed_below(offset: Column, log_start: Column, cleaned_to: Column) -> Column:
    """analytics.rules.cleanup.pure.removed_below as a column (null where offset is null)."""
    return (offset < F.coalesce(log_start, F.lit(-1))) | (offset < F.coalesce(cleaned_to,
                                                                            F.lit(-1)))


def rule_24_log_start(inputs: BrokerInputs) -> RuleResult:
    """Rule 24: no replica's log start offset (retention, DeleteRecords) is past the highest
    HWM any leader of its partition journaled (analytics.rules.cleanup.pure.log_start_violation)."""
    if inputs.bounds is None:
        return rule_result(24, 0, [])
    highest = _highest_hwm(inputs.journal)
    starts = inputs.bounds.filter(F.col("log_start").isNotNull()).join(
        highest, ["topic", "partition"])
    past = F.col("log_start") > F.col("highest_hwm")
    checked, count = counts(starts, past)
    violations = evidence(starts.filter(past), count, ["topic", "partition", "node"])
    as_reported(violations, message=cl.log_start_message, offset="log_start", partition_id=True)
    return rule_result(24, checked, violations, count)



def _highest_hwm(journal: DataFrame) -> DataFrame:
    return journal.filter(~F.col("corrupt") & (F.col("event") == "HwmAdvanced")) \
        .groupBy("topic", "partition").agg(F.max("new").alias("highest_hwm"))


def _rule_25_group(log: Any, acked: Any) -> Any:
    """cogroup applyInArrow body: one compacted partition's final-leader records and its acked
    keyed writes (analytics.rules.cleanup.pure.check_compacted_partition)."""
    import pyarrow as pa

    out = list(cl.check_compacted_partition(log.to_pylist(), acked.to_pylist()))
    return pa.Table.from_pylist(out, schema=arrow_schema(R25_SCHEMA))


def rule_25_compaction(inputs: BrokerInputs, replicas: DataFrame,
                       recovering: DataFrame) -> RuleResult:
    """Rule 25: no cleaner checkpoint past its partition's highest journaled HWM
    (analytics.rules.cleanup.pure.cleaned_past_hwm), and below the final leader's checkpoint
    every acked key's latest record is kept and no older record outlives a newer one
    (check_compacted_partition); a finding on a RECOVERING partition is attributed."""
    if inputs.bounds is None or not inputs.cleaned:
        result = rule_result(25, 0, [])
        result.notes = {"keys": 0, "cleaner_checkpoints": 0, "attributed": 0}
        return result
    cleaned = inputs.bounds.filter(F.col("cleaned_to").isNotNull())
    points = cleaned.join(_highest_hwm(inputs.journal), ["topic", "partition"])
    past = F.col("cleaned_to") > F.col("highest_hwm")
    checkpoints, past_count = counts(points, past)
    violations = evidence(points.filter(past), past_count, ["topic", "partition", "node"])
    for v in violations:
        v["message"] = cl.cleaned_past_hwm_message(v)
        v["kind"] = "cleaned past the high watermark"
        v["offset"] = v["cleaned_to"]
    reference = (replicas.filter(F.col("kind") == dr.REFERENCE)
                 .select("topic", "partition", "node")
                 .join(cleaned.select("topic", "partition", "node", "log_start", "cleaned_to"),
                       ["topic", "partition", "node"]))
    acked = (inputs.acks.filter(
        ~F.col("corrupt") & (F.col("event") == "ack") & (F.col("acks") == ACKS_ALL)
        & (F.col("error") == dr.ACK_OK) & F.col("record_key").isNotNull())
        .select("topic", "partition", "record_key", "offset", "tombstone")
        .join(F.broadcast(reference), ["topic", "partition"]))
    log = (inputs.logs.filter(~F.col("corrupt") & (F.col("offset") >= 0)
                              & F.col("record_key").isNotNull())
           .join(F.broadcast(reference.select("topic", "partition", "node")),
                 ["topic", "partition", "node"])
           .select("topic", "partition", "record_key", "offset"))
    out = cogroup_in_arrow(log, acked, ["topic", "partition"], _rule_25_group, R25_SCHEMA) \
        .join(F.broadcast(recovering.withColumn("recovered", F.lit(True))),
              ["topic", "partition"], "left") \
        .withColumn("recovered", F.coalesce(F.col("recovered"), F.lit(False)))
    tallies = {(r["kind"], r["recovered"]): int(r["n"] or 0) for r in
               out.groupBy("kind", "recovered").agg(F.sum("count").alias("n")).collect()}
    keys = tallies.get((cl.KEYS_CHECKED, False), 0) + tallies.get((cl.KEYS_CHECKED, True), 0)
    found = sum(n for (kind, recovered), n in tallies.items()
                if kind != cl.KEYS_CHECKED and not recovered)
    attributed = sum(n for (kind, recovered), n in tallies.items()
                     if kind != cl.KEYS_CHECKED and recovered)
    bad = out.filter((F.col("kind") != cl.KEYS_CHECKED) & ~F.col("recovered")).drop("recovered")
    violations += evidence(bad, found, ["topic", "partition", "offset", "record_key"])
    as_reported(violations, partition_id=True)
    result = rule_result(25, keys + checkpoints, violations, past_count + found)
    result.notes = {"keys": keys, "cleaner_checkpoints": checkpoints, "attributed": attributed}
    return result
