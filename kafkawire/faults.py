"""Fault layer between node ids: drop, delay and partition RPCs, switched at run time.

One FaultInjector per process, shared by its KafkaClient (outbound, keyed by the destination node
id) and its listener (inbound, keyed by the caller's `node-<id>` client id). Chaos scenarios and
the HTTP endpoint drive it through `apply_json`; `rules()` reports what is in force. A request
without a node id on the relevant side (an admin CLI, an unknown peer) is never faulted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

DIRECTIONS = ("both", "outbound", "inbound")


def _node_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"node id must be an int, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"node id must be an int, got {value!r}") from None


def _node_ids(value: Any, key: str) -> set[int]:
    if not isinstance(value, list | tuple | set | frozenset):
        raise ValueError(f"'{key}' must be a list of node ids, got {value!r}")
    return {_node_id(v) for v in value}


class FaultInjector:
    """Rules by peer node id. Drops are silent: the caller sees a timeout, never an error."""

    def __init__(self) -> None:
        self._drop_outbound: set[int] = set()
        self._drop_inbound: set[int] = set()
        self._partitioned: set[int] = set()
        self._delay_ms: dict[int, int] = {}
        self.dropped_outbound_count = 0
        self.dropped_inbound_count = 0

    # -- switching rules ------------------------------------------------------------------------

    def drop(self, node_id: int, direction: str = "both") -> None:
        """Silently drop requests to (`outbound`), from (`inbound`) or both ways with node_id."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        node_id = _node_id(node_id)
        if direction in ("both", "outbound"):
            self._drop_outbound.add(node_id)
        if direction in ("both", "inbound"):
            self._drop_inbound.add(node_id)

    def delay(self, node_id: int, ms: int) -> None:
        """Hold each request to or from node_id for `ms` before it is sent or handled."""
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise ValueError(f"delay must be a non-negative int of ms, got {ms!r}")
        node_id = _node_id(node_id)
        if ms == 0:
            self._delay_ms.pop(node_id, None)
        else:
            self._delay_ms[node_id] = ms

    def partition(self, node_ids: Iterable[int]) -> None:
        """Cut this process off from node_ids in both directions."""
        self._partitioned.update(_node_id(n) for n in node_ids)

    def heal(self, node_ids: Iterable[int] | None = None) -> None:
        """Remove every rule, or only the rules naming node_ids."""
        if node_ids is None:
            self._drop_outbound.clear()
            self._drop_inbound.clear()
            self._partitioned.clear()
            self._delay_ms.clear()
            return
        for n in {_node_id(v) for v in node_ids}:
            self._drop_outbound.discard(n)
            self._drop_inbound.discard(n)
            self._partitioned.discard(n)
            self._delay_ms.pop(n, None)

    def rules(self) -> dict[str, Any]:
        """The rules in force, JSON-able; `apply_json(rules())` reproduces them."""
        return {
            "drop_outbound": sorted(self._drop_outbound),
            "drop_inbound": sorted(self._drop_inbound),
            "partition": sorted(self._partitioned),
            "delay_ms": {str(n): ms for n, ms in sorted(self._delay_ms.items())},
        }

    def apply_json(self, rules: Mapping[str, Any]) -> None:
        """Replace every rule with `rules` (the shape `rules()` returns; absent keys mean none).

        Also accepts `"drop": [ids]` for both directions. Raises ValueError, changing nothing,
        on a malformed document.
        """
        if not isinstance(rules, Mapping):
            raise ValueError("fault rules must be a JSON object")
        known = {"drop", "drop_outbound", "drop_inbound", "partition", "delay_ms"}
        unknown = set(rules) - known
        if unknown:
            raise ValueError(f"unknown fault rule keys {sorted(unknown)}; known: {sorted(known)}")
        both = _node_ids(rules.get("drop", []), "drop")
        outbound = _node_ids(rules.get("drop_outbound", []), "drop_outbound") | both
        inbound = _node_ids(rules.get("drop_inbound", []), "drop_inbound") | both
        partitioned = _node_ids(rules.get("partition", []), "partition")
        raw_delays = rules.get("delay_ms", {})
        if not isinstance(raw_delays, Mapping):
            raise ValueError("'delay_ms' must map node id to milliseconds")
        delays: dict[int, int] = {}
        for key, ms in raw_delays.items():
            if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
                raise ValueError(f"delay for node {key} must be a non-negative int, got {ms!r}")
            if ms:
                delays[_node_id(key)] = ms
        self._drop_outbound = outbound
        self._drop_inbound = inbound
        self._partitioned = partitioned
        self._delay_ms = delays

    # -- checks on the request path -------------------------------------------------------------

    @property
    def active(self) -> bool:
        return bool(
            self._drop_outbound or self._drop_inbound or self._partitioned or self._delay_ms
        )

    def drops_outbound(self, dest_node_id: int | None) -> bool:
        dropped = self._cut_off(dest_node_id, self._drop_outbound)
        self.dropped_outbound_count += dropped
        return dropped

    def drops_inbound(self, source_node_id: int | None) -> bool:
        dropped = self._cut_off(source_node_id, self._drop_inbound)
        self.dropped_inbound_count += dropped
        return dropped

    def _cut_off(self, node_id: int | None, dropped_one_way: set[int]) -> bool:
        """The peer's messages this way are dropped: that way only, or partitioned away."""
        return node_id is not None and (node_id in dropped_one_way or node_id in self._partitioned)

    def delay_ms(self, node_id: int | None) -> int:
        if node_id is None:
            return 0
        return self._delay_ms.get(node_id, 0)
