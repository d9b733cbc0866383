"""docker-compose.yml without a Docker engine: parse it, check it, and run every service's exact
command and environment as a local process.

Each container has its own network namespace and disk; local processes share 127.0.0.1 and one
file system. So every `service-name:port` pair in a command, environment value or healthcheck is
rewritten, consistently, to `127.0.0.1:<a free port>`, and every path under a volume's mount
point to a directory of its own under the run's root (a volume two services mount maps to one
directory, as in Docker). The image's ENTRYPOINT (from the Dockerfile) is the `minikraft` of the
running interpreter. `depends_on: condition: service_healthy` waits on the service's own
healthcheck command, run the same way. Processes are stopped by the pid this module started.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cluster.launch.local_cluster import free_ports

_PRIVATE_IPV4 = re.compile(
    r"(?<![\d.])(10\.\d{1,3}|172\.(1[6-9]|2\d|3[01])|192\.168)\.\d{1,3}\.\d{1,3}(?![\d.])"
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class ComposeError(ValueError):
    """A compose file this module cannot run; the message names the service and key."""


def parse_duration_s(text: str | int | float) -> float:
    """Compose durations (`1m30s`, `3s`, `500ms`) in seconds."""
    if isinstance(text, int | float):
        return float(text)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ComposeError(f"not a duration: {text!r}")
    return sum(float(n) * _DURATION_S[u] for n, u in parts)


@dataclass(frozen=True)
class Healthcheck:
    test: list[str]  # argv after "CMD"
    interval_s: float
    timeout_s: float
    retries: int
    start_period_s: float


@dataclass(frozen=True)
class PortMapping:
    host_ip: str
    host_port: int
    container_port: int


@dataclass
class ComposeService:
    name: str
    command: list[str]
    environment: dict[str, str]
    volumes: list[tuple[str, str]]  # (volume name, mount point)
    ports: list[PortMapping]
    depends_on: dict[str, str]  # service -> condition
    healthcheck: Healthcheck | None
    hostname: str


@dataclass
class ComposeFile:
    services: dict[str, ComposeService]
    volumes: list[str]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


def _as_list(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str | int) for v in value):
        return [str(v) for v in value]
    raise ComposeError(f"{where}: expected a list of strings, got {value!r}")


def _environment(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, list):
        env = {}
        for item in value:
            key, _, val = str(item).partition("=")
            env[key] = val
        return env
    raise ComposeError(f"{where}: environment must be a mapping or a list")


def _healthcheck(value: Any, where: str) -> Healthcheck | None:
    if value is None or value.get("disable"):
        return None
    test = _as_list(value.get("test"), f"{where}.test")
    if not test or test[0] != "CMD":
        raise ComposeError(f"{where}.test: only the exec form [\"CMD\", ...] is supported")
    return Healthcheck(
        test=test[1:],
        interval_s=parse_duration_s(value.get("interval", "30s")),
        timeout_s=parse_duration_s(value.get("timeout", "30s")),
        retries=int(value.get("retries", 3)),
        start_period_s=parse_duration_s(value.get("start_period", "0s")),
    )


def _ports(value: Any, where: str) -> list[PortMapping]:
    mappings = []
    for item in value or []:
        parts = str(item).split(":")
        if len(parts) == 3:
            mappings.append(PortMapping(parts[0], int(parts[1]), int(parts[2])))
        elif len(parts) == 2:
            mappings.append(PortMapping("0.0.0.0", int(parts[0]), int(parts[1])))
        else:
            raise ComposeError(f"{where}: expected [ip:]host_port:container_port, got {item!r}")
    return mappings


def _volumes(value: Any, where: str) -> list[tuple[str, str]]:
    volumes = []
    for item in value or []:
        source, sep, target = str(item).partition(":")
        if not sep:
            raise ComposeError(f"{where}: expected volume:/path, got {item!r}")
        volumes.append((source, target.split(":")[0]))
    return volumes


def _depends_on(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list):
        return {str(v): "service_started" for v in value}
    return {str(k): str((v or {}).get("condition", "service_started")) for k, v in value.items()}


def load_compose(path: str | Path) -> ComposeFile:
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, dict) or not isinstance(raw.get("services"), dict):
        raise ComposeError(f"{path}: no services")
    services = {}
    for name, body in raw["services"].items():
        where = f"services.{name}"
        services[name] = ComposeService(
            name=name,
            command=_as_list(body.get("command", []), f"{where}.command"),
            environment=_environment(body.get("environment"), where),
            volumes=_volumes(body.get("volumes"), f"{where}.volumes"),
            ports=_ports(body.get("ports"), f"{where}.ports"),
            depends_on=_depends_on(body.get("depends_on")),
            healthcheck=_healthcheck(body.get("healthcheck"), f"{where}.healthcheck"),
            hostname=str(body.get("hostname", name)),
        )
    return ComposeFile(services, list((raw.get("volumes") or {}).keys()), raw)


def dockerfile_entrypoint(path: str | Path) -> list[str]:
    """The exec-form ENTRYPOINT of a Dockerfile (ComposeError if absent or shell form)."""
    for line in Path(path).read_text().splitlines():
        if line.strip().upper().startswith("ENTRYPOINT"):
            try:
                value = json.loads(line.strip()[len("ENTRYPOINT") :].strip())
            except json.JSONDecodeError as exc:
                raise ComposeError(f"{path}: ENTRYPOINT is not in exec form") from exc
            return [str(v) for v in value]
    raise ComposeError(f"{path}: no ENTRYPOINT")


# -- consistency --------------------------------------------------------------------------------


def host_port_refs(text: str, hosts: set[str]) -> list[tuple[str, int]]:
    """Every `host:port` in text whose host is one of hosts."""
    return [(h, int(p)) for h, p in _host_port_pattern(hosts).findall(text)]


def _host_port_pattern(hosts: set[str]) -> re.Pattern[str]:
    names = "|".join(sorted((re.escape(h) for h in hosts), key=len, reverse=True))
    return re.compile(rf"(?<![\w.-])({names}):(\d+)")


def check_consistency(compose: ComposeFile) -> list[str]:
    """Problems a real engine would hit at start or at run time; empty when consistent."""
    problems: list[str] = []
    services = compose.services
    hosts = {s.hostname for s in services.values()} | set(services)
    published: dict[tuple[str, int], str] = {}
    node_ids: dict[str, str] = {}
    listened: dict[tuple[str, int], str] = {}
    for svc in services.values():
        for target, condition in svc.depends_on.items():
            if target not in services:
                problems.append(f"{svc.name}: depends_on unknown service {target}")
            elif condition == "service_healthy" and services[target].healthcheck is None:
                problems.append(f"{svc.name}: waits for {target} healthy, which has no healthcheck")
        for port in svc.ports:
            key = (port.host_ip, port.host_port)
            if key in published:
                problems.append(f"{svc.name}: host port {port.host_port} also published by "
                                f"{published[key]}")
            published[key] = svc.name
        for volume, _mount in svc.volumes:
            if volume not in compose.volumes:
                problems.append(f"{svc.name}: volume {volume} is not declared")
        node_id = svc.environment.get("KAFKA_NODE_ID")
        if node_id is not None:
            if node_id in node_ids:
                problems.append(f"{svc.name}: KAFKA_NODE_ID {node_id} also used by "
                                f"{node_ids[node_id]}")
            node_ids[node_id] = svc.name
        for listener in svc.environment.get("KAFKA_LISTENERS", "").split(","):
            for host, number in host_port_refs(listener, hosts):
                if host != svc.hostname:
                    problems.append(f"{svc.name}: listens on another service's name {host}")
                listened[(host, number)] = svc.name
        everything = " ".join([*svc.command, *svc.environment.values(),
                               *(svc.healthcheck.test if svc.healthcheck else [])])
        if _PRIVATE_IPV4.search(everything):
            problems.append(f"{svc.name}: a private-range IP address (use service names)")
    for svc in services.values():
        for text in svc.environment.get("KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS", "").split(","):
            refs = host_port_refs(text.strip(), hosts)
            owner = listened.get(refs[0]) if refs else None
            roles = services[owner].environment.get("KAFKA_PROCESS_ROLES", "") if owner else ""
            if not refs or "controller" not in roles:
                problems.append(f"{svc.name}: quorum bootstrap {text.strip()!r} is not a "
                                "controller service's listener")
        for ref in host_port_refs(svc.environment.get("KAFKA_INITIAL_CONTROLLERS", ""), hosts):
            if ref not in listened:
                problems.append(f"{svc.name}: initial controller {ref[0]}:{ref[1]} is no listener")
        if svc.healthcheck is not None:
            for ref in host_port_refs(" ".join(svc.healthcheck.test), hosts):
                if ref not in listened:
                    problems.append(f"{svc.name}: healthcheck names {ref[0]}:{ref[1]}, "
                                    "which no service listens on")
    return problems


def start_order(compose: ComposeFile) -> list[str]:
    """Services with their dependencies first (ComposeError on a cycle)."""
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise ComposeError(f"depends_on cycle through {name}")
        state[name] = "visiting"
        for dep in compose.services[name].depends_on:
            visit(dep)
        state[name] = "done"
        order.append(name)

    for name in compose.services:
        visit(name)
    return order


# -- local processes ----------------------------------------------------------------------------


class HostMap:
    """service-name:port -> 127.0.0.1:<free port>, the same pair always to the same port."""

    def __init__(self, hosts: set[str], host: str = "127.0.0.1") -> None:
        self.host = host
        self._pattern = _host_port_pattern(hosts)
        self.addresses: dict[tuple[str, int], str] = {}

    def reserve(self, pairs: list[tuple[str, int]]) -> None:
        missing = sorted({p for p in pairs if p not in self.addresses})
        taken = set(self.addresses.values())
        while missing:
            # A port released by an earlier call can come back from the OS: two services on one
            # port would be one process refusing to start (CI saw it), so ask again.
            for port in free_ports(len(missing), self.host):
                address = f"{self.host}:{port}"
                if address not in taken:
                    taken.add(address)
                    self.addresses[missing.pop(0)] = address

    def rewrite(self, text: str) -> str:
        def local(match: re.Match[str]) -> str:
            pair = (match.group(1), int(match.group(2)))
            self.reserve([pair])
            return self.addresses[pair]

        return self._pattern.sub(local, text)

    def address(self, host: str, port: int) -> str:
        self.reserve([(host, port)])
        return self.addresses[(host, port)]


def minikraft_argv() -> list[str]:
    """The image's `minikraft` entry point as this interpreter runs it."""
    script = Path(sys.executable).parent / "minikraft"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cluster.cli.main"]


