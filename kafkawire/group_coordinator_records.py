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
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
VALUE_VERSION = 3
_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})
    topic: str = field(metadata={"kafka_type": "string"})
    partition: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    offset: i64 = field(metadata={"kafka_type": "int64"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))  # v3+
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    member_id: str = field(metadata={"kafka_type": "string"})
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)  # v3+
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    rebalance_timeout: i32 = field(metadata={"kafka_type": "int32"})  # v1+
    session_timeout: i32 = field(metadata={"kafka_type": "int32"})
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    assignment: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: i32 = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"})
    leader: str | None = field(metadata={"kafka_type": "string"})
    current_state_timestamp: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))  # v2+
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
