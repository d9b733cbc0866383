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

