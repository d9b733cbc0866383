"""Every metadata log segment and snapshot of every node under a directory, one file at a
time, decoded with the project's own code (read by Spark as `minikraft-metadata`,
analytics.engine.data_sources, or staged as Parquet, analytics.engine.staging).

Each record becomes one row (schema below); a damaged region (a batch failing its CRC or framing,
analytics.read.log_scan) becomes one row flagged corrupt at offset -1 with its byte position and its
`damage` ("corrupt": bit rot, a finding; "torn": a crash's torn tail, not one), and reading goes
on at the next valid batch. Record values that do not decode (a newer minikraft's type) become
corrupt rows too (damage null), and reading goes on. With the option `source_node`, only that
node's segments are decoded in full: the other nodes' segments give their control batches only
(rules 1 and 5 read every node's LeaderChange and Voters records; rule 2 compares the others
batch by batch, from the batch rows: one row per batch or damaged region).
The pure-Python part (`discover_files`, `iter_file_rows`) is shared with analytics.baseline, so the
Spark audit and the single-process pass read the same rows. Other on-disk kinds (broker event
journals, the chaos ack journal, partition logs) plug in as further `FileSpec.kind`s and readers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from analytics.read.log_scan import CORRUPT, Damage, walk_batches
from metadata.records import (
    BROKER_FLAG_UNCHANGED,
    LAST_KNOWN_LEADER_UNCHANGED,
    LEADER_RECOVERY_STATE_UNCHANGED,
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    CorruptRecordError,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnknownRecordError,
    UnregisterBrokerRecord,
    decode_record,
)
from raft.core.control_records import (
    ControlRecordError,
    LeaderChangeRecord,
    VotersRecord,
    control_version,
    decode_control,
)
from raft.core.replica_key import uuid_to_str
from storage.core.record_batch import Record, RecordBatch, decode_batch

METADATA_PARTITION_DIR_NAME = "__cluster_metadata-0"
META_PROPERTIES_FILE_NAME = "meta.properties"
KIND_SEGMENT = "segment"
KIND_SNAPSHOT = "snapshot"
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_NODE_DIR = re.compile(r"^(controller|broker)-(\d+)$")

# (column, Spark DDL type); the order is the row tuple's order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("node", "INT"),
    ("role", "STRING"),
    ("directory_id", "STRING"),
    ("file", "STRING"),
    ("kind", "STRING"),
    ("snapshot_end_offset", "BIGINT"),
    ("position", "BIGINT"),
    ("offset", "BIGINT"),
    ("epoch", "INT"),
    ("batch_timestamp_ms", "BIGINT"),
    ("is_control", "BOOLEAN"),
    ("record_type", "STRING"),
    ("version", "INT"),
    ("record_hash", "BIGINT"),
    ("corrupt", "BOOLEAN"),
    ("corrupt_reason", "STRING"),
    ("damage", "STRING"),
    ("topic_id", "STRING"),
    ("topic_name", "STRING"),
    ("partition_id", "INT"),
    ("leader", "INT"),
    ("leader_epoch", "INT"),
    ("partition_epoch", "INT"),
    ("replicas", "ARRAY<INT>"),
    ("isr", "ARRAY<INT>"),
    ("elr", "ARRAY<INT>"),
    ("last_known_elr", "ARRAY<INT>"),
    ("last_known_leader", "INT"),
    ("leader_recovery_state", "INT"),
    ("adding_replicas", "ARRAY<INT>"),
    ("removing_replicas", "ARRAY<INT>"),
    ("leader_id", "INT"),
    ("voters", "ARRAY<STRUCT<id: INT, directory_id: STRING>>"),
    ("broker_id", "INT"),
    ("broker_epoch", "BIGINT"),
    ("fenced", "BOOLEAN"),
    ("resource_type", "INT"),
    ("resource", "STRING"),
    ("name", "STRING"),
    ("value", "STRING"),
)
COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in COLUMNS)
COL: dict[str, int] = {name: i for i, name in enumerate(COLUMN_NAMES)}
SCHEMA_DDL = ", ".join(f"`{name}` {ddl}" for name, ddl in COLUMNS)

# One row per batch (or damaged region) of every file: what rule 2 and the damage report read.
BATCH_COLUMNS: tuple[tuple[str, str], ...] = (
    ("node", "INT"),
    ("role", "STRING"),
    ("file", "STRING"),
    ("kind", "STRING"),
    ("snapshot_end_offset", "BIGINT"),
    ("log_end", "BOOLEAN"),
    ("position", "BIGINT"),
    ("size", "BIGINT"),
    ("base_offset", "BIGINT"),
    ("last_offset", "BIGINT"),
    ("epoch", "INT"),
    ("timestamp_ms", "BIGINT"),
    ("is_control", "BOOLEAN"),
    ("crc", "BIGINT"),
    ("damage", "STRING"),
    ("damage_reason", "STRING"),
    ("after_offset", "BIGINT"),
    ("resumed_position", "BIGINT"),
    ("resumed_offset", "BIGINT"),
)
BATCH_SCHEMA_DDL = ", ".join(f"`{name}` {ddl}" for name, ddl in BATCH_COLUMNS)


@dataclass(frozen=True, slots=True)
class FileSpec:
    """One file to read, with what its node directory says about it."""

    node: int
    role: str
    directory_id: str | None
    file: str
    kind: str
    snapshot_end_offset: int | None = None
    log_end: bool = False  # the last segment of its node's log: only there can a tail be torn
    control_only: bool = False  # decode control batches only (not the replay source node)


def _read_properties(path: Path) -> dict[str, str]:
    """meta.properties as key -> value; read-only (never assigns a directory id, unlike startup)."""
    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return out
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!" or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


def _node_of(metadata_dir: Path, props: dict[str, str]) -> tuple[int, str]:
    role = "node"
    for parent in metadata_dir.parents:
        match = _NODE_DIR.match(parent.name)
        if match:
            role = match.group(1)
            if "node.id" not in props:
                return int(match.group(2)), role
            break
    try:
        return int(props.get("node.id", "-1")), role
    except ValueError:
        return -1, role


def discover_files(root: str | Path) -> list[FileSpec]:
    """Every metadata segment and snapshot under root, in a stable order."""
    specs: list[FileSpec] = []
    for partition_dir in sorted(Path(root).rglob(METADATA_PARTITION_DIR_NAME)):
        if not partition_dir.is_dir():
            continue
        props = _read_properties(partition_dir.parent / META_PROPERTIES_FILE_NAME)
        node, role = _node_of(partition_dir.parent, props)
        directory_id = props.get("directory.id") or props.get("storage.id")
        for path in sorted(partition_dir.iterdir()):
            if _SEGMENT_NAME.match(path.name):
                specs.append(FileSpec(node, role, directory_id, str(path), KIND_SEGMENT))
                continue
            snapshot = _SNAPSHOT_NAME.match(path.name)
            if snapshot:
                specs.append(FileSpec(node, role, directory_id, str(path), KIND_SNAPSHOT,
                                      int(snapshot.group(1))))
    last_segment: dict[int, int] = {}
    for index, spec in enumerate(specs):
        if spec.kind == KIND_SEGMENT:
            last_segment[spec.node] = index  # sorted by base offset within a node's directory
    return [dataclasses.replace(spec, log_end=True) if last_segment.get(spec.node) == i else spec
            for i, spec in enumerate(specs)]


def _hash64(value: bytes) -> int:
    """A signed 64-bit digest of a record's bytes: rule 2 compares these across replicas."""
    return int.from_bytes(hashlib.blake2b(value, digest_size=8).digest(), "big", signed=True)


