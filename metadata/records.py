"""Metadata records of `__cluster_metadata`, each declared once (ARCHITECTURE.md "On disk").

A record is a frozen slotted dataclass with Kafka's type id and its highest version. On disk and
on the wire it is msgpack `[type_id, version, {field: value}]`: uuids as 16 raw bytes, sequences
as lists, fields in declaration order (so the bytes are stable; a golden test pins them). Fields
added in a later version carry `since` metadata: older versions load them with their defaults
(PartitionRecord / PartitionChangeRecord v0 load with empty ELR fields, seed 001).

Seed conventions for PartitionChangeRecord: a None ISR / replicas / ELR / LastKnownELR and a
LeaderRecoveryState of -1 mean "unchanged"; leader -2 (NO_LEADER_CHANGE) means unchanged, -1 no
leader. For LastKnownLeader the seed uses -1 for "none"; minikraft uses -2 for "unchanged"
(LAST_KNOWN_LEADER_UNCHANGED), mirroring the leader field, since the field is not nullable here.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from types import NoneType, UnionType
from typing import (
    Any,
    ClassVar,
    TypeVar,
    Union,
    dataclass_transform,
    get_args,
    get_origin,
    get_type_hints,
)

import msgpack

from kafkawire import constants
from raft.core.replica_key import uuid_to_str

NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader: Kafka's "unchanged"
LAST_KNOWN_LEADER_NONE = -1
LAST_KNOWN_LEADER_UNCHANGED = -2  # PartitionChangeRecord.last_known_leader: minikraft's "unchanged"
LEADER_RECOVERY_STATE_UNCHANGED = -1

# BrokerRegistrationChangeRecord.fenced / in_controlled_shutdown (minikraft's encoding).
BROKER_FLAG_UNCHANGED = -1
BROKER_FLAG_FALSE = 0
BROKER_FLAG_TRUE = 1

# ConfigRecord.resource_type: Kafka's ConfigResource.Type ids (kafkawire.constants).
CONFIG_RESOURCE_TOPIC = constants.CONFIG_RESOURCE_TOPIC
CONFIG_RESOURCE_BROKER = constants.CONFIG_RESOURCE_BROKER


class UnknownRecordError(ValueError):
    """A record type id or version this code does not know (written by a newer minikraft)."""


class CorruptRecordError(ValueError):
    """Bytes that are not a well-formed metadata record."""


def _since(version: int) -> dict[str, int]:
    return {"since": version}


class RecordBase:
    """The base of every metadata record: Kafka's type id and the highest version we write."""

    __slots__ = ()
    TYPE_ID: ClassVar[int]
    VERSION: ClassVar[int]


R = TypeVar("R", bound=RecordBase)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def metadata_record(type_id: int, version: int = 0) -> Callable[[type[R]], type[R]]:
    """A record class as Kafka's metadata JSON names it: `"apiKey": type_id`, versions 0 to
    `version`; a frozen slotted dataclass whose fields are the record's, in wire order."""

    def declare(cls: type[R]) -> type[R]:
        cls.TYPE_ID = type_id
        cls.VERSION = version
        return dataclass(frozen=True, slots=True)(cls)

    return declare


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int


