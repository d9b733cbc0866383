"""`minikraft health --bootstrap-server H:P [--watch] [--output json]` (CLI.md): exit 0 healthy;
1 degraded (offline or under-min-ISR partitions, a fenced broker, a voter missing or lagging);
2 unreachable. The brokers answer DescribeCluster v2 (fenced brokers included, KIP-1073) and
DescribeTopicPartitions, and forward DescribeQuorum to the controllers."""

from __future__ import annotations

import asyncio
import time

import click

from cluster.client.health import check_health
from cluster.output import emit_json, output_option, stdout


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
