"""The audit's rules over the rows of analytics.read.datasource, each citing INVARIANTS.md.

Set-wide rules (1, 2, 5) are DataFrame joins, aggregations and windows. Per-partition rules
(8, 10, 11, 13, 19) replay each partition once, from one controller's log (the longest), record
by record in log order (analytics.rules.partitions.pure: PartitionRegistration.merge and controller.core.
invariants, which analytics.baseline runs too, one definition of each rule); the replay runs
where that log is decoded, in shards (analytics.rules.partitions.shards), and Spark reads its output:
violations, a tally per partition and a few partitions' last points.
Every rule returns a RuleResult: how many things it checked and the violations with evidence
(file, offset, node, partition). Only small aggregates reach the driver.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from analytics.engine.staging import Table
from analytics.read.datasource import FileSpec
from analytics.rules.groups.pure import GROUP_RULE_NAMES
from analytics.rules.partitions.pure import VIOLATION
from analytics.rules.partitions.shards import REPLAY_OUTPUT_COLUMNS, ShardPlan
from raft.core.replica_key import ZERO_UUID, uuid_to_str

METADATA_PARTITION = "__cluster_metadata-0"
ZERO_DIRECTORY_ID = uuid_to_str(ZERO_UUID)
MAX_EVIDENCE = 1000  # violations listed per rule; the count is always complete

RULE_NAMES: dict[int, str] = {
    1: "at most one leader per epoch",
    2: "committed entries agree across replicas (log matching)",
    5: "one voter change at a time; voters carry directory ids",
    8: "partition epoch +1 per change; leader epoch bumps exactly on leader change",
    10: "ISR and ELR disjoint; ELR empty while ISR >= min ISR",
    11: "LastKnownELR / LastKnownLeader cleared when they must be",
    13: "the leader is in the ISR unless RECOVERING",
    19: "RECOVERING implies ISR == [leader]",
    20: "HWM advances only while the committed ISR >= min ISR (journals)",
    22: "no follower keeps entries the final leader does not have",
    23: "every acked acks=all write is in the final log exactly once, or attributed",
    24: "no replica's log start offset passes the partition's high watermark",
}
PARTITION_RULES = (8, 10, 11, 13, 19)


@dataclass
class RuleResult:
    rule: int | str  # an INVARIANTS.md number, or a named check (analytics.rules.groups.pure)
    name: str
    checked: int
    violations: list[dict[str, Any]] = field(default_factory=list)
    violation_count: int = 0
    # rule 23: losses an unclean or designated election explains (reported, not violations)
    attributed: list[dict[str, Any]] = field(default_factory=list)
    attributed_count: int = 0
    notes: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "name": self.name, "checked": self.checked,
               "violation_count": self.violation_count, "violations": self.violations}
        if self.rule == 23:
            out["attributed_count"] = self.attributed_count
            out["attributed"] = self.attributed
        if self.notes:
            out["notes"] = self.notes
        return out


def rule_result(rule: int | str, checked: int, violations: list[dict[str, Any]],
                violation_count: int | None = None) -> RuleResult:
    count = len(violations) if violation_count is None else violation_count
    name = RULE_NAMES[rule] if isinstance(rule, int) else GROUP_RULE_NAMES[rule]
    return RuleResult(rule, name, checked, violations[:MAX_EVIDENCE], count)


def rule_order(result: RuleResult) -> tuple[int, int, str]:
    """Numbered rules first, by number; then the named checks, by name."""
    if isinstance(result.rule, int):
        return 0, result.rule, ""
    return 1, 0, result.rule


# -- per-partition replay: analytics.rules.partitions.pure, run by analytics.rules.partitions.shards ---------------

REPLAY_OUTPUT_SCHEMA = StructType([
    StructField(name, {"STRING": StringType(), "INT": IntegerType(), "BIGINT": LongType(),
                       "BOOLEAN": BooleanType()}[kind]) for name, kind in REPLAY_OUTPUT_COLUMNS])


# -- Spark rules -------------------------------------------------------------------------------

def _evidence(bad: DataFrame, count: int, order: list[Any]) -> list[dict[str, Any]]:
    """Up to MAX_EVIDENCE violation rows; no Spark job at all when there are none."""
    if not count:
        return []
    return [r.asDict(recursive=True) for r in bad.orderBy(*order).limit(MAX_EVIDENCE).collect()]


def _counts(df: DataFrame, violation: Any) -> tuple[int, int]:
    """(rows checked, rows violating) in one job."""
    row = df.agg(F.count(F.lit(1)).alias("checked"),
                 F.sum(F.when(violation, 1).otherwise(0)).alias("bad")).collect()[0]
    return int(row["checked"] or 0), int(row["bad"] or 0)


def good_rows(df: DataFrame) -> DataFrame:
    return df.filter(~F.col("corrupt") & (F.col("offset") >= 0))


def rule_1_one_leader_per_epoch(df: DataFrame) -> RuleResult:
    """Rule 1: every LeaderChange record of an epoch, on every node, names the same leader."""
    changes = good_rows(df).filter(F.col("record_type") == "LeaderChangeRecord")
    per_epoch = changes.groupBy("epoch").agg(
        F.array_sort(F.collect_set("leader_id")).alias("leaders"),
        F.sort_array(F.collect_list(F.struct("node", "file", "offset", "leader_id")))
        .alias("records"))
    checked, count = _counts(per_epoch, F.size("leaders") > 1)
    bad = per_epoch.filter(F.size("leaders") > 1).select(
        "epoch", "leaders", F.slice("records", 1, 20).alias("records"),
        F.col("records")[0]["file"].alias("file"), F.col("records")[0]["offset"].alias("offset"),
        F.col("records")[0]["node"].alias("node"), F.lit(METADATA_PARTITION).alias("partition"))
    violations = _evidence(bad, count, ["epoch"])
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
    violations = _evidence(bad, count, ["offset", "node", "other_node"])
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
    checked, suspects = _counts(with_prev, (F.col("changed") > 1) | no_id)
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


@dataclass(frozen=True)
class ReplaySource:
    """The one log each partition is replayed from: the longest controller log, starting at its
    earliest snapshot that covers the log start (or at the log start)."""

    node: int
    snapshot_file: str | None
    from_offset: int


def pick_replay_source(
    logs: Iterable[tuple[int, str, int, int]], snapshots: Iterable[tuple[int, str, int, bool]]
) -> ReplaySource | None:
    """From (node, role, log_start, log_end) and (node, file, end_offset, corrupt): the longest
    controller log (lowest node id on a tie), from its earliest intact snapshot at or past the
    log start, else from the log start; with no segments, the latest snapshot alone."""
    log_list, snapshot_list = list(logs), list(snapshots)
    if not log_list and not snapshot_list:
        return None
    if log_list:
        node, _role, log_start, _end = min(
            log_list, key=lambda r: (r[1] != "controller", -r[3], r[0]))
    else:
        node = min(s[0] for s in snapshot_list)
    usable = sorted((s[2], s[1]) for s in snapshot_list if s[0] == node and not s[3])
    if not log_list:
        if not usable:
            return None
        return ReplaySource(node, usable[-1][1], usable[-1][0])
    covering = [u for u in usable if u[0] >= log_start]
    if covering:
        return ReplaySource(node, covering[0][1], covering[0][0])
    return ReplaySource(node, None, log_start)


def choose_replay_source(summary: list[dict[str, Any]]) -> ReplaySource | None:
    logs: dict[tuple[int, str], list[int]] = {}
    for r in summary:
        if r["kind"] == "segment" and r["first_offset"] is not None:
            bounds = logs.setdefault((r["node"], r["role"]), [r["first_offset"], r["last_offset"]])
            bounds[0] = min(bounds[0], r["first_offset"])
            bounds[1] = max(bounds[1], r["last_offset"])
    return pick_replay_source(
        [(node, role, b[0], b[1]) for (node, role), b in logs.items()],
        [(r["node"], r["file"], r["snapshot_end_offset"], bool(r["corrupt"]))
         for r in summary if r["kind"] == "snapshot"])


def shard_plan(source: ReplaySource, files: Iterable[FileSpec], shards: int, records: Table,
               output: Table) -> ShardPlan:
    """The replay source's files, replayed in `shards` shards (analytics.rules.partitions.shards) that
    stage their rows into the records table and their output into the output table."""
    return ShardPlan(source.node, source.from_offset, source.snapshot_file,
                     tuple(f for f in files if f.node == source.node), max(1, shards),
                     records.directory, output.directory)


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