def _envelope_version(value: bytes) -> int | None:
    """The version a record was written with (`[type_id, version, fields]`), without re-decoding."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(value[:16])
    try:
        unpacker.read_array_header()
        unpacker.skip()
        version = unpacker.unpack()
    except (ValueError, msgpack.OutOfData, msgpack.UnpackException):
        return None
    return version if isinstance(version, int) else None


def _ints(values: Sequence[int] | None) -> list[int] | None:
    return None if values is None else list(values)


def _fill_metadata(row: list[Any], value: bytes) -> None:
    record = decode_record(value)
    row[COL["record_type"]] = type(record).__name__
    if isinstance(record, PartitionChangeRecord):
        row[COL["topic_id"]] = uuid_to_str(record.topic_id)
        row[COL["partition_id"]] = record.partition_id
        # Seed 001: None / -1 / -2 mean "unchanged"; the columns are null then.
        row[COL["leader"]] = None if record.leader == NO_LEADER_CHANGE else record.leader
        row[COL["replicas"]] = _ints(record.replicas)
        row[COL["isr"]] = _ints(record.isr)
        row[COL["elr"]] = _ints(record.eligible_leader_replicas)
        row[COL["last_known_elr"]] = _ints(record.last_known_elr)
        row[COL["last_known_leader"]] = (
            None if record.last_known_leader == LAST_KNOWN_LEADER_UNCHANGED
            else record.last_known_leader
        )
        row[COL["leader_recovery_state"]] = (
            None if record.leader_recovery_state == LEADER_RECOVERY_STATE_UNCHANGED
            else record.leader_recovery_state
        )
        row[COL["adding_replicas"]] = _ints(record.adding_replicas)
        row[COL["removing_replicas"]] = _ints(record.removing_replicas)
    elif isinstance(record, PartitionRecord):
        row[COL["topic_id"]] = uuid_to_str(record.topic_id)
        row[COL["partition_id"]] = record.partition_id
        row[COL["leader"]] = record.leader
        row[COL["leader_epoch"]] = record.leader_epoch
        row[COL["partition_epoch"]] = record.partition_epoch
        row[COL["replicas"]] = list(record.replicas)
        row[COL["isr"]] = list(record.isr)
        row[COL["elr"]] = list(record.eligible_leader_replicas)
        row[COL["last_known_elr"]] = list(record.last_known_elr)
        row[COL["last_known_leader"]] = record.last_known_leader
        row[COL["leader_recovery_state"]] = record.leader_recovery_state
        row[COL["adding_replicas"]] = list(record.adding_replicas)
        row[COL["removing_replicas"]] = list(record.removing_replicas)
    elif isinstance(record, TopicRecord):
        row[COL["topic_id"]] = uuid_to_str(record.topic_id)
        row[COL["topic_name"]] = record.name
    elif isinstance(record, RemoveTopicRecord):
        row[COL["topic_id"]] = uuid_to_str(record.topic_id)
    elif isinstance(record, RegisterBrokerRecord):
        row[COL["broker_id"]] = record.broker_id
        row[COL["broker_epoch"]] = record.broker_epoch
        row[COL["fenced"]] = record.fenced
    elif isinstance(record, (FenceBrokerRecord, UnfenceBrokerRecord)):
        row[COL["broker_id"]] = record.id
        row[COL["broker_epoch"]] = record.epoch
        row[COL["fenced"]] = isinstance(record, FenceBrokerRecord)
    elif isinstance(record, BrokerRegistrationChangeRecord):
        row[COL["broker_id"]] = record.broker_id
        row[COL["broker_epoch"]] = record.broker_epoch
        row[COL["fenced"]] = (
            None if record.fenced == BROKER_FLAG_UNCHANGED else bool(record.fenced)
        )
    elif isinstance(record, UnregisterBrokerRecord):
        row[COL["broker_id"]] = record.broker_id
        row[COL["broker_epoch"]] = record.broker_epoch
    elif isinstance(record, ConfigRecord):
        row[COL["resource_type"]] = record.resource_type
        row[COL["resource"]] = record.resource_name
        row[COL["name"]] = record.name
        row[COL["value"]] = record.value
    elif isinstance(record, FeatureLevelRecord):
        row[COL["name"]] = record.name
        row[COL["value"]] = str(record.feature_level)


def _fill_control(row: list[Any], control: Record) -> None:
    record = decode_control(control)
    row[COL["record_type"]] = type(record).__name__
    if isinstance(record, LeaderChangeRecord):
        row[COL["leader_id"]] = record.leader_id
    elif isinstance(record, VotersRecord):
        # A zero directory id is kept as written: rule 5's check looks for it.
        row[COL["voters"]] = [
            {"id": v.voter_id, "directory_id": uuid_to_str(v.voter_directory_id)}
            for v in record.voters
        ]


def _field_sets(cls: Any) -> tuple[dict[int, frozenset[str]], frozenset[str], dict[str, Any]]:
    """(known fields per version, required fields, wire defaults) of a record type."""
    fields = dataclasses.fields(cls)
    version: int = cls.VERSION
    known = {v: frozenset(f.name for f in fields if f.metadata.get("since", 0) <= v)
             for v in range(version + 1)}
    required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING)
    defaults = {f.name: list(f.default) if isinstance(f.default, tuple) else f.default
                for f in fields if f.default is not dataclasses.MISSING}
    return known, required, defaults


_PARTITION_FIELDS = {cls.TYPE_ID: (cls.__name__, *_field_sets(cls))
                     for cls in (PartitionRecord, PartitionChangeRecord)}
_PARTITION_RECORD_ID = PartitionRecord.TYPE_ID
# (column index, wire field): the row columns a partition record fills, named as on the wire.
_WIRE_NAMES = {"elr": "eligible_leader_replicas"}
_COLUMNS_FULL = tuple((COL[c], _WIRE_NAMES.get(c, c)) for c in (
    "partition_id", "leader", "leader_recovery_state", "leader_epoch", "partition_epoch",
    "last_known_leader", "replicas", "isr", "elr", "last_known_elr", "adding_replicas",
    "removing_replicas"))
_UNCHANGED: dict[str, int] = {"leader": NO_LEADER_CHANGE, "last_known_leader": LAST_KNOWN_LEADER_UNCHANGED,
              "leader_recovery_state": LEADER_RECOVERY_STATE_UNCHANGED}


def partition_values(value: bytes) -> tuple[Any, ...] | None:
    """(record type, version, topic id, then the _COLUMNS_FULL values) of a PartitionRecord /
    PartitionChangeRecord straight from its msgpack map, the bulk of a metadata log; None for
    anything else or anything unexpected, which then goes through decode_record, the one
    definition of the format (metadata.records). Value types are checked where the values
    become Arrow columns (analytics.engine.staging.to_arrow, analytics.engine.record_columns): a value that
    does not fit its column makes that row corrupt there."""
    unpacked = unpack_partition(value)
    return None if unpacked is None else values_of(unpacked)


Unpacked = tuple[int, int, dict[str, Any], bytes]  # type id, version, fields, topic id bytes


def unpack_partition(value: bytes) -> Unpacked | None:
    """partition_values' first half: the msgpack map of a partition record, checked against
    its type's fields (None: not a partition record, or not a well-formed one). A caller
    that wants only some partitions' values reads data["partition_id"] and the topic's bytes
    here and calls values_of for those alone."""
    try:
        type_id, version, data = msgpack.unpackb(value, raw=False, strict_map_key=True)
        _name, known, required, _defaults = _PARTITION_FIELDS[type_id]
        fields = known[version]
        topic = data["topic_id"]
    except (ValueError, TypeError, KeyError, msgpack.ExtraData, msgpack.FormatError,
            msgpack.StackError):
        return None
    keys = data.keys()
    if not keys <= fields or not required <= keys or type(topic) is not bytes or len(topic) != 16:
        return None
    return type_id, version, data, topic


def values_of(unpacked: Unpacked) -> tuple[Any, ...]:
    """partition_values' second half: the row values of an unpack_partition result."""
    type_id, version, data, topic = unpacked
    get = data.get
    out = [get(column, default) for column, default in _FIELD_PLAN[type_id]]
    for index, unchanged in _UNCHANGED_AT[type_id]:
        # Seed 001: -1 / -2 mean "unchanged" in a change record; the columns are null then.
        if out[index] == unchanged:
            out[index] = None
    topic_id = _TOPIC_IDS.get(topic)
    if topic_id is None:
        topic_id = uuid_to_str(uuid.UUID(bytes=topic))
        if len(_TOPIC_IDS) < _TOPIC_IDS_CACHED:
            _TOPIC_IDS[topic] = topic_id
    return (_PARTITION_FIELDS[type_id][0], version, topic_id, *out)


