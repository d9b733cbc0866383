"""The Spark audit reads KIP-868 metadata transactions as the nodes' loader applies them (issue
35): the log of tests/unit/test_audit_transactions.py (transactions aborted at a controller
failover, one open at the log's end, committed ones) gives the same audit document as the same
log with the aborted and open transactions' records as NoOpRecords: the replay's rules, the
partitions' tallies and the topic names alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from analytics.audit import run_audit
from tests.unit.test_audit_transactions import BIG, transaction_story, without_elapsed

pytestmark = pytest.mark.spark


def test_spark_audit_drops_aborted_and_unfinished_transactions(spark: SparkSession,
                                                               tmp_path: Path) -> None:
    transaction_story(tmp_path / "with", as_noops=False)
    transaction_story(tmp_path / "noops", as_noops=True)
    with_aborted = run_audit(tmp_path / "with", spark=spark).to_json()
    reference = run_audit(tmp_path / "noops", spark=spark).to_json()
    assert without_elapsed(with_aborted) == without_elapsed(reference)
    assert "ghost" not in with_aborted["topic_names"].values()
    assert "big" in with_aborted["topic_names"].values()
    states = next(r for r in with_aborted["rules"] if r["rule"] == 10)["checked"]
    assert states > 2 * BIG  # the committed transactions are applied
