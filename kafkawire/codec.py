"""Compiled writers and readers for kio entities: the same bytes and the same entities as kio's
generic `entity_writer` / `entity_reader`, without their per-field dispatch.

For each entity class, once, we ask how every field travels (kafkawire.entity_fields reads it
from kio's dataclass: Kafka type, tag, nullability, array or entity, a tagged field's default,
and kio's choice of writer / reader for each Kafka type) and generate straight-line Python source:
runs of fixed-size fields are one `struct.Struct` pack/unpack, values are local variables, nested
entities are direct calls. Nothing about a schema is declared here; kio's dataclasses stay the
only schema.

The reader builds kio's dataclass instances the way kio's native reader does (allocate, then set
the slots; no `__init__`, no re-validation), with the values kio returns: plain int/str/bytes,
`ErrorCode`, `timedelta`, `uuid.UUID` (the all-zero UUID is None), kio's own datetime reader.
Unlike kio's native reader, a length larger than the bytes left is an error before anything is
allocated (Apache Kafka's generated readers refuse it the same way): a 5-byte frame claiming
2**34 array items must be `UndecodableRequestError`, not an abort of the process.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid
from collections.abc import Callable
from dataclasses import MISSING, fields
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import writers
from kio.serial.errors import BufferUnderflow, NegativeByteLength, UnexpectedNull
from kio.serial.readers import read_datetime_i64, read_nullable_datetime_i64

from kafkawire.constants import ZERO_UUID
from kafkawire.entity_fields import (
    field_tag,
    is_nullable,
    kafka_type,
    shape,
    tagged_default,
    wire_form,
)

Writer = Callable[[Any], bytes]
Reader = Callable[[bytes, int], tuple[Any, int]]

_ZERO_UUID = ZERO_UUID.bytes

# kio's writer for a kafka type -> (struct code, value expression) for fixed-size values.
_FIXED_WRITE: dict[Any, tuple[str, str]] = {
    writers.write_int8: ("b", "{}"),
    writers.write_int16: ("h", "{}"),
    writers.write_int32: ("i", "{}"),
    writers.write_int64: ("q", "{}"),
    writers.write_uint8: ("B", "{}"),
    writers.write_uint16: ("H", "{}"),
    writers.write_uint32: ("I", "{}"),
    writers.write_uint64: ("Q", "{}"),
    writers.write_float64: ("d", "{}"),
    writers.write_boolean: ("?", "{}"),
    writers.write_error_code: ("h", "{}.value"),
    writers.write_timedelta_i32: ("i", "round({}.total_seconds() * 1000)"),
    writers.write_timedelta_i64: ("q", "round({}.total_seconds() * 1000)"),
    writers.write_uuid: ("16s", "(_Z if {0} is None else {0}.bytes)"),
    writers.write_datetime_i64: ("q", "round({}.timestamp() * 1000)"),
    writers.write_nullable_datetime_i64: (
        "q",
        "(-1 if {0} is None else round({0}.timestamp() * 1000))",
    ),
}
# kio's reader name -> (struct code, conversion of the unpacked value) for fixed-size values.
_FIXED_READ: dict[str, tuple[str, str]] = {
    "read_int8": ("b", "{}"),
    "read_int16": ("h", "{}"),
    "read_int32": ("i", "{}"),
    "read_int64": ("q", "{}"),
    "read_uint8": ("B", "{}"),
    "read_uint16": ("H", "{}"),
    "read_uint32": ("I", "{}"),
    "read_uint64": ("Q", "{}"),
    "read_float64": ("d", "{}"),
    "read_boolean": ("B", "_bool({})"),
    "read_error_code": ("h", "_ec({})"),
    "read_timedelta_i32": ("i", "_td(0, 0, 0, {})"),
    "read_timedelta_i64": ("q", "_td(0, 0, 0, {})"),
    "read_uuid": ("16s", "(None if {0} == _Z else _mkuuid({0}))"),
}
_STRINGS_READ = {
    # name -> (compact?, nullable?, decode to str?)
    "read_compact_string": (True, False, True),
    "read_compact_string_nullable": (True, True, True),
    "read_compact_string_as_bytes": (True, False, False),
    "read_compact_string_as_bytes_nullable": (True, True, False),
    "read_legacy_string": (False, False, True),
    "read_nullable_legacy_string": (False, True, True),
    "read_legacy_bytes": (False, False, False),
    "read_nullable_legacy_bytes": (False, True, False),
}
_DELEGATED_READ = {"read_datetime_i64", "read_nullable_datetime_i64"}
_WRITE_STRING = {
    writers.write_compact_string: "compact",
    writers.write_nullable_compact_string: "compact",
    writers.write_legacy_string: "legacy_string",
    writers.write_nullable_legacy_string: "legacy_string",
    writers.write_legacy_bytes: "legacy_bytes",
    writers.write_nullable_legacy_bytes: "legacy_bytes",
}


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint, byte for byte as kio's `_write_varint`."""
    out = bytearray()
    chunk = value & 0x7F
    value >>= 7
    while value:
        out.append(0x80 | chunk)
        chunk = value & 0x7F
        value >>= 7
    out.append(chunk)
    return bytes(out)


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, new position); at most 5 bytes, as kio's reader."""
    result = 0
    shift = 0
    for _ in range(5):
        if pos >= len(buf):
            raise BufferUnderflow("Buffer is exhausted")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos
    raise ValueError("Varint is too long, the most significant bit in the 5th byte is set")


