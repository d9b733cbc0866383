"""The configs minikraft knows, declared once, as Apache Kafka 4.x defines them: every topic
config (Kafka's TopicConfig / LogConfig) with its type, default, validator and broker-level
synonyms (ServerTopicConfigSynonyms, first one wins), and the broker configs clients and tools
read (ServerLogConfigs, KafkaConfig). CreateTopics, IncrementalAlterConfigs, AlterConfigs and
DescribeConfigs all use this table; the broker's write path reads effective topic values from it.

A config minikraft accepts, it honours. Where a feature is not built (segment.jitter.ms, index
files, tiered storage, throttling, per-topic flush), `not_built` says so: its default (and the
values in `honoured`) are accepted, any other value is refused with INVALID_CONFIG and that
reason. Retention, segment.ms and the log cleaner's configs are honoured by
broker/runtime/log_manager.py.

Values are strings as Kafka's ConfigDef.convertToString prints them ("9223372036854775807" for
Long.MAX_VALUE, lists comma-separated).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from itertools import dropwhile

from storage.core.log_cleaner import (
    DEDUPE_BUFFER_LOAD_FACTOR,
    DEDUPE_BUFFER_MAX,
    OFFSET_MAP_BYTES_PER_ENTRY,
)


# DescribeConfigsResponse.ConfigType ids.
class ConfigType(IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


# DescribeConfigsResponse.ConfigSource ids.
class ConfigSource(IntEnum):
    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


LONG_MAX = str(2**63 - 1)
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
_SHORT_RANGE = (-(2**15), 2**15 - 1)
HOURS_TO_MS = 3_600_000
MINUTES_TO_MS = 60_000

# Topic config names the code reads (Kafka's TopicConfig constants).
CLEANUP_POLICY = "cleanup.policy"
COMPRESSION_TYPE = "compression.type"
COMPRESSION_GZIP_LEVEL = "compression.gzip.level"
COMPRESSION_LZ4_LEVEL = "compression.lz4.level"
COMPRESSION_ZSTD_LEVEL = "compression.zstd.level"
MAX_MESSAGE_BYTES = "max.message.bytes"
MAX_DECOMPRESSED_MESSAGE_BYTES = "max.decompressed.message.bytes"
MESSAGE_TIMESTAMP_TYPE = "message.timestamp.type"
MESSAGE_TIMESTAMP_BEFORE_MAX_MS = "message.timestamp.before.max.ms"
MESSAGE_TIMESTAMP_AFTER_MAX_MS = "message.timestamp.after.max.ms"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
PREALLOCATE = "preallocate"
SEGMENT_BYTES = "segment.bytes"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
REMOTE_STORAGE_ENABLE = "remote.storage.enable"

Check = Callable[[str], "str | None"]


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker-level name for a topic config; `to_ms` converts hours/minutes to milliseconds."""

    name: str
    to_ms: int = 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str | None
    doc: str
    check: Check | None = None  # beyond parsing as `type`: range, allowed values
    synonyms: tuple[Synonym, ...] = ()
    not_built: str | None = None  # why a value other than the default is refused
    honoured: frozenset[str] = frozenset()  # values accepted although not_built
    dynamic: bool = False  # broker configs: alterable with IncrementalAlterConfigs/AlterConfigs
    sensitive: bool = False

    def value_error(self, value: str | None) -> str | None:
        """Kafka's ConfigException text for a value that does not parse or validate, or, for a
        value minikraft cannot honour, why; None if the value is accepted."""
        if value is None:
            return f"Null value not supported for {self.name}"
        reason = _type_error(self.type, value)
        if reason is not None:
            return f"Invalid value {value} for configuration {self.name}: {reason}"
        # A list is checked element by element, and Kafka names the bad element.
        parts = (
            [p.strip() for p in value.split(",") if p.strip()]
            if self.type is ConfigType.LIST
            else [value]
        )
        for part in parts if self.check is not None else ():
            reason = self.check(part) if self.check is not None else None
            if reason is not None:
                return f"Invalid value {part} for configuration {self.name}: {reason}"
        if self.not_built is not None and not self.accepts_unbuilt(value):
            return (
                f"minikraft does not honour {self.name}={value}: {self.not_built}; only "
                f"{_accepted_values(self)} is accepted"
            )
        return None

    def accepts_unbuilt(self, value: str) -> bool:
        return normalise(self, value) in {normalise(self, v) for v in self._accepted()}

    def _accepted(self) -> set[str]:
        return {v for v in (self.default, *self.honoured) if v is not None}