# A log names few topics, each in many records: their base64 form is computed once.
_TOPIC_IDS: dict[bytes, str] = {}
_TOPIC_IDS_CACHED = 100_000


_WIRE_FULL = tuple(column for _index, column in _COLUMNS_FULL)
_FIELD_PLAN = {type_id: tuple((column, spec[3].get(column)) for column in _WIRE_FULL)
               for type_id, spec in _PARTITION_FIELDS.items()}
_UNCHANGED_AT = {type_id: () if type_id == _PARTITION_RECORD_ID else tuple(
    (index, _UNCHANGED[column]) for index, column in enumerate(_WIRE_FULL)
    if column in _UNCHANGED) for type_id in _PARTITION_FIELDS}
# The row columns partition_values fills, in its order.
PARTITION_VALUE_COLUMNS: tuple[int, ...] = (
    COL["record_type"], COL["version"], COL["topic_id"],
    *(index for index, _column in _COLUMNS_FULL))
PARTITION_VALUE_NAMES: tuple[str, ...] = tuple(COLUMN_NAMES[i] for i in PARTITION_VALUE_COLUMNS)


def _fill_partition_fast(row: list[Any], value: bytes) -> bool:
    """partition_values into a row; False (nothing filled) where it gives None."""
    values = partition_values(value)
    if values is None:
        return False
    for index, v in zip(PARTITION_VALUE_COLUMNS, values, strict=True):
        row[index] = v
    return True


