"""`minikraft metadata-quorum --bootstrap-controller H:P describe --status | --replication`."""

from __future__ import annotations

import asyncio

import click

from cluster.cli.admin_client import describe_quorum
from cluster.cli.output import EXIT_USAGE, emit_json, emit_table, fail, output_option
from cluster.protocol.errors import KafkaError


@click.group("metadata-quorum")
@click.option("--bootstrap-controller", required=True, help="host:port[,host:port...]")
@click.pass_context
def metadata_quorum(ctx: click.Context, bootstrap_controller: str) -> None:
    """Describe and change the KRaft metadata quorum."""
    ctx.obj = {"bootstrap_controller": bootstrap_controller}


@metadata_quorum.command()
@click.option("--status", "mode", flag_value="status", help="leader, epoch, HWM, voters")
@click.option("--replication", "mode", flag_value="replication", help="per-replica progress")
@output_option
@click.pass_context
def describe(ctx: click.Context, mode: str | None, output: str) -> None:
    """Describe the quorum (ask the leader)."""
    if mode is None:
        fail("one of --status or --replication is required", EXIT_USAGE)
    try:
        status = asyncio.run(describe_quorum(ctx.obj["bootstrap_controller"]))
    except KafkaError as exc:
        fail(f"{exc.error.name}: {exc.message or 'no controller answered'}", EXIT_USAGE)
    if mode == "status":
        data = status.status_json(cluster_id=None)
        if output == "json":
            emit_json(data)
            return
        rows = [
            ["LeaderId", data["leader_id"]],
            ["LeaderEpoch", data["leader_epoch"]],
            ["HighWatermark", data["high_watermark"]],
            ["MaxFollowerLag", data["max_follower_lag"]],
            [
                "CurrentVoters",
                ", ".join(f"{v['id']}@{v['directory_id']}" for v in data["current_voters"]),
            ],
            [
                "CurrentObservers",
                ", ".join(f"{o['id']}@{o['directory_id']}" for o in data["current_observers"]),
            ],
        ]
        emit_table("metadata quorum", ["", ""], rows)
        return
    replication = status.replication_json()
    if output == "json":
        emit_json(replication)
        return
    columns = [
        "node_id",
        "directory_id",
        "log_end_offset",
        "lag",
        "last_fetch_timestamp_ms",
        "last_caught_up_timestamp_ms",
        "status",
    ]
    emit_table("replication", columns, [[row[c] for c in columns] for row in replication])
