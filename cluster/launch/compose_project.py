"""A docker-compose.yml project running under a real Docker engine, seen from the host.

Compose v2 (`docker compose`) where the CLI has the plugin, else v1 (`docker-compose`, Debian
12's 1.29): both take the same file and label their containers the same way
(`com.docker.compose.project` / `.service`), so everything after `up` reads the engine itself
(`docker inspect`) and works with either.

`describe_nodes` turns the project's containers into the NodeSpecs a LocalCluster holds: the
node id and role from the container's KAFKA_* environment, the address its port is published
on (127.0.0.1) and its HTTP listener's, the host directory bind-mounted at the node's data path, and the container's
main process as the pid (a container's processes are host processes; the pid with its start
time names this incarnation, as for local nodes). `write_cluster_file` writes them as
`cluster.json` (network "compose") under the data directory, so `minikraft chaos` and
`minikraft audit --dir` take a compose cluster as they take a local one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.launch.local_cluster import (
    CLUSTER_FILE,
    COMPOSE,
    LocalCluster,
    NodeSpec,
    process_start_time,
)

DATA_MOUNT = "/var/lib/minikraft"
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"


class ComposeProjectError(RuntimeError):
    """A compose or docker command failed; the message carries its output."""


def compose_command(env: dict[str, str] | None = None) -> list[str] | None:
    """`docker compose` when the CLI has the v2 plugin, else `docker-compose` (v1), else None."""
    docker = shutil.which("docker")
    if docker is not None:
        done = subprocess.run([docker, "compose", "version"], capture_output=True, env=env,
                              timeout=30)
        if done.returncode == 0:
            return [docker, "compose"]
    v1 = shutil.which("docker-compose")
    return [v1] if v1 is not None else None


def run_docker(args: list[str], env: dict[str, str] | None = None,
               timeout_s: float = 120.0) -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise ComposeProjectError("no docker CLI")
    done = subprocess.run([docker, *args], env=env, capture_output=True, text=True,
                          timeout=timeout_s)
    if done.returncode != 0:
        raise ComposeProjectError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class ComposeProject:
    file: Path
    name: str
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    command: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.command:
            found = compose_command(self.env)
            if found is None:
                raise ComposeProjectError("neither `docker compose` nor `docker-compose` found")
            self.command = found

    def compose(self, *args: str, timeout_s: float = 300.0) -> str:
        argv = [*self.command, "-f", str(self.file), "-p", self.name, *args]
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True,
                              timeout=timeout_s, cwd=self.file.parent)
        if done.returncode != 0:
            raise ComposeProjectError(f"{' '.join(argv[len(self.command):])}: "
                                      f"{done.stderr.strip()[-3000:]}")
        return done.stdout

    def containers(self) -> dict[str, dict[str, Any]]:
        """service name -> `docker inspect` of its container (running or not)."""
        ids = run_docker(["ps", "-a", "-q", "--filter", f"label={PROJECT_LABEL}={self.name}"],
                         self.env).split()
        if not ids:
            return {}
        inspected = json.loads(run_docker(["inspect", *ids], self.env))
        return {c["Config"]["Labels"][SERVICE_LABEL]: c for c in inspected}

    def health(self) -> dict[str, str]:
        """service -> health status (starting, healthy, unhealthy; `none` without a check,
        `exited` for a container that is not running)."""
        states = {}
        for service, info in self.containers().items():
            state = info["State"]
            health = state.get("Health")
            states[service] = (
                "exited" if not state.get("Running")
                else (health or {}).get("Status", "none")
            )
        return states


def _env(info: dict[str, Any]) -> dict[str, str]:
    pairs = (item.partition("=") for item in info["Config"].get("Env") or [])
    return {key: value for key, _, value in pairs}


HTTP_PORT = 8080  # KAFKA_HTTP_LISTENER in docker-compose.yml


def _published_ports(info: dict[str, Any]) -> dict[int, int]:
    """Container port -> host port, of the ports published on 127.0.0.1 (a stopped container
    has no bindings in NetworkSettings; its HostConfig still has them)."""
    found: dict[int, int] = {}
    for section, key in (("NetworkSettings", "Ports"), ("HostConfig", "PortBindings")):
        for container_port, bindings in ((info.get(section) or {}).get(key) or {}).items():
            for binding in bindings or []:
                if binding.get("HostIp") in ("127.0.0.1", "0.0.0.0", "") and binding.get(
                    "HostPort"
                ):
                    found.setdefault(int(str(container_port).split("/")[0]),
                                     int(binding["HostPort"]))
    return found


def _published(info: dict[str, Any]) -> tuple[int, int]:
    """(Kafka port, HTTP port) on the host: the container's published Kafka listener, and its
    HTTP listener (0 when a compose file does not publish it)."""
    ports = _published_ports(info)
    kafka = [host for container, host in sorted(ports.items()) if container != HTTP_PORT]
    if not kafka:
        raise ComposeProjectError(f"{info['Name']}: no published port")
    return kafka[0], ports.get(HTTP_PORT, 0)


def _data_dir(info: dict[str, Any]) -> str:
    for mount in info.get("Mounts") or []:
        if mount.get("Destination") == DATA_MOUNT:
            return str(mount["Source"])
    raise ComposeProjectError(f"{info['Name']}: nothing mounted at {DATA_MOUNT}")


def node_spec(service: str, info: dict[str, Any]) -> NodeSpec:
    env = _env(info)
    role = env.get("KAFKA_PROCESS_ROLES", "")
    if role not in ("controller", "broker"):
        raise ComposeProjectError(f"{service}: KAFKA_PROCESS_ROLES {role!r} is not one role")
    running = bool(info["State"].get("Running"))
    pid = int(info["State"]["Pid"]) if running and info["State"].get("Pid") else None
    networks = info["NetworkSettings"].get("Networks") or {}
    port, http_port = _published(info)
    return NodeSpec(
        role=role,
        node_id=int(env["KAFKA_NODE_ID"]),
        host="127.0.0.1",
        port=port,
        # The node's status for `minikraft console`; network faults go through the engine
        # (docker network disconnect), never this listener's /v1/faults.
        http_port=http_port,
        dir=_data_dir(info),
        config="",
        log_file="",
        pid=pid,
        start_time=process_start_time(pid) if pid else None,
        extra={
            "service": service,
            "container": str(info["Id"]),
            "networks": ",".join(sorted(networks)),
        },
    )


def describe_nodes(project: ComposeProject) -> tuple[list[NodeSpec], list[NodeSpec], str]:
    """(controllers, brokers, cluster id) of the project's containers, by node id."""
    specs, cluster_ids = [], set()
    for service, info in project.containers().items():
        specs.append(node_spec(service, info))
        cluster_ids.add(_env(info).get("CLUSTER_ID", ""))
    if len(cluster_ids) != 1:
        raise ComposeProjectError(f"project {project.name}: CLUSTER_ID values {cluster_ids}")
    specs.sort(key=lambda s: s.node_id)
    return ([s for s in specs if s.role == "controller"],
            [s for s in specs if s.role == "broker"], cluster_ids.pop())