_RECORD_TYPE, _VERSION, _TOPIC_ID = COL["record_type"], COL["version"], COL["topic_id"]


def file_template(spec: FileSpec) -> list[Any]:
    template: list[Any] = [None] * len(COLUMNS)
    template[COL["node"]] = spec.node
    template[COL["role"]] = spec.role
    template[COL["directory_id"]] = spec.directory_id
    template[COL["file"]] = spec.file
    template[COL["kind"]] = spec.kind
    template[COL["snapshot_end_offset"]] = spec.snapshot_end_offset
    template[COL["corrupt"]] = False
    return template


def damage_row(template: list[Any], position: int, reason: str, damage: str | None
                ) -> tuple[Any, ...]:
    row = template.copy()
    row[COL["offset"]], row[COL["position"]] = -1, position
    row[COL["corrupt"]], row[COL["corrupt_reason"]] = True, reason
    row[COL["damage"]] = damage
    return tuple(row)


def batch_base_row(template: list[Any], batch: RecordBatch, position: int) -> list[Any]:
    """A file's template with one batch's columns set: what each of its rows starts from."""
    base = template.copy()
    base[COL["position"]] = position
    base[COL["epoch"]] = batch.leader_epoch
    base[COL["batch_timestamp_ms"]] = batch.timestamp_ms
    base[COL["is_control"]] = batch.is_control
    return base