def _bool(value: int) -> bool:
    if value > 1:
        raise ValueError("Invalid boolean value")
    return value == 1


_EC_MEMBERS: dict[int, ErrorCode] = dict(ErrorCode._value2member_map_)  # type: ignore[arg-type]


def _ec(value: int) -> ErrorCode:
    member = _EC_MEMBERS.get(value)
    return member if member is not None else ErrorCode(value)


def _mkuuid(raw: bytes) -> uuid.UUID:
    """uuid.UUID(bytes=raw) without its argument checks (raw is 16 bytes from struct)."""
    value = _new_object(uuid.UUID)
    _set_object(value, "int", int.from_bytes(raw, "big"))
    _set_object(value, "is_safe", uuid.SafeUUID.unknown)
    return value


_new_object = object.__new__
_set_object = object.__setattr__
_ARRAY_CACHED = 64


@cache
def _array_structs(code: str) -> tuple[struct.Struct, ...]:
    """Structs for arrays of 0.._ARRAY_CACHED items of one fixed-size type."""
    return tuple(struct.Struct(f">{n}{code}") for n in range(_ARRAY_CACHED + 1))


def _array(structs: tuple[struct.Struct, ...], code: str, count: int) -> struct.Struct:
    return structs[count] if count <= _ARRAY_CACHED else struct.Struct(f">{count}{code}")


def _compile(src: _Source, what: str) -> None:
    # The source is generated here from kio's own field introspection, never from input.
    code = compile("\n".join(src.lines), f"<kafkawire.codec {what}>", "exec")
    exec(code, src.ns)


_NULL_MESSAGE = "Unexpectedly read null where compact string/bytes was expected"


def _underflow() -> BufferUnderflow:
    return BufferUnderflow("Buffer is exhausted")


_BASE_NS: dict[str, Any] = {
    "_Z": _ZERO_UUID,
    "_uv": uvarint,
    "_ruv": _read_uvarint,
    "_bool": _bool,
    "_ec": _ec,
    "_td": datetime.timedelta,
    "_uuid": uuid.UUID,
    "_pack": struct.pack,
    "_unpack_from": struct.unpack_from,
    "_new": object.__new__,
    "_setattr": object.__setattr__,
    "_underflow": _underflow,
    "_NULL_MESSAGE": _NULL_MESSAGE,
    "_mkuuid": _mkuuid,
    "_array": _array,
    "_UnexpectedNull": UnexpectedNull,
    "_NegativeByteLength": NegativeByteLength,
    "_read_datetime_i64": read_datetime_i64,
    "_read_nullable_datetime_i64": read_nullable_datetime_i64,
    "_I16": struct.Struct(">h"),
    "_I32": struct.Struct(">i"),
}


