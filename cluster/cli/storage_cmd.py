"""`minikraft storage random-uuid | format | info` (CLI.md "Storage", KIP-856 / KIP-853)."""

from __future__ import annotations

import uuid

import click

from cluster.launch.node_entrypoint import parse_voters
from cluster.output import EXIT_USAGE, emit_json, emit_table, fail, output_option
from kafkawire.config import ConfigError, NodeConfig
from kafkawire.uuids import random_directory_id
from raft.core.control_records import Voter, bootstrap_snapshot
from raft.core.replica_key import uuid_from_str, uuid_to_str
from raft.runtime.meta_properties import (
    AlreadyFormattedError,
    format_directories,
    random_uuid_str,
    storage_info,
)


@click.group()
def storage() -> None:
    """Format and inspect log directories."""


@storage.command("random-uuid")
def random_uuid() -> None:
    """Print a new UUID in Kafka's 22-char base64url form (for --cluster-id)."""
    click.echo(random_uuid_str())


@storage.command("format")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
@click.option("--cluster-id", required=True)
@click.option("--standalone", is_flag=True, help="bootstrap a quorum of one voter: this node")
@click.option("--initial-controllers", default=None, help="id@host:port:directory-id,...")
@click.option("--no-initial-controllers", is_flag=True, help="join later as an observer")
@click.option("--ignore-formatted", is_flag=True, help="skip directories already formatted")
@output_option
def format_cmd(
    config_path: str,
    cluster_id: str,
    standalone: bool,
    initial_controllers: str | None,
    no_initial_controllers: bool,
    ignore_formatted: bool,
    output: str,
) -> None:
    """Write meta.properties (with a fresh directory id) into every log directory."""
    try:
        config = NodeConfig.from_file(config_path)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    try:
        uuid_from_str(cluster_id)
    except ValueError:
        fail(
            f"--cluster-id {cluster_id!r} is not a UUID (use `minikraft storage random-uuid`)",
            EXIT_USAGE,
        )
    chosen = sum([standalone, initial_controllers is not None, no_initial_controllers])
    is_controller = "controller" in config.roles
    if chosen > 1:
        fail(
            "--standalone, --initial-controllers and --no-initial-controllers exclude each other",
            EXIT_USAGE,
        )
    if is_controller and chosen == 0:
        fail(
            "a controller needs one of --standalone, --initial-controllers or "
            "--no-initial-controllers",
            EXIT_USAGE,
        )
    metadata_directory_id: uuid.UUID | None = None
    bootstrap: bytes | None = None
    if is_controller and standalone:
        listener = config.controller_listener()
        assert listener is not None  # validated by NodeConfig
        metadata_directory_id = random_directory_id()
        voters = [Voter(config.node_id, metadata_directory_id, {listener.name: listener.address})]
        bootstrap = bootstrap_snapshot(voters)
    elif is_controller and initial_controllers is not None:
        try:
            voters = parse_voters(initial_controllers, "--initial-controllers")
        except ConfigError as exc:
            raise click.BadParameter(str(exc)) from exc
        mine = [v for v in voters if v.voter_id == config.node_id]
        if not mine:
            fail(f"node.id {config.node_id} is not in --initial-controllers", EXIT_USAGE)
        metadata_directory_id = mine[0].voter_directory_id
        bootstrap = bootstrap_snapshot(voters)
    try:
        formatted = format_directories(
            config.node_id,
            cluster_id,
            config.log_dirs,
            config.metadata_log_dir,
            metadata_directory_id=metadata_directory_id,
            ignore_formatted=ignore_formatted,
            bootstrap_voters_raw_batches=bootstrap,
        )
    except AlreadyFormattedError as exc:
        fail(f"{exc} (use --ignore-formatted to skip formatted directories)")
    rows = [
        {"path": str(d.path), "directory_id": uuid_to_str(d.directory_id), "formatted": d.formatted}
        for d in formatted
    ]
    if output == "json":
        emit_json({"cluster_id": cluster_id, "node_id": config.node_id, "directories": rows})
    else:
        for row in rows:
            verb = "Formatted" if row["formatted"] else "Skipped (already formatted)"
            click.echo(f"{verb} {row['path']} with directory.id {row['directory_id']}")


@storage.command("info")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
@output_option
def info(config_path: str, output: str) -> None:
    """Show what is formatted where, with directory ids."""
    try:
        config = NodeConfig.from_file(config_path)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    data = storage_info(config.log_dirs, config.metadata_log_dir)
    if output == "json":
        emit_json(data)
        return
    emit_table(
        f"cluster {data.get('cluster_id')} node {data.get('node_id')}",
        ["path", "directory id", "formatted", "metadata"],
        [
            [d["path"], d["directory_id"], d["formatted"], d["metadata"]]
            for d in data["directories"]
        ],
    )
