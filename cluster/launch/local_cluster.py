"""A local cluster of separate processes under one directory (`minikraft up` / `down`).

Layout under D (CLI.md): `cluster.json`; per node a data directory `controller-N/` (what a failed
disk loses), its properties file under `config/` (kept outside the data directory), its output
under `logs/`. Processes are started in their own session and stopped by the pid recorded in
cluster.json, never by a name match; a pid is only signalled while it still started at the
recorded tick (or, in a cluster.json that records no start time, while its command line names
that node's config file), so a recycled pid is never hit. Nodes are exec'd, or forked from a
warm interpreter once cluster/launch/fork_server.py is enabled (the test suite does).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cluster.launch import fork_server
from cluster.launch.layout import Layout, LayoutError, plan_layout
from cluster.launch.netns import NetnsPlan
from kafkawire.config import render_properties
from kafkawire.uuids import random_directory_id
from raft.core.control_records import Voter, bootstrap_snapshot
from raft.core.replica_key import uuid_to_str
from raft.runtime.meta_properties import format_directories, read_meta_properties

CLUSTER_FILE = "cluster.json"
LOOPBACK = "loopback"
NETNS = "netns"
NETWORKS = (LOOPBACK, NETNS)
# A docker compose project's containers (cluster/launch/compose_project.py writes its
# cluster.json; `minikraft up`/`down` leave it to `docker compose`).
COMPOSE = "compose"


@dataclass
class NodeSpec:
    role: str  # "controller" | "broker"
    node_id: int
    host: str
    port: int
    http_port: int
    dir: str
    config: str
    log_file: str
    pid: int | None = None
    directory_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    # The pid's start time (clock ticks since boot, /proc/PID/stat): with the pid, names this
    # process and no later one that reuses the pid (is_running).
    start_time: int | None = None

    @property
    def name(self) -> str:
        return f"{self.role}-{self.node_id}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def to_json(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "address": self.address,
            "http": f"{self.host}:{self.http_port}",
            "pid": self.pid,
            "dir": self.dir,
            "config": self.config,
            "log_file": self.log_file,
            "directory_id": self.directory_id,
        }


# "LO-HI": free_ports picks from these ports instead of asking the OS for ephemeral ones. Below
# the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default) no client
# connection's source port can take a picked port before its node binds it, and processes that
# pick at once (the test suite's workers) can be given disjoint ranges (tests/conftest.py).
PORT_RANGE_ENV = "MINIKRAFT_PORT_RANGE"


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Ports free now (bound together, so distinct); a small race until their node binds them
    is accepted. From MINIKRAFT_PORT_RANGE when set, else the OS's ephemeral ports."""
    span = os.environ.get(PORT_RANGE_ENV)
    candidates: list[int] = [0] * count
    if span:
        low, _, high = span.partition("-")
        candidates = list(range(int(low), int(high) + 1))
        random.SystemRandom().shuffle(candidates)
    sockets: list[socket.socket] = []
    try:
        for port in candidates:
            if len(sockets) == count:
                break
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((host, port))
            except OSError:
                sock.close()  # in use (or in TIME_WAIT): try the next one
                continue
            sockets.append(sock)
        if len(sockets) < count:
            raise OSError(f"no {count} free ports in {PORT_RANGE_ENV}={span}")
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def ports_in_use(ports: Iterable[int], host: str = "127.0.0.1") -> list[int]:
    """The ports another process holds now (a node given one would fail to bind it)."""
    busy = []
    for port in sorted(ports):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # As the node's listener binds: a port only in TIME_WAIT is free to it.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                busy.append(port)
    return busy


