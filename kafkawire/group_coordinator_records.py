"""The records of `__consumer_offsets`, declared once in kio's style from Apache Kafka's
group-coordinator JSON (OffsetCommitKey/Value, GroupMetadataKey/Value): kio generates client
messages only. Every record is a key and a value, each prefixed by its int16 schema version as
Kafka writes them: key version 0/1 is an offset commit, 2 the group's metadata; a null value is
a tombstone (the offset or the group is deleted). Values are version 3 (the newest non-flexible
one, which Kafka 4.x reads and writes); minikraft wrote every record of its own topic, so it
reads that version only. No `from __future__ import
annotations`: kio reads the field types at run time."""

import io
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i32, i64

from kafkawire.declared_schema import KafkaEntity, kafka_field, kafka_schema

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
VALUE_VERSION = 3
_VERSION = struct.Struct(">h")


@kafka_schema(EntityType.data, OFFSET_COMMIT_KEY_VERSION, flexible=False)
class OffsetCommitKey(KafkaEntity):
    group: str = kafka_field("string")
    topic: str = kafka_field("string")
    partition: i32 = kafka_field("int32")


@kafka_schema(EntityType.data, VALUE_VERSION, flexible=False)
class OffsetCommitValue(KafkaEntity):
    offset: i64 = kafka_field("int64")
    leader_epoch: i32 = kafka_field("int32", default=i32(-1))  # v3+
    metadata: str = kafka_field("string")
    commit_timestamp: i64 = kafka_field("int64")


@kafka_schema(EntityType.data, GROUP_METADATA_KEY_VERSION, flexible=False)
class GroupMetadataKey(KafkaEntity):
    group: str = kafka_field("string")


@kafka_schema(EntityType.nested, VALUE_VERSION, flexible=False)
class MemberMetadata(KafkaEntity):
    member_id: str = kafka_field("string")
    group_instance_id: str | None = kafka_field("string", default=None)  # v3+
    client_id: str = kafka_field("string")
    client_host: str = kafka_field("string")
    rebalance_timeout: i32 = kafka_field("int32")  # v1+
    session_timeout: i32 = kafka_field("int32")
    subscription: bytes = kafka_field("bytes")
    assignment: bytes = kafka_field("bytes")


@kafka_schema(EntityType.data, VALUE_VERSION, flexible=False)
class GroupMetadataValue(KafkaEntity):
    protocol_type: str = kafka_field("string")
    generation: i32 = kafka_field("int32")
    protocol: str | None = kafka_field("string")
    leader: str | None = kafka_field("string")
    current_state_timestamp: i64 = kafka_field("int64", default=i64(-1))  # v2+
    members: tuple[MemberMetadata, ...]


Key = OffsetCommitKey | GroupMetadataKey
Value = OffsetCommitValue | GroupMetadataValue


class UnknownRecordVersionError(ValueError):
    """A key or value version this node does not read (a newer Kafka's record)."""


def encode_key(key: Key) -> bytes:
    version = (
        OFFSET_COMMIT_KEY_VERSION if isinstance(key, OffsetCommitKey) else GROUP_METADATA_KEY_VERSION
    )
    return _VERSION.pack(version) + _write(key)


def encode_value(value: Value | None) -> bytes | None:
    """Version 3 bytes of `value`; None (a tombstone) stays None."""
    if value is None:
        return None
    return _VERSION.pack(VALUE_VERSION) + _write(value)


def decode_key(data: bytes) -> Key:
    (version,) = _VERSION.unpack_from(data)
    if version in (0, 1):
        return _read(OffsetCommitKey, data)
    if version == GROUP_METADATA_KEY_VERSION:
        return _read(GroupMetadataKey, data)
    raise UnknownRecordVersionError(f"__consumer_offsets key version {version}")


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value of `key`'s record; None: a tombstone."""
    if data is None:
        return None
    (version,) = _VERSION.unpack_from(data)
    if version != VALUE_VERSION:
        raise UnknownRecordVersionError(f"__consumer_offsets value version {version}")
    schema = OffsetCommitValue if isinstance(key, OffsetCommitKey) else GroupMetadataValue
    value: Value = _read(schema, data)
    return value


def _read(schema: type, data: bytes) -> Any:
    entity: Any
    entity, _size = entity_reader(schema)(data, _VERSION.size)
    return entity


def _write(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()
