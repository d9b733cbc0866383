"""Rules 1, 2 and 5 (INVARIANTS.md, the Raft metadata quorum) on Spark, over the metadata log
rows and batch rows of every node (analytics.read.datasource): DataFrame joins, aggregations and
windows; only counts and capped evidence reach the driver. Their pure form, the baseline's, is
analytics.rules.quorum.pure (rule 2 there compares records, here batches: the same verdict).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analytics.rules.quorum.pure import METADATA_PARTITION, ZERO_DIRECTORY_ID
from analytics.rules.result import MAX_EVIDENCE, RuleResult, rule_result
from analytics.rules.spark_common import counts, evidence, good_rows


def rule_1_one_leader_per_epoch(df: DataFrame) -> RuleResult:
    """Rule 1: every LeaderChange record of an epoch, on every node, names the same leader."""
    changes = good_rows(df).filter(F.col("record_type") == "LeaderChangeRecord")
    per_epoch = changes.groupBy("epoch").agg(
        F.array_sort(F.collect_set("leader_id")).alias("leaders"),
        F.sort_array(F.collect_list(F.struct("node", "file", "offset", "leader_id")))
        .alias("records"))
    checked, count = counts(per_epoch, F.size("leaders") > 1)
    bad = per_epoch.filter(F.size("leaders") > 1).select(
        "epoch", "leaders", F.slice("records", 1, 20).alias("records"),
        F.col("records")[0]["file"].alias("file"), F.col("records")[0]["offset"].alias("offset"),
        F.col("records")[0]["node"].alias("node"), F.lit(METADATA_PARTITION).alias("partition"))
    violations = evidence(bad, count, ["epoch"])
    for v in violations:
        v["message"] = f"rule 1: epoch {v['epoch']} has leaders {v['leaders']}"
    return rule_result(1, checked, violations, count)


def rule_2_committed_prefix(batches: DataFrame) -> RuleResult:
    """Rule 2 (Raft's log matching), batch by batch: followers store the leader's batches as
    they are (storage/runtime/disk_log.append_as_follower), so two replicas holding a batch at the
    same base offset hold the same bytes exactly when its last offset, epoch and CRC agree; no
    record is decoded. The same base offset and epoch with other content is a violation, and
    two logs that agree at a batch agree at every batch below it. A divergent tail past the
    last agreeing batch is an uncommitted suffix, not a violation. Evidence names the replicas
    that disagree with the others (`divergent_nodes`: in every disagreeing pair)."""
    entries = batches.filter(F.col("damage").isNull() & (F.col("kind") == "segment")).select(
        "node", "file", "base_offset", "last_offset", "epoch", "crc")
    a, b = entries.alias("a"), entries.alias("b")
    pairs = a.join(b, (F.col("a.base_offset") == F.col("b.base_offset"))
                   & (F.col("a.node") < F.col("b.node")))
    pairs = pairs.select(
        F.col("a.base_offset").alias("offset"), F.col("a.last_offset").alias("last_offset"),
        F.col("b.last_offset").alias("other_last_offset"), F.col("a.node").alias("node"),
        F.col("b.node").alias("other_node"), F.col("a.file").alias("file"),
        F.col("b.file").alias("other_file"), F.col("a.epoch").alias("epoch"),
        F.col("b.epoch").alias("other_epoch"),
        ((F.col("a.epoch") == F.col("b.epoch")) & (F.col("a.crc") == F.col("b.crc"))
         & (F.col("a.last_offset") == F.col("b.last_offset"))).alias("match"),
        (F.col("a.epoch") == F.col("b.epoch")).alias("same_epoch"),
    )
    per_pair = pairs.groupBy("node", "other_node").agg(
        F.count(F.lit(1)).alias("compared"),
        F.sum(F.col("last_offset") - F.col("offset") + 1).alias("records"),
        F.max(F.when(F.col("match"), F.col("last_offset"))).alias("last_agreeing_offset"),
        F.min(F.when(~F.col("match"), F.col("offset"))).alias("first_difference"),
        F.max(F.when(~F.col("match") & F.col("same_epoch"), 1).otherwise(0)).alias("same_epoch_diff"),
    ).collect()  # one row per pair of nodes
    # checked counts records (offsets compared pairwise), as the per-record baseline does.
    checked = sum(int(r["records"] or 0) for r in per_pair)
    notes = {"batches_compared": sum(int(r["compared"]) for r in per_pair)}
    suspect = [r for r in per_pair if r["first_difference"] is not None and (
        r["same_epoch_diff"] or (r["last_agreeing_offset"] is not None
                                 and r["first_difference"] < r["last_agreeing_offset"]))]
    if not suspect:
        result = rule_result(2, checked, [], 0)
        result.notes = notes
        return result
    last_match = batches.sparkSession.createDataFrame(
        [(r["node"], r["other_node"], r["last_agreeing_offset"]) for r in suspect],
        "node INT, other_node INT, last_agreeing_offset BIGINT")
    bad = (pairs.filter(~F.col("match"))
           .join(F.broadcast(last_match), ["node", "other_node"])
           .filter(F.col("same_epoch") | (F.col("offset") < F.col("last_agreeing_offset")))
           .select("offset", "last_offset", "other_last_offset", "node", "other_node", "file",
                   "other_file", "epoch", "other_epoch", "last_agreeing_offset",
                   F.lit(METADATA_PARTITION).alias("partition")))
    count = bad.count()
    violations = evidence(bad, count, ["offset", "node", "other_node"])
    _name_divergent(violations)
    for v in violations:
        v["message"] = (f"rule 2: batch at offset {v['offset']} (to {v['last_offset']}) "
                        f"differs between node {v['node']} (epoch {v['epoch']}) and node "
                        f"{v['other_node']} (epoch {v['other_epoch']}), below or at their "
                        f"agreeing offset {v['last_agreeing_offset']}; divergent: node(s) "
                        f"{v['divergent_nodes']}")
    result = rule_result(2, checked, violations, count)
    result.notes = notes
    return result


def _name_divergent(violations: list[dict[str, Any]]) -> None:
    """Per offset, the replicas found in every disagreeing pair there: with three replicas and
    one bad copy, that copy alone (with two replicas, both: nothing breaks the tie)."""
    pairs: dict[int, list[set[int]]] = {}
    for v in violations:
        pairs.setdefault(v["offset"], []).append({v["node"], v["other_node"]})
    for v in violations:
        sets = pairs[v["offset"]]
        v["divergent_nodes"] = sorted(set.intersection(*sets)) or sorted(set.union(*sets))


def rule_5_voter_changes(df: DataFrame) -> RuleResult:
    """Rule 5: each VotersRecord differs from the set before it (per node, snapshot then log
    order) by at most one voter key, and every voter has a non-zero directory id (rule 4)."""
    voters = good_rows(df).filter(F.col("record_type") == "VotersRecord").select(
        "node", "file", "offset", "kind", "voters",
        F.when(F.col("kind") == "snapshot", F.col("snapshot_end_offset") - 1)
        .otherwise(F.col("offset")).alias("log_position"),
        F.when(F.col("kind") == "snapshot", 0).otherwise(1).alias("kind_order"),
        F.array_sort(F.transform(
            "voters", lambda v: F.concat_ws(":", v["id"].cast("string"), v["directory_id"])))
        .alias("keys"),
    )
    order = Window.partitionBy("node").orderBy("log_position", "kind_order", "offset")
    with_prev = voters.withColumn("previous", F.lag("keys").over(order)).withColumn(
        "changed", F.when(F.col("previous").isNull(), 0).otherwise(
            F.size(F.array_except("keys", "previous")) + F.size(F.array_except("previous", "keys"))))
    no_id = F.exists("voters", lambda v: v["directory_id"].isNull()
                     | (v["directory_id"] == ZERO_DIRECTORY_ID))
    checked, suspects = counts(with_prev, (F.col("changed") > 1) | no_id)
    if not suspects:
        return rule_result(5, checked, [], 0)
    too_many = with_prev.filter(F.col("changed") > 1).groupBy("log_position", "keys", "previous").agg(
        F.min("node").alias("node"), F.first("file").alias("file"),
        F.first("offset").alias("offset"), F.sort_array(F.collect_set("node")).alias("nodes"),
        F.max("changed").alias("changed"))
    too_many = too_many.select(
        "node", "nodes", "file", "offset",
        F.concat(F.lit("rule 5: voter set changed by "), F.col("changed").cast("string"),
                 F.lit(" keys at once")).alias("message"))
    zero_ids = (voters.select("node", "file", "offset", "log_position", "kind_order",
                              F.explode("voters").alias("voter"))
                .filter(F.col("voter.directory_id").isNull()
                        | (F.col("voter.directory_id") == ZERO_DIRECTORY_ID))
                .groupBy("log_position", "kind_order", "voter").agg(
                    F.min("node").alias("node"), F.first("file").alias("file"),
                    F.first("offset").alias("offset"),
                    F.sort_array(F.collect_set("node")).alias("nodes")))
    zero_ids = zero_ids.select(
        "node", "nodes", "file", "offset",
        F.concat(F.lit("rule 5: voter "), F.col("voter.id").cast("string"),
                 F.lit(" has no directory id")).alias("message"))
    bad = too_many.unionByName(zero_ids).withColumn("partition", F.lit(METADATA_PARTITION))
    violations = [r.asDict(recursive=True) for r in bad.orderBy("offset", "node", "message")
                  .limit(MAX_EVIDENCE).collect()]
    return rule_result(5, checked, violations,
                       len(violations) if len(violations) < MAX_EVIDENCE else bad.count())














