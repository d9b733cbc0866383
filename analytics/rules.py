"""The audit's rules over the rows of analytics.datasource, each citing INVARIANTS.md.

Set-wide rules (1, 2, 5) are DataFrame joins, aggregations and windows. Per-partition rules
(8, 10, 11, 13, 19) replay each partition once, from one controller's log (the longest): the
driver lays the partition records out in buckets of partitions (analytics.replay_input, no
row through the JVM), and one streaming `mapInArrow` task per bucket sorts it into log order
and replays its partitions (no per-group call). The replay is `replay_partition`, plain Python
over PartitionRegistration.merge and controller.core.invariants, which analytics.baseline runs
too, so the simulator, the audit and the baseline share one definition of each rule.
Every rule returns a RuleResult: how many things it checked and the violations with evidence
(file, offset, node, partition). Only small aggregates reach the driver.
"""

from __future__ import annotations

import functools
import operator
import re
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
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

from analytics.gc_pause import fewer_collections
from analytics.group_rules import GROUP_RULE_NAMES
from analytics.replay_input import ReplayInput, ReplayPlan, bucket_count, bucket_rows
from analytics.spark_session import map_ids_in_arrow
from controller.core.invariants import (
    check_epochs_bumped,
    check_isr_elr_disjoint,
    check_last_known_elr,
    check_leader_election,
    check_recovering_isr,
    effective_min_isr,
)
from controller.core.partition_registration import LeaderRecoveryState, PartitionRegistration
from controller.core.records import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    LAST_KNOWN_LEADER_UNCHANGED,
    LEADER_RECOVERY_STATE_UNCHANGED,
    NO_LEADER,
    NO_LEADER_CHANGE,
    PartitionChangeRecord,
    PartitionRecord,
)
from raft.core.replica_key import ZERO_UUID, uuid_from_str, uuid_to_str

METADATA_PARTITION = "__cluster_metadata-0"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
DEFAULT_MIN_INSYNC_REPLICAS = 1
ELR_FEATURE = "eligible.leader.replicas.version"  # controller.core.config_control's name
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
}
PARTITION_RULES = (8, 10, 11, 13, 19)
_RULE_PREFIX = re.compile(r"^rule (\d+):")


@dataclass
class RuleResult:
    rule: int | str  # an INVARIANTS.md number, or a named check (analytics.group_rules)
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


# -- per-partition replay: pure Python, shared with analytics.baseline ------------------------

REPLAY_COLUMNS = (
    "seq_major", "seq_minor", "node", "file", "offset", "batch_timestamp_ms", "record_type",
    "topic_id", "partition_id", "leader", "leader_epoch", "partition_epoch", "replicas", "isr",
    "elr", "last_known_elr", "last_known_leader", "leader_recovery_state", "adding_replicas",
    "removing_replicas", "resource_type", "resource", "name", "value",
)
REPLAY_OUTPUT_SCHEMA = StructType([
    StructField("kind", StringType()),
    StructField("rule", IntegerType()),
    StructField("message", StringType()),
    StructField("node", IntegerType()),
    StructField("file", StringType()),
    StructField("offset", LongType()),
    StructField("topic_id", StringType()),
    StructField("partition_id", IntegerType()),
    StructField("record_type", StringType()),
    StructField("batch_timestamp_ms", LongType()),
    StructField("leader", IntegerType()),
    StructField("leader_epoch", IntegerType()),
    StructField("partition_epoch", IntegerType()),
    StructField("isr_size", IntegerType()),
    StructField("elr_size", IntegerType()),
    StructField("min_isr", IntegerType()),
    StructField("recovering", BooleanType()),
    StructField("states", LongType()),
    StructField("changes", LongType()),
    StructField("unavailable_ms", LongType()),
    StructField("under_min_isr_ms", LongType()),
    StructField("leader_changes", LongType()),
])
POINT = "point"
VIOLATION = "violation"