def record_row(base: list[Any], batch: RecordBatch, index: int, hashes: bool,
               try_partition: bool = True) -> tuple[Any, ...]:
    """The row of batch.records[index] (base: batch_base_row); a record that does not decode
    is a corrupt row. try_partition False: the caller already knows partition_values refuses
    it."""
    row = base.copy()
    row[_OFFSET] = batch.offset_of(index)
    record = batch.records[index]
    value = record.value or b""  # a null value cannot decode: reported corrupt
    if hashes:
        row[_HASH] = _hash64(value)
    if batch.is_control:
        row[_VERSION] = control_version(value)
        try:
            _fill_control(row, record)
        except (CorruptRecordError, UnknownRecordError, ControlRecordError) as exc:
            row[COL["corrupt"]], row[COL["corrupt_reason"]] = True, str(exc)
    elif not (try_partition and _fill_partition_fast(row, value)):
        row[_VERSION] = _envelope_version(value)
        try:
            _fill_metadata(row, value)
        except (CorruptRecordError, UnknownRecordError, ControlRecordError) as exc:
            row[COL["corrupt"]], row[COL["corrupt_reason"]] = True, str(exc)
    return tuple(row)


_OFFSET, _HASH = COL["offset"], COL["record_hash"]


def _batch_rows(template: list[Any], batch: RecordBatch, position: int, hashes: bool
                ) -> Iterator[tuple[Any, ...]]:
    base = batch_base_row(template, batch, position)
    for index in range(len(batch.records)):
        yield record_row(base, batch, index, hashes)


def read_file(spec: FileSpec) -> bytes | str:
    try:
        return Path(spec.file).read_bytes()
    except OSError as exc:
        return f"unreadable: {exc}"


def iter_file_rows(spec: FileSpec, hashes: bool = True) -> Iterator[tuple[Any, ...]]:
    """Rows of one file in schema order, a damaged region as one corrupt row (reading resumes
    after it). hashes: fill record_hash (the baseline's per-record rule 2; the Spark audit
    compares batches instead). A control_only spec yields its control batches' rows only."""
    template = file_template(spec)
    data = read_file(spec)
    if isinstance(data, str):
        yield damage_row(template, 0, data, CORRUPT)
        return
    for item in walk_batches(data, spec.log_end and spec.kind == KIND_SEGMENT):
        if isinstance(item, Damage):
            yield damage_row(template, item.position, item.reason, item.kind)
            continue
        header, _crc = item
        if spec.control_only and not header.is_control:
            continue
        batch, _size = decode_batch(data, header.position)  # CRC already checked: cannot fail
        yield from _batch_rows(template, batch, header.position, hashes)


def iter_file_batches(spec: FileSpec) -> Iterator[tuple[Any, ...]]:
    """One row per batch (BATCH_COLUMNS), from headers and checksums only, and one per
    damaged region (its claimed offsets, the good offset before it, where reading resumed)."""
    head = (spec.node, spec.role, spec.file, spec.kind, spec.snapshot_end_offset, spec.log_end)
    data = read_file(spec)
    if isinstance(data, str):
        yield (*head, 0, 0, None, None, None, None, None, None, CORRUPT, data, None,
               None, None)
        return
    for item in walk_batches(data, spec.log_end and spec.kind == KIND_SEGMENT):
        if isinstance(item, Damage):
            yield (*head, item.position, None, item.claimed_base_offset,
                   item.claimed_last_offset, None, None, None, None, item.kind, item.reason,
                   item.after_offset, item.resumed_position, item.resumed_offset)
            continue
        header, crc = item
        yield (*head, header.position, header.size, header.base_offset, header.last_offset,
               header.leader_epoch, header.timestamp_ms, header.is_control, crc, None, None,
               None, None, None)


# -- Spark side: imported lazily so the pure readers work without pyspark ---------------------