@dataclass
class LocalCluster:
    dir: Path
    cluster_id: str
    controllers: list[NodeSpec]
    brokers: list[NodeSpec]
    host: str = "127.0.0.1"
    network: str = LOOPBACK  # LOOPBACK: every node on 127.0.0.1; NETNS: cluster/launch/netns.py
    netns_subnet: str | None = None
    # COMPOSE: {"project", "file", "docker_host"} (cluster/chaos/compose_faults.py uses them).
    compose: dict[str, str] | None = None

    # -- planning --------------------------------------------------------------------------

    @classmethod
    def plan(
        cls,
        directory: Path,
        *,
        controllers: int = 3,
        brokers: int = 0,
        base_port: int = 19090,
        overrides: dict[str, str] | None = None,
        network: str = LOOPBACK,
        layout: Layout | None = None,
    ) -> LocalCluster:
        """Nodes by `layout` (ids, ports, each node's own settings; cluster/launch/layout.py),
        else `controllers` with ids 1.. and `brokers` with ids 101..; ports not given come
        from `base_port`'s scheme, or, with base_port 0, are free ports."""
        directory = directory.resolve()
        host = "127.0.0.1"
        plan = NetnsPlan.for_directory(directory) if network == NETNS else None
        if layout is None:
            layout = plan_layout(controllers=controllers, brokers=brokers)
        controllers, brokers = len(layout.controller_ids), len(layout.broker_ids)
        if base_port == 0:
            explicit = layout.explicit_ports()
            picked = [
                p for p in free_ports(2 * (controllers + brokers) + len(explicit))
                if p not in explicit
            ]
            ports = picked[: 2 * (controllers + brokers)]
        else:
            ports = [base_port + i for i in range(1, controllers + 1)]
            ports += [base_port + 100 + j for j in range(1, brokers + 1)]
            ports += [base_port + 200 + i for i in range(1, controllers + 1)]
            ports += [base_port + 300 + j for j in range(1, brokers + 1)]
        rpc_ports, http_ports = ports[: controllers + brokers], ports[controllers + brokers :]
        rpc_ports = [*(layout.controller_ports or rpc_ports[:controllers]),
                     *(layout.broker_ports or rpc_ports[controllers:])]
        if len(set(rpc_ports + http_ports)) != len(rpc_ports + http_ports):
            raise LayoutError(
                f"a given port is also one --base-port {base_port} gives another node "
                "(--base-port 0 picks free ones)"
            )
        from raft.runtime.meta_properties import random_uuid_str

        cluster = cls(
            directory, random_uuid_str(), [], [], host, network,
            None if plan is None else str(plan.subnet),
        )

        def node_host(index: int) -> str:
            # netns: each node its own address on the cluster's bridge.
            return host if plan is None else plan.node_address(index)

        def settings(node_id: int) -> dict[str, str]:
            return {**(overrides or {}), **layout.node_settings.get(node_id, {})}

        for i, node_id in enumerate(layout.controller_ids):
            cluster.controllers.append(
                cluster._spec(
                    "controller", node_id, rpc_ports[i], http_ports[i], settings(node_id),
                    node_host(i),
                )
            )
        for j, node_id in enumerate(layout.broker_ids):
            k = controllers + j
            cluster.brokers.append(
                cluster._spec(
                    "broker", node_id, rpc_ports[k], http_ports[k], settings(node_id),
                    node_host(k),
                )
            )
        return cluster

    def _spec(
        self, role: str, node_id: int, port: int, http_port: int, extra: dict[str, str],
        host: str,
    ) -> NodeSpec:
        name = f"{role}-{node_id}"
        return NodeSpec(
            role=role,
            node_id=node_id,
            host=host,
            port=port,
            http_port=http_port,
            dir=str(self.dir / name),
            config=str(self.dir / "config" / f"{name}.properties"),
            log_file=str(self.dir / "logs" / f"{name}.log"),
            extra=dict(extra),
        )

    @property
    def bootstrap_controller(self) -> str:
        return ",".join(c.address for c in self.controllers)

    @property
    def bootstrap_server(self) -> str:
        """Every broker's address: a client's bootstrap.servers."""
        return ",".join(b.address for b in self.brokers)

    def node_properties(self, spec: NodeSpec) -> dict[str, str]:
        props = {
            "node.id": str(spec.node_id),
            "process.roles": spec.role,
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.bootstrap.servers": self.bootstrap_controller,
            "http.listener": f"{spec.host}:{spec.http_port}",
        }
        if spec.role == "controller":
            props["listeners"] = f"CONTROLLER://{spec.address}"
            props["metadata.log.dir"] = str(Path(spec.dir) / "metadata")
        else:
            props["listeners"] = f"PLAINTEXT://{spec.address}"
            props["log.dirs"] = str(Path(spec.dir) / "data")
            props["metadata.log.dir"] = str(Path(spec.dir) / "metadata")
            # The event journal lives outside the node's data directory (a wiped disk keeps it).
            props["minikraft.journal.dir"] = str(self.dir / "journal")
        props.update(spec.extra)
        return props

    # -- format and write ------------------------------------------------------------------

    def bootstrap_voters(self, standalone: bool = False) -> list[NodeSpec]:
        """The controllers a fresh quorum starts with: all of them (`storage format
        --initial-controllers`), or with standalone the first alone (`--standalone`; the others
        are formatted `--no-initial-controllers` and join by add-controller, KIP-853)."""
        return self.controllers[:1] if standalone else list(self.controllers)

    def format(self, standalone: bool = False) -> None:
        """Write configs, and format what is not formatted yet (a restart keeps its data)."""
        (self.dir / "config").mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        directory_ids = {c.node_id: random_directory_id() for c in self.controllers}
        first = self.bootstrap_voters(standalone)
        voters = [
            Voter(c.node_id, directory_ids[c.node_id], {"CONTROLLER": c.address}) for c in first
        ]
        bootstrap = bootstrap_snapshot(voters)
        bootstrapped = {c.node_id for c in first}
        for spec in self.controllers + self.brokers:
            props = self.node_properties(spec)
            Path(spec.config).write_text(render_properties(props))
            metadata_dir = Path(props["metadata.log.dir"])
            existing = read_meta_properties(metadata_dir) if metadata_dir.exists() else None
            if existing is not None:
                spec.directory_id = uuid_to_str(existing.directory_id)
                continue
            log_dirs = [Path(p) for p in props.get("log.dirs", "").split(",") if p]
            is_voter = spec.role == "controller" and spec.node_id in bootstrapped
            format_directories(
                spec.node_id,
                self.cluster_id,
                log_dirs,
                metadata_dir,
                metadata_directory_id=directory_ids[spec.node_id] if is_voter else None,
                ignore_formatted=True,
                bootstrap_voters_raw_batches=bootstrap if is_voter else None,
            )
            meta = read_meta_properties(metadata_dir)
            spec.directory_id = uuid_to_str(meta.directory_id) if meta else None

    def write_cluster_file(self) -> None:
        data: dict[str, Any] = {
            "cluster_id": self.cluster_id,
            "bootstrap_server": self.bootstrap_server,
            "bootstrap_controller": self.bootstrap_controller,
            "controllers": [c.to_json() for c in self.controllers],
            "brokers": [b.to_json() for b in self.brokers],
            "specs": [asdict(s) for s in self.controllers + self.brokers],
            "network": self.network,
        }
        if self.compose is not None:
            data["compose"] = self.compose
        plan = self.netns
        if plan is not None:
            data["netns"] = {
                "id": plan.id, "subnet": str(plan.subnet), "host_address": plan.host_address,
                "bridge": plan.bridge,
                "namespaces": {s.name: plan.namespace(s.name) for s in self.all_nodes()},
            }
        tmp = self.dir / (CLUSTER_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.dir / CLUSTER_FILE)

    @classmethod
    def load(cls, directory: Path) -> LocalCluster:
        path = directory / CLUSTER_FILE
        data = json.loads(path.read_text())
        specs = [NodeSpec(**s) for s in data["specs"]]
        netns = data.get("netns") or {}
        return cls(
            directory.resolve(),
            data["cluster_id"],
            [s for s in specs if s.role == "controller"],
            [s for s in specs if s.role == "broker"],
            network=data.get("network", LOOPBACK),
            netns_subnet=netns.get("subnet"),
            compose=data.get("compose"),
        )

    # -- network ---------------------------------------------------------------------------

    @property
    def netns(self) -> NetnsPlan | None:
        """The namespaces' names and addresses in netns mode (None on loopback)."""
        if self.network != NETNS:
            return None
        return NetnsPlan.for_directory(self.dir, self.netns_subnet)

    def create_network(self) -> None:
        """netns: the bridge and one namespace per node (what a crashed run left is removed
        first). Loopback: nothing to create."""
        plan = self.netns
        if plan is not None:
            plan.create([(s.name, s.node_id, s.host) for s in self.all_nodes()])

    def remove_network(self) -> list[str]:
        """Every namespace and link carrying this directory's id (netns only)."""
        plan = self.netns
        return [] if plan is None else plan.remove()

    # -- processes -------------------------------------------------------------------------

    @staticmethod
    def node_args(spec: NodeSpec) -> list[str]:
        """The `minikraft` arguments that run this node."""
        return [spec.role, "--config", spec.config]

    def command(self, spec: NodeSpec) -> list[str]:
        base = [sys.executable, "-m", "cluster.cli.main", *self.node_args(spec)]
        plan = self.netns
        return base if plan is None else plan.exec_prefix(spec.name) + base

    def start_node(self, spec: NodeSpec) -> int:
        Path(spec.log_file).parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        server = fork_server.active()
        if server is not None and self.netns is None:
            pid = server.spawn(self.node_args(spec), spec.log_file, env, os.getcwd())
        else:
            with open(spec.log_file, "ab") as out:
                pid = subprocess.Popen(
                    self.command(spec),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=env,
                ).pid
        spec.pid, spec.start_time = pid, process_start_time(pid)
        return pid

    def start(self) -> None:
        for spec in self.controllers + self.brokers:
            if not is_running(spec):
                self.start_node(spec)
        self.write_cluster_file()

    def node(self, name: str) -> NodeSpec:
        for spec in self.controllers + self.brokers:
            if spec.name == name or str(spec.node_id) == name:
                return spec
        raise KeyError(name)

    def kill(self, spec: NodeSpec, sig: int = signal.SIGKILL) -> None:
        """Signal a node by its recorded pid (only if that pid still runs this node)."""
        if spec.pid is not None and is_running(spec):
            send_signal(spec.pid, sig)
            if sig == signal.SIGKILL:
                wait_exit(spec.pid, 5.0)

    def stop(self, timeout_s: float = 10.0) -> list[str]:
        """SIGTERM the brokers and wait for them to exit, then the controllers; SIGKILL what is
        left after timeout_s (the controllers get at least CONTROLLER_STOP_FLOOR_S of their own).

        Kafka's order: a broker's controlled shutdown is granted by the active controller over
        heartbeats, so the controllers must still answer while the brokers stop. Signalled all at
        once, the brokers' shutdown heartbeats went to controllers that were stopping too, and at
        100,000 partitions `down` SIGKILLed two or three brokers (issue 35)."""
        deadline = time.monotonic() + timeout_s
        killed = terminate(self.brokers, timeout_s)
        remaining = max(deadline - time.monotonic(), CONTROLLER_STOP_FLOOR_S)
        return killed + terminate(self.controllers, remaining)

    def running(self) -> list[NodeSpec]:
        return [s for s in self.controllers + self.brokers if is_running(s)]

    def all_nodes(self) -> list[NodeSpec]:
        return self.controllers + self.brokers