@metadata_record(0)
class RegisterBrokerRecord(RecordBase):
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[Endpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()


@metadata_record(1)
class UnregisterBrokerRecord(RecordBase):
    broker_id: int
    broker_epoch: int


@metadata_record(2)
class TopicRecord(RecordBase):
    name: str
    topic_id: uuid.UUID


@metadata_record(3, version=1)
class PartitionRecord(RecordBase):
    partition_id: int
    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_recovery_state: int = 0
    leader_epoch: int = 0
    partition_epoch: int = 0
    eligible_leader_replicas: tuple[int, ...] = field(default=(), metadata=_since(1))
    last_known_elr: tuple[int, ...] = field(default=(), metadata=_since(1))
    last_known_leader: int = field(default=LAST_KNOWN_LEADER_NONE, metadata=_since(1))


@metadata_record(4)
class ConfigRecord(RecordBase):
    resource_type: int
    resource_name: str
    name: str
    value: str | None  # None deletes the key


@metadata_record(5, version=1)
class PartitionChangeRecord(RecordBase):
    partition_id: int
    topic_id: uuid.UUID
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int = LEADER_RECOVERY_STATE_UNCHANGED
    eligible_leader_replicas: tuple[int, ...] | None = field(default=None, metadata=_since(1))
    last_known_elr: tuple[int, ...] | None = field(default=None, metadata=_since(1))
    last_known_leader: int = field(default=LAST_KNOWN_LEADER_UNCHANGED, metadata=_since(1))


@metadata_record(7)
class FenceBrokerRecord(RecordBase):
    id: int
    epoch: int


@metadata_record(8)
class UnfenceBrokerRecord(RecordBase):
    id: int
    epoch: int


@metadata_record(9)
class RemoveTopicRecord(RecordBase):
    topic_id: uuid.UUID


@metadata_record(12)
class FeatureLevelRecord(RecordBase):
    name: str
    feature_level: int


@metadata_record(15)
class ProducerIdsRecord(RecordBase):
    """A block of producer ids handed to a broker (AllocateProducerIds): ids below
    next_producer_id are taken, so a new active controller continues after them."""

    broker_id: int
    broker_epoch: int
    next_producer_id: int


@metadata_record(17)
class BrokerRegistrationChangeRecord(RecordBase):
    broker_id: int
    broker_epoch: int
    fenced: int = BROKER_FLAG_UNCHANGED
    in_controlled_shutdown: int = BROKER_FLAG_UNCHANGED
    log_dirs: tuple[uuid.UUID, ...] | None = None


@metadata_record(20)
class NoOpRecord(RecordBase):
    """A record that only moves the log forward (Kafka's, KIP-835): a new active controller
    commits one in its epoch, and the active one every metadata.max.idle.interval.ms."""


# KIP-868 metadata transactions: the records between a BeginTransactionRecord and its
# EndTransactionRecord are applied together or, after an AbortTransactionRecord, not at all
# (the loader publishes none of them before the end; metadata/loader.py).
@metadata_record(23)
class BeginTransactionRecord(RecordBase):
    name: str | None = None


@metadata_record(24)
class EndTransactionRecord(RecordBase):
    """The end of a transaction: its records are applied, all together."""


@metadata_record(25)
class AbortTransactionRecord(RecordBase):
    reason: str | None = None


TRANSACTION_MARKERS = (BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord)


MetadataRecord = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | ProducerIdsRecord
    | BrokerRegistrationChangeRecord
    | NoOpRecord
    | BeginTransactionRecord
    | EndTransactionRecord
    | AbortTransactionRecord
)

# The union is the one list of record classes; the registry is read from it.
RECORD_TYPES: Mapping[int, type[MetadataRecord]] = {
    cls.TYPE_ID: cls for cls in get_args(MetadataRecord)
}

# Kafka's JSON names where camelCase of our snake_case differs (dump-log output).
_KAFKA_JSON_NAMES = {"last_known_elr": "lastKnownELR"}

_Decoder = Callable[[Any], Any]


def _camel(name: str) -> str:
    if name in _KAFKA_JSON_NAMES:
        return _KAFKA_JSON_NAMES[name]
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _type_name(cls: type) -> str:
    """TopicRecord -> TOPIC_RECORD, as Kafka's MetadataRecordType prints it."""
    out = []
    for i, ch in enumerate(cls.__name__):
        if ch.isupper() and i > 0:
            out.append("_")
        out.append(ch.upper())
    return "".join(out)


def _fail(expected: str, value: Any) -> CorruptRecordError:
    return CorruptRecordError(f"expected {expected}, got {type(value).__name__}")


def _decode_int(value: Any) -> int:
    if type(value) is not int:  # exactly int: a bool (an int subclass) is not one here
        raise _fail("int", value)
    return value  # type: ignore[no-any-return]


def _decode_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail("bool", value)
    return value


def _decode_str(value: Any) -> str:
    if not isinstance(value, str):
        raise _fail("str", value)
    return value


# Decoded ids by their bytes: a 10,000-partition topic names one topic id (and a few directory
# ids) in every record, and uuid.UUID() is a third of a record's decode (issue 35). Bounded.
_UUID_CACHE: dict[bytes, uuid.UUID] = {}
_UUID_CACHE_MAX = 4096


