"""Per-record validation of a produced batch (Kafka's LogValidator.validateRecord): what is
wrong with single records, answered in Produce's record_errors rather than as a bare error.

Kafka fails the whole batch when any record fails (nothing of it is appended) and names each
failing record by its index in the batch. Only the key check is here: a compacted topic
(cleanup.policy containing `compact`) takes no record without a key. The timestamp checks
(message.timestamp.before/after.max.ms) are broker.core.topic_write_configs'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafkawire.errors import Errors, KafkaError
from storage.core.record_batch import Record

CLEANUP_POLICY = "cleanup.policy"
LOG_CLEANUP_POLICY = "log.cleanup.policy"  # the broker default
COMPACT = "compact"
_SHOWN_RECORD_ERRORS = 3  # Kafka's message lists the first three


@dataclass(frozen=True, slots=True)
class RecordError:
    """One rejected record: its index in the batch and why (Produce's BatchIndexAndErrorMessage)."""

    batch_index: int
    message: str

    def __str__(self) -> str:
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


class RecordValidationError(KafkaError):
    """A batch refused for its records (Kafka's RecordValidationException): the error, the
    message Kafka answers in error_message, and every record error."""

    def __init__(
        self, error: Errors, record_errors: Sequence[RecordError], message: str | None = None
    ) -> None:
        shown = ", ".join(str(e) for e in record_errors[:_SHOWN_RECORD_ERRORS])
        super().__init__(
            error,
            message
            or f"One or more records have been rejected due to {len(record_errors)} record errors"
            f" in total, and only showing the first three errors at most: [{shown}]",
        )
        self.record_errors = tuple(record_errors)


def is_compacted(cleanup_policy: str | None) -> bool:
    """Kafka's LogConfig.compact: the policy list names `compact` (alone or with `delete`)."""
    if cleanup_policy is None:
        return False
    return COMPACT in (p.strip().lower() for p in cleanup_policy.split(","))


def keyless_record_errors(
    records: Sequence[Record], topic: str, partition: int
) -> list[RecordError]:
    """LogValidator.validateKey for a compacted topic: every record without a key."""
    return [
        RecordError(
            index,
            "Compacted topic cannot accept message without key in topic partition "
            f"{topic}-{partition}",
        )
        for index, record in enumerate(records)
        if record.key is None
    ]
