"""Broker event journal records: what the Spark audit reads to check rules 20-23.

Each event is a slotted dataclass, built once and never changed. Not `frozen`: a frozen one
sets each field through object.__setattr__, 4-5 us of a RoleChanged's 5.5, and a restarted
broker builds one for each of its 100,000 partitions (issue 35). `encode_event` packs it as
one self-describing msgpack map `{"event": <class name>, "version": 0, <field>: <value>, ...}`
so a reader needs no code of ours to decode it. Tuples travel as msgpack arrays and come back
as tuples. `ts` is the broker's wall clock in milliseconds, passed in by the runtime.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, get_args

import msgpack

EVENT_VERSION = 0


@dataclass(slots=True)
class PartitionEvent:
    """What every event names first: the broker that journaled it and the partition."""

    broker_id: int
    topic: str
    partition: int
    # The topic id (Kafka's 22-char base64): a re-created name is another partition. Added
    # after the rest, it is keyword-only and written last.
    topic_id: str = field(default="", kw_only=True)


@dataclass(slots=True)
class HwmAdvanced(PartitionEvent):
    """The leader moved the high watermark; isr_size and min_isr are those in force (rule 20)."""

    old: int
    new: int
    isr_size: int
    min_isr: int
    leader_epoch: int
    ts: int
    isr: tuple[int, ...] = ()


@dataclass(slots=True)
class Truncated(PartitionEvent):
    """The replica's log was cut from from_offset (its old end) down to to_offset (rule 22)."""

    from_offset: int
    to_offset: int
    reason: str
    leader_epoch: int
    high_watermark: int
    ts: int


@dataclass(slots=True)
class IsrProposed(PartitionEvent):
    """The leader sent AlterPartition; broker_epochs pairs with proposed_isr (rule 17)."""

    proposal_id: int
    kind: str
    leader_epoch: int
    partition_epoch: int
    committed_isr: tuple[int, ...]
    proposed_isr: tuple[int, ...]
    broker_epochs: tuple[int, ...]
    leader_recovery_state: int
    ts: int


@dataclass(slots=True)
class IsrResult(PartitionEvent):
    """How an AlterPartition ended: committed, reverted (rule 18), pending or retried."""

    proposal_id: int
    error: str
    outcome: str
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int
    ts: int


@dataclass(slots=True)
class RecoveryStateChanged(PartitionEvent):
    """KIP-704 transitions of the partition's leader recovery state as this broker saw them."""

    leader_epoch: int
    old_state: int
    new_state: int
    reason: str
    ts: int


@dataclass(slots=True)
class ProduceAcked(PartitionEvent):
    """A produce was acknowledged to the client (acks=all once the HWM passed it, rule 20)."""

    base_offset: int
    last_offset: int
    acks: int
    leader_epoch: int
    high_watermark: int
    ts: int


@dataclass(slots=True)
class RoleChanged(PartitionEvent):
    """The replica became leader or follower (or stopped being a replica) at an epoch."""

    role: str
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int
    log_end_offset: int
    high_watermark: int
    ts: int


JournalEvent = (
    HwmAdvanced
    | Truncated
    | IsrProposed
    | IsrResult
    | RecoveryStateChanged
    | ProduceAcked
    | RoleChanged
)

EVENT_TYPES: dict[str, type[JournalEvent]] = {cls.__name__: cls for cls in get_args(JournalEvent)}


class JournalDecodeError(ValueError):
    """An entry that is not a known journal event."""


# Field names per event class in the order they are written (the constructor's: the
# keyword-only topic_id last), read once: a journal entry is written for every acked produce.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in sorted(dataclasses.fields(cls), key=lambda f: f.kw_only is True))
    for cls in EVENT_TYPES.values()
}
# Per event class: its name and a getter of its fields' values in that order, in one call (a
# restarted broker journals a RoleChanged for each of its 100,000 partitions; issue 35).
_WRITERS: dict[type, tuple[str, operator.attrgetter[Any]]] = {
    cls: (cls.__name__, operator.attrgetter(*names)) for cls, names in _FIELD_NAMES.items()
}


def event_map(event: JournalEvent) -> dict[str, Any]:
    """The map a journal entry holds, its tuples kept: msgpack packs a tuple as the array it
    packs a list as."""
    kind = type(event)
    name, values = _WRITERS[kind]
    body: dict[str, Any] = {"event": name, "version": EVENT_VERSION}
    body.update(zip(_FIELD_NAMES[kind], values(event), strict=True))
    return body


class _FlatLayout(NamedTuple):
    """An event class's map as one flat array (pack_event): its keys and values in turn, the
    values' places empty, and the headers of the map and of the array its pairs make."""

    template: list[Any]
    map_header: bytes
    array_header_bytes: int


def _flat_layout(name: str, fields: tuple[str, ...]) -> _FlatLayout:
    template: list[Any] = ["event", name, "version", EVENT_VERSION]
    for field_name in fields:
        template += [field_name, None]
    pairs = len(template) // 2
    # msgpack: a map of up to 15 pairs is a fixmap (one byte), else a map 16 (0xde, then its
    # size in two bytes); an array of up to 15 items a fixarray (one byte), else an array 16.
    map_header = bytes([0x80 | pairs]) if pairs < 16 else b"\xde" + pairs.to_bytes(2, "big")
    return _FlatLayout(template, map_header, 1 if 2 * pairs < 16 else 3)


_FLAT_LAYOUTS: dict[type, _FlatLayout] = {
    cls: _flat_layout(cls.__name__, names) for cls, names in _FIELD_NAMES.items()
}


def pack_event(pack: Callable[[Any], bytes], event: JournalEvent) -> bytes:
    """encode_event's bytes, packed by `pack` (a msgpack Packer's, the writer's own) without
    building the map: a msgpack map is its header, then each key and its value in turn, so
    it is the flat array of them with the array's header replaced by the map's. Half the cost
    of the map: a restarted broker journals a RoleChanged for each of its 100,000 partitions,
    and a leader an event for every acked produce (issue 35)."""
    kind = type(event)
    layout = _FLAT_LAYOUTS[kind]
    flat = layout.template.copy()
    flat[5::2] = _WRITERS[kind][1](event)
    return layout.map_header + pack(flat)[layout.array_header_bytes :]


def event_to_dict(event: JournalEvent) -> dict[str, Any]:
    """The map a journal entry decodes to (arrays as lists)."""
    body = event_map(event)
    for name, value in body.items():
        if isinstance(value, tuple):
            body[name] = list(value)
    return body


def event_from_dict(body: Any) -> JournalEvent:
    if not isinstance(body, dict):
        raise JournalDecodeError(f"journal entry is {type(body).__name__}, not a map")
    cls = EVENT_TYPES.get(body.get("event"))  # type: ignore[arg-type]
    if cls is None:
        raise JournalDecodeError(f"unknown journal event {body.get('event')!r}")
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in body:
            if f.default is dataclasses.MISSING:
                raise JournalDecodeError(f"{cls.__name__} entry lacks field {f.name!r}")
            continue
        value = body[f.name]
        values[f.name] = tuple(value) if isinstance(value, list) else value
    event: JournalEvent = cls(**values)
    return event


def encode_event(event: JournalEvent) -> bytes:
    packed: bytes = msgpack.packb(event_map(event), use_bin_type=True)
    return packed


def decode_event(raw: bytes) -> JournalEvent:
    try:
        body = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several types for garbage
        raise JournalDecodeError(f"undecodable journal entry: {exc}") from exc
    return event_from_dict(body)
