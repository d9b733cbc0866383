"""`minikraft controller --config F`: run one node process in the foreground until SIGTERM
(clean) or SIGKILL (not). Without --config the node reads Kafka-style KAFKA_* environment, and
`--format-if-needed` formats its unformatted directories first (docker-compose.yml)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from cluster.output import EXIT_FAILED, EXIT_USAGE, fail
from kafkawire.config import ConfigError, NodeConfig
from kafkawire.loop import run
from raft.runtime.meta_properties import (
    StorageError,
)


def _setup_logging(config: NodeConfig, role: str) -> None:
    level = getattr(logging, str(config.get("log.level", "INFO")).upper(), logging.INFO)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            f"%(asctime)s %(levelname)s [{role}-{config.node_id}] %(name)s: %(message)s"
        )
    )
    root.addHandler(handler)
    root.setLevel(level)


def _load(config_path: str | None, role: str, format_if_needed: bool = False) -> NodeConfig:
    from cluster.launch import node_entrypoint

    try:
        config = node_entrypoint.load_node_config(config_path)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    if role not in config.roles:
        fail(f"process.roles does not include {role}", EXIT_USAGE)
    if format_if_needed:
        try:
            node_entrypoint.format_if_needed(config)
        except ConfigError as exc:
            fail(str(exc), EXIT_USAGE)
        except StorageError as exc:
            fail(str(exc), EXIT_FAILED)
    return config


_CONFIG_HELP = "properties file (default: KAFKA_* environment variables)"
_FORMAT_HELP = "format unformatted directories first (CLUSTER_ID, KAFKA_INITIAL_CONTROLLERS)"


def _node_command(function: Callable[[str | None, bool], None]) -> click.Command:
    """A node's command: --config and --format-if-needed, the same for both roles."""
    function = click.option("--format-if-needed", is_flag=True, help=_FORMAT_HELP)(function)
    function = click.option("--config", "config_path", default=None,
                            type=click.Path(dir_okay=False), help=_CONFIG_HELP)(function)
    return click.command()(function)


def _run_node(
    config_path: str | None, role: str, format_if_needed: bool,
    build: Callable[[NodeConfig], Any],
) -> None:
    """Load the config, log as `role-id`, build the node and run it until it stops."""
    config = _load(config_path, role, format_if_needed)
    _setup_logging(config, role)
    try:
        node = build(config)
    except StorageError as exc:  # unformatted, another cluster's or another node's (seed 003)
        fail(str(exc), EXIT_FAILED)
    except ConfigError as exc:  # a setting the node reads as it builds (a garbled true/false)
        fail(str(exc), EXIT_USAGE)
    run(node.run())


@_node_command
def controller(config_path: str | None, format_if_needed: bool) -> None:
    """Run one controller process (a KRaft voter or observer) in the foreground."""
    from cluster.bench.raft_workload import raft_bench_routes
    from controller.runtime.controller_node import ControllerNode

    _run_node(config_path, "controller", format_if_needed,
              lambda config: ControllerNode(config, http_routes=raft_bench_routes))


@_node_command
def broker(config_path: str | None, format_if_needed: bool) -> None:
    """Run one broker process (a metadata observer hosting partitions) in the foreground."""
    from broker.runtime.broker_node import BrokerNode

    _run_node(config_path, "broker", format_if_needed, BrokerNode)
