"""The config table (metadata.config_defs) and what uses it: the controller's
validation of CreateTopics / IncrementalAlterConfigs / AlterConfigs, and the write path's
topic data configs (broker.core.topic_write_configs). Issue 34."""

from __future__ import annotations

import pytest

from broker.core.topic_write_configs import (
    RecordValidationError,
    TopicWriteConfig,
    check_decompressed_sizes,
    check_timestamps,
    stored_batch,
)
from controller.core import config_control
from kafkawire import admin_messages as am
from kafkawire import constants
from kafkawire.errors import Errors
from metadata.config_defs import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerLevels,
    ConfigSource,
    effective_topic_configs,
    topic_config_values,
)
from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.records import CONFIG_RESOURCE_TOPIC, ConfigRecord, TopicRecord
from storage.core.compression import GZIP, NONE, ZSTD
from storage.core.record_batch import Record, decode_batch, encode_batch

NOW_MS = 1_800_000_000_000
NO_LEVELS = BrokerLevels({}, {}, {}, {})


def test_every_topic_config_has_a_default_that_its_own_validator_accepts() -> None:
    for definition in TOPIC_CONFIGS.values():
        assert definition.default is not None
        assert definition.value_error(definition.default) is None, definition.name
        for synonym in definition.synonyms:
            assert synonym.name in BROKER_CONFIGS, synonym.name


def test_kafka_messages_for_unknown_names_and_bad_values() -> None:
    assert config_control.topic_config_error("no.such", "1") == "Unknown topic config name: no.such"
    assert config_control.topic_config_error("retention.ms", "x") == (
        "Invalid value x for configuration retention.ms: Not a number of type LONG"
    )
    assert config_control.topic_config_error("min.insync.replicas", "0") == (
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"
    )
    assert config_control.topic_config_error("unclean.leader.election.enable", "yes") == (
        "Invalid value yes for configuration unclean.leader.election.enable: "
        "Expected value to be either true or false"
    )
    assert config_control.topic_config_error("cleanup.policy", "compact, delete") is None
    assert config_control.topic_config_error("cleanup.policy", "compact,foo") == (
        "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"
    )
    assert config_control.topic_config_error("compression.gzip.level", "12") == (
        "Invalid value 12 for configuration compression.gzip.level: "
        "Value must be between 1 and 9 or equal to -1"
    )


def test_a_config_minikraft_cannot_honour_is_refused_unless_it_is_what_the_broker_does() -> None:
    reason = config_control.topic_config_error("segment.jitter.ms", "1000")
    assert reason is not None
    assert reason.startswith("minikraft does not honour segment.jitter.ms=1000")
    assert config_control.topic_config_error("segment.jitter.ms", "0") is None  # the default
    assert config_control.topic_config_error("remote.storage.enable", "true") is not None
    refused = config_control.broker_config_error("log.roll.jitter.ms", "1")
    assert refused is not None and refused[0] is Errors.INVALID_CONFIG
    # Kafka's DynamicLogConfig: the hours form is static.
    static = config_control.broker_config_error("log.retention.hours", "-1")
    assert static is not None and static[0] is Errors.INVALID_REQUEST


def test_retention_segment_ms_and_the_cleaners_configs_are_honoured_so_accepted() -> None:
    # Issue 34: broker/runtime/log_manager.py honours these, so any valid value is accepted.
    for name, value in {
        "retention.ms": "1000",
        "retention.bytes": "1048576",
        "segment.ms": "500",
        "file.delete.delay.ms": "0",
        "delete.retention.ms": "0",
        "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "10",
        "max.compaction.lag.ms": "60000",
    }.items():
        assert config_control.topic_config_error(name, value) is None, name
    assert config_control.broker_config_error("log.retention.ms", "1") is None


