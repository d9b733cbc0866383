"""`minikraft topics (--bootstrap-server B | --bootstrap-controller C) create | describe | alter`
(CLI.md, Kafka's kafka-topics.sh), on Kafka's protocol: CreateTopics, DescribeTopicPartitions
(seed 001's paging) and CreatePartitions (`alter --partitions`). Brokers forward the writes to the
active controller; controllers (KIP-919) answer them themselves (cluster.client.bootstrap).
"""

from __future__ import annotations

import asyncio

import click
from kio.schema.create_partitions.v3.request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32

from cluster.cli.bootstrap_options import bootstrap_options, chosen_bootstrap
from cluster.client.topics import (
    create_topics_request,
    describe_all,
    error_name,
    kafka_timeout,
    parse_configs,
    partition_rows,
    run_admin,
    unavailable,
    under_min_isr_row,
)
from cluster.output import EXIT_USAGE, emit_json, emit_table, fail, output_option, report_result
from kafkawire.errors import Errors, KafkaError
from raft.core.replica_key import uuid_to_str


@click.group("topics")
@bootstrap_options
@click.pass_context
def topics(ctx: click.Context, bootstrap_server: str | None, bootstrap_controller: str | None) -> None:
    """Create, describe and alter topics."""
    ctx.obj = {"bootstrap": chosen_bootstrap(bootstrap_server, bootstrap_controller)}


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
    # On the wire -1 asks for the controller's default; an operator's count must be > 0, as
    # kafka-topics.sh insists, and is refused with the server's name for it.
    if partitions < 1:
        fail(f"INVALID_PARTITIONS: number of partitions {partitions} is not > 0")
    if replication_factor < 1:
        fail(f"INVALID_REPLICATION_FACTOR: replication factor {replication_factor} is not > 0")
    request = create_topics_request(topic, partitions, replication_factor, parse_configs(configs))
    response = run_admin(ctx.obj["bootstrap"], request)
    result = response.topics[0]
    error = error_name(result.error_code)
    topic_id = uuid_to_str(result.topic_id) if error is None else None
    report_result(
        output, error, result.error_message,
        {"topic": topic, "topic_id": topic_id},
        f"Created topic {topic} (topic id {topic_id}).",
    )


@topics.command()
@click.option("--topic", required=True)
@click.option("--partitions", type=int, required=True, help="the new total partition count")
@output_option
@click.pass_context
def alter(ctx: click.Context, topic: str, partitions: int, output: str) -> None:
    """Add partitions to a topic (CreatePartitions; kafka-topics.sh --alter --partitions)."""
    request = CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=TopicName(topic), count=i32(partitions), assignments=None),),
        timeout=kafka_timeout(),
        validate_only=False,
    )
    result = run_admin(ctx.obj["bootstrap"], request).results[0]
    report_result(
        output, error_name(result.error_code), result.error_message,
        {"topic": topic, "partitions": partitions},
        f"Topic {topic} now has {partitions} partitions.",
    )


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
        described = asyncio.run(describe_all(ctx.obj["bootstrap"], [topic] if topic else []))
    except KafkaError as exc:
        fail(f"{exc.error.name}: {exc.message}", EXIT_USAGE)
    errors = [t for t in described if t.error_code != 0]
    rows = []
    for t in described:
        for row in partition_rows([t]):
            if under_min_isr_partitions and not under_min_isr_row(t, row):
                continue
            if unavailable_partitions and not unavailable(row):
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
        fail(f"{Errors.of(int(t.error_code)).name}: topic {t.name!r}")