def _decode_uuid(value: Any) -> uuid.UUID:
    cached = _UUID_CACHE.get(value) if type(value) is bytes else None
    if cached is not None:
        return cached
    if not isinstance(value, bytes) or len(value) != 16:
        raise _fail("16-byte uuid", value)
    decoded = uuid.UUID(bytes=value)
    if len(_UUID_CACHE) >= _UUID_CACHE_MAX:
        _UUID_CACHE.clear()
    _UUID_CACHE[value] = decoded
    return decoded


def _decode_endpoint(value: Any) -> Endpoint:
    if not isinstance(value, dict) or set(value) != {"name", "host", "port"}:
        raise _fail("endpoint map", value)
    return Endpoint(
        _decode_str(value["name"]), _decode_str(value["host"]), _decode_int(value["port"])
    )


_SCALARS: dict[Any, _Decoder] = {
    int: _decode_int,
    bool: _decode_bool,
    str: _decode_str,
    uuid.UUID: _decode_uuid,
    Endpoint: _decode_endpoint,
}


def _decoder_for(hint: Any) -> _Decoder:
    origin = get_origin(hint)
    if origin in (UnionType, Union):
        (inner,) = [a for a in get_args(hint) if a is not NoneType]
        inner_decode = _decoder_for(inner)
        return lambda v: None if v is None else inner_decode(v)
    if origin is tuple:
        item_decode = _decoder_for(get_args(hint)[0])

        def decode_tuple(value: Any) -> tuple[Any, ...]:
            if not isinstance(value, list):
                raise _fail("list", value)
            return tuple(map(item_decode, value))

        return decode_tuple
    return _SCALARS[hint]


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    since: int
    decode: _Decoder
    has_default: bool


