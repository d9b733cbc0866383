"""Rule 20 checked once: its plain form (analytics.rules.replication.pure.hwm_violation, which the audit
baseline and the broker simulator run) and its Spark column (analytics.rules.replication.spark.rule_20_hwm)
flag the same journal rows, both built on the broker's own predicate
(broker.core.high_watermark.hwm_may_advance)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from pyspark.sql import SparkSession

from analytics.read.broker_inputs import JOURNAL_COLUMNS, ddl
from analytics.rules.replication import pure as dr
from analytics.rules.replication import spark as broker_rules

pytestmark = pytest.mark.spark

# Every HwmAdvanced shape the rule tells apart: forward, standing still, backwards, unknown;
# ISR below, at and above min ISR; a null on either side.
MOVES = [(0, 5), (5, 5), (5, 3), (None, 5)]
SIZES = [None, 1, 2, 3]


def _rows() -> list[dict[str, Any]]:
    rows = []
    for ts, ((old, new), isr_size, min_isr) in enumerate(itertools.product(MOVES, SIZES, SIZES)):
        row: dict[str, Any] = {name: None for name, _type in JOURNAL_COLUMNS}
        row.update(file="broker-1.journal", node=1, position=ts, event="HwmAdvanced", broker_id=1,
                   topic="t", partition=0, leader_epoch=1, ts=ts, old=old, new=new,
                   isr_size=isr_size, min_isr=min_isr, corrupt=False)
        rows.append(row)
    return rows


def _spark_flags(spark: SparkSession, rows: list[dict[str, Any]]) -> tuple[int, list[int]]:
    names = [name for name, _type in JOURNAL_COLUMNS]
    journal = spark.createDataFrame([tuple(r[n] for n in names) for r in rows],
                                    ddl(JOURNAL_COLUMNS))
    result = broker_rules.rule_20_hwm(journal)
    assert result.checked == len(rows)
    return result.violation_count, sorted(v["ts"] for v in result.violations)


def test_rule_20_pure_and_spark_forms_flag_the_same_rows(spark: SparkSession) -> None:
    rows = _rows()
    pure = [r["ts"] for r in rows
            if dr.hwm_violation(r["event"], r["old"], r["new"], r["isr_size"], r["min_isr"])]
    assert len(pure) == 3  # (0 -> 5) with ISR 1 < 2, 1 < 3, 2 < 3
    assert _spark_flags(spark, rows) == (len(pure), pure)



# Rule 21: one broker journal's rows of a partition, in order; (event, fields) per row. Leading
# RECOVERING: the HWM moving and a produce acked are violations, the HWM standing still is not
# serving; RECOVERED again, both are fine; an older journal's RoleChanged (no recovery state)
# leaves the leader unchecked; a follower is not judged; RECOVERING reached by a
# RecoveryStateChanged counts too. The second file shows the state is per journal file.
RULE_21_STORY = [
    ("RoleChanged", {"role": "follower", "leader_recovery_state": 0}),
    ("ProduceAcked", {}),
    ("RoleChanged", {"role": "leader", "leader_recovery_state": 1}),
    ("HwmAdvanced", {"old": 0, "new": 3}),
    ("HwmAdvanced", {"old": 3, "new": 3}),
    ("ProduceAcked", {}),
    ("RecoveryStateChanged", {"new_state": 0}),
    ("HwmAdvanced", {"old": 0, "new": 4}),
    ("ProduceAcked", {}),
    ("RoleChanged", {"role": "leader", "leader_recovery_state": None}),
    ("HwmAdvanced", {"old": 4, "new": 5}),
    ("RecoveryStateChanged", {"new_state": 1}),
    ("ProduceAcked", {}),
    ("RecoveryStateChanged", {"new_state": None}),
    ("HwmAdvanced", {"old": 5, "new": None}),
]


def _rule_21_rows() -> list[dict[str, Any]]:
    rows = []
    for file, partition in (("broker-1.journal", 0), ("broker-1.journal", 1), ("broker-2.journal", 0)):
        story = RULE_21_STORY if partition == 0 else RULE_21_STORY[4:]
        for event, fields in story:
            row: dict[str, Any] = {name: None for name, _type in JOURNAL_COLUMNS}
            position = len(rows)
            row.update(file=file, node=int(file[7]), position=position, event=event,
                       broker_id=int(file[7]), topic="t", partition=partition, leader_epoch=1,
                       ts=position, corrupt=False, **fields)
            rows.append(row)
    return rows


def test_rule_21_pure_and_spark_forms_flag_the_same_rows(spark: SparkSession) -> None:
    rows = _rule_21_rows()
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["file"], row["partition"]), []).append(row)
    judged = [(row["position"], bad) for group in groups.values()
              for row, bad in dr.recovering_serves(group)]
    pure = sorted(position for position, bad in judged if bad)
    # A whole story judges 5 rows and flags 3 (HWM 0 -> 3 and the ack while RECOVERING, the ack
    # after RECOVERING again); partition 1's starts at the HWM standing still with no role yet,
    # so only its last ack is judged (RECOVERING, leader): flagged.
    assert len(judged) == 2 * 5 + 1 and len(pure) == 2 * 3 + 1
    names = [name for name, _type in JOURNAL_COLUMNS]
    journal = spark.createDataFrame([tuple(r[n] for n in names) for r in rows],
                                    ddl(JOURNAL_COLUMNS))
    result = broker_rules.rule_21_recovering(journal)
    assert (result.checked, result.violation_count) == (len(judged), len(pure))
    assert sorted(v["position"] for v in result.violations) == pure
    assert all(v["message"].startswith("rule 21: broker ") for v in result.violations)
