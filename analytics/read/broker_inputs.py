"""Readers for what brokers and clients wrote, for rules 20, 22 and 23 (INVARIANTS.md).

Three kinds of file, each read one input partition per file, each row a plain tuple in the
column order below (shared by the Spark DataSources and analytics.baseline):
- broker event journals `journal/broker-<id>.journal`: msgpack maps written back to back
  (`{"event": "HwmAdvanced", "version": 0, ...}`); decoded as plain maps, never with broker code
  (analytics may not import broker.*);
- consumer journals `journal/*consumers.journal`: a consumer group's `read` and `commit`
  entries (cluster/chaos/group_consumers.py declares them);
- ack journals (any other `journal/*.journal`): the producer's `send` and `ack` entries, each
  saying whether its producer is idempotent (absent in older journals: read as null); a keyed
  write's entry may carry `record_key` (the Kafka record key, bytes or text) and `tombstone`
  (true for a null value), which rule 25 judges compacted topics by (absent: not judged);
- partition data logs `<log.dir>/<topic>-<partition>/<offset>.log`: the one batch format
  (storage.core.record_batch); a record's key for rule 23 is its value up to the first ':'
  (`<producer>-<seq>`); its Kafka record key (rule 25, as hex) is read only for the partitions
  some replica's log cleaner has checkpointed (a compacted topic's: the others cost nothing).
A torn or garbled entry or batch becomes one row flagged corrupt with its byte position and the
file's reading stops there; nothing here raises on bad input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from storage.core.record_batch import CorruptBatchError, iter_segment_batches

JOURNAL_DIR_NAME = "journal"
_BROKER_JOURNAL_NAME = re.compile(r"^broker-(\d+)\.journal$")
_CONSUMER_JOURNAL_NAME = re.compile(r"^(?:.*-)?consumers\.journal$")
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
PARTITION_METADATA_FILE = "partition.metadata"  # Kafka's: `version: 0`, `topic_id: <base64>`
_SEGMENT_NAME = re.compile(r"^\d{20}\.log$")
_NODE_DIR = re.compile(r"^(?:broker|controller)-(\d+)$")
METADATA_PARTITION_DIR_NAME = "__cluster_metadata-0"

JOURNAL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("file", "STRING"),
    ("node", "INT"),
    ("position", "BIGINT"),
    ("event", "STRING"),
    ("broker_id", "INT"),
    ("topic", "STRING"),
    ("partition", "INT"),
    ("leader_epoch", "INT"),
    ("ts", "BIGINT"),
    ("old", "BIGINT"),
    ("new", "BIGINT"),
    ("isr_size", "INT"),
    ("min_isr", "INT"),
    ("isr", "ARRAY<INT>"),
    ("role", "STRING"),
    ("leader_id", "INT"),
    ("from_offset", "BIGINT"),
    ("to_offset", "BIGINT"),
    ("old_state", "INT"),
    ("new_state", "INT"),
    ("reason", "STRING"),
    # RoleChanged's (and the AlterPartition events'): the partition's leader recovery state the
    # broker acted on (rule 21); null where the event or an older journal has none.
    ("leader_recovery_state", "INT"),
    ("corrupt", "BOOLEAN"),
    ("corrupt_reason", "STRING"),
)
ACK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("file", "STRING"),
    ("position", "BIGINT"),
    ("event", "STRING"),
    ("producer_id", "STRING"),
    ("seq", "BIGINT"),
    ("key", "STRING"),
    ("topic", "STRING"),
    ("partition", "INT"),
    ("acks", "INT"),
    ("error", "STRING"),
    ("offset", "BIGINT"),
    ("leader_epoch", "INT"),
    ("ts", "BIGINT"),
    ("idempotent", "BOOLEAN"),
    ("record_key", "STRING"),  # hex of the Kafka record key (rule 25); null: not journaled
    ("tombstone", "BOOLEAN"),
    ("corrupt", "BOOLEAN"),
    ("corrupt_reason", "STRING"),
)
CONSUMER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("file", "STRING"),
    ("position", "BIGINT"),
    ("event", "STRING"),
    ("group_id", "STRING"),
    ("member", "STRING"),
    ("topic", "STRING"),
    ("partition", "INT"),
    ("offset", "BIGINT"),
    ("key", "STRING"),
    ("ts", "BIGINT"),
    ("corrupt", "BOOLEAN"),
    ("corrupt_reason", "STRING"),
)
PARTITION_LOG_COLUMNS: tuple[tuple[str, str], ...] = (
    ("node", "INT"),
    ("file", "STRING"),
    ("topic", "STRING"),
    ("partition", "INT"),
    ("position", "BIGINT"),
    ("offset", "BIGINT"),
    ("leader_epoch", "INT"),
    ("key", "STRING"),
    ("record_key", "STRING"),  # hex of the Kafka record key, for compacted partitions only
    ("corrupt", "BOOLEAN"),
    ("corrupt_reason", "STRING"),
)


def ddl(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in columns)


def names(columns: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    return tuple(name for name, _ in columns)


@dataclass(frozen=True, slots=True)
class JournalFile:
    file: str
    node: int | None  # the broker id for a broker journal, None for an ack journal
    # (topic name, topic id) of every live partition directory (partition.metadata): a broker
    # journal's events of another id under a live name are of a deleted incarnation
    live_topic_ids: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class PartitionLogFile:
    node: int
    topic: str
    partition: int
    file: str
    keys: bool = False  # read the records' keys: a log cleaner has checkpointed the partition


def _journal_paths(root: str | Path) -> Iterator[Path]:
    base = Path(root)
    dirs = [base] if base.name == JOURNAL_DIR_NAME else []
    dirs += sorted(p for p in base.rglob(JOURNAL_DIR_NAME) if p.is_dir())
    for journal_dir in dirs:
        yield from sorted(journal_dir.glob("*.journal"))


def discover_journals(root: str | Path) -> tuple[list[JournalFile], list[JournalFile]]:
    """(broker event journals, ack journals) under every `journal/` directory below root."""
    brokers: list[JournalFile] = []
    acks: list[JournalFile] = []
    live: frozenset[tuple[str, str]] | None = None
    for path in _journal_paths(root):
        match = _BROKER_JOURNAL_NAME.match(path.name)
        if match:
            live = live_topic_ids(root) if live is None else live
            brokers.append(JournalFile(str(path), int(match.group(1)), live))
        elif not _CONSUMER_JOURNAL_NAME.match(path.name):
            acks.append(JournalFile(str(path), None))
    return brokers, acks


def discover_consumer_journals(root: str | Path) -> list[JournalFile]:
    """The consumer groups' journals under every `journal/` directory below root."""
    return [JournalFile(str(p), None) for p in _journal_paths(root)
            if _CONSUMER_JOURNAL_NAME.match(p.name)]


