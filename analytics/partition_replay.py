"""Rules 8, 10, 11, 13 and 19 on Spark as DataFrame operations: every partition's log replayed
by window functions in the JVM, with no Python worker and no per-row Python.

PartitionRegistration.merge (controller.core) is "the last value each field was set to":
a PartitionRecord sets every field, a PartitionChangeRecord the fields it does not leave
unchanged (null columns, seed 001), so the state after a record is `last(field, ignorenulls)`
over the partition's rows in log order; the leader epoch is the last PartitionRecord's plus one
per change that names a leader, the partition epoch the last PartitionRecord's plus one per
change. Each state is then checked with the predicates of controller.core.invariants
(check_epochs_bumped, check_isr_elr_disjoint, check_last_known_elr, check_recovering_isr) and
analytics.rules_shared.check_leader_in_isr, written as column expressions with the same messages.
analytics.baseline replays the same logs through those Python functions (analytics.rules.
replay_partition): it is the independent peer, and tests/spark/test_audit_rules.py checks that
both flag the same records rule by rule.

Output: one row per violation, one POINT per replayed state and one TALLY per partition, in
analytics.rules.REPLAY_OUTPUT_SCHEMA (what the timelines, the partition index and the rule
results read).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from controller.core.partition_registration import LeaderRecoveryState
from controller.core.records import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    LAST_KNOWN_LEADER_NONE,
    NO_LEADER,
)

RECOVERING = int(LeaderRecoveryState.RECOVERING)
_NO_CONFIG = -1  # a min ISR config row that deletes the value (falls back to the next level)
STATE_ARRAYS = ("replicas", "isr", "elr", "last_known_elr", "adding_replicas",
                "removing_replicas")
STATE_SCALARS = ("leader", "last_known_leader", "leader_recovery_state")


def _list(column: str | Column) -> Column:
    """A replica list as Python's `list(...)` prints it: `[1, 2, 3]`."""
    return F.concat(F.lit("["), F.array_join(column, ", "), F.lit("]"))


def _text(column: str | Column) -> Column:
    return F.col(column).cast("string") if isinstance(column, str) else column.cast("string")


def _message(condition: Column, *parts: Any) -> Column:
    return F.when(condition, F.concat(*[p if isinstance(p, Column) else F.lit(p)
                                        for p in parts]))


def _configured(rows: DataFrame) -> DataFrame:
    """Each row with the min ISR and ELR switch in force at it (rule 9, rule 10's ELR-off
    checks): the last config row before it in the partition's log order, as replay_partition
    reads them (a deleted config falls back to the cluster default, then to 1)."""
    order = Window.partitionBy("topic_id", "partition_id").orderBy("seq_major", "seq_minor") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_config = F.col("record_type") == "ConfigRecord"
    config_value = F.coalesce(F.col("value").try_cast("int"), F.lit(_NO_CONFIG))
    topic_min = F.last(F.when(is_config & (F.col("resource_type") == CONFIG_RESOURCE_TOPIC), config_value),
                       ignorenulls=True).over(order)
    cluster_min = F.last(F.when(is_config & (F.col("resource_type") == CONFIG_RESOURCE_BROKER), config_value),
                         ignorenulls=True).over(order)
    feature = F.last(F.when(F.col("record_type") == "FeatureLevelRecord",
                            F.col("value").try_cast("int")), ignorenulls=True).over(order)
    configured = F.coalesce(F.when(topic_min != _NO_CONFIG, topic_min),
                            F.when(cluster_min != _NO_CONFIG, cluster_min), F.lit(1))
    return rows.withColumn("configured_min_isr", configured) \
        .withColumn("elr_enabled", F.coalesce(feature >= 1, F.lit(True)))


