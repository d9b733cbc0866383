"""`minikraft consume --bootstrap-server H:P --topic T` (CLI.md "Data, logs, health"): reads
committed records (below each partition's high watermark, rule 20) from the partition leaders
with Kafka's ListOffsets and Fetch (read committed, assigned partitions, no group) until
--max-messages or until nothing new arrived for --timeout-ms."""

from __future__ import annotations

import asyncio

import click

from cluster.client.consumer import consume_records
from cluster.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, output_option, stdout
from kafkawire.errors import Errors, KafkaError


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True)
@click.option("--topic", required=True)
@click.option("--partition", type=click.IntRange(0), default=None)
@click.option("--from-beginning", is_flag=True, default=False)
@click.option("--max-messages", type=click.IntRange(1), default=None)
@click.option("--timeout-ms", type=click.IntRange(1), default=2000, show_default=True)
@output_option
def consume(
    bootstrap: str, topic: str, partition: int | None, from_beginning: bool,
    max_messages: int | None, timeout_ms: int, output: str,
) -> None:
    """Read committed records of a topic from its partition leaders."""
    try:
        result = asyncio.run(
            consume_records(
                bootstrap, topic, partition=partition, from_beginning=from_beginning,
                max_messages=max_messages, timeout_ms=timeout_ms,
            )
        )
    except KafkaError as exc:
        if output == "json":
            emit_json({"count": 0, "records": [], "error": exc.error.name})
        else:
            stdout.print(f"{exc.error.name}: {exc.message}")
        raise SystemExit(
            EXIT_USAGE if exc.error is Errors.NETWORK_EXCEPTION else EXIT_FAILED
        ) from None
    if output == "json":
        emit_json(result)
    else:
        for record in result["records"]:
            stdout.print(f"{record['partition']}:{record['offset']} {record['value']}")
    raise SystemExit(EXIT_OK)
