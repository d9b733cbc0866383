"""The consumer-group checks (analytics.rules.groups.pure: named, not numbered) on Spark: the
pure check per data partition a group read (cogroup applyInArrow), over the consumer journals and
the final leader's log that rule 22 chose (analytics.rules.replication.spark)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics.engine.broker_tables import BrokerInputs
from analytics.engine.spark_session import cogroup_in_arrow
from analytics.rules.groups import pure as gr
from analytics.rules.replication import pure as dr
from analytics.rules.result import RuleResult, rule_result
from analytics.rules.spark_common import arrow_schema, as_reported, evidence

GROUP_SCHEMA = ("rule STRING, kind STRING, group_id STRING, topic STRING, partition INT, "
                "offset BIGINT, count BIGINT, file STRING, message STRING")


def _group_partition(entries: Any, events: Any) -> Any:
    """cogroup applyInArrow body: one data partition's final-leader offsets and its consumer
    journal rows."""
    import pyarrow as pa

    out = list(gr.check_group_partition(entries.column("offset").to_pylist(),
                                        events.to_pylist()))
    return pa.Table.from_pylist(out, schema=arrow_schema(GROUP_SCHEMA))


def group_rules(inputs: BrokerInputs, replicas: DataFrame) -> list[RuleResult]:
    """`committed_offsets_monotonic` and `no_skipped_committed_record` (analytics.rules.groups.pure)
    per data partition a consumer group read; nothing when no consumer journal exists."""
    if not inputs.files.get("consumer_journals"):
        return []
    events = inputs.consumers.filter(~F.col("corrupt")).select(
        "file", "position", "event", "group_id", "topic", "partition", "offset", "corrupt")
    read = events.select("topic", "partition").distinct()
    reference = replicas.filter(F.col("kind") == dr.REFERENCE).select("topic", "partition",
                                                                      "node")
    entries = (inputs.logs.filter(~F.col("corrupt") & (F.col("offset") >= 0))
               .join(F.broadcast(reference), ["topic", "partition", "node"])
               .join(F.broadcast(read), ["topic", "partition"])
               .select("topic", "partition", "offset"))
    out = cogroup_in_arrow(entries, events, ["topic", "partition"], _group_partition, GROUP_SCHEMA)
    tallies = {(r["rule"], r["kind"]): (int(r["rows"]), int(r["entries"] or 0)) for r in
               out.groupBy("rule", "kind").agg(F.count(F.lit(1)).alias("rows"),
                                               F.sum("count").alias("entries")).collect()}
    results = []
    for rule in (gr.COMMITS_MONOTONIC, gr.NO_SKIPPED):
        count = tallies.get((rule, gr.VIOLATION), (0, 0))[0]
        bad = out.filter((F.col("rule") == rule) & (F.col("kind") == gr.VIOLATION))
        violations = evidence(bad, count, ["topic", "partition", "group_id", "offset"])
        as_reported(violations, partition_id=True)
        result = rule_result(rule, tallies.get((rule, gr.CHECKED), (0, 0))[1], violations, count)
        if rule == gr.NO_SKIPPED:
            result.notes = {"skipped_records": tallies.get((rule, gr.VIOLATION), (0, 0))[1]}
        results.append(result)
    return results

