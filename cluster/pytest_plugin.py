"""A minikraft cluster for a user's own pytest suite, in one line (the `pytest11` entry point
`minikraft`, loaded wherever minikraft is installed), as Testcontainers gives Kafka users:

    def test_roundtrip(minikraft_bootstrap_servers):
        producer = Producer({"bootstrap.servers": minikraft_bootstrap_servers})

`minikraft_cluster` (session scope) starts the cluster on first use, each node its own process
on 127.0.0.1 (forked from one warm interpreter, cluster/launch/fork_server.py), waits until it
is ready, and stops every process by pid at the end of the session;
it can kill -9, stop and restart a node by id. Its layout comes from ini options (pytest.ini,
pyproject's [tool.pytest.ini_options]) or the same options on the command line, which win:

    minikraft_controllers / --minikraft-controllers        1
    minikraft_brokers / --minikraft-brokers                1
    minikraft_controller_ids, minikraft_broker_ids         e.g. 0,1,2 (sets the count)
    minikraft_controller_ports, minikraft_broker_ports     e.g. 9092,9095,9098 (else free ports)
    minikraft_set / --minikraft-set                        k=v for every node (one a line)
    minikraft_node_set / --minikraft-node-set              ID:k=v for one node (one a line)
    minikraft_timeout_s / --minikraft-timeout-s            60 (start-up and restarts)

Under pytest-xdist each worker starts its own cluster: give no fixed ports there.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the node code is imported when a test first asks for a cluster
    from cluster.launch.local_cluster import LocalCluster, NodeSpec

_OPTIONS: dict[str, tuple[str, str, str | None]] = {
    # ini name: (ini type, help, default)
    "minikraft_controllers": ("string", "number of controllers (default 1)", None),
    "minikraft_brokers": ("string", "number of brokers (default 1)", None),
    "minikraft_controller_ids": ("string", "the controllers' node ids, e.g. 1,2,3", None),
    "minikraft_broker_ids": ("string", "the brokers' node ids, e.g. 0,1,2", None),
    "minikraft_controller_ports": ("string", "each controller's port, in id order", None),
    "minikraft_broker_ports": ("string", "each broker's port, in id order, e.g. 9092,9095", None),
    "minikraft_set": ("linelist", "k=v properties for every node", None),
    "minikraft_node_set": ("linelist", "ID:k=v properties for one node", None),
    "minikraft_timeout_s": ("string", "seconds to wait for start-up and restarts", "60"),
}
DEFAULT_CONTROLLERS = 1
DEFAULT_BROKERS = 1


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minikraft", "a local minikraft (Kafka) cluster for tests")
    for name, (kind, help_text, default) in _OPTIONS.items():
        parser.addini(name, help_text, type=kind, default=default)  # type: ignore[arg-type]
        flag = "--" + name.replace("_", "-")
        if kind == "linelist":
            group.addoption(flag, action="append", dest=name, default=None, help=help_text)
        else:
            group.addoption(flag, dest=name, default=None, help=help_text)


def _value(config: pytest.Config, name: str) -> str | list[str] | None:
    """The command line's value, else the ini file's (None / [] when neither gives one)."""
    given = config.getoption(name)
    return given if given is not None else config.getini(name)


def _text(config: pytest.Config, name: str) -> str | None:
    value = _value(config, name)
    return value if isinstance(value, str) and value.strip() else None


class MinikraftCluster:
    """The running cluster a test gets: its addresses, and its nodes by id."""

    def __init__(self, cluster: LocalCluster, timeout_s: float) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s

    @property
    def bootstrap_servers(self) -> str:
        """The brokers' addresses, for a client's `bootstrap.servers`."""
        return self.cluster.bootstrap_server

    @property
    def bootstrap_controllers(self) -> str:
        """The controllers' addresses (Kafka's `--bootstrap-controller`, KIP-919)."""
        return self.cluster.bootstrap_controller

    @property
    def broker_ids(self) -> list[int]:
        return [b.node_id for b in self.cluster.brokers]

    @property
    def controller_ids(self) -> list[int]:
        return [c.node_id for c in self.cluster.controllers]

    @property
    def dir(self) -> Path:
        return self.cluster.dir

    def node(self, node_id: int) -> NodeSpec:
        return self.cluster.node(str(node_id))

    def address(self, node_id: int) -> str:
        return self.node(node_id).address

    def is_running(self, node_id: int) -> bool:
        from cluster.launch.local_cluster import is_running

        return is_running(self.node(node_id))

    def kill(self, node_id: int) -> None:
        """kill -9 the node (no clean shutdown) and wait until its process is gone."""
        self.cluster.kill(self.node(node_id), signal.SIGKILL)

    def stop(self, node_id: int) -> None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL if it has not exited in time."""
        from cluster.launch.local_cluster import wait_exit

        spec = self.node(node_id)
        self.cluster.kill(spec, signal.SIGTERM)
        if spec.pid is not None and not wait_exit(spec.pid, self.timeout_s):
            self.kill(node_id)

    def start(self, node_id: int) -> None:
        """Start the node again on its own data and wait until it is back (a broker registered
        and unfenced, a controller answering with a leader in the quorum)."""
        from cluster.launch.readiness import wait_node_ready

        spec = self.node(node_id)
        if not self.is_running(node_id):
            self.cluster.start_node(spec)
            self.cluster.write_cluster_file()  # `minikraft down --dir` finds the new pid
        asyncio.run(wait_node_ready(self.cluster, spec.name, self.timeout_s))

    def restart(self, node_id: int) -> None:
        """A clean stop, then start (kill() first for a crash)."""
        self.stop(node_id)
        self.start(node_id)


