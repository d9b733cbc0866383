"""docker-compose.yml read without an engine: parse it (with Compose's `${VAR:-default}`
interpolation) and check what an engine would only show at run time.

`check_consistency` finds the mistakes that make a compose cluster fail after `up`: a node
config the node itself refuses (NodeConfig, the same validation as at start), two nodes with one
node id or one data directory, a quorum bootstrap or initial controller that is not a
controller's advertised endpoint, an internal advertised name that is no service, an external
one that is not the port published for that listener, a depends_on on something unknown. The
file itself is run under a real engine by tests/integration/test_compose.py.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kafkawire.config import ConfigError, NodeConfig, parse_listeners

_PRIVATE_IPV4 = re.compile(
    r"(?<![\d.])(10\.\d{1,3}|172\.(1[6-9]|2\d|3[01])|192\.168)\.\d{1,3}\.\d{1,3}(?![\d.])"
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# Compose's interpolation: $$ (a literal $), ${VAR}, ${VAR:-default}, ${VAR-default}, $VAR.
_VARIABLE = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|"
                       r"([A-Za-z_][A-Za-z0-9_]*))")
DATA_MOUNT = "/var/lib/minikraft"


class ComposeError(ValueError):
    """A compose file this module cannot read; the message names the service and key."""


def parse_duration_s(text: str | int | float) -> float:
    """Compose durations (`1m30s`, `3s`, `500ms`) in seconds."""
    if isinstance(text, int | float):
        return float(text)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ComposeError(f"not a duration: {text!r}")
    return sum(float(n) * _DURATION_S[u] for n, u in parts)


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Every string in value with Compose's variables substituted from env."""
    if isinstance(value, str):
        def sub(match: re.Match[str]) -> str:
            if match.group(1):
                return "$"
            name = match.group(2) or match.group(5)
            found = env.get(name)
            if match.group(3) == ":-" and not found:
                return match.group(4)
            if match.group(3) == "-" and found is None:
                return match.group(4)
            return found or ""

        return _VARIABLE.sub(sub, value)
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


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
    volumes: list[tuple[str, str]]  # (source: a volume's name or a host path, mount point)
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
        parts = str(item).split("/")[0].split(":")
        try:
            if len(parts) == 3:
                mappings.append(PortMapping(parts[0], int(parts[1]), int(parts[2])))
            elif len(parts) == 2:
                mappings.append(PortMapping("0.0.0.0", int(parts[0]), int(parts[1])))
            else:
                raise ValueError(item)
        except ValueError:
            raise ComposeError(
                f"{where}: expected [ip:]host_port:container_port, got {item!r}"
            ) from None
    return mappings


def _volumes(value: Any, where: str) -> list[tuple[str, str]]:
    volumes = []
    for item in value or []:
        source, sep, target = str(item).partition(":")
        if not sep:
            raise ComposeError(f"{where}: expected source:/path, got {item!r}")
        volumes.append((source, target.split(":")[0]))
    return volumes


def _depends_on(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list):
        return {str(v): "service_started" for v in value}
    return {str(k): str((v or {}).get("condition", "service_started")) for k, v in value.items()}


def load_compose(path: str | Path, env: Mapping[str, str] | None = None) -> ComposeFile:
    """The file as Compose reads it, variables taken from env (default: os.environ)."""
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, dict) or not isinstance(raw.get("services"), dict):
        raise ComposeError(f"{path}: no services")
    raw = interpolate(raw, os.environ if env is None else env)
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


def _node_config(svc: ComposeService) -> NodeConfig:
    return NodeConfig.from_env(svc.environment)


def _is_bind(source: str) -> bool:
    return source.startswith(("/", "./", "../", "~"))


