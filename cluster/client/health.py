"""A cluster's health on Kafka's protocol: 0 healthy; 1 degraded (offline or under-min-ISR
partitions, a fenced broker, a voter missing or lagging); 2 unreachable. The brokers answer
DescribeCluster v2 (fenced brokers included, KIP-1073) and DescribeTopicPartitions, and forward
DescribeQuorum to the controllers (`minikraft health`, the chaos runner)."""

from __future__ import annotations

from typing import Any

from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.static.primitive import i8

from cluster.client.admin_client import describe_quorum
from cluster.client.bootstrap import new_client, send_to_any
from cluster.client.topics import describe_all, partition_rows, unavailable, under_min_isr_row
from cluster.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from kafkawire.clock import now_ms
from kafkawire.errors import KafkaError
from metadata.kafka_describe import ENDPOINT_TYPE_BROKER

VOTER_FETCH_STALE_MS = 5000
VOTER_MAX_LAG = 1000


async def check_health(bootstrap: str, timeout_ms: int = 3000) -> tuple[int, dict[str, Any]]:
    client = new_client("minikraft-health", request_timeout_ms=timeout_ms)
    try:
        _, cluster = await send_to_any(
            client,
            bootstrap,
            DescribeClusterRequest(
                include_cluster_authorized_operations=False,
                endpoint_type=i8(ENDPOINT_TYPE_BROKER),
                include_fenced_brokers=True,
            ),
            timeout_ms=timeout_ms,
        )
        topics = await describe_all(bootstrap, [])
    except KafkaError as exc:
        return EXIT_USAGE, {"status": "unreachable", "problems": [str(exc)]}
    finally:
        await client.close()
    problems: list[str] = []
    fenced = sorted(int(b.broker_id) for b in cluster.brokers if b.is_fenced)
    problems += [f"broker {b} is fenced" for b in fenced]
    offline: list[str] = []
    under_min_isr: list[str] = []
    by_name = {t.name: t for t in topics}
    for row in partition_rows(topics):
        name = f"{row['topic']}-{row['partition']}"
        if unavailable(row):
            offline.append(name)
        elif under_min_isr_row(by_name[row["topic"]], row):
            under_min_isr.append(name)
    problems += [f"partition {n} is offline" for n in offline]
    problems += [f"partition {n} is under min ISR" for n in under_min_isr]
    quorum: dict[str, Any] = {}
    try:
        # Through the brokers, which forward DescribeQuorum to the controllers (Kafka's way).
        status = await describe_quorum(bootstrap, timeout_ms=timeout_ms)
        checked_ms = now_ms()
        rows = status.replication_json()
        quorum = {"leader_id": status.leader_id, "leader_epoch": status.leader_epoch,
                  "voters": [r for r in rows if r["status"] != "Observer"]}
        if status.leader_id is None:
            problems.append("the metadata quorum has no leader")
        for row in quorum["voters"]:
            if row["status"] == "Leader":
                continue
            stale = checked_ms - row["last_fetch_timestamp_ms"] > VOTER_FETCH_STALE_MS
            if row["lag"] is None or row["lag"] > VOTER_MAX_LAG or stale:
                problems.append(f"voter {row['node_id']} is missing or lagging")
    except KafkaError as exc:
        problems.append(f"controllers unreachable: {exc}")
    report = {
        "status": "healthy" if not problems else "degraded",
        "problems": problems,
        "brokers": [
            {"node_id": int(b.broker_id), "address": f"{b.host}:{int(b.port)}",
             "fenced": bool(b.is_fenced)}
            for b in cluster.brokers
        ],
        "fenced_brokers": fenced,
        "offline_partitions": offline,
        "under_min_isr_partitions": under_min_isr,
        "quorum": quorum,
    }
    return (EXIT_OK if not problems else EXIT_FAILED), report
