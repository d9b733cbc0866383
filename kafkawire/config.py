"""server.properties-style node config with Kafka's key names.

A node reads a properties file (`minikraft controller --config F`) or, in docker compose,
environment variables in Kafka's image style (`KAFKA_NODE_ID` -> `node.id`). Unknown keys are
kept (Kafka warns and ignores them); known keys are validated up front so a typo in a number
fails at start with the key's name, not later.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULTS: dict[str, str] = {
    "process.roles": "controller",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.election.backoff.max.ms": "1000",
    # minikraft's: a voter that lost its leader stands after a random 0..this many ms (issue 19)
    "minikraft.quorum.leader.lost.jitter.max.ms": "200",
    "controller.quorum.bootstrap.servers": "",
    "metadata.max.idle.interval.ms": "500",
    # Kafka's snapshot triggers (KRaftConfigs), on every node: 20 MiB of committed batches
    # since the last snapshot, or the first commit an hour after it.
    "metadata.log.max.record.bytes.between.snapshots": str(20 * 1024 * 1024),
    "metadata.log.max.snapshot.interval.ms": str(60 * 60 * 1000),
    # minikraft's own extra trigger: also snapshot after this many committed records; 0 (the
    # default) leaves Kafka's two alone. Tests use it to force snapshots by count.
    "metadata.log.snapshot.interval.records": "0",
    "metadata.log.segment.bytes": str(8 * 1024 * 1024),
    "socket.request.max.bytes": str(100 * 1024 * 1024),
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "http.listener": "",
    "log.level": "INFO",
}

_INT_KEYS = (
    "node.id",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.request.timeout.ms",
    "controller.quorum.election.backoff.max.ms",
    "minikraft.quorum.leader.lost.jitter.max.ms",
    "metadata.max.idle.interval.ms",
    "metadata.log.max.record.bytes.between.snapshots",
    "metadata.log.max.snapshot.interval.ms",
    "metadata.log.snapshot.interval.records",
    "metadata.log.segment.bytes",
    "socket.request.max.bytes",
    "broker.session.timeout.ms",
    "broker.heartbeat.interval.ms",
)

# Kafka's lower limits (ConfigDef.Range.atLeast) for the keys that have one here.
_AT_LEAST = {
    "metadata.log.max.record.bytes.between.snapshots": 1,
    "metadata.log.max.snapshot.interval.ms": 0,
    "metadata.log.snapshot.interval.records": 0,
}


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the key."""


def parse_properties(text: str) -> dict[str, str]:
    """Java-properties subset: `key=value` or `key: value`, `#`/`!` comments, blank lines."""
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep <= 0:
            raise ConfigError(f"line {number}: expected key=value, got {raw!r}")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


def render_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def props_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Kafka's docker convention: KAFKA_FOO_BAR=1 -> foo.bar=1 (CLUSTER_ID stays apart)."""
    return {
        key[len("KAFKA_") :].lower().replace("_", "."): value
        for key, value in environ.items()
        if key.startswith("KAFKA_")
    }


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def parse_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"expected host:port, got {text!r}")
    return host, int(port)


def parse_listeners(text: str) -> list[Listener]:
    listeners = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, rest = item.partition("://")
        if not sep:
            raise ConfigError(f"listeners: expected NAME://host:port, got {item!r}")
        host, port = parse_host_port(rest)
        listeners.append(Listener(name, host, port))
    return listeners