def _node_id(partition_dir: Path) -> int:
    """The broker owning a partition directory: its log dir's meta.properties, else the
    nearest `broker-<id>` ancestor, else -1."""
    props = partition_dir.parent / "meta.properties"
    try:
        for line in props.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "node.id":
                return int(value.strip())
    except (OSError, UnicodeDecodeError, ValueError):
        pass
    for parent in partition_dir.parents:
        match = _NODE_DIR.match(parent.name)
        if match:
            return int(match.group(1))
    return -1


def live_topic_ids(root: str | Path) -> frozenset[tuple[str, str]]:
    """(topic, topic id) named by the partition.metadata of every live partition directory
    below root (a deleted partition's `-delete` and a stray's `-stray` directories are not)."""
    found = set()
    for path in Path(root).rglob(PARTITION_METADATA_FILE):
        match = _PARTITION_DIR.match(path.parent.name)
        if match is None:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "topic_id" and value.strip():
                found.add((match.group(1), value.strip()))
    return frozenset(found)


def incarnation(topic: str | None, topic_id: str | None,
                live: dict[str, set[str]]) -> str | None:
    """The audit's name of a journal event's topic: a deleted incarnation of a name that lives
    on under another id gets `<topic>@<topic id>`, so the rules never merge a deleted topic's
    partitions with those of the topic created again under its name (issue 38)."""
    if topic is None or not topic_id:
        return topic
    ids = live.get(topic)
    if not ids or topic_id in ids:
        return topic
    return f"{topic}@{topic_id}"


LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LOG_BOUND_COLUMNS: tuple[tuple[str, str], ...] = (
    ("node", "INT"),
    ("topic", "STRING"),
    ("partition", "INT"),
    ("log_start", "BIGINT"),
    ("cleaned_to", "BIGINT"),
)


