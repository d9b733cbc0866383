"""How a field of a kio entity travels, read from the dataclass itself: its Kafka type and tag
(the field's metadata), whether it is nullable, an array, a nested entity, and the default a
tagged field is left off at.

kio's dataclasses are the only schema; kio keeps these questions in private modules
(`kio.serial._introspect`, `_implicit_defaults`, and the writer/reader choice inside
`_serialize` and its native reader), so kafkawire.codec asks them here instead, with kio's
answers restated (tests/unit/test_kafkawire_codec.py proves the same bytes and the same
entities as kio's public `entity_writer` / `entity_reader` for every schema kio ships).
"""

from __future__ import annotations

import dataclasses
import types
import typing
import uuid
from dataclasses import MISSING, dataclass, fields, is_dataclass
from datetime import timedelta
from typing import Any

from kio.serial import writers
from kio.serial.readers import tz_aware_from_i64
from kio.static.constants import uuid_zero
from kio.static.primitive import (
    PhantomStr,
    Records,
    TZAware,
    f64,
    i8,
    i16,
    i32,
    i32Timedelta,
    i64,
    i64Timedelta,
    u8,
    u16,
    u32,
    u64,
)


class SchemaFieldError(TypeError):
    """A field kio's schema conventions do not allow (kio raises SchemaError for these)."""


@dataclass(frozen=True, slots=True)
class FieldShape:
    """`type_` is the item type: the nested entity class or the primitive type."""

    is_array: bool
    is_entity: bool
    type_: type


def kafka_type(field: dataclasses.Field[Any]) -> str:
    value = field.metadata.get("kafka_type")
    if not isinstance(value, str):
        raise SchemaFieldError(f"no `kafka_type` in the metadata of {field.name}")
    return value


def field_tag(field: dataclasses.Field[Any]) -> int | None:
    tag = field.metadata.get("tag")
    return None if tag is None else int(tag)


def _without_none(field_type: Any, name: str) -> Any:
    # Only `X | None` (kio's generated annotations); a typing.Optional stays as it is, as in kio.
    if typing.get_origin(field_type) is types.UnionType:
        others = [arg for arg in typing.get_args(field_type) if arg is not types.NoneType]
        if len(others) != 1:
            raise SchemaFieldError(f"{name}: only a union with None is supported")
        return others[0]
    return field_type


def is_nullable(field: dataclasses.Field[Any]) -> bool:
    """The field (or, for an array, the array itself) may be None."""
    field_type = field.type
    if typing.get_origin(field_type) is tuple:
        field_type = typing.get_args(field_type)[0]
    return typing.get_origin(field_type) in (types.UnionType, typing.Union) and (
        types.NoneType in typing.get_args(field_type)
    )


def shape(field: dataclasses.Field[Any]) -> FieldShape:
    if isinstance(field.type, str):
        raise SchemaFieldError(f"{field.name}: a string annotation, not a type")
    field_type = _without_none(field.type, field.name)
    if typing.get_origin(field_type) is tuple:
        args = typing.get_args(field_type)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise SchemaFieldError(f"{field.name}: an array is tuple[item, ...], got {args}")
        item = args[0]
        return FieldShape(True, is_dataclass(item), item)
    return FieldShape(False, is_dataclass(field_type), field_type)