@dataclass(frozen=True)
class NodeConfig:
    props: dict[str, str] = field(default_factory=dict)
    # The keys its file or environment gave (DescribeConfigs' STATIC_BROKER_CONFIG); the others
    # in `props` are defaults, minikraft's own where they differ from Kafka's.
    given: frozenset[str] = frozenset()

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> NodeConfig:
        merged = {**DEFAULTS, **props}
        config = cls(merged, frozenset(props))
        config.validate()
        return config

    @classmethod
    def from_file(cls, path: str | Path) -> NodeConfig:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
        return cls.from_props(parse_properties(text))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NodeConfig:
        return cls.from_props(props_from_env(os.environ if environ is None else environ))

    def validate(self) -> None:
        if "node.id" not in self.props:
            raise ConfigError("node.id is required")
        for key in _INT_KEYS:
            self.get_int(key)
        for key, least in _AT_LEAST.items():
            value = self.get_int(key)
            if value < least:  # Kafka's ConfigDef Range.atLeast message
                raise ConfigError(f"Invalid value {value} for configuration {key}: "
                                  f"Value must be at least {least}")
        roles = self.roles
        if not roles or not roles <= {"controller", "broker"}:
            raise ConfigError(f"process.roles must be controller and/or broker, got {roles}")
        if "controller" in roles and not self.controller_listener():
            raise ConfigError(
                "a controller needs a listener named by controller.listener.names in listeners"
            )
        if "controller" in roles and "metadata.log.dir" not in self.props and not self.log_dirs:
            raise ConfigError("metadata.log.dir (or log.dirs) is required")
        for text in self.bootstrap_servers:
            parse_host_port(text)
        self._validate_listeners()

    def _validate_listeners(self) -> None:
        """Kafka's listener rules (KafkaConfig.validateValues, SocketServerConfigs): names are
        unique, advertised names are listener names and never the meta-address 0.0.0.0, every
        listener has a security protocol when listener.security.protocol.map is given (minikraft
        speaks PLAINTEXT only, so another protocol is refused rather than ignored), and
        inter.broker.listener.name names one of the broker's listeners."""
        names = [lst.name for lst in self.listeners]
        if len(set(names)) != len(names):
            raise ConfigError(f"listeners: each listener name must be unique, got {names}")
        for lst in self.advertised_listeners:
            if lst.name not in names:
                raise ConfigError(
                    "advertised.listeners listener names must be equal to or a subset of the ones "
                    f"defined in listeners. Found {lst.name}; the valid options are {names}"
                )
            if lst.host == "0.0.0.0":
                raise ConfigError("advertised.listeners cannot use the nonroutable meta-address "
                                  "0.0.0.0. Use a routable IP address.")
        protocols = self.security_protocols
        if protocols is not None:
            for name in [*names, *self.controller_listener_names]:
                if name not in protocols:
                    raise ConfigError(f"listener.security.protocol.map: no security protocol "
                                      f"defined for listener {name}")
        if "broker" in self.roles and self.get("inter.broker.listener.name"):
            broker_names = [lst.name for lst in self.broker_listeners()]
            if self.get("inter.broker.listener.name") not in broker_names:
                raise ConfigError(
                    "inter.broker.listener.name must be a listener name defined in "
                    f"advertised.listeners. The valid options are {broker_names}"
                )

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.props.get(key, default)

    def get_int(self, key: str) -> int:
        value = self.props.get(key)
        if value is None:
            raise ConfigError(f"{key} is required")
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{key} must be an integer, got {value!r}") from None

    def get_bool(self, key: str, default: bool = False) -> bool:
        """A true/false property (Kafka's spelling, any case); absent: default."""
        value = self.props.get(key)
        if value is None:
            return default
        text = value.strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        return text == "true"

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def roles(self) -> set[str]:
        return {r.strip() for r in self.props.get("process.roles", "").split(",") if r.strip()}

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self.props.get("listeners", ""))

    def controller_listener(self) -> Listener | None:
        names = {n.strip() for n in self.props["controller.listener.names"].split(",")}
        return next((lst for lst in self.listeners if lst.name in names), None)

    @property
    def controller_listener_names(self) -> list[str]:
        text = self.props.get("controller.listener.names", "")
        return [n.strip() for n in text.split(",") if n.strip()]

    def broker_listeners(self) -> list[Listener]:
        """Every listener that is not a controller listener, in the order of `listeners`."""
        names = set(self.controller_listener_names)
        return [lst for lst in self.listeners if lst.name not in names]

    def broker_listener(self) -> Listener | None:
        """The inter-broker listener: inter.broker.listener.name's, else one named PLAINTEXT
        (Kafka's default, security.inter.broker.protocol=PLAINTEXT), else the first broker
        listener. Replica fetchers reach the leader on this listener's endpoint."""
        listeners = self.broker_listeners()
        wanted = self.get("inter.broker.listener.name") or "PLAINTEXT"
        return next((lst for lst in listeners if lst.name == wanted), None) or next(
            iter(listeners), None
        )

    @property
    def advertised_listeners(self) -> list[Listener]:
        return parse_listeners(self.props.get("advertised.listeners", ""))

    def advertised(self, listener: Listener) -> Listener:
        """What others are told to connect to for this listener: its advertised.listeners entry,
        else the listener itself (Kafka's effectiveAdvertisedListeners)."""
        return next((a for a in self.advertised_listeners if a.name == listener.name), listener)

    @property
    def security_protocols(self) -> dict[str, str] | None:
        """listener.security.protocol.map as {listener name: protocol}; None when not given.
        A protocol other than PLAINTEXT is a ConfigError: minikraft has no TLS or SASL."""
        text = self.props.get("listener.security.protocol.map")
        if text is None:
            return None
        protocols: dict[str, str] = {}
        for item in filter(None, (s.strip() for s in text.split(","))):
            name, sep, protocol = item.partition(":")
            if not sep or not name.strip():
                raise ConfigError(f"listener.security.protocol.map: expected NAME:PROTOCOL, "
                                  f"got {item!r}")
            if protocol.strip().upper() != "PLAINTEXT":
                raise ConfigError(f"listener.security.protocol.map: {name.strip()} uses "
                                  f"{protocol.strip()}; minikraft speaks PLAINTEXT only")
            protocols[name.strip()] = "PLAINTEXT"
        return protocols

    @property
    def http_listener(self) -> tuple[str, int] | None:
        text = self.props.get("http.listener", "")
        return parse_host_port(text) if text else None

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(p.strip()) for p in self.props.get("log.dirs", "").split(",") if p.strip()]

    @property
    def metadata_log_dir(self) -> Path:
        text = self.props.get("metadata.log.dir")
        if text:
            return Path(text)
        if self.log_dirs:
            return self.log_dirs[0]
        raise ConfigError("metadata.log.dir (or log.dirs) is required")

    @property
    def bootstrap_servers(self) -> list[str]:
        text = self.props.get("controller.quorum.bootstrap.servers", "")
        return [s.strip() for s in text.split(",") if s.strip()]
