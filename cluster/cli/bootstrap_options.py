"""Kafka's pair of bootstrap options for admin tools (KIP-919): `--bootstrap-server` (brokers)
or `--bootstrap-controller` (controllers), exactly one of them (cluster.client.bootstrap sends)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from cluster.output import EXIT_USAGE, fail


def bootstrap_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Kafka's pair for admin tools (KIP-919): `--bootstrap-server` (brokers) or
    `--bootstrap-controller` (controllers); `chosen_bootstrap` picks the one given."""
    command = click.option(
        "--bootstrap-controller",
        default=None,
        help="controller host:port[,host:port...] (KIP-919)",
    )(command)
    return click.option(
        "--bootstrap-server", default=None, help="broker host:port[,host:port...]"
    )(command)


def chosen_bootstrap(bootstrap_server: str | None, bootstrap_controller: str | None) -> str:
    if (bootstrap_server is None) == (bootstrap_controller is None):
        fail("exactly one of --bootstrap-server or --bootstrap-controller is required", EXIT_USAGE)
    return bootstrap_server or bootstrap_controller or ""