def _checkpoint_offsets(path: Path) -> dict[tuple[str, int], int]:
    """Kafka's `topic partition offset` checkpoint lines; {} for a missing or garbled file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    found: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].lstrip("-").isdigit():
            found[(parts[0], int(parts[1]))] = int(parts[2])
    return found


def read_log_bounds(root: str | Path) -> list[tuple[Any, ...]]:
    """(node, topic, partition, log_start, cleaned_to) per replica with either checkpoint, in
    LOG_BOUND_COLUMNS order: where retention or DeleteRecords moved the log start (rule 24) and
    how far the log cleaner compacted (rule 25; null for a partition never cleaned)."""
    rows: dict[tuple[int, str, int], list[int | None]] = {}
    for path in sorted(Path(root).rglob(LOG_START_CHECKPOINT)):
        node = _node_id(path.parent / "x")
        for (topic, partition), offset in _checkpoint_offsets(path).items():
            rows.setdefault((node, topic, partition), [None, None])[0] = offset
    for path in sorted(Path(root).rglob(CLEANER_CHECKPOINT)):
        node = _node_id(path.parent / "x")
        for (topic, partition), offset in _checkpoint_offsets(path).items():
            rows.setdefault((node, topic, partition), [None, None])[1] = offset
    return [(node, topic, partition, start, cleaned)
            for (node, topic, partition), (start, cleaned) in sorted(rows.items())]


def cleaned_partitions(root: str | Path) -> frozenset[tuple[str, int]]:
    """(topic, partition) named in any replica's cleaner checkpoint below root: the partitions of
    compacted topics the log cleaner has cleaned (rule 25). One never cleaned has had nothing
    taken by compaction, so rule 25 has nothing to judge there."""
    return frozenset(key for path in Path(root).rglob(CLEANER_CHECKPOINT)
                     for key in _checkpoint_offsets(path))


def discover_partition_logs(root: str | Path) -> list[PartitionLogFile]:
    """Every data partition segment `<topic>-<partition>/<offset>.log` below root, its records'
    keys read where the partition was cleaned (cleaned_partitions)."""
    out: list[PartitionLogFile] = []
    cleaned = cleaned_partitions(root)
    for path in sorted(Path(root).rglob("*.log")):
        parent = path.parent
        match = _PARTITION_DIR.match(parent.name)
        if (not _SEGMENT_NAME.match(path.name) or not match
                or parent.name == METADATA_PARTITION_DIR_NAME or parent.parent.name == "logs"):
            continue
        topic, partition = match.group(1), int(match.group(2))
        out.append(PartitionLogFile(_node_id(parent), topic, partition, str(path),
                                    (topic, partition) in cleaned))
    return out


def _iter_maps(path: str) -> Iterator[tuple[int, Any, str | None]]:
    """(byte position, entry, None) per whole entry, then (position, None, reason) once if the
    file is unreadable, torn or garbled."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        yield 0, None, f"unreadable: {exc}"
        return
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    position = 0
    while position < len(data):
        try:
            entry = unpacker.unpack()
        except msgpack.OutOfData:
            yield position, None, f"torn entry: {len(data) - position} trailing bytes"
            return
        except Exception as exc:  # msgpack raises several types for garbage
            yield position, None, f"undecodable entry: {exc}"
            return
        if not isinstance(entry, dict):
            yield position, None, f"entry is {type(entry).__name__}, not a map"
            return
        yield position, entry, None
        position = unpacker.tell()


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and all(_int(v) is not None for v in value):
        return list(value)
    return None


def iter_journal_rows(spec: JournalFile) -> Iterator[tuple[Any, ...]]:
    """One row per broker journal event, in JOURNAL_COLUMNS order (the topic as `incarnation`
    names it)."""
    live: dict[str, set[str]] = {}
    for name, topic_id in spec.live_topic_ids:
        live.setdefault(name, set()).add(topic_id)
    for position, e, reason in _iter_maps(spec.file):
        if e is None:
            yield (spec.file, spec.node, position) + (None,) * 19 + (True, reason)
            return
        topic = incarnation(_str(e.get("topic")), _str(e.get("topic_id")), live)
        yield (spec.file, spec.node, position, _str(e.get("event")), _int(e.get("broker_id")),
               topic, _int(e.get("partition")), _int(e.get("leader_epoch")),
               _int(e.get("ts")), _int(e.get("old")), _int(e.get("new")),
               _int(e.get("isr_size")), _int(e.get("min_isr")), _int_list(e.get("isr")),
               _str(e.get("role")), _int(e.get("leader_id")), _int(e.get("from_offset")),
               _int(e.get("to_offset")), _int(e.get("old_state")), _int(e.get("new_state")),
               _str(e.get("reason")), _int(e.get("leader_recovery_state")), False, None)


