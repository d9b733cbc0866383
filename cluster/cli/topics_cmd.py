"""`minikraft topics --bootstrap-server H:P create | describe` (CLI.md, Kafka's kafka-topics.sh).

Also the way every admin command reaches the active controller: a request goes to the bootstrap
address; a NOT_CONTROLLER answer (a standby) sends it on to the Raft leader found by
DescribeQuorum, and a failover in progress is retried until the timeout (Kafka's admin client).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click

from cluster.cli.admin_client import describe_quorum, split_bootstrap
from cluster.cli.output import EXIT_USAGE, emit_json, emit_table, fail, output_option
from cluster.net.client import RpcClient
from cluster.protocol import controller_messages as msg
from cluster.protocol.errors import Errors, KafkaError
from raft.core.replica_key import uuid_to_str

ADMIN_TIMEOUT_MS = 15_000
_RETRY_SLEEP_S = 0.1


async def controller_request(
    bootstrap: str, request: Any, *, timeout_ms: int = ADMIN_TIMEOUT_MS
) -> Any:
    """Send an admin request to whichever bootstrap node answers, following NOT_CONTROLLER to
    the active controller. A top-level error other than NOT_CONTROLLER raises KafkaError."""
    deadline = time.monotonic() + timeout_ms / 1000
    addresses = split_bootstrap(bootstrap)
    client = RpcClient("minikraft-admin", cluster_id=None, request_timeout_ms=timeout_ms)
    last = KafkaError(Errors.NETWORK_EXCEPTION, f"no node answered at {bootstrap}")
    try:
        while time.monotonic() < deadline:
            for address in list(addresses):
                remaining_ms = max(100, int((deadline - time.monotonic()) * 1000))
                try:
                    response = await client.request(
                        address, request, timeout_ms=min(remaining_ms, 5000)
                    )
                except KafkaError as exc:
                    last = exc
                    continue
                error = Errors.of(response.error_code)
                if error == Errors.NONE:
                    return response
                last = KafkaError(error, response.error_message)
                if error != Errors.NOT_CONTROLLER:
                    raise last
                active = await _active_controller(bootstrap, remaining_ms)
                if active is not None and active not in addresses:
                    addresses.insert(0, active)
            await asyncio.sleep(_RETRY_SLEEP_S)
        raise last
    finally:
        await client.close()


async def _active_controller(bootstrap: str, timeout_ms: int) -> str | None:
    try:
        status = await describe_quorum(bootstrap, timeout_ms=min(timeout_ms, 2000))
    except KafkaError:
        return None
    if status.leader_id is None:
        return None
    endpoints = status.endpoints().get(status.leader_id, {})
    return next(iter(endpoints.values()), None)


def run_admin(bootstrap: str, request: Any) -> Any:
    """Run one admin request; connection and top-level errors exit as CLI.md says."""
    try:
        return asyncio.run(controller_request(bootstrap, request))
    except KafkaError as exc:
        code = (
            EXIT_USAGE if exc.error in (Errors.NETWORK_EXCEPTION, Errors.REQUEST_TIMED_OUT) else 1
        )
        fail(f"{exc.error.name}: {exc.message}", code)


def error_name(code: int) -> str | None:
    return None if code == 0 else Errors.of(code).name


def parse_configs(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in items:
        for part in item.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                fail(f"config {part!r} is not key=value", EXIT_USAGE)
            configs[key.strip()] = value.strip()
    return configs


# -- describe --------------------------------------------------------------------------------


async def describe_all(
    bootstrap: str, topics: list[str], limit: int = msg.DESCRIBE_PARTITIONS_DEFAULT_LIMIT
) -> list[msg.DescribeTopicPartitionsTopic]:
    """Every page of DescribeTopicPartitions (seed 001's cursor), topics merged across pages."""
    merged: dict[str, msg.DescribeTopicPartitionsTopic] = {}
    cursor: msg.Cursor | None = None
    for _ in range(1_000_000):
        response = await controller_request(
            bootstrap, msg.DescribeTopicPartitionsRequest(topics, limit, cursor)
        )
        for topic in response.topics:
            seen = merged.get(topic.name)
            if seen is None:
                merged[topic.name] = topic
            else:
                merged[topic.name] = msg.DescribeTopicPartitionsTopic(
                    topic.name,
                    topic.error_code,
                    topic.topic_id,
                    topic.is_internal,
                    seen.partitions + topic.partitions,
                    topic.min_insync_replicas,
                )
        cursor = response.next_cursor
        if cursor is None:
            break
    return list(merged.values())


def partition_rows(topics: list[msg.DescribeTopicPartitionsTopic]) -> list[dict[str, Any]]:
    """CLI.md's `topics describe --output json` rows."""
    rows = []
    for topic in topics:
        for p in topic.partitions:
            rows.append(
                {
                    "topic": topic.name,
                    "topic_id": uuid_to_str(topic.topic_id),
                    "partition": p.partition_index,
                    "leader": p.leader_id,
                    "leader_epoch": p.leader_epoch,
                    "partition_epoch": p.partition_epoch,
                    "replicas": list(p.replica_nodes),
                    "isr": list(p.isr_nodes),
                    "elr": list(p.eligible_leader_replicas or []),
                    "last_known_elr": list(p.last_known_elr or []),
                    "last_known_leader": p.last_known_leader,
                    "offline_replicas": list(p.offline_replicas),
                    "leader_recovery_state": "RECOVERING"
                    if p.leader_recovery_state == 1
                    else "RECOVERED",
                }
            )
    return rows


def _under_min_isr(topic: msg.DescribeTopicPartitionsTopic, row: dict[str, Any]) -> bool:
    min_isr = topic.min_insync_replicas if topic.min_insync_replicas > 0 else 1
    return len(row["isr"]) < min(min_isr, len(row["replicas"]))  # rule 9


def _unavailable(row: dict[str, Any]) -> bool:
    return row["leader"] < 0 or row["leader"] in row["offline_replicas"]


# -- commands --------------------------------------------------------------------------------


@click.group("topics")
@click.option("--bootstrap-server", required=True, help="host:port[,host:port...]")
@click.pass_context
def topics(ctx: click.Context, bootstrap_server: str) -> None:
    """Create and describe topics."""
    ctx.obj = {"bootstrap_server": bootstrap_server}


@topics.command()
@click.option("--topic", required=True)
@click.option("--partitions", type=int, required=True)
@click.option("--replication-factor", type=int, required=True)
@click.option("--config", "configs", multiple=True, help="k=v (repeatable)")
@output_option
@click.pass_context
def create(
    ctx: click.Context,
    topic: str,
    partitions: int,
    replication_factor: int,
    configs: tuple[str, ...],
    output: str,
) -> None:
    """Create a topic (CreateTopics)."""
    request = msg.CreateTopicsRequest(
        [msg.CreatableTopic(topic, partitions, replication_factor, parse_configs(configs))]
    )
    response = run_admin(ctx.obj["bootstrap_server"], request)
    result = response.topics[0]
    error = error_name(result.error_code)
    if output == "json":
        emit_json(
            {
                "topic": topic,
                "topic_id": uuid_to_str(result.topic_id) if error is None else None,
                "error": error,
            }
        )
    if error is not None:
        fail(f"{error}: {result.error_message}")
    if output != "json":
        click.echo(f"Created topic {topic} (topic id {uuid_to_str(result.topic_id)}).")


@topics.command()
@click.option("--topic", default=None)
@click.option("--under-min-isr-partitions", is_flag=True)
@click.option("--unavailable-partitions", is_flag=True)
@output_option
@click.pass_context
def describe(
    ctx: click.Context,
    topic: str | None,
    under_min_isr_partitions: bool,
    unavailable_partitions: bool,
    output: str,
) -> None:
    """Describe partitions: leader, ISR, ELR, LastKnownELR, LastKnownLeader, recovery state."""
    try:
        described = asyncio.run(describe_all(ctx.obj["bootstrap_server"], [topic] if topic else []))
    except KafkaError as exc:
        fail(f"{exc.error.name}: {exc.message}", EXIT_USAGE)
    errors = [t for t in described if t.error_code != 0]
    rows = []
    for t in described:
        for row in partition_rows([t]):
            if under_min_isr_partitions and not _under_min_isr(t, row):
                continue
            if unavailable_partitions and not _unavailable(row):
                continue
            rows.append(row)
    if output == "json":
        emit_json(rows)
    else:
        columns = [
            "topic",
            "partition",
            "leader",
            "leader_epoch",
            "replicas",
            "isr",
            "elr",
            "last_known_elr",
            "last_known_leader",
            "leader_recovery_state",
        ]
        emit_table("topics", columns, [[row[c] for c in columns] for row in rows])
    for t in errors:
        fail(f"{Errors.of(t.error_code).name}: topic {t.name!r}")