def _accepted_values(definition: ConfigDef) -> str:
    return " or ".join(sorted(definition._accepted()))


def normalise(definition: ConfigDef, value: str) -> str:
    """A value as Kafka would print it back: trimmed, booleans lower-case, lists without spaces."""
    text = value.strip()
    if definition.type is ConfigType.BOOLEAN:
        return text.lower()
    if definition.type is ConfigType.LIST:
        return ",".join(p.strip() for p in text.split(",") if p.strip())
    if definition.type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        return str(int(text))
    return text


def _type_error(config_type: ConfigType, value: str) -> str | None:
    text = value.strip()
    bounds = {
        ConfigType.INT: _INT_RANGE,
        ConfigType.LONG: _LONG_RANGE,
        ConfigType.SHORT: _SHORT_RANGE,
    }.get(config_type)
    if bounds is not None:
        try:
            number = int(text)
        except ValueError:
            return f"Not a number of type {config_type.name}"
        if not bounds[0] <= number <= bounds[1]:
            return f"Not a number of type {config_type.name}"
        return None
    if config_type is ConfigType.DOUBLE:
        try:
            float(text)
        except ValueError:
            return "Not a number of type DOUBLE"
        return None
    if config_type is ConfigType.BOOLEAN and text.lower() not in ("true", "false"):
        return "Expected value to be either true or false"
    return None


def at_least(minimum: float) -> Check:
    def check(value: str) -> str | None:
        return None if float(value) >= minimum else f"Value must be at least {_num(minimum)}"

    return check


def between(low: float, high: float) -> Check:
    def check(value: str) -> str | None:
        number = float(value)
        if number < low:
            return f"Value must be at least {_num(low)}"
        if number > high:
            return f"Value must be no more than {_num(high)}"
        return None

    return check


def dedupe_buffer_size(value: str) -> str | None:
    """Kafka's Cleaner require(): an offset map that cannot hold one key never makes progress
    (Kafka fails the cleaner thread; here the value is refused)."""
    slots = min(int(value), DEDUPE_BUFFER_MAX) // OFFSET_MAP_BYTES_PER_ENTRY
    if slots * DEDUPE_BUFFER_LOAD_FACTOR > 1:
        return None
    return (
        "offset map is too small to fit in even a single message, so log cleaning will never "
        "make progress. You can increase log.cleaner.dedupe.buffer.size or decrease "
        "log.cleaner.threads"
    )


def positive(value: str) -> str | None:
    return None if float(value) > 0 else "Value must be greater than 0"


def gzip_level(value: str) -> str | None:
    """compression.gzip.level: 1-9, or -1 (Deflater's default), Kafka's message."""
    number = int(value)
    if 1 <= number <= 9 or number == -1:
        return None
    return "Value must be between 1 and 9 or equal to -1"


def one_of(*allowed: str) -> Check:
    def check(value: str) -> str | None:
        if value.strip() in allowed:
            return None
        return f"String must be one of: {', '.join(allowed)}"

    return check


def list_of(*allowed: str) -> Check:
    def check(value: str) -> str | None:
        parts = [p.strip().lower() for p in value.split(",") if p.strip()]
        bad = [p for p in parts if p not in allowed]
        return f"String must be one of: {', '.join(allowed)}" if bad else None

    return check


def _num(number: float) -> str:
    return str(int(number)) if float(number).is_integer() and abs(number) < 2**63 else str(number)