def _tuple(values: Iterable[int] | None) -> tuple[int, ...] | None:
    return None if values is None else tuple(values)  # typed int columns: no conversion


def _change_record(row: dict[str, Any], topic_id: uuid.UUID) -> PartitionChangeRecord:
    """The PartitionChangeRecord a row was decoded from (null columns = "unchanged")."""
    return PartitionChangeRecord(
        partition_id=int(row["partition_id"]),
        topic_id=topic_id,
        isr=_tuple(row["isr"]),
        leader=NO_LEADER_CHANGE if row["leader"] is None else int(row["leader"]),
        replicas=_tuple(row["replicas"]),
        removing_replicas=_tuple(row["removing_replicas"]),
        adding_replicas=_tuple(row["adding_replicas"]),
        leader_recovery_state=LEADER_RECOVERY_STATE_UNCHANGED
        if row["leader_recovery_state"] is None else int(row["leader_recovery_state"]),
        eligible_leader_replicas=_tuple(row["elr"]),
        last_known_elr=_tuple(row["last_known_elr"]),
        last_known_leader=LAST_KNOWN_LEADER_UNCHANGED
        if row["last_known_leader"] is None else int(row["last_known_leader"]),
    )


def _full_record(row: dict[str, Any], topic_id: uuid.UUID) -> PartitionRecord:
    return PartitionRecord(
        partition_id=int(row["partition_id"]),
        topic_id=topic_id,
        replicas=_tuple(row["replicas"]) or (),
        isr=_tuple(row["isr"]) or (),
        removing_replicas=_tuple(row["removing_replicas"]) or (),
        adding_replicas=_tuple(row["adding_replicas"]) or (),
        leader=int(row["leader"]),
        leader_recovery_state=int(row["leader_recovery_state"]),
        leader_epoch=int(row["leader_epoch"]),
        partition_epoch=int(row["partition_epoch"]),
        eligible_leader_replicas=_tuple(row["elr"]) or (),
        last_known_elr=_tuple(row["last_known_elr"]) or (),
        last_known_leader=int(row["last_known_leader"]),
    )


_LOG_ORDER = operator.itemgetter("seq_major", "seq_minor")


def _found_at(row: dict[str, Any], record_type: str) -> dict[str, Any]:
    """Where a violation was found (every replay output row carries these keys)."""
    return {"node": row["node"], "file": row["file"], "offset": row["offset"],
            "topic_id": row["topic_id"], "partition_id": row["partition_id"],
            "record_type": record_type, "batch_timestamp_ms": row["batch_timestamp_ms"]}


