"""Apache Kafka's own kafka-configs (ConfigCommand, from `make kafka-deps`) against minikraft's
brokers (issue 34): topic and broker entities described with every config, its source and
synonyms, including a broker's static configs; alters; and the min.insync.replicas changes ELR
forbids (INVARIANTS.md rule 15), refused with Kafka's messages."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from cluster.apache_kafka import tools
from tests.integration.test_kafka_clients import Up, start_up

pytestmark = pytest.mark.skipif(tools.skip_reason() is not None, reason=str(tools.skip_reason()))

TOPIC = "tool-configs"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    yield from start_up(tmp_path_factory)


def kafka_configs(up: Up, *args: str) -> tools.ToolResult:
    return tools.run_tool(tools.CONFIGS, ["--bootstrap-server", up.bootstrap, *args], timeout=90)


def kafka_configs_at_once(up: Up, *runs: Sequence[str]) -> list[tools.ToolResult]:
    """Independent kafka-configs runs side by side: each is a JVM start, the test's cost."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda args: kafka_configs(up, *args), runs))


def _entries(output: str) -> dict[str, str]:
    """`  name=value sensitive=false synonyms={...}` lines of a describe: name -> the rest."""
    found = {}
    for line in output.splitlines():
        match = re.match(r"^\s+([a-z0-9._-]+)=(.*)$", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def test_kafka_configs_alters_and_describes_a_topic_with_sources_and_synonyms(up: Up) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": up.bootstrap})
    config = {"cleanup.policy": "compact"}
    admin.create_topics([NewTopic(TOPIC, 1, 3, config=config)])[TOPIC].result(timeout=30)
    altered = kafka_configs(
        up, "--alter", "--entity-type", "topics", "--entity-name", TOPIC,
        "--add-config", "compression.type=zstd,retention.ms=-1",
    )
    assert altered.rc == 0, altered.stderr
    assert f"Completed updating config for topic {TOPIC}." in altered.stdout
    described, refused = kafka_configs_at_once(
        up,
        ("--describe", "--all", "--entity-type", "topics", "--entity-name", TOPIC),
        ("--alter", "--entity-type", "topics", "--entity-name", TOPIC,
         "--add-config", "segment.jitter.ms=1000"),
    )
    assert described.rc == 0, described.stderr
    assert f"All configs for topic {TOPIC} are:" in described.stdout
    entries = _entries(described.stdout)
    assert len(entries) == 37  # every topic config of Kafka 4.4
    assert entries["compression.type"].startswith(
        "zstd sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:compression.type=zstd, "
        "DEFAULT_CONFIG:compression.type=producer}"
    )
    assert "DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact" in entries["cleanup.policy"]
    assert entries["retention.ms"].startswith(
        "-1 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=-1}"
    )
    assert entries["segment.ms"].startswith("604800000 ")
    assert refused.rc != 0
    assert "minikraft does not honour segment.jitter.ms=1000" in refused.stdout + refused.stderr


def test_kafka_configs_describes_a_broker_and_refuses_the_min_isr_changes_elr_forbids(
    up: Up,
) -> None:
    broker = str(up.cluster.brokers[0].node_id)
    described, per_broker, cluster_set = kafka_configs_at_once(
        up,
        ("--describe", "--all", "--entity-type", "brokers", "--entity-name", broker),
        ("--alter", "--entity-type", "brokers", "--entity-name", broker,
         "--add-config", "min.insync.replicas=2"),
        ("--alter", "--entity-type", "brokers", "--entity-default",
         "--add-config", "min.insync.replicas=1"),
    )
    assert described.rc == 0, described.stderr
    assert f"All configs for broker {broker} are:" in described.stdout
    entries = _entries(described.stdout)
    # `minikraft up --set broker.session.timeout.ms=3000`: in the broker's config file.
    assert entries["broker.session.timeout.ms"].startswith(
        "3000 sensitive=false synonyms={STATIC_BROKER_CONFIG:broker.session.timeout.ms=3000, "
        "DEFAULT_CONFIG:broker.session.timeout.ms=9000}"
    )
    assert entries["default.replication.factor"].startswith("1 ")
    assert "DEFAULT_CONFIG:log.retention.hours=168" in entries["log.retention.hours"]

    # Rule 15: while ELR is on, no broker-level min ISR, and the cluster level stays.
    assert per_broker.rc != 0
    assert "Broker-level min.insync.replicas cannot be altered while ELR is enabled." in (
        per_broker.stdout + per_broker.stderr
    )
    assert cluster_set.rc == 0, cluster_set.stderr
    assert "Completed updating default config for brokers in the cluster." in cluster_set.stdout
    removal = kafka_configs(
        up, "--alter", "--entity-type", "brokers", "--entity-default",
        "--delete-config", "min.insync.replicas",
    )
    assert removal.rc != 0
    assert "Cluster-level min.insync.replicas cannot be removed while ELR is enabled." in (
        removal.stdout + removal.stderr
    )