def _throttled_replicas(value: str) -> str | None:
    """Kafka's ThrottledReplicaListValidator: `*`, empty, or partition:broker pairs."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if parts == ["*"] or all(
        len(p.split(":")) == 2 and all(x.strip().isdigit() for x in p.split(":")) for p in parts
    ):
        return None
    return "Value must be a list of partitionId:brokerId pairs or the single wildcard '*'"


# Why a value other than the default cannot be honoured yet (the issue that builds it: 34).
_NO_JITTER = "segment.ms is honoured without a random jitter"
_NO_TIERED = "tiered storage is not built"
_NO_THROTTLE = "replication throttling is not built"
_NO_INDEX = "minikraft keeps no offset or time index files"
_FLUSH = (
    "the flush policy is the broker's: every acks=all and follower append is fsync'd before "
    "it counts toward the high watermark (INVARIANTS.md rule 20)"
)

_LOG = "log."
_CLEANER = "log.cleaner."

# Broker defaults where minikraft's differ from Kafka's, in the table so that brokers and
# controllers answer DescribeConfigs alike (the broker reads them: broker_node).
MINIKRAFT_BROKER_DEFAULTS = {
    # On by default, unlike Kafka (which keeps it for Windows): on Linux it makes the
    # per-produce fsync cheaper, as there is no file size to write back (storage.runtime.segment).
    _LOG + PREALLOCATE: "true",
    # 8 MiB, not Kafka's 1 GiB: a laptop cluster's logs roll and recover in small steps; a
    # topic's segment.bytes overrides it.
    _LOG + SEGMENT_BYTES: str(8 * 1024 * 1024),
}

TOPIC_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    ConfigDef(
        CLEANUP_POLICY, ConfigType.LIST, "delete",
        "The retention policy for old log segments: delete (by retention.ms / retention.bytes) "
        "and/or compact (keep the latest value of each key).",
        list_of("compact", "delete"), (Synonym(_LOG + CLEANUP_POLICY),),
    ),
    ConfigDef(
        COMPRESSION_TYPE, ConfigType.STRING, "producer",
        "The final compression type of the topic's batches: uncompressed, zstd, lz4, snappy, gzip, "
        "or producer (keep the producer's codec). The broker recompresses when it differs.",
        one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        (Synonym(COMPRESSION_TYPE),),
    ),
    ConfigDef(
        COMPRESSION_GZIP_LEVEL, ConfigType.INT, "-1",
        "The compression level when compression.type is gzip.",
        gzip_level, (Synonym(COMPRESSION_GZIP_LEVEL),),
    ),
    ConfigDef(
        COMPRESSION_LZ4_LEVEL, ConfigType.INT, "9",
        "The compression level when compression.type is lz4.",
        between(1, 17), (Synonym(COMPRESSION_LZ4_LEVEL),),
    ),
    ConfigDef(
        COMPRESSION_ZSTD_LEVEL, ConfigType.INT, "3",
        "The compression level when compression.type is zstd.",
        between(-131072, 22), (Synonym(COMPRESSION_ZSTD_LEVEL),),
    ),
    ConfigDef(
        "delete.retention.ms", ConfigType.LONG, "86400000",
        "How long tombstones are kept in a compacted topic.",
        at_least(0), (Synonym(_CLEANER + "delete.retention.ms"),),
    ),
    ConfigDef(
        "errors.deadletterqueue.group.enable", ConfigType.BOOLEAN, "false",
        "Whether groups may use this topic as their dead letter queue.",
        not_built="dead letter queues are not built",
    ),
    ConfigDef(
        "file.delete.delay.ms", ConfigType.LONG, "60000",
        "The time to wait before deleting a file from the filesystem.",
        at_least(0), (Synonym(_LOG + "segment.delete.delay.ms"),),
    ),
    ConfigDef(
        "flush.messages", ConfigType.LONG, LONG_MAX,
        "The number of messages after which the log is fsync'd.",
        at_least(1), (Synonym(_LOG + "flush.interval.messages"),), not_built=_FLUSH,
    ),
    ConfigDef(
        "flush.ms", ConfigType.LONG, LONG_MAX,
        "The time after which the log is fsync'd.",
        at_least(0),
        (Synonym(_LOG + "flush.interval.ms"), Synonym(_LOG + "flush.scheduler.interval.ms")),
        not_built=_FLUSH,
    ),
    ConfigDef(
        "follower.replication.throttled.replicas", ConfigType.LIST, "",
        "Replicas whose log replication is throttled on the follower side.",
        _throttled_replicas, not_built=_NO_THROTTLE,
    ),
    ConfigDef(
        "index.interval.bytes", ConfigType.INT, "4096",
        "How often an offset index entry is added.",
        at_least(0), (Synonym(_LOG + "index.interval.bytes"),), not_built=_NO_INDEX,
    ),
    ConfigDef(
        "leader.replication.throttled.replicas", ConfigType.LIST, "",
        "Replicas whose log replication is throttled on the leader side.",
        _throttled_replicas, not_built=_NO_THROTTLE,
    ),
    ConfigDef(
        "local.retention.bytes", ConfigType.LONG, "-2",
        "The local log size a tiered partition keeps before deleting (-2: retention.bytes).",
        at_least(-2), (Synonym(_LOG + "local.retention.bytes"),), not_built=_NO_TIERED,
    ),
    ConfigDef(
        "local.retention.ms", ConfigType.LONG, "-2",
        "How long a tiered partition keeps a local segment (-2: retention.ms).",
        at_least(-2), (Synonym(_LOG + "local.retention.ms"),), not_built=_NO_TIERED,
    ),
    ConfigDef(
        "max.compaction.lag.ms", ConfigType.LONG, LONG_MAX,
        "The longest a message stays ineligible for compaction.",
        at_least(1), (Synonym(_CLEANER + "max.compaction.lag.ms"),),
    ),
    ConfigDef(
        MAX_DECOMPRESSED_MESSAGE_BYTES, ConfigType.INT, "2147483639",
        "The largest a record of a compressed batch may be once decompressed (INVALID_RECORD "
        "beyond).",
        at_least(0), (Synonym(MAX_DECOMPRESSED_MESSAGE_BYTES),),
    ),
    ConfigDef(
        MAX_MESSAGE_BYTES, ConfigType.INT, "1048588",
        "The largest record batch size the topic accepts (after compression).",
        at_least(0), (Synonym("message.max.bytes"),),
    ),
    ConfigDef(
        MESSAGE_TIMESTAMP_AFTER_MAX_MS, ConfigType.LONG, "3600000",
        "How far a record's CreateTime may be ahead of the broker's clock (INVALID_TIMESTAMP "
        "beyond). Ignored with LogAppendTime.",
        at_least(0), (Synonym(_LOG + MESSAGE_TIMESTAMP_AFTER_MAX_MS),),
    ),
    ConfigDef(
        MESSAGE_TIMESTAMP_BEFORE_MAX_MS, ConfigType.LONG, LONG_MAX,
        "How far a record's CreateTime may be behind the broker's clock (INVALID_TIMESTAMP "
        "beyond). Ignored with LogAppendTime.",
        at_least(0), (Synonym(_LOG + MESSAGE_TIMESTAMP_BEFORE_MAX_MS),),
    ),
    ConfigDef(
        MESSAGE_TIMESTAMP_TYPE, ConfigType.STRING, "CreateTime",
        "CreateTime (the producer's timestamp) or LogAppendTime (the broker's clock at append).",
        one_of("CreateTime", "LogAppendTime"), (Synonym(_LOG + MESSAGE_TIMESTAMP_TYPE),),
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5",
        "The dirty share of a log that makes it eligible for cleaning.",
        between(0, 1), (Synonym(_CLEANER + "min.cleanable.ratio"),),
    ),
    ConfigDef(
        "min.compaction.lag.ms", ConfigType.LONG, "0",
        "The shortest time a message stays uncompacted.",
        at_least(0), (Synonym(_CLEANER + "min.compaction.lag.ms"),),
    ),
    ConfigDef(
        MIN_INSYNC_REPLICAS, ConfigType.INT, "1",
        "The fewest in-sync replicas an acks=all write needs (effective: at most the replication "
        "factor, INVARIANTS.md rules 9 and 20).",
        at_least(1), (Synonym(MIN_INSYNC_REPLICAS),),
    ),
    ConfigDef(
        PREALLOCATE, ConfigType.BOOLEAN, "false",
        "Extend a new segment file ahead of its appends.",
        None, (Synonym(_LOG + PREALLOCATE),),
    ),
    ConfigDef(
        "remote.copy.lag.bytes", ConfigType.LONG, "-1",
        "How many bytes a segment waits before it is copied to tiered storage.",
        at_least(-1), (Synonym(_LOG + "remote.copy.lag.bytes"),), not_built=_NO_TIERED,
    ),
    ConfigDef(
        "remote.copy.lag.ms", ConfigType.LONG, "0",
        "How long a segment waits before it is copied to tiered storage.",
        at_least(-1), (Synonym(_LOG + "remote.copy.lag.ms"),), not_built=_NO_TIERED,
    ),
    ConfigDef(
        "remote.log.copy.disable", ConfigType.BOOLEAN, "false",
        "Stop copying segments to tiered storage.", not_built=_NO_TIERED,
    ),
    ConfigDef(
        "remote.log.delete.on.disable", ConfigType.BOOLEAN, "false",
        "Delete tiered data when tiered storage is turned off.", not_built=_NO_TIERED,
    ),
    ConfigDef(
        REMOTE_STORAGE_ENABLE, ConfigType.BOOLEAN, "false",
        "Keep the topic's old segments in tiered storage.", not_built=_NO_TIERED,
    ),
    ConfigDef(
        "retention.bytes", ConfigType.LONG, "-1",
        "The largest a partition grows before old segments are deleted (-1: no limit).",
        None, (Synonym(_LOG + "retention.bytes"),),
    ),
    ConfigDef(
        "retention.ms", ConfigType.LONG, "604800000",
        "How long a segment is kept before it is deleted (-1: forever).",
        at_least(-1),
        (
            Synonym(_LOG + "retention.ms"),
            Synonym(_LOG + "retention.minutes", MINUTES_TO_MS),
            Synonym(_LOG + "retention.hours", HOURS_TO_MS),
        ),
    ),
    ConfigDef(
        SEGMENT_BYTES, ConfigType.INT, "1073741824",
        "The size at which a partition's active segment is rolled.",
        at_least(1024 * 1024), (Synonym(_LOG + SEGMENT_BYTES),),
    ),
    ConfigDef(
        "segment.index.bytes", ConfigType.INT, "10485760",
        "The size of a segment's offset index.",
        at_least(4), (Synonym(_LOG + "index.size.max.bytes"),), not_built=_NO_INDEX,
    ),
    ConfigDef(
        "segment.jitter.ms", ConfigType.LONG, "0",
        "The random jitter subtracted from segment.ms.",
        at_least(0),
        (Synonym(_LOG + "roll.jitter.ms"), Synonym(_LOG + "roll.jitter.hours", HOURS_TO_MS)),
        not_built=_NO_JITTER,
    ),
    ConfigDef(
        "segment.ms", ConfigType.LONG, "604800000",
        "The time after which the active segment is rolled.",
        at_least(1),
        (Synonym(_LOG + "roll.ms"), Synonym(_LOG + "roll.hours", HOURS_TO_MS)),
    ),
    ConfigDef(
        UNCLEAN_LEADER_ELECTION_ENABLE, ConfigType.BOOLEAN, "false",
        "Elect a replica outside the ISR (and ELR) as a last resort, losing data "
        "(INVARIANTS.md rule 13).",
        None, (Synonym(UNCLEAN_LEADER_ELECTION_ENABLE),),
    ),
)
TOPIC_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in TOPIC_CONFIG_DEFS}


def _broker(
    name: str,
    config_type: ConfigType,
    default: str | None,
    doc: str,
    check: Check | None = None,
    *,
    dynamic: bool = False,
    not_built: str | None = None,
    honoured: Iterable[str] = (),
) -> ConfigDef:
    return ConfigDef(
        name, config_type, default, doc, check, (), not_built, frozenset(honoured), dynamic
    )


def _synonym_defs() -> list[ConfigDef]:
    """Each topic config's broker-level synonyms: dynamic (cluster-wide or per broker) as Kafka's
    DynamicLogConfig makes them, same type and validation, defaults in their own unit."""
    special = {
        _LOG + "retention.ms": None,
        _LOG + "retention.minutes": None,
        _LOG + "retention.hours": "168",
        _LOG + "roll.ms": None,
        _LOG + "roll.hours": "168",
        _LOG + "roll.jitter.ms": None,
        _LOG + "roll.jitter.hours": "0",
        _LOG + "flush.interval.ms": None,
        **MINIKRAFT_BROKER_DEFAULTS,
    }
    defs = []
    for topic_def in TOPIC_CONFIG_DEFS:
        for synonym in topic_def.synonyms:
            default = special.get(synonym.name, topic_def.default)
            hours = synonym.to_ms != 1
            defs.append(
                ConfigDef(
                    synonym.name,
                    ConfigType.INT if hours else topic_def.type,
                    default,
                    topic_def.doc + f" (the default of the topic config {topic_def.name})",
                    None if hours else topic_def.check,
                    (),
                    topic_def.not_built,
                    frozenset()
                    if topic_def.not_built is None
                    else frozenset(
                        v
                        for v in (
                            *topic_def.honoured,
                            *(
                                ()
                                if synonym.to_ms == 1 or topic_def.default is None
                                else (str(int(topic_def.default) // synonym.to_ms),)
                            ),
                        )
                    ),
                    # Kafka's DynamicLogConfig: the hours/minutes forms and the flush scheduler
                    # are static.
                    dynamic=not hours and synonym.name not in _STATIC_SYNONYMS,
                )
            )
    return defs


_STATIC_SYNONYMS = frozenset({_LOG + "flush.scheduler.interval.ms"})


BROKER_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    *_synonym_defs(),
    _broker("node.id", ConfigType.INT, None, "This node's id in the cluster."),
    _broker("process.roles", ConfigType.LIST, None, "broker, controller, or both."),
    _broker("listeners", ConfigType.STRING, None, "The listeners this node binds."),
    _broker(
        "controller.listener.names", ConfigType.LIST, None, "The listeners controllers use."
    ),
    _broker(
        "controller.quorum.bootstrap.servers", ConfigType.LIST, "",
        "host:port of controllers a node contacts first.",
    ),
    _broker("log.dirs", ConfigType.STRING, None, "The directories of the partition logs."),
    _broker("metadata.log.dir", ConfigType.STRING, None, "The directory of __cluster_metadata."),
    _broker(
        "num.partitions", ConfigType.INT, "1",
        "Partitions of an auto-created topic and of a CreateTopics asking for -1.", at_least(1),
    ),
    _broker(
        "default.replication.factor", ConfigType.INT, "1",
        "Replication factor of an auto-created topic and of a CreateTopics asking for -1.",
    ),
    _broker(
        "auto.create.topics.enable", ConfigType.BOOLEAN, "true",
        "Create a topic a client's Metadata request names.",
    ),
    _broker(
        "offsets.topic.replication.factor", ConfigType.SHORT, "3",
        "Replication factor of __consumer_offsets.", at_least(1),
    ),
    _broker(
        "offsets.topic.num.partitions", ConfigType.INT, "50",
        "Partitions of __consumer_offsets.", at_least(1),
    ),
    _broker(
        "replica.lag.time.max.ms", ConfigType.LONG, "30000",
        "How long a follower may lag before it leaves the ISR.",
    ),
    _broker(
        "replica.fetch.max.bytes", ConfigType.INT, "1048576",
        "Bytes a follower fetches per partition in one Fetch (the first batch may exceed it).",
        at_least(0),
    ),
    _broker(
        "replica.fetch.response.max.bytes", ConfigType.INT, "10485760",
        "Bytes a follower's Fetch answer may carry over all its partitions.", at_least(0),
    ),
    _broker(
        "replica.fetch.wait.max.ms", ConfigType.INT, "500",
        "How long the leader holds a follower's Fetch waiting for replica.fetch.min.bytes.",
    ),
    _broker(
        "replica.fetch.min.bytes", ConfigType.INT, "1",
        "Bytes a follower's Fetch waits for before it is answered.",
    ),
    _broker(
        "max.incremental.fetch.session.cache.slots", ConfigType.INT, "1000",
        "Incremental fetch sessions (KIP-227) a broker keeps.", at_least(0),
    ),
    _broker(
        "min.incremental.fetch.session.eviction.ms", ConfigType.INT, "120000",
        "How long a fetch session is unused before another may take its slot.", at_least(0),
    ),
    _broker(
        "log.retention.check.interval.ms", ConfigType.LONG, "300000",
        "How often logs are checked for segments to delete.", at_least(1),
    ),
    _broker(
        "log.cleaner.enable", ConfigType.BOOLEAN, "true",
        "Run the log cleaner, which compacts topics with cleanup.policy=compact.",
    ),
    _broker(
        "log.cleaner.backoff.ms", ConfigType.LONG, "15000",
        "How long the log cleaner sleeps when no log needs cleaning.", at_least(0),
    ),
    _broker(
        "log.cleaner.dedupe.buffer.size", ConfigType.LONG, str(128 * 1024 * 1024),
        "The memory of the log cleaner's offset map: at 24 bytes a key, filled to 0.9, it "
        "bounds the keys one cleaning round maps; the rest of the dirty log is cleaned in the "
        "next rounds.", dedupe_buffer_size, dynamic=True,
    ),
    _broker(
        "log.cleaner.io.max.bytes.per.second", ConfigType.DOUBLE, "1.7976931348623157E308",
        "The log cleaner is throttled so that the sum of its read and write i/o stays below "
        "this value on average.", positive, dynamic=True,
    ),
    _broker(
        "metadata.log.max.record.bytes.between.snapshots", ConfigType.LONG, "20971520",
        "Bytes of committed metadata batches after which a node snapshots its metadata image.",
        at_least(1),
    ),
    _broker(
        "metadata.log.max.snapshot.interval.ms", ConfigType.LONG, "3600000",
        "Milliseconds after which a node snapshots its metadata image at the next commit; "
        "0 disables the time trigger.", at_least(0),
    ),
    _broker(
        "broker.session.timeout.ms", ConfigType.INT, "9000",
        "How long a broker stays unfenced without a heartbeat.",
    ),
    _broker(
        "broker.heartbeat.interval.ms", ConfigType.INT, "2000",
        "How often a broker heartbeats to the active controller.",
    ),
    _broker(
        "socket.request.max.bytes", ConfigType.INT, "104857600",
        "The largest request a listener reads.", at_least(1),
    ),
)
BROKER_CONFIGS: Mapping[str, ConfigDef] = {d.name: d for d in BROKER_CONFIG_DEFS}


# -- effective values ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigValue:
    """One DescribeConfigs row: value, where it came from, and the synonyms below it (Kafka's
    order: the topic, then per-broker dynamic, cluster dynamic, static, default)."""

    name: str
    value: str | None
    source: ConfigSource
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]
    definition: ConfigDef | None


@dataclass(frozen=True, slots=True)
class BrokerLevels:
    """The broker-level values a node sees: dynamic configs for its own id and the cluster
    default (from the metadata image), its static config file, and its own defaults where they
    differ from Kafka's (minikraft's node defaults)."""

    per_broker: Mapping[str, str]
    cluster: Mapping[str, str]
    static: Mapping[str, str]
    node_defaults: Mapping[str, str]

    def synonyms_of(self, names: Iterable[str]) -> list[tuple[str, str | None, ConfigSource]]:
        rows: list[tuple[str, str | None, ConfigSource]] = []
        ordered = list(names)
        for level, source in (
            (self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.cluster, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, ConfigSource.STATIC_BROKER_CONFIG),
        ):
            rows.extend((name, level[name], source) for name in ordered if name in level)
        for name in ordered:
            default = self.node_defaults.get(name)
            if default is None:
                definition = BROKER_CONFIGS.get(name)
                default = None if definition is None else definition.default
            if default is not None:
                rows.append((name, default, ConfigSource.DEFAULT_CONFIG))
        return rows


def _convert(definition: ConfigDef, synonym_name: str, value: str | None) -> str | None:
    """A broker-level synonym's value in the topic config's unit (log.retention.hours -> ms)."""
    if value is None:
        return None
    for synonym in definition.synonyms:
        if synonym.name == synonym_name and synonym.to_ms != 1:
            # Kafka's KafkaConfig: a negative retention in hours or minutes is -1, forever.
            return str(max(-1, int(value) * synonym.to_ms))
    return value


def topic_config_values(topic_overrides: Mapping[str, str], levels: BrokerLevels) -> list[ConfigValue]:
    """Every topic config with its effective value and source (Kafka's createTopicConfigEntry).

    The value: the topic's own, else the first synonym, in Kafka's order of names
    (log.retention.ms, then .minutes, then .hours), that any broker level sets, else the first
    with a default. The synonyms listed (and the source, the first of them) are Kafka's
    configSynonyms of the primary broker name: its levels' entries from the first entry of that
    name on, so retention.ms, whose log.retention.ms has no default, lists none."""
    rows = []
    for definition in TOPIC_CONFIG_DEFS:
        names = [s.name for s in definition.synonyms]
        found = levels.synonyms_of(names)
        primary = names[:1]
        listed = list(dropwhile(lambda row: row[0] not in primary, found))  # noqa: B023
        value: str | None
        if definition.name in topic_overrides:
            value = topic_overrides[definition.name]
            listed = [(definition.name, value, ConfigSource.TOPIC_CONFIG), *listed]
        else:
            value = _synonym_value(definition, found)
        source = listed[0][2] if listed else ConfigSource.DEFAULT_CONFIG
        rows.append(ConfigValue(definition.name, value, source, tuple(listed), definition))
    return rows


def _synonym_value(
    definition: ConfigDef, found: list[tuple[str, str | None, ConfigSource]]
) -> str | None:
    """The value the broker levels give a topic config: names in Kafka's order, set values
    before defaults; the topic config's own default if no level has one."""
    for defaults in (False, True):
        for synonym in definition.synonyms:
            for name, value, source in found:
                if name == synonym.name and (source == ConfigSource.DEFAULT_CONFIG) == defaults:
                    return _convert(definition, name, value)
    return definition.default


def effective_topic_configs(
    topic_overrides: Mapping[str, str], levels: BrokerLevels
) -> dict[str, str | None]:
    """name -> effective value of every topic config (what the write path honours)."""
    return {row.name: row.value for row in topic_config_values(topic_overrides, levels)}


def broker_config_values(levels: BrokerLevels, *, cluster_default: bool) -> list[ConfigValue]:
    """A broker's configs (Kafka's createBrokerConfigEntry): every known broker config and any
    other key of its config file; for the cluster default resource (""), only the dynamic
    cluster-level configs set."""
    if cluster_default:
        return [
            ConfigValue(
                name,
                value,
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                ((name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),),
                BROKER_CONFIGS.get(name),
            )
            for name, value in sorted(levels.cluster.items())
        ]
    names = sorted(set(BROKER_CONFIGS) | set(levels.static) | set(levels.per_broker))
    rows = []
    for name in names:
        synonyms = levels.synonyms_of([name])
        if synonyms:
            _, value, source = synonyms[0]
        else:
            value, source = None, ConfigSource.DEFAULT_CONFIG
        rows.append(ConfigValue(name, value, source, tuple(synonyms), BROKER_CONFIGS.get(name)))
    return rows


def declared_defaults(*names: str) -> dict[str, str]:
    """The defaults this table declares for broker configs `names` (minikraft's where they
    differ from Kafka's): what a node reads when its config file leaves one out."""
    defaults = {}
    for name in names:
        default = BROKER_CONFIGS[name].default
        if default is None:
            raise ValueError(f"{name} has no default")  # node.id, log.dirs: the file must say
        defaults[name] = default
    return defaults