@dataclass
class LocalService:
    name: str
    argv: list[str]
    env: dict[str, str]
    health_argv: list[str] | None
    healthcheck: Healthcheck | None
    depends_on: dict[str, str]
    log_file: Path
    proc: subprocess.Popen[bytes] | None = None
    healthy: bool = False

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _base_env() -> dict[str, str]:
    """What a container's process sees besides the service's environment: no KAFKA_* leaks in."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def localize(
    compose: ComposeFile, root: Path, entrypoint: list[str], hosts: HostMap | None = None
) -> tuple[list[LocalService], HostMap]:
    """Each service's command, environment and healthcheck, rewritten for local processes."""
    names = {s.hostname for s in compose.services.values()} | set(compose.services)
    host_map = hosts or HostMap(names)
    local_entry = minikraft_argv() if entrypoint == ["minikraft"] else entrypoint
    result = []
    for name in start_order(compose):
        svc = compose.services[name]
        mounts = sorted(svc.volumes, key=lambda v: len(v[1]), reverse=True)

        def rewrite(text: str, mounts: list[tuple[str, str]] = mounts) -> str:
            for volume, mount in mounts:
                if text == mount or text.startswith(mount.rstrip("/") + "/"):
                    text = str(root / "volumes" / volume) + text[len(mount.rstrip("/")) :]
                    break
            return host_map.rewrite(text)

        def rewrite_list(text: str, rewrite: Callable[[str], str] = rewrite) -> str:
            return ",".join(rewrite(part) for part in text.split(","))

        env = {**_base_env(), **{k: rewrite_list(v) for k, v in svc.environment.items()}}
        health = None
        if svc.healthcheck is not None:
            test = [rewrite(a) for a in svc.healthcheck.test]
            health = minikraft_argv() + test[1:] if test[0] == "minikraft" else test
        result.append(
            LocalService(
                name=name,
                argv=local_entry + [rewrite(a) for a in svc.command],
                env=env,
                health_argv=health,
                healthcheck=svc.healthcheck,
                depends_on=dict(svc.depends_on),
                log_file=root / "logs" / f"{name}.log",
            )
        )
    return result, host_map