# The fixed-size Kafka types: (kio's writer, the name of kio's reader); never nullable.
_FIXED: dict[str, tuple[Any, str]] = {
    "int8": (writers.write_int8, "read_int8"),
    "int16": (writers.write_int16, "read_int16"),
    "int32": (writers.write_int32, "read_int32"),
    "int64": (writers.write_int64, "read_int64"),
    "uint8": (writers.write_uint8, "read_uint8"),
    "uint16": (writers.write_uint16, "read_uint16"),
    "uint32": (writers.write_uint32, "read_uint32"),
    "uint64": (writers.write_uint64, "read_uint64"),
    "float64": (writers.write_float64, "read_float64"),
    "bool": (writers.write_boolean, "read_boolean"),
    "error_code": (writers.write_error_code, "read_error_code"),
    "timedelta_i32": (writers.write_timedelta_i32, "read_timedelta_i32"),
    "timedelta_i64": (writers.write_timedelta_i64, "read_timedelta_i64"),
}
# (Kafka type, flexible, nullable) -> (kio's writer, the name of kio's reader).
_VARIABLE: dict[tuple[str, bool, bool], tuple[Any, str]] = {
    ("string", False, False): (writers.write_legacy_string, "read_legacy_string"),
    ("string", False, True): (writers.write_nullable_legacy_string, "read_nullable_legacy_string"),
    ("string", True, False): (writers.write_compact_string, "read_compact_string"),
    ("string", True, True): (writers.write_nullable_compact_string, "read_compact_string_nullable"),
    ("bytes", False, False): (writers.write_legacy_bytes, "read_legacy_bytes"),
    ("bytes", False, True): (writers.write_nullable_legacy_bytes, "read_nullable_legacy_bytes"),
    ("bytes", True, False): (writers.write_compact_string, "read_compact_string_as_bytes"),
    ("bytes", True, True): (
        writers.write_nullable_compact_string,
        "read_compact_string_as_bytes_nullable",
    ),
    ("datetime_i64", False, False): (writers.write_datetime_i64, "read_datetime_i64"),
    ("datetime_i64", False, True): (
        writers.write_nullable_datetime_i64,
        "read_nullable_datetime_i64",
    ),
}


def wire_form(kafka_type_: str, flexible: bool, nullable: bool) -> tuple[Any, str]:
    """(kio's writer, the name of kio's reader) for one value of a Kafka type: kio's choice.
    Records travel as bytes; a uuid is never null on the wire (the zero uuid stands for it);
    a datetime's framing does not depend on the flexible versions."""
    if kafka_type_ in _FIXED and not nullable:
        return _FIXED[kafka_type_]
    if kafka_type_ == "uuid":
        return writers.write_uuid, "read_uuid"
    if kafka_type_ == "records":
        kafka_type_ = "bytes"
    if kafka_type_ == "datetime_i64":
        flexible = False
    form = _VARIABLE.get((kafka_type_, flexible, nullable))
    if form is None:
        # No Kafka message schema declares such a field: a schema that does is malformed.
        raise TypeError(
            f"no wire form for a {kafka_type_!r} field (flexible={flexible}, nullable={nullable})"
        )
    return form


# kio's implicit defaults of a tagged field without a declared one (Kafka's generated code
# leaves a tagged field off when it equals its default).
_IMPLICIT_DEFAULTS: dict[type, object] = {
    u8: u8(0),
    u16: u16(0),
    u32: u32(0),
    u64: u64(0),
    i8: i8(0),
    i16: i16(0),
    i32: i32(0),
    i64: i64(0),
    f64: f64(0.0),
    i32Timedelta: i32Timedelta.parse(timedelta(0)),
    i64Timedelta: i64Timedelta.parse(timedelta(0)),
    TZAware: tz_aware_from_i64(i64(0)),
    uuid.UUID: uuid_zero,
    str: "",
    PhantomStr: "",
    bytes: b"",
}


def _implicit_default(field_type: type) -> object:
    if issubclass(field_type, Records):
        # Kafka's schemas never tag a records field (its generator refuses one): malformed.
        raise TypeError("a records field cannot be tagged")
    if field_type in _IMPLICIT_DEFAULTS:
        return _IMPLICIT_DEFAULTS[field_type]
    return _IMPLICIT_DEFAULTS[field_type.__bases__[0]]


def tagged_default(field: dataclasses.Field[Any]) -> Any:
    """The value a tagged field is left off at: its declared default, else kio's implicit one
    (a nested entity: built from its own fields' defaults)."""
    if field.default is not MISSING:
        return field.default
    if is_nullable(field):
        raise SchemaFieldError(f"{field.name}: a nullable tagged field defaults to None")
    field_shape = shape(field)
    if field_shape.is_array:
        raise SchemaFieldError(f"{field.name}: a tagged array defaults to the empty tuple")
    if field_shape.is_entity:
        entity = field_shape.type_
        return entity(**{nested.name: tagged_default(nested) for nested in fields(entity)})
    return _implicit_default(field_shape.type_)
