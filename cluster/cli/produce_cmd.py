"""`minikraft produce --bootstrap-server H:P --topic T` (CLI.md "Data, logs, health").

Values are `<producer-id>-<seq>` (padded to --record-size), unique and sequenced so the audit can
check loss and duplication; `--journal F` appends every send and its ack as msgpack lines.
Records go one per request (Kafka's Produce, one record batch v2 each), in order, round-robin
over the partitions (or to --partition).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from cluster.client.producer import ACKS, produce_records
from cluster.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, output_option, stdout
from kafkawire.errors import Errors, KafkaError


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True)
@click.option("--topic", required=True)
@click.option("--acks", type=click.Choice(sorted(ACKS)), default="all", show_default=True)
@click.option("--num-records", type=click.IntRange(0), default=10, show_default=True)
@click.option("--record-size", type=click.IntRange(1), default=16, show_default=True)
@click.option("--partition", type=click.IntRange(0), default=None)
@click.option("--timeout-ms", type=click.IntRange(1), default=10_000, show_default=True)
@click.option("--journal", type=click.Path(dir_okay=False, path_type=Path), default=None)
@output_option
def produce(
    bootstrap: str, topic: str, acks: str, num_records: int, record_size: int,
    partition: int | None, timeout_ms: int, journal: Path | None, output: str,
) -> None:
    """Send sequenced records to a topic and report what was acknowledged."""
    try:
        summary = asyncio.run(
            produce_records(
                bootstrap, topic, acks=ACKS[acks], num_records=num_records,
                record_size=record_size, partition=partition, journal=journal,
                timeout_ms=timeout_ms,
            )
        )
    except KafkaError as exc:
        code = EXIT_USAGE if exc.error is Errors.NETWORK_EXCEPTION else EXIT_FAILED
        if output == "json":
            emit_json({"sent": 0, "acked": 0, "errors": {exc.error.name: 1},
                       "records_per_s": 0.0, "latency_ms": {"p50": 0.0, "p99": 0.0}})
        else:
            stdout.print(f"{exc.error.name}: {exc.message}")
        raise SystemExit(code) from None
    if output == "json":
        emit_json(summary)
    else:
        stdout.print(
            f"sent {summary['sent']}, acked {summary['acked']}, errors {summary['errors']}, "
            f"{summary['records_per_s']} records/s, p50 {summary['latency_ms']['p50']} ms, "
            f"p99 {summary['latency_ms']['p99']} ms"
        )
    raise SystemExit(EXIT_OK if summary["acked"] == summary["sent"] else EXIT_FAILED)