def iter_ack_rows(spec: JournalFile) -> Iterator[tuple[Any, ...]]:
    """One row per `send` / `ack` entry of an ack journal, in ACK_COLUMNS order."""
    for position, e, reason in _iter_maps(spec.file):
        if e is None:
            yield (spec.file, position) + (None,) * 14 + (True, reason)
            return
        producer, seq = _str(e.get("producer_id")), _int(e.get("seq"))
        key = f"{producer}-{seq}" if producer is not None and seq is not None else None
        yield (spec.file, position, _str(e.get("event")), producer, seq, key,
               _str(e.get("topic")), _int(e.get("partition")), _int(e.get("acks")),
               _str(e.get("error")), _int(e.get("offset")), _int(e.get("leader_epoch")),
               _int(e.get("ts")), _bool(e.get("idempotent")), _key_hex(e.get("record_key")),
               _bool(e.get("tombstone")), False, None)


def iter_consumer_rows(spec: JournalFile) -> Iterator[tuple[Any, ...]]:
    """One row per `read` / `commit` entry of a consumer journal, in CONSUMER_COLUMNS order."""
    for position, e, reason in _iter_maps(spec.file):
        if e is None:
            yield (spec.file, position) + (None,) * 8 + (True, reason)
            return
        yield (spec.file, position, _str(e.get("event")), _str(e.get("group")),
               _str(e.get("member")), _str(e.get("topic")), _int(e.get("partition")),
               _int(e.get("offset")), _str(e.get("value")), _int(e.get("ts")), False, None)


def _key_hex(value: Any) -> str | None:
    """A journaled Kafka record key (msgpack bin or text) as the hex the log rows carry."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, str):
        return value.encode("utf-8").hex()
    return None


def record_key(value: bytes | None) -> str | None:
    """Rule 23's identity of a produced record: its value up to the first ':'."""
    if value is None:
        return None
    head = value.split(b":", 1)[0]
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError:
        return head.hex()


def iter_partition_log_rows(spec: PartitionLogFile) -> Iterator[tuple[Any, ...]]:
    """One row per record of a data partition segment, in PARTITION_LOG_COLUMNS order."""
    head = (spec.node, spec.file, spec.topic, spec.partition)
    try:
        data = Path(spec.file).read_bytes()
    except OSError as exc:
        yield (*head, 0, -1, None, None, None, True, f"unreadable: {exc}")
        return
    keys = spec.keys
    try:
        for position, batch, _size in iter_segment_batches(data):
            if not batch.is_control:
                epoch = batch.leader_epoch
                for index, record in enumerate(batch.records):
                    key = record.key.hex() if keys and record.key is not None else None
                    yield (*head, position, batch.offset_of(index), epoch,
                           record_key(record.value), key, False, None)
    except CorruptBatchError as exc:
        yield (*head, exc.position, -1, None, None, None, True, exc.reason)


@dataclass(frozen=True, slots=True)
class FileKind:
    """One kind of file above as every reader takes it (the audit's stager, the Spark
    DataSources, the baseline): its staged table, how to find its files below a directory, the
    rows of one file and their columns."""

    table: str
    discover: Callable[[str | Path], Sequence[Any]]
    rows: Callable[[Any], Iterator[tuple[Any, ...]]]
    columns: tuple[tuple[str, str], ...]

    def dicts(self, spec: Any) -> Iterator[dict[str, Any]]:
        """The rows of one file as {column: value}."""
        keys = names(self.columns)
        return (dict(zip(keys, raw, strict=True)) for raw in self.rows(spec))


BROKER_JOURNALS = FileKind(
    "broker_journals", lambda root: discover_journals(root)[0], iter_journal_rows, JOURNAL_COLUMNS
)
ACK_JOURNALS = FileKind(
    "ack_journals", lambda root: discover_journals(root)[1], iter_ack_rows, ACK_COLUMNS
)
CONSUMER_JOURNALS = FileKind(
    "consumer_journals", discover_consumer_journals, iter_consumer_rows, CONSUMER_COLUMNS
)
PARTITION_LOGS = FileKind(
    "partition_logs", discover_partition_logs, iter_partition_log_rows, PARTITION_LOG_COLUMNS
)


@dataclass(frozen=True, slots=True)
class BrokerFiles:
    """Every broker-side file below a directory, by kind (one walk: the broker journals' live
    topic ids are read once)."""

    journals: list[JournalFile]
    acks: list[JournalFile]
    consumers: list[JournalFile]
    logs: list[PartitionLogFile]

    def counts(self) -> dict[str, int]:
        """The audit report's `files`."""
        return {"broker_journals": len(self.journals), "ack_journals": len(self.acks),
                "partition_log_segments": len(self.logs), "consumer_journals": len(self.consumers)}


def discover_broker_files(root: str | Path) -> BrokerFiles:
    journals, acks = discover_journals(root)
    return BrokerFiles(journals, acks, discover_consumer_journals(root),
                       discover_partition_logs(root))
