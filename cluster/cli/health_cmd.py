"""`minikraft health --bootstrap-server H:P [--watch] [--output json]` (CLI.md): exit 0 healthy;
1 degraded (offline or under-min-ISR partitions, a fenced broker, a voter missing or lagging);
2 unreachable. The broker answers METADATA; the quorum is asked of the controllers it names."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click

from cluster.cli.admin_client import describe_quorum
from cluster.cli.broker_client import fetch_metadata, new_client
from cluster.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, output_option, stdout
from cluster.protocol.errors import KafkaError

VOTER_FETCH_STALE_MS = 5000
VOTER_MAX_LAG = 1000


async def check_health(bootstrap: str, timeout_ms: int = 3000) -> tuple[int, dict[str, Any]]:
    client = new_client("minikraft-health")
    try:
        metadata = await fetch_metadata(client, bootstrap, None, timeout_ms)
    except KafkaError as exc:
        return EXIT_USAGE, {"status": "unreachable", "problems": [str(exc)]}
    finally:
        await client.close()
    problems: list[str] = []
    fenced = sorted(b.node_id for b in metadata.brokers if b.fenced)
    problems += [f"broker {b} is fenced" for b in fenced]
    offline: list[str] = []
    under_min_isr: list[str] = []
    for topic in metadata.topics:
        for p in topic.partitions:
            name = f"{topic.name}-{p.partition_index}"
            if p.leader_id < 0:
                offline.append(name)
            elif len(p.isr_nodes) < min(topic.min_insync_replicas, len(p.replica_nodes)):
                under_min_isr.append(name)
    problems += [f"partition {n} is offline" for n in offline]
    problems += [f"partition {n} is under min ISR" for n in under_min_isr]
    quorum: dict[str, Any] = {}
    controllers = ",".join(metadata.controller_bootstrap_servers)
    try:
        status = await describe_quorum(controllers, timeout_ms=timeout_ms)
        now_ms = int(time.time() * 1000)
        rows = status.replication_json()
        quorum = {"leader_id": status.leader_id, "leader_epoch": status.leader_epoch,
                  "voters": [r for r in rows if r["status"] != "Observer"]}
        if status.leader_id is None:
            problems.append("the metadata quorum has no leader")
        for row in quorum["voters"]:
            if row["status"] == "Leader":
                continue
            stale = now_ms - row["last_fetch_timestamp_ms"] > VOTER_FETCH_STALE_MS
            if row["lag"] is None or row["lag"] > VOTER_MAX_LAG or stale:
                problems.append(f"voter {row['node_id']} is missing or lagging")
    except KafkaError as exc:
        problems.append(f"controllers unreachable: {exc}")
    report = {
        "status": "healthy" if not problems else "degraded",
        "problems": problems,
        "brokers": [
            {"node_id": b.node_id, "address": f"{b.host}:{b.port}", "fenced": b.fenced,
             "epoch": b.epoch}
            for b in metadata.brokers
        ],
        "fenced_brokers": fenced,
        "offline_partitions": offline,
        "under_min_isr_partitions": under_min_isr,
        "quorum": quorum,
    }
    return (EXIT_OK if not problems else EXIT_FAILED), report


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True)
@click.option("--watch", is_flag=True, default=False, help="check every second until Ctrl-C")
@output_option
def health(bootstrap: str, watch: bool, output: str) -> None:
    """Report cluster health; the exit code says healthy (0), degraded (1), unreachable (2)."""
    while True:
        code, report = asyncio.run(check_health(bootstrap))
        if output == "json":
            emit_json(report)
        else:
            stdout.print(f"{report['status']}: " + ("; ".join(report["problems"]) or "all good"))
        if not watch:
            raise SystemExit(code)
        time.sleep(1)
