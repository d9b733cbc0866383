"""`minikraft metadata-quorum --bootstrap-controller H:P describe --status | --replication`,
`add-controller | remove-controller` (KIP-853) and `add-voter | remove-voter` (seed 003)."""

from __future__ import annotations

import asyncio
import uuid

import click

from cluster.client.admin_client import add_voter, describe_quorum, remove_voter
from cluster.output import EXIT_FAILED, EXIT_USAGE, emit_json, emit_table, fail, output_option
from kafkawire.config import ConfigError, NodeConfig
from kafkawire.errors import Errors, KafkaError
from raft.core.replica_key import ReplicaKey, uuid_from_str, uuid_to_str
from raft.runtime.meta_properties import read_meta_properties
from storage.runtime.fsutil import StorageError

TIMEOUT_MS_OPTION = click.option(
    "--timeout-ms",
    type=click.IntRange(min=1),
    default=30_000,
    show_default=True,
    help="how long the leader may wait for catch-up and commit (rule 5)",
)


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
        status = asyncio.run(
            describe_quorum(ctx.obj["bootstrap_controller"], with_cluster_id=mode == "status")
        )
    except KafkaError as exc:
        fail(f"{exc.error.name}: {exc.message or 'no controller answered'}", EXIT_USAGE)
    if mode == "status":
        data = status.status_json(cluster_id=status.cluster_id or None)
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
            [
                "CouldBeVoters",
                ", ".join(f"{o['id']}@{o['directory_id']}" for o in data["could_be_voters"]),
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


def _parse_uuid(text: str, option: str) -> uuid.UUID:
    try:
        return uuid_from_str(text)
    except ValueError:
        fail(f"{option} {text!r} is not a UUID", EXIT_USAGE)


def _run_change(
    bootstrap: str,
    key: ReplicaKey,
    add: bool,
    listeners: dict[str, str] | None,
    timeout_ms: int,
    output: str,
) -> None:
    """Send the change to the leader; Kafka's error name and exit 1 when it refuses."""
    try:
        if add:
            asyncio.run(
                add_voter(bootstrap, key.id, key.directory_id, listeners, timeout_ms=timeout_ms)
            )
        else:
            asyncio.run(remove_voter(bootstrap, key.id, key.directory_id, timeout_ms=timeout_ms))
    except KafkaError as exc:
        # CLI.md: 2 when no controller could be reached, 1 when the leader refused.
        code = EXIT_USAGE if exc.error == Errors.NETWORK_EXCEPTION else EXIT_FAILED
        fail(f"{exc.error.name}: {exc.message or 'no controller answered'}", code)
    verb = "added" if add else "removed"
    if output == "json":
        emit_json(
            {"voter_id": key.id, "directory_id": uuid_to_str(key.directory_id), "result": verb}
        )
    else:
        click.echo(f"Voter {key} {verb}.")


@metadata_quorum.command("add-controller")
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="the new controller's properties (formatted storage)",
)
@TIMEOUT_MS_OPTION
@output_option
@click.pass_context
def add_controller(ctx: click.Context, config_path: str, timeout_ms: int, output: str) -> None:
    """Add a controller as a voter: id, directory id and endpoint from its config and storage."""
    try:
        config = NodeConfig.from_file(config_path)
        meta = read_meta_properties(config.metadata_log_dir)
    except (ConfigError, StorageError) as exc:
        fail(str(exc), EXIT_USAGE)
    listener = config.controller_listener()
    if listener is None or "controller" not in config.roles:
        fail(f"{config_path} is not a controller's config", EXIT_USAGE)
    if meta is None:
        fail(
            f"{config.metadata_log_dir} is not formatted (run `minikraft storage format`)",
            EXIT_USAGE,
        )
    key = ReplicaKey(config.node_id, meta.directory_id)
    _run_change(
        ctx.obj["bootstrap_controller"],
        key,
        True,
        {listener.name: listener.address},
        timeout_ms,
        output,
    )


@metadata_quorum.command("remove-controller")
@click.option("--controller-id", required=True, type=int)
@click.option("--controller-directory-id", required=True, help="22-char directory id")
@TIMEOUT_MS_OPTION
@output_option
@click.pass_context
def remove_controller(
    ctx: click.Context,
    controller_id: int,
    controller_directory_id: str,
    timeout_ms: int,
    output: str,
) -> None:
    """Remove the voter with exactly this id and directory id."""
    key = ReplicaKey(
        controller_id, _parse_uuid(controller_directory_id, "--controller-directory-id")
    )
    _run_change(ctx.obj["bootstrap_controller"], key, False, None, timeout_ms, output)


def _voter_command(name: str, add: bool, whose: str, help_text: str) -> None:
    """Seed 003's add-voter and remove-voter: the same options, one change each."""

    @metadata_quorum.command(name, help=help_text)
    @click.option("--replica-id", required=True, type=int)
    @click.option("--replica-uuid", required=True, help=f"the {whose}'s directory id")
    @TIMEOUT_MS_OPTION
    @output_option
    @click.pass_context
    def command(
        ctx: click.Context, replica_id: int, replica_uuid: str, timeout_ms: int, output: str
    ) -> None:
        key = ReplicaKey(replica_id, _parse_uuid(replica_uuid, "--replica-uuid"))
        _run_change(ctx.obj["bootstrap_controller"], key, add, None, timeout_ms, output)


_voter_command(
    "add-voter",
    True,
    "observer",
    "Seed 003: promote a replica fetching as an observer (the leader knows its endpoint).",
)
_voter_command(
    "remove-voter",
    False,
    "voter",
    "Seed 003: remove the voter with exactly this id and directory id.",
)
