"""`minikraft bench kafka --quick --output json` end to end against Apache Kafka (issue 36):
one cold start of each, the pytest fixture once each, the clusters measured side by side line
by line A B B A (minikraft's fsync run among them), each broker kill decomposed; every line of the JSON has both figures and a ratio of the two, its
durability on both sides and the load average of each. Slow (several minutes: six JVMs start
three times on two cores); figures are not asserted, only that they were measured."""

from __future__ import annotations

import json

import pytest

from cluster.apache_kafka import tools
from cluster.bench.kafka_bench import GOALS, UNITS
from tests.integration.conftest import minikraft

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(tools.skip_reason() is not None, reason=tools.skip_reason() or ""),
]


@pytest.mark.timeout(2400)
def test_bench_kafka_quick_json_has_every_line_with_both_figures() -> None:
    result = minikraft("bench", "kafka", "--quick", "--output", "json", timeout=2300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["bench"] == "kafka" and report["peer"] == "kafka" and report["quick"] is True
    assert report["kafka_version"] == "4.4.0" and "-Xmx1G" in report["kafka_jvm_opts"]
    lines = {r["metric"]: r for r in report["results"]}
    assert set(UNITS) <= set(lines)  # every line of the issue, Kafka's tools' lines too
    assert set(GOALS) <= set(lines)
    for line in report["results"]:
        assert line["minikraft"] > 0 and line["peer"] > 0, line
        assert line["ratio"] == pytest.approx(line["minikraft"] / line["peer"], rel=2e-3), line
        assert " / " in line["durability"]
        assert len(line["load_average"]["minikraft"]) == 3
        assert len(line["load_average"]["kafka"]) == 3
        assert line["goal_met"] in ((None,) if line["goal"] is None else (True, False))
    assert any(m.endswith(", minikraft fsync") for m in lines)
    # Measured A B B A: each line keeps the load of each of its measurements.
    assert lines["ready"]["load_samples"]["kafka"] and lines["ready"]["load_samples"]["minikraft"]
    assert report["made"]["controller kills"] == report["made"]["broker kills"] == 1
    # Each broker kill decomposed on both sides: the fencing, read from the metadata logs,
    # came after the kill and before the acknowledgement.
    for side in ("minikraft", "kafka"):
        kill = report["broker_failover_parts"][side]["kills"][0]
        assert 0 < kill["kill->fenced"] < kill["total"], kill
