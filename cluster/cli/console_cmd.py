"""`minikraft console --dir D [--host 127.0.0.1] [--port 8070] [--interval-s 1.0]
[--compose FILE [--project-name P]]`: serve the live console of the cluster under D
(cluster/console) until Ctrl-C. For a docker compose project, D is its data directory and its
`cluster.json` is (re)written from the engine first, as `minikraft chaos --compose` does."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import click

from cluster.launch.compose_project import (
    ComposeProjectError,
    describe_compose_cluster,
    recorded_compose,
)
from cluster.launch.local_cluster import CLUSTER_FILE
from cluster.output import EXIT_USAGE, fail


def run_console(directory: Path, host: str, port: int, interval_s: float) -> None:
    """Serve until Ctrl-C; an address already taken is one line and exit 2."""
    from cluster.console.runtime.server import serve

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(directory, host, port, interval_s))
    except OSError as exc:
        fail(f"cannot serve the console on {host}:{port}: {exc.strerror or exc}", EXIT_USAGE)


@click.command("console")
@click.option("--dir", "directory", required=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="the cluster directory (`minikraft up --dir D`)")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to bind; anything but loopback exposes the actions to the network")
@click.option("--port", default=8070, show_default=True, type=click.IntRange(0, 65535))
@click.option("--interval-s", default=1.0, show_default=True, type=click.FloatRange(0.1, 60),
              help="how often the nodes are polled (one status request each per interval)")
@click.option("--compose", "compose_file", default=None,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a docker compose project's file (--dir: its data directory)")
@click.option("--project-name", default=None,
              help="the compose project (default: COMPOSE_PROJECT_NAME, else the file's "
                   "directory name)")
def console(directory: Path, host: str, port: int, interval_s: float,
            compose_file: Path | None, project_name: str | None) -> None:
    """A live page: the quorum, brokers, every partition, the metadata log as it commits,
    timelines, faults to inject and guided scenarios."""
    if compose_file is not None or recorded_compose(directory) is not None:
        try:
            describe_compose_cluster(directory, compose_file, project_name)
        except (ComposeProjectError, OSError) as exc:
            fail(f"compose project: {exc}", EXIT_USAGE)
    if not (directory / CLUSTER_FILE).exists():
        fail(f"no cluster under {directory} ({CLUSTER_FILE} missing): "
             f"start one with `minikraft up --dir {directory} --detach`", EXIT_USAGE)
    run_console(directory.resolve(), host, port, interval_s)