class _Source:
    """Lines of one generated function plus the constants it refers to."""

    def __init__(self, ns: dict[str, Any]) -> None:
        self.lines: list[str] = []
        self.ns = ns
        self._n = 0

    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def const(self, prefix: str, value: Any) -> str:
        name = self.name(prefix)
        self.ns[name] = value
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


def _flexible(entity_type: type) -> bool:
    return bool(getattr(entity_type, "__flexible__", False))


def _is_request_header(entity_type: type) -> bool:
    # kio special-cases RequestHeader.client_id as a legacy nullable string (see its writer).
    return entity_type.__name__ == "RequestHeader"


# ---------------------------------------------------------------- writers


def _field_writer_kind(entity_type: type, field: dataclasses.Field[Any], tagged: bool) -> Any:
    """kio's own primitive writer for a primitive (or primitive array) field."""
    if _is_request_header(entity_type) and field.name == "client_id":
        return writers.write_nullable_legacy_string
    nullable = False if (tagged or shape(field).is_array) else is_nullable(field)
    return wire_form(kafka_type(field), _flexible(entity_type), nullable)[0]


class UnknownFieldTypeError(TypeError):
    """A kio field writer this codec has no compiled form for (a newer kio's primitive)."""


def _emit_uvarint_write(src: _Source, ind: int, out: str, expr: str) -> None:
    var = src.name("_n")
    src.emit(ind, f"{var} = {expr}")
    src.emit(ind, f"if {var} < 128: {out}.append({var})")
    src.emit(ind, f"else: {out} += _uv({var})")


def _emit_write_primitive(src: _Source, ind: int, out: str, kio_writer: Any, var: str) -> None:
    fixed = _FIXED_WRITE.get(kio_writer)
    if fixed is not None:
        code, expr = fixed
        packer = src.const("_S", struct.Struct(">" + code))
        src.emit(ind, f"{out} += {packer}.pack({expr.format(var)})")
        return
    kind = _WRITE_STRING.get(kio_writer)
    if kind is None:
        # Every field type of every kio schema has a form above (test_kafkawire_codec compiles
        # them all); a kio release with a new primitive must fail loudly at compile time.
        raise UnknownFieldTypeError(f"no compiled writer for kio's {kio_writer!r}")
    nullable = kio_writer in (
        writers.write_nullable_compact_string,
        writers.write_nullable_legacy_string,
        writers.write_nullable_legacy_bytes,
    )
    if kind == "compact":
        ind = _emit_none(src, ind, var, f"{out}.append(0)" if nullable else None)
        src.emit(ind, f"if isinstance({var}, str): {var} = {var}.encode()")
        _emit_uvarint_write(src, ind, out, f"len({var}) + 1")
        src.emit(ind, f"{out} += {var}")
        return
    null_len, length = ("b'\\xff\\xff'", "_I16") if kind == "legacy_string" else (
        "b'\\xff\\xff\\xff\\xff'",
        "_I32",
    )
    ind = _emit_none(src, ind, var, f"{out} += {null_len}" if nullable else None)
    if kind == "legacy_string":
        src.emit(ind, f"{var} = {var}.encode()")
    src.emit(ind, f"{out} += {length}.pack(len({var}))")
    src.emit(ind, f"{out} += {var}")


def _emit_none(src: _Source, ind: int, var: str, write_null: str | None) -> int:
    """A None value: `write_null` for a nullable field (the value's code then goes under an
    else), kio's TypeError for another. Returns the indent of the value's code."""
    if write_null is None:
        src.emit(ind, f"if {var} is None: raise TypeError('Unexpectedly received None value')")
        return ind
    src.emit(ind, f"if {var} is None: {write_null}")
    src.emit(ind, "else:")
    return ind + 1


