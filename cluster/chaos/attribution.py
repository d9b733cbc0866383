"""Rule 23's evidence, read from the metadata log: which partitions had an unclean or designated
election, and at which offset.

A partition had such an election iff a committed PartitionChangeRecord (or PartitionRecord, for a
snapshot-free log that recreates it) set its leader_recovery_state to RECOVERING: that is what the
controller writes for an unclean election and for a DESIGNATED one (rule 21). The controllers'
segments are read read-only (storage/runtime/log_reader.py, safe on a running node); "committed"
means below the high watermark the quorum reports, and only entries at least `since_offset` count,
so one chaos run never borrows another's excuse. Logs of every controller are merged: they agree
below the high watermark (rule 2), and a controller whose disk was replaced only lacks a prefix.
A KIP-868 transaction's records count as the nodes' loader applies them (metadata.transactions):
at its End; never those of an aborted one, nor of one still open at the high watermark.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metadata.partition_registration import LeaderRecoveryState
from metadata.records import (
    TRANSACTION_MARKERS,
    CorruptRecordError,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
    UnknownRecordError,
    decode_record,
)
from metadata.transactions import TransactionHold
from storage.runtime.log_reader import read_batches

METADATA_PARTITION_DIR = "__cluster_metadata-0"


@dataclass(frozen=True)
class RecoveringElection:
    topic: str
    partition: int
    offset: int  # the metadata log offset of the record that set RECOVERING
    leader: int
    record_type: str  # PartitionChangeRecord, or PartitionRecord

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset,
                "leader": self.leader, "record": self.record_type}


@dataclass
class MetadataScan:
    high_watermark: int
    end_offset_read: int  # one past the last committed offset found in any log
    elections: list[RecoveringElection]


def metadata_log_dirs(controller_dirs: list[Path]) -> list[Path]:
    return [Path(d) / "metadata" / METADATA_PARTITION_DIR for d in controller_dirs]


def scan_recovering_elections(
    log_dirs: list[Path], high_watermark: int, since_offset: int = 0
) -> MetadataScan:
    """Every committed record in [since_offset, high_watermark) that set a partition RECOVERING."""
    committed: dict[int, bytes] = {}
    for directory in log_dirs:
        if not directory.is_dir():
            continue
        for _path, batch in read_batches(directory):
            if batch.base_offset >= high_watermark:
                break
            if batch.is_control:
                continue
            for index, record in enumerate(batch.records):
                offset = batch.base_offset + index
                if offset < high_watermark and record.value is not None:
                    committed.setdefault(offset, record.value)
    topics: dict[uuid.UUID, str] = {}
    elections: list[RecoveringElection] = []
    recovering = int(LeaderRecoveryState.RECOVERING)
    transaction: TransactionHold[tuple[int, MetadataRecord]] = TransactionHold()
    applied: list[tuple[int, MetadataRecord]] = []
    for offset in sorted(committed):
        try:
            decoded = decode_record(committed[offset])
        except (CorruptRecordError, UnknownRecordError):
            continue
        if isinstance(decoded, TRANSACTION_MARKERS):
            applied += transaction.marker(type(decoded).__name__, offset)
        elif not transaction.hold((offset, decoded)):
            applied.append((offset, decoded))
    for offset, decoded in applied:
        if isinstance(decoded, TopicRecord):
            topics[decoded.topic_id] = decoded.name
        elif (
            isinstance(decoded, PartitionChangeRecord | PartitionRecord)
            and decoded.leader_recovery_state == recovering
            and offset >= since_offset
        ):
            elections.append(
                RecoveringElection(
                    topics.get(decoded.topic_id, str(decoded.topic_id)), decoded.partition_id,
                    offset, decoded.leader, type(decoded).__name__,
                )
            )
    end = max(committed) + 1 if committed else 0
    return MetadataScan(high_watermark, end, elections)


def attribute_losses(
    lost_by_partition: dict[int, list[str]], topic: str, elections: list[RecoveringElection]
) -> tuple[dict[int, dict[str, Any]], dict[int, list[str]]]:
    """Split lost acked writes into (attributed per partition, with the election records) and
    unexplained (a bug, rule 23)."""
    attributed: dict[int, dict[str, Any]] = {}
    unexplained: dict[int, list[str]] = {}
    for partition, values in sorted(lost_by_partition.items()):
        if not values:
            continue
        evidence = [e for e in elections if e.topic == topic and e.partition == partition]
        if evidence:
            attributed[partition] = {
                "lost": len(values),
                "lost_values": values[:20],
                "elections": [e.to_json() for e in evidence],
                "metadata_offsets": [e.offset for e in evidence],
            }
        else:
            unexplained[partition] = values
    return attributed, unexplained