def replay_partition(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Replay one partition's records in log order; yield a timeline point per state and a
    violation per broken rule (8, 10, 11, 13, 19). Config rows set the min ISR in force
    (rule 9: min(min.insync.replicas, replication factor), default 1); a FeatureLevelRecord for
    ELR switches rule 10's ELR-off checks."""
    topic_min: int | None = None
    cluster_min: int | None = None
    elr_enabled = True
    reg: PartitionRegistration | None = None
    topic_uuid: uuid.UUID | None = None
    for row in sorted(rows, key=_LOG_ORDER):
        record_type = row["record_type"]
        if record_type == "ConfigRecord":
            value = None if row["value"] is None else int(row["value"])
            if row["resource_type"] == CONFIG_RESOURCE_TOPIC:
                topic_min = value
            elif row["resource_type"] == CONFIG_RESOURCE_BROKER:
                cluster_min = value
            continue
        if record_type == "FeatureLevelRecord":
            elr_enabled = int(row["value"]) >= 1
            continue
        if topic_uuid is None:
            topic_uuid = uuid_from_str(row["topic_id"])
        messages: list[str] = []
        before = None  # the state a PartitionChangeRecord applies to (rule 13's change check)
        if record_type == "PartitionRecord":
            after = PartitionRegistration.from_record(_full_record(row, topic_uuid))
            if reg is not None and row["seq_major"] >= 0:
                messages += check_epochs_bumped(reg, after)  # rule 8: a re-sent full state
        elif reg is None:
            yield {"kind": VIOLATION, "rule": 8,
                   "message": "rule 8: PartitionChangeRecord for a partition with no "
                              "PartitionRecord before it", **_found_at(row, record_type)}
            continue
        else:
            after = reg.merge(_change_record(row, topic_uuid))  # the one merge (STYLE.md)
            messages += check_epochs_bumped(reg, after)  # rule 8
            before = reg
        configured = topic_min if topic_min is not None else cluster_min
        min_isr = effective_min_isr(
            configured if configured is not None else DEFAULT_MIN_INSYNC_REPLICAS,
            len(after.replicas))
        messages += check_isr_elr_disjoint(after, min_isr, elr_enabled)  # rule 10
        if elr_enabled:
            messages += check_last_known_elr(after, min_isr)  # rule 11
        messages += check_leader_election(after, before=before)  # rule 13, no broker view
        messages += check_recovering_isr(after)  # rule 19
        reg = after
        if messages:
            evidence = _found_at(row, record_type)
            for message in messages:
                match = _RULE_PREFIX.match(message)
                yield {"kind": VIOLATION, "rule": int(match.group(1)) if match else 0,
                       "message": message, **evidence}
        # The point carries _found_at's keys in its order, built in one literal:
        # this runs once per partition record (a million at 1M records).
        yield {"kind": POINT, "rule": None, "message": None, "node": row["node"],
               "file": row["file"], "offset": row["offset"], "topic_id": row["topic_id"],
               "partition_id": row["partition_id"], "record_type": record_type,
               "batch_timestamp_ms": row["batch_timestamp_ms"],
               "leader": after.leader, "leader_epoch": after.leader_epoch,
               "partition_epoch": after.partition_epoch, "isr_size": len(after.isr),
               "elr_size": len(after.elr), "min_isr": min_isr,
               "recovering": after.leader_recovery_state == LeaderRecoveryState.RECOVERING}


TALLY = "tally"  # one row per partition: how many states and changes its replay saw
TIMELINE_POINTS = 2000  # the last points of a partition kept for the report's timeline
ARROW_OUT_ROWS = 8192


def replay_summary(rows: Iterable[dict[str, Any]], keep_points: int = TIMELINE_POINTS
                   ) -> Iterator[dict[str, Any]]:
    """replay_partition, reduced for the Spark audit: every violation, the last keep_points
    points (what a timeline draws) and one TALLY row counting all states and changes, leader
    changes, and the time (by batch timestamps) the partition had no leader or an ISR below
    the min ISR in force, so the output grows with the violations, not with the log."""
    points: deque[dict[str, Any]] = deque(maxlen=keep_points)
    states = changes = leader_changes = unavailable_ms = under_min_isr_ms = 0
    last: dict[str, Any] | None = None
    for out in replay_partition(rows):
        if out["kind"] != POINT:
            yield out
            continue
        states += 1
        changes += out["record_type"] == "PartitionChangeRecord"
        if last is not None:
            held = max(0, (out["batch_timestamp_ms"] or 0) - (last["batch_timestamp_ms"] or 0))
            unavailable_ms += held if last["leader"] == NO_LEADER else 0
            under_min_isr_ms += held if last["isr_size"] < last["min_isr"] else 0
            leader_changes += out["leader"] != last["leader"]
        points.append(out)
        last = out
    yield from points
    if last is not None:
        yield {"kind": TALLY, "rule": None, "message": None, "node": last["node"],
               "file": last["file"], "offset": last["offset"], "topic_id": last["topic_id"],
               "partition_id": last["partition_id"], "states": states, "changes": changes,
               "unavailable_ms": unavailable_ms, "under_min_isr_ms": under_min_isr_ms,
               "leader_changes": leader_changes}


TIMELINE_PARTITIONS = 12  # partitions whose timeline the report draws


def timeline_rank(violations: int, states: int, topic_id: str, partition_id: int
                  ) -> tuple[int, int, str, int]:
    """The report's order for timelines: most violations, then most states (the audit's
    _timelines sorts the same way in Spark)."""
    return -violations, -states, topic_id, partition_id


def _replay_groups(rows: Iterable[dict[str, Any]]) -> Iterator[Any]:
    """Rows sorted by (topic_id, partition_id, log order), replayed group after group
    (replay_summary), as Arrow batches of REPLAY_OUTPUT_SCHEMA: one streaming pass, no
    per-group call. Every violation and tally goes out; timeline points only for this
    task's TIMELINE_PARTITIONS first partitions by timeline_rank, a superset of the ones the
    report can pick among them (each partition is replayed by one task only)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(REPLAY_OUTPUT_SCHEMA)
    out: list[dict[str, Any]] = []
    candidates: list[tuple[tuple[int, int, str, int], list[dict[str, Any]]]] = []

    def replay(group: list[dict[str, Any]]) -> None:
        points: list[dict[str, Any]] = []
        violations = 0
        for item in replay_summary(group):
            kind = item["kind"]
            if kind == POINT:
                points.append(item)
                continue
            out.append(item)
            violations += kind == VIOLATION
            if kind == TALLY and points:
                candidates.append((timeline_rank(violations, item["states"], item["topic_id"],
                                                 item["partition_id"]), points))
        if len(candidates) > 2 * TIMELINE_PARTITIONS:
            candidates.sort(key=operator.itemgetter(0))
            del candidates[TIMELINE_PARTITIONS:]

    group: list[dict[str, Any]] = []
    key: tuple[Any, Any] | None = None
    for row in rows:
        row_key = (row["topic_id"], row["partition_id"])
        if row_key != key:
            replay(group)
            group, key = [], row_key
            if len(out) >= ARROW_OUT_ROWS:
                yield pa.RecordBatch.from_pylist(out, schema=schema)
                out = []
        group.append(row)
    replay(group)
    candidates.sort(key=operator.itemgetter(0))
    for _rank, points in candidates[:TIMELINE_PARTITIONS]:
        out.extend(points)
    if out:
        yield pa.RecordBatch.from_pylist(out, schema=schema)


def _replay_buckets(replay: ReplayInput, batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow body over bucket ids (analytics.replay_input): each bucket's rows, read,
    joined with their configs and sorted outside the JVM, replayed in one streaming pass."""
    with fewer_collections():  # analytics.gc_pause: 11-12% of a task's CPU was collections
        for batch in batches:
            for bucket in batch.column("id").to_pylist():
                yield from _replay_groups(bucket_rows(
                    replay, int(bucket), list(REPLAY_COLUMNS), MIN_INSYNC_REPLICAS,
                    ELR_FEATURE, CONFIG_RESOURCE_TOPIC, CONFIG_RESOURCE_BROKER))


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
    they are (raft/runtime/disk_log.append_as_follower), so two replicas holding a batch at the
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


def replay_plan(directory: Path, source: ReplaySource, cores: int, partition_records: int
                ) -> ReplayPlan:
    """Where staging puts the replay source's partition records (analytics.replay_input):
    enough buckets for partition_records (an estimate: the source's records), a multiple of
    the cores."""
    directory.mkdir(parents=True, exist_ok=True)
    return ReplayPlan(directory, source.node, source.from_offset, source.snapshot_file,
                      bucket_count(partition_records, cores), REPLAY_COLUMNS)


def replay_partitions(spark: SparkSession, replay: ReplayInput | None) -> DataFrame | None:
    """Violations, last points and a tally of every partition (replay_summary): one Spark
    task per bucket of partitions, each replaying its partitions in log order with the min
    ISR configs (topic and cluster default) and ELR feature rows in force."""
    if replay is None or replay.buckets == 0:
        return None
    return map_ids_in_arrow(spark, replay.buckets, functools.partial(_replay_buckets, replay),
                            REPLAY_OUTPUT_SCHEMA)


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
