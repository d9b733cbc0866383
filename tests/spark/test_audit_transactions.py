"""The Spark audit reads KIP-868 metadata transactions as the nodes' loader applies them (issue
35): the log of tests/unit/test_audit_transactions.py (transactions aborted at a controller
failover, one open at the log's end, committed ones) gives the same audit document as the same
log with the aborted and open transactions' records as NoOpRecords: the replay's rules, the
partitions' tallies and the topic names alike."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from analytics.audit import run_audit
from tests.unit.test_audit_transactions import (  # noqa: F401 (story: a fixture)
    BIG,
    Story,
    story,
    without_elapsed,
)

pytestmark = pytest.mark.spark


def test_spark_audit_drops_aborted_and_unfinished_transactions(
        spark: SparkSession, story: Story) -> None:  # noqa: F811
    with_aborted = run_audit(story.with_aborted, spark=spark).to_json()
    reference = run_audit(story.as_noops, spark=spark).to_json()
    assert without_elapsed(with_aborted) == without_elapsed(reference)
    assert "ghost" not in with_aborted["topic_names"].values()
    assert "big" in with_aborted["topic_names"].values()
    states = next(r for r in with_aborted["rules"] if r["rule"] == 10)["checked"]
    assert states > 2 * BIG  # the committed transactions are applied
