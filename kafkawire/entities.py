"""Building kio entities of any version from one set of values.

A handler fills in every field it knows; `build` keeps the ones the schema's version has (older
versions lack topic ids, leader epochs, tagged fields...) and lets kio's defaults fill the rest.
`item_type` finds the nested class of a field for the same version.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

NO_THROTTLE = datetime.timedelta(0)


@cache
def field_names(schema: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(schema))


def has_field(schema: type, name: str) -> bool:
    return name in field_names(schema)


def build(schema: type, **values: Any) -> Any:
    """schema(**values) without the values this version does not have; a throttle time or a
    top-level error code a version added and the caller did not give is zero / NONE."""
    names = field_names(schema)
    kept = {k: v for k, v in values.items() if k in names}
    if "throttle_time" in names:
        kept.setdefault("throttle_time", NO_THROTTLE)
    if "error_code" in names:
        kept.setdefault("error_code", ErrorCode.none)
    return schema(**kept)


@cache
def item_type(schema: type, name: str) -> type:
    """The entity class of field `name`: X of `tuple[X, ...]`, `X | None` or `X`."""
    hint = typing.get_type_hints(schema)[name]
    while True:
        args = [a for a in typing.get_args(hint) if a is not type(None) and a is not Ellipsis]
        origin = typing.get_origin(hint)
        if origin in (tuple, typing.Union, types.UnionType) and args:
            hint = args[0]
            continue
        if not isinstance(hint, type):
            raise TypeError(f"{schema.__qualname__}.{name} is not an entity field")
        return hint


def convert(entity: Any, schema: type, **values: Any) -> Any:
    """`entity` as `schema`, another version of the same message: the fields both versions
    have, nested entities converted field by field into `schema`'s own classes; `values` set or
    override fields (a field a version renamed). One converter serves both directions: a request
    lifted into the newest version the core takes, the core's response lowered into the
    version the client spoke (fields that version lacks dropped, as `build` does). An entity
    already of `schema` is returned as it is (entities are frozen): a follower's
    OffsetForLeaderEpoch v4 of thousands of partitions was copied field by field twice per
    request (issue 35)."""
    if type(entity) is schema and not values:
        return entity
    names = field_names(schema)
    kept = {
        f.name: _converted(getattr(entity, f.name), schema, f.name)
        for f in dataclasses.fields(entity)
        if f.name in names and f.name not in values
    }
    return build(schema, **kept, **values)


def _converted(value: Any, schema: type, name: str) -> Any:
    if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
        cls = item_type(schema, name)
        return tuple(convert(v, cls) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return convert(value, item_type(schema, name))
    return value
