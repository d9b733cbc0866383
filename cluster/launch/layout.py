"""How a local cluster is laid out: its nodes' ids, their client ports and each node's own
settings, as a client's test suite expects them (brokers 0, 1, 2 on 9092, 9095, 9098, say).
`minikraft up`'s --controller-ids, --broker-ids, --controller-ports, --broker-ports and
--node-set, and the pytest plugin's options, parse into one Layout; LocalCluster.plan places
the nodes by it. Pure: parsing and checks, no sockets (a port in use is found at `up`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

FIRST_CONTROLLER_ID = 1
FIRST_BROKER_ID = 101
MAX_NODES_PER_ROLE = 9
MAX_PORT = 65535


class LayoutError(ValueError):
    """A layout that cannot be started (the message names the option and the value)."""


@dataclass(frozen=True)
class Layout:
    controller_ids: tuple[int, ...]
    broker_ids: tuple[int, ...]
    # The client listener's port per node, in id order; None: picked (--base-port's scheme).
    controller_ports: tuple[int, ...] | None = None
    broker_ports: tuple[int, ...] | None = None
    # node id -> that node's own properties, over the cluster-wide --set ones.
    node_settings: Mapping[int, Mapping[str, str]] = field(default_factory=dict)

    def explicit_ports(self) -> set[int]:
        return set(self.controller_ports or ()) | set(self.broker_ports or ())


def parse_ids(text: str, option: str) -> tuple[int, ...]:
    """"0,1,2" -> (0, 1, 2): Kafka's node.id values, non-negative."""
    values = _parse_ints(text, option)
    if any(v < 0 for v in values):
        raise LayoutError(f"{option}: node ids are >= 0 (Kafka's node.id), got {text!r}")
    return values


def parse_ports(text: str, option: str) -> tuple[int, ...]:
    values = _parse_ints(text, option)
    if any(not 1 <= v <= MAX_PORT for v in values):
        raise LayoutError(f"{option}: ports are 1-{MAX_PORT}, got {text!r}")
    return values


def _parse_ints(text: str, option: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise LayoutError(f"{option}: expected comma-separated integers, got {text!r}") from None
    if not values:
        raise LayoutError(f"{option}: expected comma-separated integers, got {text!r}")
    if len(set(values)) != len(values):
        raise LayoutError(f"{option}: {text!r} names a value twice")
    return values


def parse_setting(text: str, option: str = "--set") -> tuple[str, str]:
    """"key=value" -> (key, value)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise LayoutError(f"{option} expects key=value, got {text!r}")
    return key.strip(), value.strip()


def parse_node_setting(text: str, option: str = "--node-set") -> tuple[int, str, str]:
    """"ID:key=value" -> (node id, key, value): a property for that node only."""
    node, sep, setting = text.partition(":")
    try:
        node_id = int(node.strip())
    except ValueError:
        node_id = -1
    if not sep or node_id < 0:
        raise LayoutError(f"{option} expects NODE_ID:key=value, got {text!r}")
    key, value = parse_setting(setting, option)
    return node_id, key, value


def _default_ids(count: int, first: int, taken: Iterable[int]) -> tuple[int, ...]:
    """`count` ids from `first` up, skipping those the other role was given."""
    used = set(taken)
    ids: list[int] = []
    candidate = first
    while len(ids) < count:
        if candidate not in used:
            ids.append(candidate)
        candidate += 1
    return tuple(ids)


def plan_layout(
    *,
    controllers: int | None = None,
    brokers: int | None = None,
    controller_ids: Sequence[int] | None = None,
    broker_ids: Sequence[int] | None = None,
    controller_ports: Sequence[int] | None = None,
    broker_ports: Sequence[int] | None = None,
    node_settings: Iterable[tuple[int, str, str]] = (),
    default_controllers: int = 3,
    default_brokers: int = 3,
) -> Layout:
    """The layout the options describe. A count and an id list must agree; ids a role was not
    given default to 1.. (controllers) and 101.. (brokers), skipping ids the other role took."""
    n_controllers = _count("controllers", controllers, controller_ids, default_controllers, 1)
    n_brokers = _count("brokers", brokers, broker_ids, default_brokers, 0)
    c_ids = tuple(controller_ids) if controller_ids else _default_ids(
        n_controllers, FIRST_CONTROLLER_ID, broker_ids or ()
    )
    b_ids = tuple(broker_ids) if broker_ids else _default_ids(
        n_brokers, FIRST_BROKER_ID, c_ids
    )
    shared = sorted(set(c_ids) & set(b_ids))
    if shared:
        raise LayoutError(
            f"node ids {shared} are given to a controller and a broker: every node needs its "
            "own node.id (give each role its own ids)"
        )
    for option, ports, ids in (
        ("--controller-ports", controller_ports, c_ids),
        ("--broker-ports", broker_ports, b_ids),
    ):
        if ports is not None and len(ports) != len(ids):
            raise LayoutError(
                f"{option}: {len(ports)} port(s) for {len(ids)} node(s) {list(ids)}: one per node"
            )
    both = [*(controller_ports or ()), *(broker_ports or ())]
    if len(set(both)) != len(both):
        raise LayoutError(f"a port is given to two nodes: {both}")
    settings: dict[int, dict[str, str]] = {}
    for node_id, key, value in node_settings:
        if node_id not in c_ids and node_id not in b_ids:
            raise LayoutError(
                f"--node-set names node {node_id} for {key}, and there is none (controllers "
                f"{list(c_ids)}, brokers {list(b_ids)})"
            )
        settings.setdefault(node_id, {})[key] = value
    return Layout(
        c_ids,
        b_ids,
        None if controller_ports is None else tuple(controller_ports),
        None if broker_ports is None else tuple(broker_ports),
        settings,
    )


def _count(
    role: str, count: int | None, ids: Sequence[int] | None, default: int, minimum: int
) -> int:
    if ids and count is not None and count != len(ids):
        raise LayoutError(f"--{role} {count} but {len(ids)} id(s) in --{role[:-1]}-ids")
    resolved = len(ids) if ids else (default if count is None else count)
    if not minimum <= resolved <= MAX_NODES_PER_ROLE:
        raise LayoutError(f"{role}: {minimum} to {MAX_NODES_PER_ROLE}, got {resolved}")
    return resolved