class LocalComposeRun:
    """`docker compose up` for localized services: start in dependency order, gate on
    healthchecks, and stop every process by the pid it started."""

    def __init__(self, services: list[LocalService], root: Path) -> None:
        self.services = {s.name: s for s in services}
        self.root = root

    def start(self, name: str) -> int:
        svc = self.services[name]
        svc.log_file.parent.mkdir(parents=True, exist_ok=True)
        (self.root / "volumes").mkdir(parents=True, exist_ok=True)
        with open(svc.log_file, "ab") as out:
            svc.proc = subprocess.Popen(
                svc.argv, env=svc.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root,
            )
        return svc.proc.pid

    def check_health(self, name: str) -> bool:
        svc = self.services[name]
        if not svc.running():
            svc.healthy = False
            return False
        if svc.health_argv is None:
            svc.healthy = True
            return True
        timeout_s = svc.healthcheck.timeout_s if svc.healthcheck else 10.0
        try:
            done = subprocess.run(
                svc.health_argv, env=svc.env, stdin=subprocess.DEVNULL, capture_output=True,
                timeout=timeout_s, cwd=self.root,
            )
            svc.healthy = done.returncode == 0
        except subprocess.TimeoutExpired:
            svc.healthy = False
        return svc.healthy

    def _ready_to_start(self, svc: LocalService) -> bool:
        for dep, condition in svc.depends_on.items():
            target = self.services[dep]
            if condition == "service_healthy" and not target.healthy:
                return False
            if not target.running():
                return False
        return True

    def up(self, timeout_s: float, poll_s: float = 0.5) -> None:
        """Start everything, each once its dependencies hold; return once all are healthy.
        TimeoutError names what is not, and a process that exited is reported at once."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for svc in self.services.values():
                if svc.proc is None and self._ready_to_start(svc):
                    self.start(svc.name)
            exited = [s.name for s in self.services.values()
                      if s.proc is not None and s.proc.poll() is not None]
            if exited:
                raise RuntimeError(f"exited: {exited}; logs under {self.root / 'logs'}")
            for svc in self.services.values():
                if svc.proc is not None and not svc.healthy:
                    self.check_health(svc.name)
            if all(s.healthy for s in self.services.values()):
                return
            time.sleep(poll_s)
        waiting = [s.name for s in self.services.values() if not s.healthy]
        raise TimeoutError(f"not healthy after {timeout_s:.0f}s: {waiting}")

    def stop(self, timeout_s: float = 10.0) -> list[str]:
        """SIGTERM each started process by pid (dependents first), SIGKILL what is left."""
        order = list(self.services.values())[::-1]
        alive = [s for s in order if s.running()]
        for svc in alive:
            os.kill(svc.proc.pid, signal.SIGTERM)  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout_s
        killed = []
        for svc in alive:
            assert svc.proc is not None
            try:
                svc.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.kill(svc.proc.pid, signal.SIGKILL)
                svc.proc.wait(5.0)
                killed.append(svc.name)
        return killed