def _states(rows: DataFrame) -> DataFrame:
    """Partition records with the state after each (merge as last-set values) and the state
    before it (`prev_*`, null where no state existed)."""
    order = Window.partitionBy("topic_id", "partition_id").orderBy("seq_major", "seq_minor")
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    full = F.col("record_type") == "PartitionRecord"
    change = ~full
    rows = rows.withColumn("full_records", F.sum(full.cast("int")).over(running)) \
        .withColumn("bumps", F.sum((change & F.col("leader").isNotNull()).cast("int"))
                    .over(running)) \
        .withColumn("changes_so_far", F.sum(change.cast("int")).over(running))
    since_full = {
        "leader_epoch": F.last(F.when(full, F.col("leader_epoch")), ignorenulls=True)
        .over(running) + F.col("bumps")
        - F.last(F.when(full, F.col("bumps")), ignorenulls=True).over(running),
        "partition_epoch": F.last(F.when(full, F.col("partition_epoch")), ignorenulls=True)
        .over(running) + F.col("changes_so_far")
        - F.last(F.when(full, F.col("changes_so_far")), ignorenulls=True).over(running),
    }
    state = {name: F.last(F.when(full, F.coalesce(name, F.array().cast("array<int>")))
                          .otherwise(F.col(name)), ignorenulls=True).over(running)
             for name in STATE_ARRAYS}
    state.update({name: F.last(name, ignorenulls=True).over(running) for name in STATE_SCALARS})
    state.update(since_full)
    rows = rows.withColumns({f"s_{k}": v for k, v in state.items()})
    previous = ("leader", "leader_epoch", "partition_epoch", "replicas", "isr", "min_isr",
                "batch_timestamp_ms")
    rows = rows.withColumn("min_isr", F.least(F.col("configured_min_isr"),
                                              F.size("s_replicas")))
    return rows.withColumns({
        f"prev_{name}": F.lag(F.col(f"s_{name}") if name not in ("min_isr",
                                                                 "batch_timestamp_ms")
                              else F.col(name)).over(order) for name in previous}) \
        .withColumn("had_state", F.coalesce(F.lag("full_records").over(order), F.lit(0)) >= 1)


def _violations(s: DataFrame) -> DataFrame:
    """The messages of every rule broken by each state (same texts as controller.core)."""
    leader, isr, elr = F.col("s_leader"), F.col("s_isr"), F.col("s_elr")
    replicas, lke = F.col("s_replicas"), F.col("s_last_known_elr")
    lkl, recovery = F.col("s_last_known_leader"), F.col("s_leader_recovery_state")
    min_isr, elr_on = F.col("min_isr"), F.col("elr_enabled")
    full = F.col("record_type") == "PartitionRecord"
    # rule 8: a change is checked against the state before it; a re-sent full state too, when
    # it is not a snapshot's (seq_major -1)
    checked8 = F.col("had_state") & (~full | (F.col("seq_major") >= 0))
    replica_left = F.size(F.array_except("prev_replicas", "s_replicas")) > 0
    expected = F.col("prev_leader_epoch") + F.when(
        (leader != F.col("prev_leader")) | replica_left, 1).otherwise(0)
    has_leader = leader != NO_LEADER
    messages = [
        _message(checked8 & (F.col("s_partition_epoch") != F.col("prev_partition_epoch") + 1),
                 "rule 8: partition epoch ", _text("prev_partition_epoch"), " -> ",
                 _text("s_partition_epoch")),
        _message(checked8 & (F.col("s_leader_epoch") != expected),
                 "rule 8: leader epoch ", _text("prev_leader_epoch"), " -> ",
                 _text("s_leader_epoch"), ", expected ", _text(expected), " (leader ",
                 _text("prev_leader"), " -> ", _text("s_leader"), ")"),
        # rule 10 (check_isr_elr_disjoint)
        _message(F.size(F.array_intersect(isr, elr)) > 0,
                 "rule 10: ISR ", _list(isr), " and ELR ", _list(elr), " overlap"),
        _message((F.size(elr) > 0) & (F.size(isr) >= min_isr),
                 "rule 10: ELR ", _list(elr), " non-empty with ISR size ", _text(F.size(isr)),
                 " >= min ISR ", _text(min_isr)),
        _message((F.size(F.array_except(isr, replicas)) > 0)
                 | (F.size(F.array_except(elr, replicas)) > 0),
                 "rule 10: ISR/ELR outside replicas ", _list(replicas)),
        _message((F.size(F.array_distinct(isr)) != F.size(isr))
                 | (F.size(F.array_distinct(elr)) != F.size(elr)),
                 "rule 10: duplicate member in ISR or ELR"),
        _message(~elr_on & (F.size(isr) == 0), "rule 10: ISR empty with ELR disabled"),
        _message(~elr_on & ((F.size(elr) > 0) | (F.size(lke) > 0)
                            | (lkl != LAST_KNOWN_LEADER_NONE)),
                 "rule 10: ELR state written with ELR disabled"),
        # rule 11 (check_last_known_elr), only with ELR on
        _message(elr_on & (F.size(lke) > 0) & (F.size(isr) >= min_isr),
                 "rule 11: LastKnownELR ", _list(lke), " with ISR size ", _text(F.size(isr)),
                 " >= min ISR ", _text(min_isr)),
        _message(elr_on & (F.size(F.array_intersect(lke, F.array_union(isr, elr))) > 0),
                 "rule 11: LastKnownELR overlaps ISR or ELR"),
        _message(elr_on & has_leader & (lkl != LAST_KNOWN_LEADER_NONE),
                 "rule 11: LastKnownLeader ", _text(lkl), " kept with leader ", _text(leader)),
        # rule 13 (check_leader_in_isr)
        _message(has_leader & ~F.array_contains(replicas, leader),
                 "rule 13: leader ", _text(leader), " not in replicas ", _list(replicas)),
        _message(has_leader & F.array_contains(replicas, leader)
                 & ~F.array_contains(isr, leader) & (recovery != RECOVERING),
                 "rule 13: leader ", _text(leader), " not in ISR ", _list(isr),
                 " and not RECOVERING"),
        # rule 19 (check_recovering_isr)
        _message((recovery == RECOVERING) & has_leader
                 & ((F.size(isr) != 1) | ~F.array_contains(isr, leader)),
                 "rule 19: RECOVERING with leader ", _text(leader), " and ISR ", _list(isr)),
        _message((recovery == RECOVERING) & ~has_leader & (F.size(isr) > 1),
                 "rule 19: RECOVERING leaderless with ISR ", _list(isr)),
    ]
    return s.withColumn("messages", F.filter(F.array(*messages), lambda m: m.isNotNull()))