def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    hints = get_type_hints(cls)
    return tuple(
        _FieldSpec(
            f.name,
            f.metadata.get("since", 0),
            _decoder_for(hints[f.name]),
            f.default is not dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    )


_FIELD_SPECS: Mapping[int, tuple[_FieldSpec, ...]] = {
    type_id: _specs(cls) for type_id, cls in RECORD_TYPES.items()
}
_RECORD_CLASSES = frozenset(RECORD_TYPES.values())
# The field names each (type id, version) carries: decode_record checks a record against them.
_KNOWN_FIELDS: Mapping[tuple[int, int], frozenset[str]] = {
    (type_id, version): frozenset(spec.name for spec in specs if spec.since <= version)
    for type_id, specs in _FIELD_SPECS.items()
    for version in range(RECORD_TYPES[type_id].VERSION + 1)
}


def _plain(value: Any, uuid_form: Callable[[uuid.UUID], Any]) -> Any:
    """A field value as msgpack (uuid_form: raw bytes) or JSON (uuid_form: Kafka's base64)
    carries it: endpoints as maps, tuples as lists."""
    if isinstance(value, uuid.UUID):
        return uuid_form(value)
    if isinstance(value, Endpoint):
        return {"name": value.name, "host": value.host, "port": value.port}
    if isinstance(value, tuple):
        return [_plain(v, uuid_form) for v in value]
    return value


_UUID_BYTES = attrgetter("bytes")


def _wire_converter(hint: Any) -> Callable[[Any], Any] | None:
    """How a field of this type goes on the wire; None: as it is (ints, strings, bools, and
    tuples of them, which msgpack packs as arrays like lists)."""
    origin = get_origin(hint)
    if origin in (UnionType, Union):
        (inner,) = [a for a in get_args(hint) if a is not NoneType]
        convert = _wire_converter(inner)
        if convert is None:
            return None
        return lambda v: None if v is None else convert(v)
    if origin is tuple:
        item = _wire_converter(get_args(hint)[0])
        if item is None:
            return None
        return lambda v: [item(x) for x in v]
    if hint is uuid.UUID:
        return _UUID_BYTES
    if hint is Endpoint:
        return lambda v: _plain(v, _UUID_BYTES)
    return None


# Per record type, its fields as (name, since, wire converter): encode_record reads these
# instead of testing every value's type (issue 35: encoding was a third of a snapshot's cost).
_ENCODERS: Mapping[int, tuple[tuple[str, int, Callable[[Any], Any] | None], ...]] = {
    type_id: tuple(
        (spec.name, spec.since, _wire_converter(get_type_hints(cls)[spec.name]))
        for spec in _FIELD_SPECS[type_id]
    )
    for type_id, cls in RECORD_TYPES.items()
}


def encode_record(record: MetadataRecord, version: int | None = None) -> bytes:
    """msgpack `[type_id, version, {field: value}]`; an older version drops newer fields."""
    cls = type(record)
    if version is None:
        fast = _FAST_ENCODERS.get(cls)
        if fast is not None:
            return fast(record)
    if cls not in _RECORD_CLASSES:
        raise UnknownRecordError(f"not a metadata record: {cls.__name__}")
    use_version = cls.VERSION if version is None else version
    if not 0 <= use_version <= cls.VERSION:
        raise UnknownRecordError(f"{cls.__name__} has no version {use_version}")
    return _packer().pack([cls.TYPE_ID, use_version, _encoded_fields(record, use_version)])


def _encoded_fields(record: MetadataRecord, version: int) -> dict[str, Any]:
    """The generic path: each field of `version` read and converted in a loop."""
    data = {}
    for name, since, convert in _ENCODERS[type(record).TYPE_ID]:
        if since <= version:
            value = getattr(record, name)
            data[name] = value if convert is None else convert(value)
    return data


# One msgpack Packer per thread: msgpack.packb builds a Packer and its buffer for every call
# (the broker's journal found the same, issue 35), and a Packer is not thread-safe.
_PACKERS = threading.local()


def _packer() -> msgpack.Packer:
    packer = getattr(_PACKERS, "packer", None)
    if packer is None:
        packer = _PACKERS.packer = msgpack.Packer(use_bin_type=True)
    return packer


def _fast_encoder(cls: type[MetadataRecord]) -> Callable[[Any], bytes]:
    """encode_record at the class's own version as one generated function: the field map is
    one dict display, each value read and converted inline (a fencing of 100,000 partitions
    encodes 100,000 PartitionChangeRecords on the active controller before it appends them,
    issue 35). The bytes are the generic path's (a test compares them for every type)."""
    env: dict[str, Any] = {"packer": _packer, "type_id": cls.TYPE_ID, "version": cls.VERSION}
    items = []
    for index, (name, since, convert) in enumerate(_ENCODERS[cls.TYPE_ID]):
        if since > cls.VERSION:
            continue
        if convert is None:
            items.append(f"{name!r}: record.{name}")
        else:
            env[f"convert{index}"] = convert
            items.append(f"{name!r}: convert{index}(record.{name})")
    source = (
        "def fast(record):\n"
        f"    return packer().pack([type_id, version, {{{', '.join(items)}}}])"
    )
    exec(compile(source, f"<metadata.records encode {cls.__name__}>", "exec"), env)
    return env["fast"]  # type: ignore[no-any-return]


_FAST_ENCODERS: Mapping[type, Callable[[Any], bytes]] = {
    cls: _fast_encoder(cls) for cls in RECORD_TYPES.values()
}


# -- the fast path of decode_record -----------------------------------------------------------
# Every node decodes every metadata record (replay, snapshot loads: 100,000 records for one
# snapshot at 100,000 partitions), and the generic loop below called a decoder per field and
# built kwargs: 18.5 us a PartitionRecord (issue 35). Per (type, version) of plain fields, a
# generated function reads each field once, checks its exact type inline and sets the slots
# (frozen dataclasses: allocate, then set, as kafkawire.codec's readers do kio's); anything it
# does not expect (a field missing or extra, another type) returns None and the generic path
# below decodes it or names the problem.

# How a field's type is checked inline (None: no fast path for a record with that type).
_FAST_CHECKS: dict[Any, str] = {
    int: "type({v}) is int",
    bool: "type({v}) is bool",
    str: "type({v}) is str",
    str | None: "{v} is None or type({v}) is str",
    tuple[int, ...]: "type({v}) is list",
    tuple[int, ...] | None: "{v} is None or type({v}) is list",
}


def _fast_uuid(value: Any) -> uuid.UUID | None:
    try:
        return _decode_uuid(value)
    except CorruptRecordError:
        return None


def _fast_decoder(type_id: int, version: int) -> Callable[[dict[str, Any]], Any] | None:
    cls = RECORD_TYPES[type_id]
    hints = get_type_hints(cls)
    fields_ = {f.name: f for f in dataclasses.fields(cls)}
    env: dict[str, Any] = {"new": object.__new__, "cls": cls, "fast_uuid": _fast_uuid}
    body = [f"    if len(data) != {len(_KNOWN_FIELDS[(type_id, version)])}: return None"]
    sets = []
    for index, spec in enumerate(_FIELD_SPECS[type_id]):
        v = f"v{index}"
        env[f"set{index}"] = getattr(cls, spec.name).__set__
        if spec.since > version:  # newer than this version: its default (seed 001)
            default = fields_[spec.name].default
            if default is dataclasses.MISSING:
                return None
            env[f"default{index}"] = default
            sets.append(f"    set{index}(o, default{index})")
            continue
        hint = hints[spec.name]
        body.append(f"    {v} = data.get({spec.name!r}, data)")  # data itself: missing
        if hint is uuid.UUID:
            body.append(f"    {v} = fast_uuid({v})")
            body.append(f"    if {v} is None: return None")
        elif hint in _FAST_CHECKS:
            body.append(f"    if not ({_FAST_CHECKS[hint].format(v=v)}): return None")
            if "list" in _FAST_CHECKS[hint]:
                body.append(f"    if {v} is not None:")
                body.append(f"        for item in {v}:")
                body.append("            if type(item) is not int: return None")
                body.append(f"        {v} = tuple({v})")
        else:
            return None
        sets.append(f"    set{index}(o, {v})")
    source = "def fast(data):\n" + "\n".join([*body, "    o = new(cls)", *sets, "    return o"])
    exec(compile(source, f"<metadata.records fast {cls.__name__} v{version}>", "exec"), env)
    return env["fast"]  # type: ignore[no-any-return]


_FAST_DECODERS: Mapping[tuple[int, int], Callable[[dict[str, Any]], Any] | None] = {
    key: _fast_decoder(*key) for key in _KNOWN_FIELDS
}


def decode_record(value: bytes) -> MetadataRecord:
    """Parse one metadata record; UnknownRecordError for a newer type/version, else Corrupt."""
    try:
        parsed = msgpack.unpackb(value, raw=False, strict_map_key=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise CorruptRecordError(f"not msgpack: {e}") from e
    if not isinstance(parsed, list) or len(parsed) != 3:
        raise CorruptRecordError("a metadata record is [type_id, version, fields]")
    type_id, version, data = parsed
    if not isinstance(type_id, int) or not isinstance(version, int) or not isinstance(data, dict):
        raise CorruptRecordError("bad record header types")
    cls = RECORD_TYPES.get(type_id)
    if cls is None:
        raise UnknownRecordError(f"unknown metadata record type {type_id}")
    if not 0 <= version <= cls.VERSION:
        raise UnknownRecordError(f"{cls.__name__} version {version} is not supported")
    fast = _FAST_DECODERS[(type_id, version)]
    if fast is not None:
        record = fast(data)
        if record is not None:
            return record  # type: ignore[no-any-return]
    return _decode_fields(cls, type_id, version, data)


def _decode_fields(
    cls: type[MetadataRecord], type_id: int, version: int, data: dict[str, Any]
) -> MetadataRecord:
    """The generic path: each field through its decoder, naming what is wrong."""
    specs = _FIELD_SPECS[type_id]
    known = _KNOWN_FIELDS[(type_id, version)]
    if not known.issuperset(data):
        extra = set(data) - known
        raise CorruptRecordError(f"{cls.__name__} v{version} has unknown fields {sorted(extra)}")
    kwargs: dict[str, Any] = {}
    for spec in specs:
        if spec.since > version:
            continue  # a field newer than this version loads with its default (seed 001)
        if spec.name not in data:
            if spec.has_default:
                continue
            raise CorruptRecordError(f"{cls.__name__} is missing field {spec.name}")
        try:
            kwargs[spec.name] = spec.decode(data[spec.name])
        except CorruptRecordError as e:
            raise CorruptRecordError(f"{cls.__name__}.{spec.name}: {e}") from e
    return cls(**kwargs)


def record_to_json(record: MetadataRecord) -> dict[str, Any]:
    """Kafka's dump-log form: {"type": "TOPIC_RECORD", "version": 0, "data": {camelCase}}."""
    cls = type(record)
    data = {
        _camel(f.name): _plain(getattr(record, f.name), uuid_to_str)
        for f in dataclasses.fields(record)
    }
    return {"type": _type_name(cls), "version": cls.VERSION, "data": data}