def _emit_write_field(
    src: _Source, ind: int, out: str, entity_type: type, field: dataclasses.Field[Any],
    var: str, tagged: bool,
) -> None:
    flexible = _flexible(entity_type)
    field_shape = shape(field)
    if field_shape.is_array:
        null_array = "b'\\x00'" if flexible else "b'\\xff\\xff\\xff\\xff'"
        ind = _emit_none(src, ind, var, f"{out} += {null_array}")
        if flexible:
            _emit_uvarint_write(src, ind, out, f"len({var}) + 1")
        else:
            src.emit(ind, f"{out} += _I32.pack(len({var}))")
        item = src.name("_x")
        if field_shape.is_entity:
            writer = src.const("_w", _entity_write_into(field_shape.type_))
            src.emit(ind, f"for {item} in {var}: {writer}({out}, {item})")
            return
        kio_writer = _field_writer_kind(entity_type, field, tagged)
        fixed = _FIXED_WRITE.get(kio_writer)
        if fixed is not None and fixed[1] == "{}":
            cache_ = src.const("_A", _array_structs(fixed[0]))
            src.emit(ind, f"{out} += _array({cache_}, '{fixed[0]}', len({var})).pack(*{var})")
            return
        src.emit(ind, f"for {item} in {var}:")
        _emit_write_primitive(src, ind + 1, out, kio_writer, item)
        return
    if field_shape.is_entity:
        writer = src.const("_w", _entity_write_into(field_shape.type_))
        if not tagged and is_nullable(field):
            # KIP-893 nullable struct: int8 -1 for null, 1 then the struct.
            src.emit(ind, f"if {var} is None: {out} += b'\\xff'")
            src.emit(ind, "else:")
            src.emit(ind + 1, f"{out} += b'\\x01'")
            src.emit(ind + 1, f"{writer}({out}, {var})")
        else:
            src.emit(ind, f"{writer}({out}, {var})")
        return
    _emit_write_primitive(src, ind, out, _field_writer_kind(entity_type, field, tagged), var)


def _untagged_scalar(field: dataclasses.Field[Any]) -> bool:
    """Neither tagged, an array nor an entity: a value that may pack with its neighbours."""
    field_shape = shape(field)
    return field_tag(field) is None and not (field_shape.is_array or field_shape.is_entity)


def _fixed_write_of(entity_type: type, field: dataclasses.Field[Any]) -> tuple[str, str] | None:
    if not _untagged_scalar(field):
        return None
    return _FIXED_WRITE.get(_field_writer_kind(entity_type, field, False))


@cache
def _entity_write_into(entity_type: type) -> Callable[[bytearray, Any], None]:
    """`write(out, entity)` appending the entity's bytes to the bytearray `out`."""
    ns = dict(_BASE_NS)
    src = _Source(ns)
    src.emit(0, "def write(out, e):")
    plain = [f for f in fields(entity_type) if field_tag(f) is None]
    tagged = sorted(
        (f for f in fields(entity_type) if field_tag(f) is not None),
        key=lambda f: field_tag(f) or 0,
    )
    if tagged and not _flexible(entity_type):
        raise ValueError("Found tagged fields on a non-flexible model")
    i = 0
    while i < len(plain):
        run: list[tuple[str, str]] = []
        while i < len(plain) and (fixed := _fixed_write_of(entity_type, plain[i])) is not None:
            var = src.name("_v")
            src.emit(1, f"{var} = e.{plain[i].name}")
            run.append((fixed[0], fixed[1].format(var)))
            i += 1
        if run:
            packer = src.const("_S", struct.Struct(">" + "".join(code for code, _ in run)))
            src.emit(1, f"out += {packer}.pack({', '.join(expr for _, expr in run)})")
            continue
        var = src.name("_v")
        src.emit(1, f"{var} = e.{plain[i].name}")
        _emit_write_field(src, 1, "out", entity_type, plain[i], var, tagged=False)
        i += 1
    if _flexible(entity_type):
        if not tagged:
            src.emit(1, "out.append(0)")
        else:
            src.emit(1, "_tc = 0")
            src.emit(1, "_tb = bytearray()")
            for field in tagged:
                tag = field_tag(field) or 0
                var = src.name("_v")
                src.emit(1, f"{var} = e.{field.name}")
                # kio skips a tagged field equal to its declared default, or, without one,
                # to its implicit default.
                if field.default is not MISSING:
                    default = src.const("_D", field.default)
                else:
                    default = src.const("_D", tagged_default(field))
                src.emit(1, f"if not ({var} == {default}):")
                sub = src.name("_sub")
                src.emit(2, f"{sub} = bytearray()")
                _emit_write_field(src, 2, sub, entity_type, field, var, tagged=True)
                src.emit(2, "_tc += 1")
                src.emit(2, f"_tb += {src.const('_T', uvarint(tag))}")
                _emit_uvarint_write(src, 2, "_tb", f"len({sub})")
                src.emit(2, f"_tb += {sub}")
            _emit_uvarint_write(src, 1, "out", "_tc")
            src.emit(1, "out += _tb")
    if len(src.lines) == 1:
        src.emit(1, "pass")
    _compile(src, f"write {entity_type.__qualname__}")
    write_into: Callable[[bytearray, Any], None] = ns["write"]
    write_into.__source__ = "\n".join(src.lines)  # type: ignore[attr-defined]
    return write_into