def replay_frame(rows: DataFrame) -> DataFrame:
    """The replay's output (REPLAY_OUTPUT_SCHEMA) from a partition's rows and its config rows
    (analytics.rules.replay_partitions' union, with seq_major / seq_minor log order)."""
    configured = _configured(rows).filter(
        F.col("record_type").isin("PartitionRecord", "PartitionChangeRecord"))
    states = _violations(_states(configured))
    orphan = (F.col("record_type") == "PartitionChangeRecord") & (F.col("full_records") == 0)
    evidence = ["node", "file", "offset", "topic_id", "partition_id", "record_type",
                "batch_timestamp_ms"]
    orphans = states.filter(orphan).select(
        F.lit("violation").alias("kind"), F.lit(8).alias("rule"),
        F.lit("rule 8: PartitionChangeRecord for a partition with no PartitionRecord before "
              "it").alias("message"), *evidence)
    valid = states.filter(~orphan)
    violations = valid.select(F.lit("violation").alias("kind"),
                              F.explode("messages").alias("message"), *evidence) \
        .withColumn("rule", F.regexp_extract("message", r"^rule (\d+):", 1).cast("int"))
    points = valid.select(
        F.lit("point").alias("kind"), F.lit(None).cast("int").alias("rule"),
        F.lit(None).cast("string").alias("message"), *evidence,
        F.col("s_leader").alias("leader"), F.col("s_leader_epoch").alias("leader_epoch"),
        F.col("s_partition_epoch").alias("partition_epoch"),
        F.size("s_isr").alias("isr_size"), F.size("s_elr").alias("elr_size"), "min_isr",
        (F.col("s_leader_recovery_state") == RECOVERING).alias("recovering"))
    # time held by the state before each one (batch timestamps), as replay_summary counts it
    held = F.greatest(F.lit(0), F.coalesce("batch_timestamp_ms", F.lit(0))
                      - F.coalesce("prev_batch_timestamp_ms", F.lit(0)))
    before = F.col("had_state")
    tallies = valid.groupBy("topic_id", "partition_id").agg(
        F.max_by(F.struct("node", "file", "offset"), F.struct("seq_major", "seq_minor"))
        .alias("last"),
        F.count(F.lit(1)).alias("states"),
        F.sum((F.col("record_type") == "PartitionChangeRecord").cast("long")).alias("changes"),
        F.sum(F.when(before & (F.col("prev_leader") == NO_LEADER), held).otherwise(0))
        .cast("long").alias("unavailable_ms"),
        F.sum(F.when(before & (F.size("prev_isr") < F.col("prev_min_isr")), held).otherwise(0))
        .cast("long").alias("under_min_isr_ms"),
        F.sum((before & (F.col("s_leader") != F.col("prev_leader"))).cast("long"))
        .alias("leader_changes"),
    ).select(F.lit("tally").alias("kind"), F.lit(None).cast("int").alias("rule"),
             F.lit(None).cast("string").alias("message"), "last.node", "last.file",
             "last.offset", "topic_id", "partition_id", "states", "changes", "unavailable_ms",
             "under_min_isr_ms", "leader_changes")
    return orphans.unionByName(violations, allowMissingColumns=True) \
        .unionByName(points, allowMissingColumns=True) \
        .unionByName(tallies, allowMissingColumns=True)