def compose_cluster(project: ComposeProject, directory: Path) -> LocalCluster:
    controllers, brokers, cluster_id = describe_nodes(project)
    if not controllers:
        raise ComposeProjectError(f"project {project.name} has no controller containers")
    cluster = LocalCluster(directory.resolve(), cluster_id, controllers, brokers,
                           network=COMPOSE)
    cluster.compose = {
        "project": project.name,
        "file": str(project.file.resolve()),
        "docker_host": project.env.get("DOCKER_HOST", ""),
    }
    return cluster


def write_cluster_file(project: ComposeProject, directory: Path) -> LocalCluster:
    """cluster.json for the running project under directory (its data directory)."""
    cluster = compose_cluster(project, directory)
    directory.mkdir(parents=True, exist_ok=True)
    cluster.write_cluster_file()
    return cluster


def recorded_compose(directory: Path) -> dict[str, str] | None:
    """The compose section of directory's cluster.json (None: none, or a local cluster)."""
    try:
        data = json.loads((directory / CLUSTER_FILE).read_text())
    except (OSError, ValueError):
        return None
    section = data.get("compose") if data.get("network") == COMPOSE else None
    return section if isinstance(section, dict) else None


def describe_compose_cluster(
    directory: Path, file: Path | None, project_name: str | None
) -> LocalCluster:
    """(Re)write directory's cluster.json from the engine: the project given, else the one
    recorded there (its containers' pids change with every start)."""
    recorded = recorded_compose(directory) or {}
    env = dict(os.environ)
    if recorded.get("docker_host") and "DOCKER_HOST" not in env:
        env["DOCKER_HOST"] = recorded["docker_host"]
    path = file or Path(recorded.get("file", "docker-compose.yml"))
    name = (project_name or (recorded.get("project") if file is None else None)
            or env.get("COMPOSE_PROJECT_NAME") or default_project_name(path))
    return write_cluster_file(ComposeProject(path.resolve(), name, env), directory)


def default_project_name(file: Path) -> str:
    """Compose's default: the file's directory name, lower case, [a-z0-9_-] only."""
    return re.sub(r"[^a-z0-9_-]", "", file.resolve().parent.name.lower())
