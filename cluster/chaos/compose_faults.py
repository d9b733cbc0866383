"""Faults on a docker compose cluster's containers, through the engine (ProcessFaults calls these
when cluster.json says network "compose"; cluster/launch/compose_project.py wrote it).

kill -9 is `docker kill` (SIGKILL to the container's process), terminate is `docker stop`
(SIGTERM, SIGKILL after the grace time), pause is `docker pause` (the cgroup freezer: the
process holds its sockets and answers nothing), restart is `docker start` with the container's
own data, and a network cut is `docker network disconnect` from every network the container is
on; the heal reconnects it with its aliases (the service name the others resolve). Every call
names the container by the id recorded for the node, never by a name match, and the node's pid
is read back from the engine after a start, so is_running names the new incarnation.
The calls block (ProcessFaults' pause, resume and restart are synchronous, as a signal is);
its async faults run them in a thread.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from cluster.launch.local_cluster import LocalCluster, NodeSpec, process_start_time

DOCKER_TIMEOUT_S = 60.0
PAUSE_ATTEMPTS = 3


class ComposeFaultError(RuntimeError):
    """A docker command failed; the message carries its output."""


@dataclass
class ComposeNodes:
    cluster: LocalCluster
    # node name -> {network: its aliases}, for the nodes disconnected now
    disconnected: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    stopped: set[str] = field(default_factory=set)  # paused by SIGSTOP (see pause)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        host = (self.cluster.compose or {}).get("docker_host")
        if host and "DOCKER_HOST" not in env:
            env["DOCKER_HOST"] = host
        return env

    def docker(self, *args: str, timeout_s: float = DOCKER_TIMEOUT_S) -> str:
        cli = shutil.which("docker")
        if cli is None:
            raise ComposeFaultError("no docker CLI")
        try:
            done = subprocess.run([cli, *args], env=self.env(), capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise ComposeFaultError(f"docker {' '.join(args)}: no answer in {timeout_s}s") from exc
        if done.returncode != 0:
            raise ComposeFaultError(f"docker {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    @staticmethod
    def container(spec: NodeSpec) -> str:
        return spec.extra["container"]

    def inspect(self, spec: NodeSpec) -> dict[str, Any]:
        return dict(json.loads(self.docker("inspect", self.container(spec)))[0])

    def refresh_pid(self, spec: NodeSpec) -> None:
        state = (self.inspect(spec))["State"]
        pid = int(state.get("Pid") or 0) if state.get("Running") else 0
        spec.pid = pid or None
        spec.start_time = process_start_time(pid) if pid else None

    def kill(self, spec: NodeSpec) -> None:
        self.docker("kill", "--signal", "KILL", self.container(spec))

    def stop(self, spec: NodeSpec, grace_s: float) -> bool:
        """`docker stop`; True when the node exited by itself (exit code 0) within grace_s."""
        self.docker("stop", "--time", str(int(grace_s)), self.container(spec),
                          timeout_s=grace_s + DOCKER_TIMEOUT_S)
        return int((self.inspect(spec))["State"].get("ExitCode", -1)) == 0

    def pause(self, spec: NodeSpec) -> str:
        """`docker pause`, retried; how the node was paused. When the freezer still cannot
        freeze it (runc gives up on a process in uninterruptible sleep: seen under heavy disk
        load, "unable to freeze"), SIGSTOP through the engine holds it the same way."""
        failure = ""
        for _attempt in range(PAUSE_ATTEMPTS):
            try:
                self.docker("pause", self.container(spec))
                return "docker pause"
            except ComposeFaultError as exc:
                failure = str(exc).rpartition(": ")[2]
                time.sleep(0.2)
        self.docker("kill", "--signal", "STOP", self.container(spec))
        self.stopped.add(spec.name)
        return f"SIGSTOP (docker pause failed: {failure})"

    def unpause(self, spec: NodeSpec) -> None:
        if spec.name in self.stopped:
            self.stopped.discard(spec.name)
            self.docker("kill", "--signal", "CONT", self.container(spec))
        else:
            self.docker("unpause", self.container(spec))

    def start(self, spec: NodeSpec) -> int:
        self.docker("start", self.container(spec))
        self.refresh_pid(spec)
        return spec.pid or 0

    def disconnect(self, spec: NodeSpec) -> list[str]:
        """Cut the container off every network it is on; the networks' names."""
        networks = (self.inspect(spec))["NetworkSettings"].get("Networks") or {}
        short_id = self.container(spec)[:12]
        saved = {
            name: [a for a in (info.get("Aliases") or []) if a != short_id]
            for name, info in networks.items()
        }
        self.disconnected[spec.name] = saved
        for name in saved:
            self.docker("network", "disconnect", name, self.container(spec))
        return sorted(saved)

    def reconnect(self, spec: NodeSpec) -> None:
        for name, aliases in self.disconnected.pop(spec.name, {}).items():
            alias_args = [arg for alias in aliases for arg in ("--alias", alias)]
            self.docker("network", "connect", *alias_args, name, self.container(spec))
