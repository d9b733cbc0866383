"""Declaring a Kafka schema kio does not ship (GetReplicaLogInfo, DescribeTopicPartitions with
minikraft's tagged fields, the `__consumer_offsets` records, KRaftVersionRecord) once, in kio's
generated style: a frozen, slotted, keyword-only dataclass (a KafkaEntity) whose class attributes
say what it is and whose fields carry their Kafka type. `kafka_schema` writes the class attributes and
`kafka_field` the field metadata, so a schema module states only what its JSON file says. kio's
entity_reader / entity_writer (and kafkawire.codec) then encode it like any generated schema.

A module using these keeps no `from __future__ import annotations`: kio reads the field types at
run time."""

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field
from typing import Any, ClassVar, TypeVar, dataclass_transform

from kio.static.constants import EntityType
from kio.static.primitive import i16


class KafkaEntity:
    """The base of a declared schema: the class attributes kio's Entity protocol names (set by
    kafka_schema), declared here so type checkers see them."""

    __slots__ = ()
    __type__: ClassVar[EntityType]
    __version__: ClassVar[i16]
    __flexible__: ClassVar[bool]


T = TypeVar("T", bound=KafkaEntity)


def kafka_field(kafka_type: str, *, default: Any = MISSING, tag: int | None = None) -> Any:
    """A field of `kafka_type` (the JSON schema's type: "int32", "string", "uuid", ...); `tag`
    makes it a tagged field (flexible versions only)."""
    metadata: dict[str, Any] = {"kafka_type": kafka_type}
    if tag is not None:
        metadata["tag"] = tag
    return field(metadata=metadata, default=default)


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field, kafka_field))
def kafka_schema(
    entity_type: EntityType,
    version: int,
    *,
    flexible: bool = True,
    api_key: int | None = None,
    header: type | None = None,
) -> Callable[[type[T]], type[T]]:
    """The class as kio declares an entity: `__type__`, `__version__`, `__flexible__`, and for
    a message's parts `__api_key__` and `__header_schema__` (the header its message travels
    with)."""

    def declare(cls: type[T]) -> type[T]:
        cls.__type__ = entity_type
        cls.__version__ = i16(version)
        cls.__flexible__ = flexible
        if api_key is not None:
            setattr(cls, "__api_key__", i16(api_key))  # noqa: B010 (a message's part only)
            setattr(cls, "__header_schema__", header)  # noqa: B010
        return dataclass(frozen=True, slots=True, kw_only=True)(cls)

    return declare
