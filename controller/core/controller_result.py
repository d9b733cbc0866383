"""ControllerResult: what to write (records) kept apart from what to answer (Kafka's design)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from controller.core.partition_change import PartitionChange
from metadata.records import MetadataRecord

ResponseT = TypeVar("ResponseT")


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[ResponseT]):
    """Records to append through Raft, and the response to send once they are committed.

    `changes` are the PartitionChangeBuilder results behind the PartitionChangeRecords in
    `records`, with the ElectionKind each decided: the runtime logs and counts elections from
    them instead of re-deriving the kind from before/after states."""

    records: tuple[MetadataRecord, ...]
    response: ResponseT
    changes: tuple[PartitionChange, ...] = ()
    # Why the response is an error, for the controller's log: the broker lifecycle responses
    # carry no message on Kafka's wire (the controller logs why, the broker logs the name).
    message: str = ""