@cache  # compiled once per class
def writer(entity_type: type) -> Writer:
    """`write(entity) -> bytes`, byte for byte kio's `entity_writer(entity_type)`."""
    write_into = _entity_write_into(entity_type)

    def write(entity: Any) -> bytes:
        out = bytearray()
        write_into(out, entity)
        return bytes(out)

    return write


# ---------------------------------------------------------------- readers


def _kio_reader_name(entity_type: type, field: dataclasses.Field[Any], tagged: bool) -> str:
    if _is_request_header(entity_type) and field.name == "client_id":
        return "read_nullable_legacy_string"
    nullable = False if (tagged or shape(field).is_array) else is_nullable(field)
    return wire_form(kafka_type(field), _flexible(entity_type), nullable)[1]


def _emit_read_uvarint(src: _Source, ind: int, var: str) -> None:
    # Past the end, buf[p] raises IndexError: `reader` turns it into BufferUnderflow.
    src.emit(ind, f"{var} = buf[p]")
    src.emit(ind, f"if {var} & 128: {var}, p = _ruv(buf, p)")
    src.emit(ind, "else: p += 1")


def _emit_read_primitive(src: _Source, ind: int, name: str, var: str) -> None:
    fixed = _FIXED_READ.get(name)
    if fixed is not None:
        code, conv = fixed
        unpacker = src.const("_S", struct.Struct(">" + code))
        src.emit(ind, f"{var}, = {unpacker}.unpack_from(buf, p)")
        src.emit(ind, f"p += {struct.calcsize('>' + code)}")
        if conv != "{}":
            src.emit(ind, f"{var} = {conv.format(var)}")
        return
    if name in _DELEGATED_READ:
        src.emit(ind, f"{var}, _sz = _{name}(buf, p)")
        src.emit(ind, "p += _sz")
        return
    compact, nullable, text = _STRINGS_READ[name]
    n = src.name("_n")
    if compact:
        _emit_read_uvarint(src, ind, n)
        src.emit(ind, f"if {n} == 0:")
        if nullable:
            src.emit(ind + 1, f"{var} = None")
        else:
            src.emit(ind + 1, "raise _UnexpectedNull(_NULL_MESSAGE)")
        src.emit(ind, "else:")
        src.emit(ind + 1, f"{n} += p - 1")
    else:
        length = "_I16" if text else "_I32"
        src.emit(ind, f"{n}, = {length}.unpack_from(buf, p)")
        src.emit(ind, f"p += {2 if text else 4}")
        src.emit(ind, f"if {n} == -1:")
        if nullable:
            src.emit(ind + 1, f"{var} = None")
        else:
            src.emit(ind + 1, "raise _UnexpectedNull(_NULL_MESSAGE)")
        src.emit(ind, f"elif {n} < 0: raise _NegativeByteLength('Found negative byte length')")
        src.emit(ind, "else:")
        src.emit(ind + 1, f"{n} += p")
    src.emit(ind + 1, f"if {n} > L: raise _underflow()")
    if text:
        src.emit(ind + 1, f"{var} = str(buf[p:{n}], 'utf-8')")
    else:
        src.emit(ind + 1, f"{var} = buf[p:{n}]")
    src.emit(ind + 1, f"p = {n}")


