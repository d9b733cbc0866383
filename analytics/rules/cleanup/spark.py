"""Rules 24 and 25 (INVARIANTS.md: retention and compaction) on Spark, over the replicas' log
start and cleaner checkpoints (analytics.read.broker_inputs.read_log_bounds) and the broker
journals; the same predicates as analytics.rules.cleanup.pure, as columns. removal_floors and
removed_below are the floors rules 22 and 23 (analytics.rules.replication.spark) respect.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analytics.engine.broker_tables import BrokerInputs
from analytics.rules.cleanup import pure as cl
from analytics.rules.result import RuleResult, rule_result
from analytics.rules.spark_common import evidence


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
    highest = inputs.journal.filter(~F.col("corrupt") & (F.col("event") == "HwmAdvanced")) \
        .groupBy("topic", "partition").agg(F.max("new").alias("highest_hwm"))
    starts = inputs.bounds.filter(F.col("log_start").isNotNull()).join(
        highest, ["topic", "partition"])
    past = F.col("log_start") > F.col("highest_hwm")
    row = starts.agg(F.count(F.lit(1)).alias("checked"),
                     F.sum(past.cast("int")).alias("bad")).collect()[0]
    checked, count = int(row["checked"] or 0), int(row["bad"] or 0)
    bad = starts.filter(past)
    violations = evidence(bad, count, ["topic", "partition", "node"])
    for v in violations:
        v["message"] = cl.log_start_message(v)
        v["partition_id"] = v["partition"]
        v["partition"] = f"{v['topic']}-{v['partition']}"
        v["offset"] = v["log_start"]
    return rule_result(24, checked, violations, count)

