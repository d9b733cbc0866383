"""The committed metadata log replayed for the console, with the records and merge every node uses.

Partitions are kept in one flat map (PartitionRegistration.from_record / merge, the controller's
own code) rather than through MetadataDelta, whose copy-on-write topic maps cost O(partitions of
the topic) per record: 10,000 partitions created in one topic would be quadratic. Everything else
(brokers, topics, configs, features) replays through MetadataDelta, one delta per poll. Raft's
control records give the voter set and kraft.version. Each record also becomes a LogEntry for the
page: Kafka's dump-log form, with a PartitionChangeRecord's "unchanged" fields left out and the
field names as the seeds' schemas spell them (Isr, EligibleLeaderReplicas, LastKnownELR, ...).
KIP-868 transactions are replayed as the nodes' loader applies them (metadata.transactions):
a transaction's records, and their entries, at its EndTransactionRecord, across as many polls
as it takes; none of an aborted one, nor of one still open (a loaded snapshot drops it). The
markers themselves are listed as they come.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from metadata.metadata_image import MetadataDelta, MetadataImage, MetadataReplayError
from metadata.partition_registration import PartitionRegistration
from metadata.records import (
    CONFIG_RESOURCE_TOPIC,
    LAST_KNOWN_LEADER_UNCHANGED,
    LEADER_RECOVERY_STATE_UNCHANGED,
    NO_LEADER_CHANGE,
    TRANSACTION_MARKERS,
    ConfigRecord,
    CorruptRecordError,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnknownRecordError,
    decode_record,
    record_to_json,
)
from metadata.transactions import TransactionHold
from raft.core.control_records import (
    ControlRecordError,
    KRaftVersionRecord,
    LeaderChangeRecord,
    VotersRecord,
    decode_control,
)
from raft.core.replica_key import uuid_to_str
from storage.core.record_batch import RecordBatch

LOG_ENTRIES_KEPT = 5000
PartitionKey = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class LogEntry:
    """One committed record as the page lists it."""

    offset: int
    epoch: int
    timestamp_ms: int
    type: str
    data: dict[str, Any]
    topic: str | None = None
    partition: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "epoch": self.epoch, "ts": self.timestamp_ms,
                "type": self.type, "data": self.data, "topic": self.topic,
                "partition": self.partition}


def _schema_name(camel: str) -> str:
    """dump-log's camelCase -> the schema's PascalCase (isr -> Isr, lastKnownELR -> LastKnownELR)."""
    return camel[:1].upper() + camel[1:]


_UNCHANGED = {
    "Leader": NO_LEADER_CHANGE,
    "LeaderRecoveryState": LEADER_RECOVERY_STATE_UNCHANGED,
    "LastKnownLeader": LAST_KNOWN_LEADER_UNCHANGED,
}


def record_data(record: MetadataRecord, topics: dict[uuid.UUID, str]) -> tuple[str, dict[str, Any]]:
    """(type, fields) of a metadata record; a PartitionChangeRecord lists only what it changes
    (null lists and the -1/-2 sentinels mean unchanged, ARCHITECTURE.md "On disk")."""
    dumped = record_to_json(record)
    data = {_schema_name(k): v for k, v in dumped["data"].items()}
    if isinstance(record, PartitionChangeRecord):
        data = {k: v for k, v in data.items() if v is not None and _UNCHANGED.get(k) != v}
    if isinstance(record, PartitionRecord | PartitionChangeRecord) and record.topic_id in topics:
        data["TopicName"] = topics[record.topic_id]
    return type(record).__name__, data


def _control_data(record: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(record, VotersRecord):
        return "VotersRecord", {"Voters": [
            {"VoterId": v.voter_id, "VoterDirectoryId": uuid_to_str(v.voter_directory_id),
             "Endpoints": v.endpoints} for v in record.voters]}
    if isinstance(record, LeaderChangeRecord):
        return "LeaderChangeMessage", {
            "LeaderId": record.leader_id,
            "Voters": [k.id for k in record.voters],
            "GrantingVoters": [k.id for k in record.granting_voters],
        }
    if isinstance(record, KRaftVersionRecord):
        return "KRaftVersionRecord", {"KRaftVersion": record.kraft_version}
    return type(record).__name__, {}


@dataclass
class MetadataView:
    """Everything below `next_offset` of the committed log, replayed."""

    image: MetadataImage = field(default_factory=MetadataImage)
    partitions: dict[PartitionKey, PartitionRegistration] = field(default_factory=dict)
    voters: list[tuple[int, str]] = field(default_factory=list)  # (id, directory id)
    kraft_version: int = 0
    next_offset: int = 0
    entries: deque[LogEntry] = field(default_factory=lambda: deque(maxlen=LOG_ENTRIES_KEPT))
    problems: deque[str] = field(default_factory=lambda: deque(maxlen=100))
    # The records of an open transaction: (record, offset, epoch, timestamp ms).
    transaction: TransactionHold[tuple[MetadataRecord, int, int, int]] = field(
        default_factory=TransactionHold)

    def topic_name(self, topic_id: uuid.UUID) -> str:
        topic = self.image.topics.get(topic_id)
        return topic.name if topic is not None else uuid_to_str(topic_id)

    def load_snapshot(self, end_offset: int, batches: Iterable[RecordBatch]) -> list[LogEntry]:
        """Start over from a snapshot (the log before it was deleted)."""
        self.image = MetadataImage()
        self.partitions = {}
        self.entries.clear()
        self.next_offset = 0
        self.transaction.clear(end_offset - 1)  # Kafka's MetadataBatchLoader.resetToImage
        self.apply(batches, keep_entries=False)
        self.next_offset = end_offset
        return []

    def apply(self, batches: Iterable[RecordBatch], keep_entries: bool = True) -> list[LogEntry]:
        """Replay committed batches in offset order; what was already applied is skipped."""
        delta = MetadataDelta(self.image)
        topics = {tid: t.name for tid, t in self.image.topics.items()}
        new: list[LogEntry] = []
        for batch in batches:
            if batch.next_offset <= self.next_offset:
                continue
            for index in range(len(batch.records)):
                offset = batch.offset_of(index)
                if offset < self.next_offset:
                    continue
                for entry in self._replay(batch, index, offset, delta, topics):
                    # The active controller's NoOpRecords (one every 500 ms) would bury the rest.
                    if keep_entries and entry.type != "NoOpRecord":
                        new.append(entry)
                        self.entries.append(entry)
            self.next_offset = batch.next_offset
        self.image = delta.image()
        return new

    def _replay(
        self, batch: RecordBatch, index: int, offset: int, delta: MetadataDelta,
        topics: dict[uuid.UUID, str],
    ) -> list[LogEntry]:
        """The entries one record gives: none while a transaction holds it, a transaction's
        at its End."""
        raw, ts = batch.records[index], batch.timestamp_of(index)
        if batch.is_control:
            try:
                control = decode_control(raw)
            except ControlRecordError as exc:
                self.problems.append(f"offset {offset}: {exc}")
                return []
            if isinstance(control, VotersRecord):
                self.voters = [(v.voter_id, uuid_to_str(v.voter_directory_id))
                               for v in control.voters]
            elif isinstance(control, KRaftVersionRecord):
                self.kraft_version = control.kraft_version
            kind, data = _control_data(control)
            return [LogEntry(offset, batch.leader_epoch, ts, kind, data)]
        try:
            record = decode_record(raw.value or b"")
        except (CorruptRecordError, UnknownRecordError) as exc:
            self.problems.append(f"offset {offset}: {exc}")
            return []
        item = (record, offset, batch.leader_epoch, ts)
        if isinstance(record, TRANSACTION_MARKERS):
            entries = [self._apply(*held, delta, topics)
                       for held in self.transaction.marker(type(record).__name__, offset)]
            kind, data = record_data(record, topics)
            return [*entries, LogEntry(offset, batch.leader_epoch, ts, kind, data)]
        if self.transaction.hold(item):
            return []
        return [self._apply(*item, delta, topics)]

    def _apply(
        self, record: MetadataRecord, offset: int, epoch: int, ts: int, delta: MetadataDelta,
        topics: dict[uuid.UUID, str],
    ) -> LogEntry:
        topic: str | None = None
        partition: int | None = None
        if isinstance(record, PartitionRecord):
            self.partitions[(record.topic_id, record.partition_id)] = (
                PartitionRegistration.from_record(record))
            topic, partition = topics.get(record.topic_id), record.partition_id
        elif isinstance(record, PartitionChangeRecord):
            key = (record.topic_id, record.partition_id)
            current = self.partitions.get(key)
            if current is not None:
                self.partitions[key] = current.merge(record)
            topic, partition = topics.get(record.topic_id), record.partition_id
        else:
            if isinstance(record, TopicRecord):
                topics[record.topic_id] = record.name
                topic = record.name
            elif isinstance(record, ConfigRecord) and record.resource_type == CONFIG_RESOURCE_TOPIC:
                topic = record.resource_name
            elif isinstance(record, RemoveTopicRecord):
                topic = topics.pop(record.topic_id, None)
                for key in [k for k in self.partitions if k[0] == record.topic_id]:
                    del self.partitions[key]
            try:
                delta.replay(record, offset)
            except MetadataReplayError as exc:
                self.problems.append(f"offset {offset}: {exc}")
        kind, data = record_data(record, topics)
        return LogEntry(offset, epoch, ts, kind, data, topic, partition)