def _emit_read_field(
    src: _Source, ind: int, entity_type: type, field: dataclasses.Field[Any], var: str,
    tagged: bool,
) -> None:
    flexible = _flexible(entity_type)
    field_shape = shape(field)
    if field_shape.is_array:
        n = src.name("_n")
        if flexible:
            _emit_read_uvarint(src, ind, n)
            src.emit(ind, f"if {n} == 0: {var} = None")
            src.emit(ind, "else:")
            src.emit(ind + 1, f"{n} -= 1")
        else:
            src.emit(ind, f"{n}, = _I32.unpack_from(buf, p)")
            src.emit(ind, "p += 4")
            src.emit(ind, f"if {n} == -1: {var} = None")
            src.emit(ind, f"elif {n} < 0: raise ValueError('negative array length')")
            src.emit(ind, "else:")
        ind += 1
        # Apache Kafka's rule: a count larger than the bytes left is an error, checked before
        # anything is allocated or looped over.
        src.emit(ind, f"if {n} > L - p: raise _underflow()")
        if field_shape.is_entity:
            reader = src.const("_r", _entity_read(field_shape.type_))
            src.emit(ind, f"{var} = [None] * {n}")
            item = src.name("_i")
            src.emit(ind, f"for {item} in range({n}): {var}[{item}], p = {reader}(buf, p, L)")
            src.emit(ind, f"{var} = tuple({var})")
            return
        name = _kio_reader_name(entity_type, field, tagged)
        fixed = _FIXED_READ.get(name)
        if fixed is not None and fixed[1] == "{}":
            size = struct.calcsize(">" + fixed[0])
            cache_ = src.const("_A", _array_structs(fixed[0]))
            src.emit(ind, f"{var} = _array({cache_}, '{fixed[0]}', {n}).unpack_from(buf, p)")
            src.emit(ind, f"p += {size} * {n}")
            return
        item = src.name("_i")
        value = src.name("_y")
        src.emit(ind, f"{var} = [None] * {n}")
        src.emit(ind, f"for {item} in range({n}):")
        _emit_read_primitive(src, ind + 1, name, value)
        src.emit(ind + 1, f"{var}[{item}] = {value}")
        src.emit(ind, f"{var} = tuple({var})")
        return
    if field_shape.is_entity:
        reader = src.const("_r", _entity_read(field_shape.type_))
        if not tagged and is_nullable(field):
            src.emit(ind, "if p >= L: raise _underflow()")
            src.emit(ind, "if buf[p] == 255:")  # int8 -1: null struct (KIP-893)
            src.emit(ind + 1, f"{var} = None")
            src.emit(ind + 1, "p += 1")
            src.emit(ind, f"else: {var}, p = {reader}(buf, p + 1, L)")
        else:
            src.emit(ind, f"{var}, p = {reader}(buf, p, L)")
        return
    _emit_read_primitive(src, ind, _kio_reader_name(entity_type, field, tagged), var)


def _fixed_read_of(entity_type: type, field: dataclasses.Field[Any]) -> tuple[str, str] | None:
    if not _untagged_scalar(field):
        return None
    return _FIXED_READ.get(_kio_reader_name(entity_type, field, False))