def _plan(config: pytest.Config, directory: Path) -> LocalCluster:
    from cluster.launch.layout import (
        parse_ids,
        parse_node_setting,
        parse_ports,
        parse_setting,
        plan_layout,
    )
    from cluster.launch.local_cluster import LocalCluster

    def ints(name: str, parse: Callable[[str, str], tuple[int, ...]]) -> tuple[int, ...] | None:
        text = _text(config, name)
        return None if text is None else parse(text, name)

    def count(name: str) -> int | None:
        text = _text(config, name)
        return None if text is None else int(text)

    settings = _value(config, "minikraft_set") or []
    node_settings = _value(config, "minikraft_node_set") or []
    layout = plan_layout(
        controllers=count("minikraft_controllers"),
        brokers=count("minikraft_brokers"),
        controller_ids=ints("minikraft_controller_ids", parse_ids),
        broker_ids=ints("minikraft_broker_ids", parse_ids),
        controller_ports=ints("minikraft_controller_ports", parse_ports),
        broker_ports=ints("minikraft_broker_ports", parse_ports),
        node_settings=[parse_node_setting(s, "minikraft_node_set") for s in node_settings],
        default_controllers=DEFAULT_CONTROLLERS,
        default_brokers=DEFAULT_BROKERS,
    )
    overrides = dict(parse_setting(s, "minikraft_set") for s in settings)
    return LocalCluster.plan(directory, base_port=0, overrides=overrides, layout=layout)


@pytest.fixture(scope="session")
def minikraft_cluster(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MinikraftCluster]:
    """A cluster for the whole session, started on first use and stopped (every process, by
    pid) when the session ends, pass or fail."""
    from cluster.launch import fork_server
    from cluster.launch.layout import LayoutError
    from cluster.launch.readiness import wait_until_ready

    try:
        cluster = _plan(pytestconfig, tmp_path_factory.mktemp("minikraft"))
        refused = None
    except (LayoutError, ValueError) as exc:
        refused = f"minikraft: {exc}"
    if refused is not None:  # an option's value: say which, no traceback
        pytest.fail(refused, pytrace=False)
    timeout_s = float(_text(pytestconfig, "minikraft_timeout_s") or 60)
    # The nodes are forked from one interpreter that imported their code once, as minikraft's
    # own suite does (cluster/launch/fork_server.py): six execs would each import it again,
    # 1.1-1.5 s of CPU apiece, most of a cold start on two cores (issue 36's Ready line).
    own_server = fork_server.active() is None
    if own_server:
        fork_server.enable()
    cluster.format()
    try:
        cluster.start()
        asyncio.run(wait_until_ready(cluster, timeout_s))
        yield MinikraftCluster(cluster, timeout_s)
    finally:
        cluster.stop()
        if own_server:  # after the stop: restarts during the session fork too
            fork_server.disable()


@pytest.fixture(scope="session")
def minikraft_bootstrap_servers(minikraft_cluster: MinikraftCluster) -> str:
    """The brokers' addresses, "host:port,host:port", for `bootstrap.servers`."""
    return minikraft_cluster.bootstrap_servers


@pytest.fixture(scope="session")
def minikraft_bootstrap_controllers(minikraft_cluster: MinikraftCluster) -> str:
    """The controllers' addresses, for admin clients bootstrapped on controllers (KIP-919)."""
    return minikraft_cluster.bootstrap_controllers