def check_consistency(compose: ComposeFile) -> list[str]:
    """Problems a real engine would hit at start or at run time; empty when consistent."""
    problems: list[str] = []
    services = compose.services
    hostnames = {s.hostname for s in services.values()} | set(services)
    published: dict[tuple[str, int], str] = {}
    node_ids: dict[str, str] = {}
    data_sources: dict[str, str] = {}
    controller_endpoints: set[str] = set()
    configs: dict[str, NodeConfig] = {}
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
        for source, mount in svc.volumes:
            if not _is_bind(source) and source not in compose.volumes:
                problems.append(f"{svc.name}: volume {source} is not declared")
            if mount == DATA_MOUNT:
                if source in data_sources:
                    problems.append(f"{svc.name}: data directory {source} also used by "
                                    f"{data_sources[source]}")
                data_sources[source] = svc.name
        everything = " ".join([*svc.command, *svc.environment.values(),
                               *(svc.healthcheck.test if svc.healthcheck else [])])
        if _PRIVATE_IPV4.search(everything):
            problems.append(f"{svc.name}: a private-range IP address (use service names)")
        if "KAFKA_NODE_ID" not in svc.environment:
            continue
        try:
            config = configs[svc.name] = _node_config(svc)
        except ConfigError as exc:
            problems.append(f"{svc.name}: the node refuses its config: {exc}")
            continue
        node_id = str(config.node_id)
        if node_id in node_ids:
            problems.append(f"{svc.name}: KAFKA_NODE_ID {node_id} also used by "
                            f"{node_ids[node_id]}")
        node_ids[node_id] = svc.name
        if DATA_MOUNT not in (m for _, m in svc.volumes):
            problems.append(f"{svc.name}: nothing mounted at {DATA_MOUNT} (its data dies with "
                            "the container)")
        controller = config.controller_listener() if "controller" in config.roles else None
        if controller is not None:
            controller_endpoints.add(config.advertised(controller).address)
    for name, config in configs.items():
        svc = services[name]
        problems += _check_advertised(svc, config, hostnames)
        for address in config.bootstrap_servers:
            if address not in controller_endpoints:
                problems.append(f"{name}: quorum bootstrap {address!r} is not a controller's "
                                "advertised listener")
        initial = svc.environment.get("KAFKA_INITIAL_CONTROLLERS", "")
        for entry in filter(None, initial.split(",")):
            address = entry.partition("@")[2].rpartition(":")[0]
            if address not in controller_endpoints:
                problems.append(f"{name}: initial controller {address} is no controller's "
                                "advertised listener")
    return problems


def _check_advertised(
    svc: ComposeService, config: NodeConfig, hostnames: set[str]
) -> list[str]:
    """Each advertised endpoint is reachable where it is meant to be: a service name on the
    compose network (its own), or 127.0.0.1 on the very port published for that listener."""
    problems = []
    listeners = {lst.name: lst for lst in config.listeners}
    for lst in listeners.values():
        advertised = config.advertised(lst)
        if advertised.host in hostnames:
            if advertised.host not in (svc.name, svc.hostname):
                problems.append(f"{svc.name}: advertises another service's name "
                                f"{advertised.host}")
            elif advertised.port != lst.port:
                problems.append(f"{svc.name}: advertises {advertised.address} but {lst.name} "
                                f"listens on port {lst.port}")
        elif advertised.host in ("127.0.0.1", "localhost"):
            mapped = [p for p in svc.ports if p.host_port == advertised.port]
            if not mapped or mapped[0].container_port != lst.port:
                problems.append(f"{svc.name}: advertises {advertised.address} for {lst.name}, "
                                f"which is not published to its port {lst.port}")
        else:
            problems.append(f"{svc.name}: advertises {advertised.address}, neither a service "
                            "name nor a published port on 127.0.0.1")
    for lst in parse_listeners(svc.environment.get("KAFKA_ADVERTISED_LISTENERS", "")):
        if lst.name not in listeners:  # NodeConfig refuses it too; named here for the file
            problems.append(f"{svc.name}: advertises {lst.name}, which it does not listen on")
    return problems