def test_broker_levels_give_sources_in_kafkas_order() -> None:
    levels = BrokerLevels(
        per_broker={"compression.type": "zstd"},
        cluster={"compression.type": "lz4", "log.retention.hours": "-1"},
        static={"message.max.bytes": "5000"},
        node_defaults={"log.preallocate": "true"},
    )
    rows = {r.name: r for r in topic_config_values({"cleanup.policy": "compact"}, levels)}
    assert (rows["cleanup.policy"].value, rows["cleanup.policy"].source) == (
        "compact", ConfigSource.TOPIC_CONFIG
    )
    assert (rows["compression.type"].value, rows["compression.type"].source) == (
        "zstd", ConfigSource.DYNAMIC_BROKER_CONFIG
    )
    assert [s[2] for s in rows["compression.type"].synonyms] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    assert rows["retention.ms"].value == "-1"  # log.retention.hours=-1: forever
    assert rows["max.message.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert rows["preallocate"].value == "true"  # minikraft's node default
    assert rows["segment.ms"].value == "604800000"  # log.roll.hours=168
    assert effective_topic_configs({}, NO_LEVELS)["message.timestamp.after.max.ms"] == "3600000"
    # minikraft's own broker defaults are the table's, so a controller (whose config file has
    # no broker defaults) describes a topic as its brokers do.
    plain = effective_topic_configs({}, NO_LEVELS)
    assert (plain["segment.bytes"], plain["preallocate"]) == (str(8 * 1024 * 1024), "true")


def _image() -> MetadataImage:
    import uuid

    delta = MetadataDelta(MetadataImage())
    delta.replay(TopicRecord("t", uuid.uuid4()), 1)
    delta.replay(ConfigRecord(CONFIG_RESOURCE_TOPIC, "t", "cleanup.policy", "compact"), 2)
    return delta.image()


def _topic(*configs: am.AlterableConfig) -> am.AlterConfigsResource:
    return am.config_resource(constants.CONFIG_RESOURCE_TOPIC, "t", list(configs))


def test_alter_configs_replaces_a_topics_configs_incremental_edits_them() -> None:
    image = _image()
    legacy = config_control.legacy_alter_configs(
        image, am.alter_configs_request([(constants.CONFIG_RESOURCE_TOPIC, "t", {"compression.type": "gzip"})])
    )
    assert legacy.response.responses[0].error_code == Errors.NONE
    assert {(r.name, r.value) for r in legacy.records} == {  # type: ignore[attr-defined]
        ("compression.type", "gzip"),
        ("cleanup.policy", None),  # left out: removed
    }
    incremental = config_control.incremental_alter_configs(
        image,
        am.incremental_alter_configs_request(
            [_topic(am.alterable_config("cleanup.policy", constants.OP_APPEND, "delete"))]
        ),
    )
    assert [(r.name, r.value) for r in incremental.records] == [  # type: ignore[attr-defined]
        ("cleanup.policy", "compact,delete")
    ]
    not_a_list = config_control.incremental_alter_configs(
        image,
        am.incremental_alter_configs_request(
            [_topic(am.alterable_config("retention.ms", constants.OP_APPEND, "1"))]
        ),
    )
    answer = not_a_list.response.responses[0]
    assert answer.error_code == Errors.INVALID_CONFIG and not not_a_list.records
    assert answer.error_message == "Can't APPEND to key retention.ms because its type is not LIST."


def test_broker_configs_static_unknown_and_dynamic() -> None:
    image = _image()

    def alter(name: str, key: str, value: str) -> tuple[int, str]:
        resource = am.config_resource(
            constants.CONFIG_RESOURCE_BROKER, name, [am.alterable_config(key, constants.OP_SET, value)]
        )
        result = config_control.incremental_alter_configs(
            image, am.incremental_alter_configs_request([resource])
        )
        answer = result.response.responses[0]
        return answer.error_code, answer.error_message or ""

    assert alter("", "num.partitions", "3") == (
        Errors.INVALID_REQUEST, "Cannot update these configs dynamically: [num.partitions]"
    )
    assert alter("", "no.such.key", "1") == (
        Errors.INVALID_CONFIG, "Unknown broker config name: no.such.key"
    )
    assert alter("", "compression.type", "gzip") == (Errors.NONE, "")


def _batch(*records: Record, codec: int = NONE, ts: int = NOW_MS) -> bytes:
    return encode_batch(0, 0, ts, list(records), compression=codec, producer_id=7, base_sequence=0)


def test_timestamps_outside_the_window_are_invalid_timestamp_per_record() -> None:
    config = TopicWriteConfig(timestamp_before_max_ms=1000, timestamp_after_max_ms=500)
    raw = _batch(
        Record(None, b"a"),
        Record(None, b"b", timestamp_ms=NOW_MS - 1001),
        Record(None, b"c", timestamp_ms=NOW_MS + 500),
        Record(None, b"d", timestamp_ms=NOW_MS + 501),
    )
    batch, _ = decode_batch(raw)
    with pytest.raises(RecordValidationError) as caught:
        check_timestamps(batch, config, NOW_MS, "t-0")
    assert caught.value.error is Errors.INVALID_TIMESTAMP
    assert [e.batch_index for e in caught.value.record_errors] == [1, 3]
    assert caught.value.record_errors[0].message == (
        f"Timestamp {NOW_MS - 1001} of message with offset 1 is out of range. The timestamp "
        f"should be within [{NOW_MS - 1000}, {NOW_MS + 500}]"
    )
    # LogAppendTime: the producer's timestamps do not matter.
    check_timestamps(batch, TopicWriteConfig(log_append_time=True, timestamp_before_max_ms=0), NOW_MS, "t-0")


def test_the_topics_codec_recompresses_and_log_append_time_stamps_the_batch() -> None:
    records = [Record(b"k%d" % i, b"v" * 100, (("h", b"x"),)) for i in range(5)]
    raw = _batch(*records, codec=ZSTD, ts=NOW_MS - 5000)
    batch, _ = decode_batch(raw)
    gzip_append_time = TopicWriteConfig(target_codec=GZIP, compression_level=9, log_append_time=True)
    stored, _ = decode_batch(stored_batch(raw, batch, gzip_append_time, NOW_MS))
    assert stored.compression == GZIP
    assert stored.attributes & 0x08 and stored.max_timestamp_ms == NOW_MS
    assert [(r.key, r.value, r.headers) for r in stored.records] == [
        (r.key, r.value, r.headers) for r in records
    ]
    assert (stored.producer_id, stored.base_sequence) == (7, 0)
    # compression.type=producer keeps the bytes; LogAppendTime alone stamps them in place.
    assert stored_batch(raw, batch, TopicWriteConfig(), NOW_MS) is raw
    stamped, _ = decode_batch(stored_batch(raw, batch, TopicWriteConfig(log_append_time=True), NOW_MS))
    assert stamped.compression == ZSTD and stamped.max_timestamp_ms == NOW_MS
    assert stamped.records == batch.records


def test_a_producer_may_not_mark_its_batch_log_append_time() -> None:
    # Kafka's validateTimestamp: on a LogAppendTime topic, a batch the producer marked
    # LogAppendTime is refused; on a CreateTime topic its records are read at its max timestamp.
    raw = encode_batch(0, 0, NOW_MS, [Record(None, b"a"), Record(None, b"b")], log_append_time=True)
    batch, _ = decode_batch(raw)
    with pytest.raises(RecordValidationError) as caught:
        check_timestamps(batch, TopicWriteConfig(log_append_time=True), NOW_MS, "t-0")
    assert [e.batch_index for e in caught.value.record_errors] == [0, 1]
    assert "Producer should not set timestamp type to LogAppendTime." in (
        caught.value.record_errors[0].message
    )
    check_timestamps(batch, TopicWriteConfig(), NOW_MS, "t-0")  # in range: accepted
    with pytest.raises(RecordValidationError):
        check_timestamps(batch, TopicWriteConfig(), NOW_MS - 2 * 3_600_000, "t-0")


def test_synonyms_listed_as_kafka_lists_them() -> None:
    # configSynonyms(...).dropWhile(name != primary): from the first entry of the primary broker
    # name on; the value still comes from the first name any level sets (ms, minutes, hours).
    levels = BrokerLevels({}, {"log.retention.hours": "2"}, {"log.retention.ms": "5000"}, {})
    row = next(r for r in topic_config_values({}, levels) if r.name == "retention.ms")
    assert row.value == "5000"
    assert row.synonyms == (
        ("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    assert row.source == ConfigSource.STATIC_BROKER_CONFIG
    plain = next(r for r in topic_config_values({}, NO_LEVELS) if r.name == "retention.ms")
    assert (plain.value, plain.source, plain.synonyms) == (
        "604800000", ConfigSource.DEFAULT_CONFIG, ()
    )


def test_max_decompressed_message_bytes_bounds_records_of_compressed_batches() -> None:
    records = [Record(b"k", b"x" * 4096), Record(b"k", b"x" * 64)]
    config = TopicWriteConfig(max_decompressed_message_bytes=512)
    compressed, _ = decode_batch(_batch(*records, codec=GZIP))
    with pytest.raises(RecordValidationError) as caught:
        check_decompressed_sizes(compressed, config, "t-0")
    assert caught.value.error is Errors.INVALID_RECORD
    assert [e.batch_index for e in caught.value.record_errors] == [0]
    plain, _ = decode_batch(_batch(*records))  # uncompressed: max.message.bytes alone
    check_decompressed_sizes(plain, config, "t-0")
    check_decompressed_sizes(compressed, TopicWriteConfig(), "t-0")  # Kafka's default
