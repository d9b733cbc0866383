"""A node's config from a file or from Kafka-style environment, and "format on first start".

This is the container entry point's logic (docker-compose.yml): `minikraft controller
--format-if-needed` with no --config reads `KAFKA_*` variables (KAFKA_NODE_ID -> node.id) and
formats the node's directories that are not formatted yet, as Kafka's image runs
`kafka-storage.sh format --ignore-formatted` before the server. The format inputs are the same
keys a properties file can carry: `CLUSTER_ID` (or `cluster.id`), `KAFKA_INITIAL_CONTROLLERS`
(`initial.controllers`, KIP-853's `id@host:port:directory-id,...`) or `KAFKA_STANDALONE=true`
(`standalone`). A controller with neither joins as an observer (`--no-initial-controllers`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafkawire.config import ConfigError, NodeConfig, parse_host_port
from kafkawire.uuids import random_directory_id
from raft.core.control_records import Voter, bootstrap_snapshot
from raft.core.replica_key import uuid_from_str
from raft.runtime.meta_properties import FormattedDirectory, format_directories
from storage.runtime.power_loss import DISK_MODE_KEY, set_default_disk_mode

CLUSTER_ID_ENV = "CLUSTER_ID"
INITIAL_CONTROLLERS_KEY = "initial.controllers"
STANDALONE_KEY = "standalone"


def load_node_config(
    config_path: str | Path | None, environ: Mapping[str, str] | None = None
) -> NodeConfig:
    """The properties file when given, else the KAFKA_* environment (ConfigError if unusable).
    Also sets this process's disk mode (`minikraft.disk.mode`, storage/runtime/power_loss.py)."""
    if config_path is not None:
        config = NodeConfig.from_file(config_path)
    else:
        env = os.environ if environ is None else environ
        if "KAFKA_NODE_ID" not in env:
            raise ConfigError("no --config and no KAFKA_NODE_ID in the environment")
        config = NodeConfig.from_env(env)
    try:
        set_default_disk_mode(config.get(DISK_MODE_KEY))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return config


def parse_voters(text: str, option: str = INITIAL_CONTROLLERS_KEY) -> list[Voter]:
    """`1@host:9093:<dir-uuid>,2@...` (KIP-853's initial controllers, from `option`: the config
    key or the CLI's --initial-controllers) -> voters (ConfigError on a malformed entry)."""
    voters = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        node, at, rest = item.partition("@")
        host_port, colon, dir_text = rest.rpartition(":")
        if not at or not colon or not node.isdigit():
            raise ConfigError(f"{option}: expected id@host:port:directory-id, got {item!r}")
        try:
            host, port = parse_host_port(host_port)
            directory_id = uuid_from_str(dir_text)
        except (ConfigError, ValueError) as exc:
            raise ConfigError(f"{option}: {item!r}: {exc}") from None
        voters.append(Voter(int(node), directory_id, {"CONTROLLER": f"{host}:{port}"}))
    if len({v.voter_id for v in voters}) != len(voters):
        raise ConfigError(f"{option}: a controller id appears twice")
    return voters


@dataclass(frozen=True)
class FormatPlan:
    cluster_id: str
    metadata_directory_id: uuid.UUID | None
    bootstrap: bytes | None


def plan_format(config: NodeConfig, environ: Mapping[str, str] | None = None) -> FormatPlan:
    env = os.environ if environ is None else environ
    cluster_id = env.get(CLUSTER_ID_ENV) or config.get("cluster.id")
    if not cluster_id:
        raise ConfigError(f"formatting needs {CLUSTER_ID_ENV} (or cluster.id)")
    if "controller" not in config.roles:
        return FormatPlan(cluster_id, None, None)
    initial = config.get(INITIAL_CONTROLLERS_KEY, "") or ""
    standalone = (config.get(STANDALONE_KEY, "") or "").lower() in ("true", "1", "yes")
    if initial and standalone:
        raise ConfigError("initial.controllers and standalone exclude each other")
    if standalone:
        listener = config.controller_listener()
        assert listener is not None  # NodeConfig.validate requires it for a controller
        directory_id = random_directory_id()
        voters = [Voter(config.node_id, directory_id, {listener.name: listener.address})]
        return FormatPlan(cluster_id, directory_id, bootstrap_snapshot(voters))
    if initial:
        voters = parse_voters(initial)
        mine = [v for v in voters if v.voter_id == config.node_id]
        if not mine:
            raise ConfigError(f"node.id {config.node_id} is not in initial.controllers")
        return FormatPlan(cluster_id, mine[0].voter_directory_id, bootstrap_snapshot(voters))
    return FormatPlan(cluster_id, None, None)


def format_if_needed(
    config: NodeConfig, environ: Mapping[str, str] | None = None
) -> list[FormattedDirectory]:
    """Format every directory of this node that has no meta.properties; formatted ones are kept
    as they are (`--ignore-formatted`), so a restart never rewrites a log."""
    plan = plan_format(config, environ)
    try:
        return format_directories(
            config.node_id,
            plan.cluster_id,
            config.log_dirs,
            config.metadata_log_dir,
            metadata_directory_id=plan.metadata_directory_id,
            ignore_formatted=True,
            bootstrap_voters_raw_batches=plan.bootstrap,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