def _setter(entity_type: type, name: str) -> Callable[[Any, Any], None]:
    """The slot's own setter (what object.__setattr__ ends in, minus the lookup); frozen
    dataclasses only forbid `setattr` on instances, not the slot descriptor."""
    descriptor = entity_type.__dict__.get(name)
    if descriptor is not None and type(descriptor).__name__ == "member_descriptor":
        return descriptor.__set__  # type: ignore[no-any-return]

    def set_attribute(obj: Any, value: Any) -> None:
        object.__setattr__(obj, name, value)

    return set_attribute


@cache
def _entity_read(entity_type: type) -> Callable[[bytes, int, int], tuple[Any, int]]:
    """`read(buf, p, L) -> (entity, new p)` for bytes `buf` of length L."""
    ns = dict(_BASE_NS)
    src = _Source(ns)
    src.emit(0, "def read(buf, p, L):")
    all_fields = fields(entity_type)
    plain = [f for f in all_fields if field_tag(f) is None]
    tagged = [f for f in all_fields if field_tag(f) is not None]
    if tagged and not _flexible(entity_type):
        raise ValueError("Found tagged fields on a non-flexible model")
    names: dict[str, str] = {}
    i = 0
    while i < len(plain):
        run: list[tuple[str, str, str]] = []
        while i < len(plain) and (fixed := _fixed_read_of(entity_type, plain[i])) is not None:
            var = src.name("_v")
            names[plain[i].name] = var
            run.append((var, fixed[0], fixed[1]))
            i += 1
        if run:
            fmt = ">" + "".join(code for _, code, _ in run)
            unpacker = src.const("_S", struct.Struct(fmt))
            src.emit(1, f"{', '.join(v for v, _, _ in run)}, = {unpacker}.unpack_from(buf, p)")
            src.emit(1, f"p += {struct.calcsize(fmt)}")
            for var, _, conv in run:
                if conv != "{}":
                    src.emit(1, f"{var} = {conv.format(var)}")
            continue
        var = src.name("_v")
        names[plain[i].name] = var
        _emit_read_field(src, 1, entity_type, plain[i], var, tagged=False)
        i += 1
    if _flexible(entity_type):
        for field in tagged:
            var = src.name("_v")
            names[field.name] = var
            src.emit(1, f"{var} = {src.const('_D', tagged_default(field))}")
        _emit_read_uvarint(src, 1, "_nt")
        src.emit(1, "for _k in range(_nt):")
        _emit_read_uvarint(src, 2, "_tag")
        _emit_read_uvarint(src, 2, "_tsz")  # kio reads the value itself, not the size
        branch = "if"
        for field in tagged:
            src.emit(2, f"{branch} _tag == {field_tag(field)}:")
            _emit_read_field(src, 3, entity_type, field, names[field.name], tagged=True)
            branch = "elif"
        if tagged:
            src.emit(2, "else: raise KeyError(f'Unknown tagged field tag: {_tag}')")
        else:
            src.emit(2, "raise KeyError(f'Unknown tagged field tag: {_tag}')")
    cls = src.const("_C", entity_type)
    src.emit(1, f"o = _new({cls})")
    for field in all_fields:
        setter = src.const("_set", _setter(entity_type, field.name))
        src.emit(1, f"{setter}(o, {names[field.name]})")
    src.emit(1, "return o, p")
    _compile(src, f"read {entity_type.__qualname__}")
    read: Callable[[bytes, int, int], tuple[Any, int]] = ns["read"]
    read.__source__ = "\n".join(src.lines)  # type: ignore[attr-defined]
    return read


@cache  # compiled once per class
def reader(entity_type: type) -> Reader:
    """`read(buffer, offset) -> (entity, new offset)`: kio's `entity_reader(entity_type)`'s
    entity; a truncated buffer or a length beyond it raises (never allocates for it)."""
    read_entity = _entity_read(entity_type)

    def read(buffer: bytes, offset: int = 0) -> tuple[Any, int]:
        if type(buffer) is not bytes:
            buffer = bytes(buffer)
        try:
            return read_entity(buffer, offset, len(buffer))
        except (struct.error, IndexError) as exc:
            raise BufferUnderflow(f"Buffer is exhausted: {exc}") from None

    return read
