"""What a topic's data configs do to a producer's batch on the leader (Kafka's LogValidator,
the parts driven by LogConfig): `max.message.bytes`, `message.timestamp.type`,
`message.timestamp.before.max.ms` / `after.max.ms`, and `compression.type` (with its levels).

Kept apart from the checks every batch gets (storage.core.record_batch.validate_batch: magic, CRC,
offsets) and from the key check of compacted topics (storage.core.record_validation, whose
RecordValidationError carries the per-record errors of both). Pure: the runtime passes the
effective configs (metadata.config_defs) and the clock in.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass

from kafkawire.errors import Errors
from metadata import config_defs as cd
from storage.core import compression
from storage.core.record_batch import (
    TIMESTAMP_TYPE_FLAG,
    RecordBatch,
    encode_batch,
    record_body_sizes,
    with_log_append_time,
)
from storage.core.record_validation import RecordError, RecordValidationError, is_compacted

NO_TIMESTAMP = -1
DEFAULT_MAX_DECOMPRESSED_MESSAGE_BYTES = 2_147_483_639
_CODECS = {
    "uncompressed": compression.NONE,
    "gzip": compression.GZIP,
    "snappy": compression.SNAPPY,
    "lz4": compression.LZ4,
    "zstd": compression.ZSTD,
}
_LEVEL_KEYS = {
    compression.GZIP: cd.COMPRESSION_GZIP_LEVEL,
    compression.LZ4: cd.COMPRESSION_LZ4_LEVEL,
    compression.ZSTD: cd.COMPRESSION_ZSTD_LEVEL,
}


@dataclass(frozen=True, slots=True)
class TopicWriteConfig:
    max_message_bytes: int = 1_048_588
    target_codec: int | None = None  # None: compression.type=producer, the producer's codec
    compression_level: int | None = None
    log_append_time: bool = False
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 3_600_000
    compacted: bool = False  # cleanup.policy names compact: keys required (record_validation)
    max_decompressed_message_bytes: int = DEFAULT_MAX_DECOMPRESSED_MESSAGE_BYTES

    def rewrites(self, batch: RecordBatch) -> bool:
        """Whether the stored batch differs from the producer's (stored_batch)."""
        return self.log_append_time or (
            self.target_codec is not None and self.target_codec != batch.compression
        )

    @classmethod
    def from_configs(cls, values: Mapping[str, str | None]) -> TopicWriteConfig:
        """From a topic's effective configs (config_defs.effective_topic_configs)."""

        def number(key: str) -> int:
            value = values.get(key)
            default = cd.TOPIC_CONFIGS[key].default
            return int(value if value is not None else default or 0)

        codec_name = values.get(cd.COMPRESSION_TYPE) or "producer"
        codec = _CODECS.get(codec_name)
        return cls(
            max_message_bytes=number(cd.MAX_MESSAGE_BYTES),
            target_codec=codec,
            compression_level=None
            if codec is None or codec not in _LEVEL_KEYS
            else number(_LEVEL_KEYS[codec]),
            log_append_time=values.get(cd.MESSAGE_TIMESTAMP_TYPE) == "LogAppendTime",
            timestamp_before_max_ms=number(cd.MESSAGE_TIMESTAMP_BEFORE_MAX_MS),
            timestamp_after_max_ms=number(cd.MESSAGE_TIMESTAMP_AFTER_MAX_MS),
            compacted=is_compacted(values.get(cd.CLEANUP_POLICY)),
            max_decompressed_message_bytes=number(cd.MAX_DECOMPRESSED_MESSAGE_BYTES),
        )


def check_timestamps(
    batch: RecordBatch, config: TopicWriteConfig, now_ms: int, topic_partition: str
) -> None:
    """Kafka's validateTimestamp for every record: on a CreateTime topic a timestamp outside
    [now - before.max.ms, now + after.max.ms] is INVALID_TIMESTAMP; otherwise (a LogAppendTime
    topic, or no timestamp) a batch the producer marked LogAppendTime is. Raises
    RecordValidationError listing every failing record."""
    producer_log_append_time = bool(batch.attributes & TIMESTAMP_TYPE_FLAG)
    low = now_ms - config.timestamp_before_max_ms
    high = now_ms + config.timestamp_after_max_ms
    if producer_log_append_time:
        # Kafka reads every record of a LogAppendTime batch at the batch's max timestamp.
        timestamps = [batch.max_timestamp_ms] * len(batch.records)
    else:
        if config.log_append_time:
            return
        base = batch.timestamp_ms  # None: the record's timestamp is the base timestamp
        timestamps = [base if t is None else t for t in map(_TIMESTAMP, batch.records)]
        if min(timestamps) >= low and max(timestamps) <= high:
            return  # the common case, checked without a message per record
    errors: list[RecordError] = []
    for index, timestamp in enumerate(timestamps):
        if not config.log_append_time and timestamp != NO_TIMESTAMP:
            if not low <= timestamp <= high:
                errors.append(
                    RecordError(
                        index,
                        f"Timestamp {timestamp} of message with offset "
                        f"{batch.offset_of(index)} is out of range. The timestamp should be "
                        f"within [{low}, {high}]",
                    )
                )
        elif producer_log_append_time:
            errors.append(
                RecordError(
                    index,
                    f"Invalid timestamp type in message of {topic_partition}. Producer should "
                    "not set timestamp type to LogAppendTime.",
                )
            )
    if errors:
        raise RecordValidationError(
            Errors.INVALID_TIMESTAMP,
            errors,
            "One or more records have been rejected due to invalid timestamp",
        )


_TIMESTAMP = operator.attrgetter("timestamp_ms")


def check_decompressed_sizes(
    batch: RecordBatch, config: TopicWriteConfig, topic_partition: str
) -> None:
    """max.decompressed.message.bytes: a record of a compressed batch whose declared
    (decompressed) size is over it is INVALID_RECORD; an uncompressed record is bounded by
    max.message.bytes alone (Kafka 4.4)."""
    limit = config.max_decompressed_message_bytes
    if batch.compression == compression.NONE or limit >= DEFAULT_MAX_DECOMPRESSED_MESSAGE_BYTES:
        return
    errors = [
        RecordError(
            index,
            f"Record {index} of a compressed batch is {size} bytes decompressed, over "
            f"max.decompressed.message.bytes {limit} in topic partition {topic_partition}",
        )
        for index, size in enumerate(record_body_sizes(batch))
        if size > limit
    ]
    if errors:
        raise RecordValidationError(Errors.INVALID_RECORD, errors)


def stored_batch(raw: bytes, batch: RecordBatch, config: TopicWriteConfig, now_ms: int) -> bytes:
    """The bytes to store for a validated producer batch: recompressed with the topic's codec
    when it differs from the producer's (Kafka's buildRecordsAndAssignOffsets), stamped with the
    append time for LogAppendTime, else as sent. The base offset and leader epoch are stamped
    by the caller (outside the CRC)."""
    target = config.target_codec
    if target is not None and target != batch.compression:
        return encode_batch(
            batch.base_offset,
            batch.leader_epoch,
            batch.timestamp_ms,
            batch.records,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            compression=target,
            compression_level=config.compression_level,
            is_transactional=batch.is_transactional,
            log_append_time=config.log_append_time,
            max_timestamp_ms=now_ms if config.log_append_time else None,
        )
    if config.log_append_time:
        return with_log_append_time(raw, now_ms)
    return raw
