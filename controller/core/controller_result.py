"""ControllerResult: what to write (records) kept apart from what to answer (Kafka's design)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from controller.core.records import MetadataRecord

ResponseT = TypeVar("ResponseT")


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[ResponseT]):
    """Records to append through Raft, and the response to send once they are committed."""

    records: tuple[MetadataRecord, ...]
    response: ResponseT
