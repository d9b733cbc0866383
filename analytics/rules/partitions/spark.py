"""Rules 8, 10, 11, 13 and 19 (INVARIANTS.md: partitions, ISR, ELR, leader recovery) on Spark.
The replay itself is the pure form (analytics.rules.partitions.pure: PartitionRegistration.merge
and controller.core.invariants after every record), run where the replay source is decoded, in
shards (analytics.rules.partitions.shards); Spark reads the shards' output (violations, a tally
per partition, a few partitions' last points) and turns it into the rules' results, the
report's index and its timelines. Only small aggregates reach the driver.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analytics.engine.staging import Table
from analytics.rules.partitions.pure import PARTITION_RULES, VIOLATION
from analytics.rules.result import MAX_EVIDENCE, RuleResult, rule_result


def replay_partitions(spark: SparkSession, output: Table | None) -> DataFrame | None:
    """The replay shards' output (analytics.rules.partitions.shards: violations, a tally per partition,
    the last points of a few partitions) as a DataFrame; None when nothing was replayed."""
    if output is None or output.rows == 0:
        return None
    return output.read(spark)


def partition_summaries(replayed: DataFrame) -> Any:
    """One row per partition from the replay's output, as an Arrow table (the partitions'
    count of rows, a few numbers each): violations in all and per partition rule (`rule_N`),
    and the TALLY's states, changes, time without a leader, time under min ISR and leader
    changes (null where the partition has no TALLY). One job feeds the rules' counts, the
    report's index and its choice of timelines (analytics.audit)."""
    violation = F.col("kind") == VIOLATION

    def count_of(condition: Any) -> Any:
        return F.sum(F.when(condition, 1).otherwise(0))

    return replayed.groupBy("topic_id", "partition_id").agg(
        count_of(violation).alias("violations"),
        *(count_of(violation & (F.col("rule") == rule)).alias(f"rule_{rule}")
          for rule in PARTITION_RULES),
        *(F.sum(name).alias(name) for name in ("states", "changes", "unavailable_ms",
                                               "under_min_isr_ms", "leader_changes")),
    ).toArrow()


def partition_rule_results(replayed: DataFrame | None, summaries: Any | None
                           ) -> list[RuleResult]:
    """Rules 8, 10, 11, 13, 19: counts from partition_summaries, evidence from the replay's
    output (which the caller should persist) for a rule that has violations."""
    if replayed is None or summaries is None:
        return [rule_result(rule, 0, []) for rule in PARTITION_RULES]
    import pyarrow.compute as pc

    def total(column: str) -> int:
        return int(pc.sum(summaries[column]).as_py() or 0)

    states, changes = total("states"), total("changes")
    results = []
    for rule in PARTITION_RULES:
        count = total(f"rule_{rule}")
        evidence: list[dict[str, Any]] = []
        if count:
            bad = replayed.filter((F.col("kind") == VIOLATION) & (F.col("rule") == rule)).select(
                "node", "file", "offset", "topic_id", "partition_id", "record_type", "message")
            evidence = [r.asDict() for r in bad.orderBy("offset", "topic_id", "partition_id")
                        .limit(MAX_EVIDENCE).collect()]
            for v in evidence:
                v["partition"] = f"{v['topic_id']}-{v['partition_id']}"
        results.append(rule_result(rule, changes if rule == 8 else states, evidence, count))
    return results

