"""`minikraft controller --config F`: run one node process in the foreground until SIGTERM
(clean) or SIGKILL (not)."""

from __future__ import annotations

import logging
import sys

import click

from cluster.cli.output import EXIT_FAILED, EXIT_USAGE, fail
from cluster.config import ConfigError, NodeConfig
from cluster.net.loop import run
from raft.runtime.meta_properties import InconsistentClusterIdError, UnformattedError


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


def _load(config_path: str) -> NodeConfig:
    try:
        return NodeConfig.from_file(config_path)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)


@click.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
def controller(config_path: str) -> None:
    """Run one controller process (a KRaft voter or observer) in the foreground."""
    from controller.runtime.controller_node import ControllerNode

    config = _load(config_path)
    if "controller" not in config.roles:
        fail("process.roles does not include controller", EXIT_USAGE)
    _setup_logging(config, "controller")
    try:
        node = ControllerNode(config)
    except (UnformattedError, InconsistentClusterIdError) as exc:
        fail(str(exc), EXIT_FAILED)
    run(node.run())


@click.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
def broker(config_path: str) -> None:
    """Run one broker process (a metadata observer hosting partitions) in the foreground."""
    from broker.runtime.broker_node import BrokerNode

    config = _load(config_path)
    if "broker" not in config.roles:
        fail("process.roles does not include broker", EXIT_USAGE)
    _setup_logging(config, "broker")
    try:
        node = BrokerNode(config)
    except (UnformattedError, InconsistentClusterIdError) as exc:
        fail(str(exc), EXIT_FAILED)
    run(node.run())