CONTROLLER_STOP_FLOOR_S = 5.0


def terminate(specs: list[NodeSpec], timeout_s: float) -> list[str]:
    """SIGTERM those of specs still running, in order; SIGKILL any left after timeout_s.
    The names of the killed ones."""
    alive = [s for s in specs if is_running(s)]
    for spec in alive:
        send_signal(spec.pid, signal.SIGTERM)  # type: ignore[arg-type]
    deadline = time.monotonic() + timeout_s
    for spec in alive:
        wait_exit(spec.pid, max(0.0, deadline - time.monotonic()))  # type: ignore[arg-type]
    killed = []
    for spec in alive:
        if is_running(spec):
            send_signal(spec.pid, signal.SIGKILL)  # type: ignore[arg-type]
            wait_exit(spec.pid, 5.0)  # type: ignore[arg-type]
            killed.append(spec.name)
    return killed


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def is_running(spec: NodeSpec) -> bool:
    if spec.pid is None:
        return False
    try:
        pid, _status = os.waitpid(spec.pid, os.WNOHANG)
        # Our own child: waitpid is authoritative (its cmdline may not be readable mid-exec).
        return pid != spec.pid
    except ChildProcessError:
        pass  # not our child (started by an earlier `up`): fall back to /proc
    if spec.start_time is not None:
        # Not our child (an earlier `up`'s, or the fork server's): the same pid started at the
        # same tick is the same process; a recycled pid started later.
        same = process_start_time(spec.pid) == spec.start_time
    else:  # a cluster.json written before start times were recorded
        same = spec.config in _cmdline(spec.pid)
    return same and not _exited(spec.pid)


def process_start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (after the parenthesised command name, which may hold spaces)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def send_signal(pid: int, sig: int) -> None:
    """Signal a process is_running just named; one that ended since is what we wanted."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _exited(pid: int) -> bool:
    """Gone, a zombie, or being reaped ("X (dead)", brief: a parent that ignores SIGCHLD, as the
    fork server does, has the kernel reap at once, and /proc shows that state in between)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split()[1] in ("Z", "X")
    except (OSError, IndexError):
        return True
    return False


def wait_exit(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return True
        except ChildProcessError:
            if _exited(pid):
                return True
        time.sleep(0.02)
    return False
