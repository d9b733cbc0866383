"""`minikraft bench scale` end to end (issue 35), small: partitions created through the brokers
with confluent-kafka in requests Kafka accepts, every ISR full, a kill -9 of the active
controller followed by a successful create, a restarted broker back in every ISR, `minikraft
down` stopping everything. The figures at full size are in BENCHMARKS.md. Slow: run with
`pytest -m slow tests/integration/test_scale.py -s`; SCALE_PARTITIONS sets the size."""

from __future__ import annotations

import os

import pytest

from cluster.bench.scale_bench import run_scale_bench

pytest.importorskip("confluent_kafka", reason="dev extra: confluent-kafka")

PARTITIONS = int(os.environ.get("SCALE_PARTITIONS", "6000"))


@pytest.mark.slow
def test_bench_scale_creates_fails_over_and_stops_cleanly() -> None:
    report = run_scale_bench(partitions=PARTITIONS, topics=2, kills=1, settle_s=0)
    print(report)
    results = {r["metric"]: r["minikraft"] for r in report["results"]}
    assert results["partitions created"] == PARTITIONS
    assert results["create requests failed"] == 0, report["requests"]
    # A request of 5,000 partitions is within Kafka's MAX_RECORDS_PER_USER_OP: every one
    # answered, and two topics of 3,000 need two requests each time one grows past 5,000.
    assert all(r["op"] == "create" for r in report["requests"])
    assert results["full ISR after last create"] < 300
    assert report["failover_s"] and report["failover_s"][0] < 60
    assert results["restarted broker in every ISR"] < 300
    assert report["down"]["exit"] == 0 and report["still_running_after_down"] == []
