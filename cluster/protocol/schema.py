"""Codec between frozen message dataclasses and msgpack-able data.

A message is a `@dataclass(frozen=True, slots=True)` whose fields are typed with: int, str, bool,
bytes, float, uuid.UUID (16 raw bytes on the wire), `X | None`, `list[T]`, `tuple[T, ...]`,
`dict[str, T]`, `dict[int, T]`, nested message dataclasses and IntEnum subclasses (an int on the
wire). Each class is compiled once into a pair of generated functions (this is the Raft hot path),
and decoding is strict: bool is not int, int is not bool, a missing required field or a wrong type
raises SchemaError naming the field; unknown keys are ignored so newer peers can add fields.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

Encoder = Callable[[Any], Any]
Decoder = Callable[[Any], Any]


class SchemaError(ValueError):
    """A wire body that does not fit its message type; `path` names the field (`a.b[2]`)."""

    def __init__(self, path: str, reason: str, message_type: str = "") -> None:
        self.path = path
        self.reason = reason
        self.message_type = message_type
        where = f"{message_type}." if message_type else ""
        super().__init__(f"field '{where}{path}': {reason}" if path else f"{where}{reason}")

    def under(self, prefix: str) -> SchemaError:
        """The same error seen from the enclosing field `prefix`."""
        if not self.path:
            path = prefix
        elif self.path.startswith("["):
            path = prefix + self.path
        else:
            path = f"{prefix}.{self.path}"
        return SchemaError(path, self.reason)


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()

# Compiled converters per type; filled lazily, never invalidated (a class's schema is fixed).
_ENCODERS: dict[type, Encoder] = {}
_DECODERS: dict[type, Decoder] = {}
_COMPILING_ENCODERS: set[type] = set()
_COMPILING_DECODERS: set[type] = set()

_PRIMITIVES: tuple[type, ...] = (int, str, bool, bytes, float)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _optional_inner(tp: Any) -> Any | None:
    """X for `X | None` / Optional[X]; None if tp is not such a union."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != 1 or len(typing.get_args(tp)) != 2:
            raise TypeError(f"unsupported union {tp}: only `X | None` is allowed in messages")
        return args[0]
    return None


def _is_int_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.IntEnum)


def _is_message(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


# ---------------------------------------------------------------------------------------------
# Encoding: None from _encoder_for_type means "the value is already msgpack-able as it is".


def _uuid_to_wire(value: uuid.UUID) -> bytes:
    return value.bytes


def _encoder_for_type(tp: Any) -> Encoder | None:
    if tp in _PRIMITIVES:
        return None
    inner = _optional_inner(tp)
    if inner is not None:
        inner_enc = _encoder_for_type(inner)
        if inner_enc is None:
            return None
        enc_opt = inner_enc
        return lambda v: None if v is None else enc_opt(v)
    if tp is uuid.UUID:
        return _uuid_to_wire
    if _is_int_enum(tp):
        return int
    if _is_message(tp):
        return _message_encoder(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        elem_enc = _encoder_for_type(args[0])
        if elem_enc is None:
            return None  # msgpack packs list and tuple alike
        enc_elem = elem_enc
        return lambda v: [enc_elem(x) for x in v]
    if origin is dict and len(args) == 2 and args[0] in (str, int):
        val_enc = _encoder_for_type(args[1])
        if val_enc is None:
            return None
        enc_val = val_enc
        return lambda v: {k: enc_val(x) for k, x in v.items()}
    raise TypeError(f"unsupported message field type {tp!r}")


def _message_fields(cls: type) -> list[tuple[dataclasses.Field[Any], Any]]:
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if f.init]


def _message_encoder(cls: type) -> Encoder:
    cached = _ENCODERS.get(cls)
    if cached is not None:
        return cached
    if cls in _COMPILING_ENCODERS:  # a recursive message: resolve at call time
        return lambda v: _ENCODERS[cls](v)
    _COMPILING_ENCODERS.add(cls)
    try:
        namespace: dict[str, Any] = {}
        items = []
        for i, (field, tp) in enumerate(_message_fields(cls)):
            enc = _encoder_for_type(tp)
            if enc is None:
                items.append(f"{field.name!r}: o.{field.name}")
            else:
                namespace[f"_e{i}"] = enc
                items.append(f"{field.name!r}: _e{i}(o.{field.name})")
        source = "def encode(o):\n    return {" + ", ".join(items) + "}\n"
        exec(compile(source, f"<to_wire {cls.__qualname__}>", "exec"), namespace)
        encoder: Encoder = namespace["encode"]
    finally:
        _COMPILING_ENCODERS.discard(cls)
    _ENCODERS[cls] = encoder
    return encoder


# ---------------------------------------------------------------------------------------------
# Decoding: every decoder validates; errors carry a path relative to the value decoded.


def _exact_decoder(tp: type) -> Decoder:
    name = tp.__name__

    def decode(v: Any) -> Any:
        if v.__class__ is tp:
            return v
        raise SchemaError("", f"expected {name}, got {_type_name(v)}")

    return decode


def _float_decoder(v: Any) -> float:
    if v.__class__ is float:
        return typing.cast(float, v)
    if v.__class__ is int:
        return float(v)
    raise SchemaError("", f"expected float, got {_type_name(v)}")


def _uuid_decoder(v: Any) -> uuid.UUID:
    if v.__class__ is bytes and len(v) == 16:
        return uuid.UUID(bytes=v)
    if v.__class__ is uuid.UUID:
        return typing.cast(uuid.UUID, v)
    raise SchemaError("", f"expected 16-byte uuid, got {_type_name(v)}")


def _enum_decoder(tp: type[enum.IntEnum]) -> Decoder:
    name = tp.__name__

    def decode(v: Any) -> Any:
        if v.__class__ is not int and v.__class__ is not tp:
            raise SchemaError("", f"expected int ({name}), got {_type_name(v)}")
        try:
            return tp(v)
        except ValueError:
            raise SchemaError("", f"{v} is not a valid {name}") from None

    return decode


def _sequence_decoder(elem_tp: Any, make: type) -> Decoder:
    kind = "list" if make is list else "tuple"
    if elem_tp in (int, str, bool, bytes):
        elem_name = elem_tp.__name__

        def decode_exact(v: Any) -> Any:
            if v.__class__ is not list and v.__class__ is not tuple:
                raise SchemaError("", f"expected {kind}, got {_type_name(v)}")
            for i, x in enumerate(v):
                if x.__class__ is not elem_tp:
                    raise SchemaError(f"[{i}]", f"expected {elem_name}, got {_type_name(x)}")
            return v if v.__class__ is make else make(v)

        return decode_exact
    elem_dec = _decoder_for_type(elem_tp)

    def decode(v: Any) -> Any:
        if v.__class__ is not list and v.__class__ is not tuple:
            raise SchemaError("", f"expected {kind}, got {_type_name(v)}")
        out = []
        for i, x in enumerate(v):
            try:
                out.append(elem_dec(x))
            except SchemaError as e:
                raise e.under(f"[{i}]") from None
        return out if make is list else tuple(out)

    return decode


def _dict_decoder(key_tp: type, val_tp: Any) -> Decoder:
    key_name = key_tp.__name__
    val_dec = _decoder_for_type(val_tp)

    def decode(v: Any) -> Any:
        if v.__class__ is not dict:
            raise SchemaError("", f"expected map, got {_type_name(v)}")
        out = {}
        for k, x in v.items():
            if k.__class__ is not key_tp:
                raise SchemaError(f"[{k!r}]", f"expected {key_name} key, got {_type_name(k)}")
            try:
                out[k] = val_dec(x)
            except SchemaError as e:
                raise e.under(f"[{k!r}]") from None
        return out

    return decode


def _decoder_for_type(tp: Any) -> Decoder:
    if tp is int or tp is str or tp is bool or tp is bytes:
        return _exact_decoder(tp)
    if tp is float:
        return _float_decoder
    inner = _optional_inner(tp)
    if inner is not None:
        inner_dec = _decoder_for_type(inner)
        return lambda v: None if v is None else inner_dec(v)
    if tp is uuid.UUID:
        return _uuid_decoder
    if _is_int_enum(tp):
        return _enum_decoder(tp)
    if _is_message(tp):
        return _message_decoder(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is list and len(args) == 1:
        return _sequence_decoder(args[0], list)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _sequence_decoder(args[0], tuple)
    if origin is dict and len(args) == 2 and args[0] in (str, int):
        return _dict_decoder(args[0], args[1])
    raise TypeError(f"unsupported message field type {tp!r}")


def _missing_branch(field: dataclasses.Field[Any], var: str, index: int, ns: dict[str, Any]) -> str:
    """Source for what a missing key becomes: the field's default, or an error."""
    if field.default is not dataclasses.MISSING:
        ns[f"_d{index}"] = field.default
        return f"{var} = _d{index}"
    if field.default_factory is not dataclasses.MISSING:
        ns[f"_f{index}"] = field.default_factory
        return f"{var} = _f{index}()"
    return f"raise SchemaError({field.name!r}, 'missing required field')"


def _can_build_directly(cls: type) -> bool:
    """True for slots dataclasses whose __init__ only assigns fields (no __post_init__)."""
    if hasattr(cls, "__post_init__") or "__slots__" not in cls.__dict__:
        return False
    return all(
        f.init and isinstance(getattr(cls, f.name, None), types.MemberDescriptorType)
        for f in dataclasses.fields(cls)
    )


def _message_decoder(cls: type) -> Decoder:
    cached = _DECODERS.get(cls)
    if cached is not None:
        return cached
    if cls in _COMPILING_DECODERS:  # a recursive message: resolve at call time
        return lambda v: _DECODERS[cls](v)
    _COMPILING_DECODERS.add(cls)
    try:
        ns: dict[str, Any] = {
            "SchemaError": SchemaError,
            "_MISSING": _MISSING,
            "_type_name": _type_name,
            "_cls": cls,
        }
        lines = [
            "def decode(d):",
            "    if d.__class__ is not dict:",
            f"        raise SchemaError('', 'expected a map of {cls.__name__} fields, got '"
            " + _type_name(d))",
            "    g = d.get",
        ]
        positional: list[str] = []
        keyword: list[str] = []
        for i, (field, tp) in enumerate(_message_fields(cls)):
            var = f"f_{field.name}"
            key = repr(field.name)
            missing = _missing_branch(field, var, i, ns)
            lines.append(f"    {var} = g({key}, _MISSING)")
            optional = _optional_inner(tp)
            base = optional if optional is not None else tp
            if base in (int, str, bool, bytes):
                # Inlined exact check: the common case on the hot path.
                ns[f"_t{i}"] = base
                cond = f"{var}.__class__ is not _t{i}"
                if optional is not None:
                    cond = f"{var} is not None and {cond}"
                lines += [
                    f"    if {cond}:",
                    f"        if {var} is _MISSING:",
                    f"            {missing}",
                    "        else:",
                    f"            raise SchemaError({key}, 'expected {base.__name__}, got '"
                    f" + _type_name({var}))",
                ]
            else:
                ns[f"_c{i}"] = _decoder_for_type(tp)
                lines += [
                    f"    if {var} is _MISSING:",
                    f"        {missing}",
                    "    else:",
                    "        try:",
                    f"            {var} = _c{i}({var})",
                    "        except SchemaError as e:",
                    f"            raise e.under({key}) from None",
                ]
            if field.kw_only:
                keyword.append(f"{field.name}={var}")
            else:
                positional.append(var)
        if _can_build_directly(cls):
            # Slot descriptors skip the frozen __init__'s object.__setattr__ calls: half the cost.
            ns["_new"] = object.__new__
            lines.append("    o = _new(_cls)")
            for i, (field, _) in enumerate(_message_fields(cls)):
                ns[f"_s{i}"] = getattr(cls, field.name).__set__
                lines.append(f"    _s{i}(o, f_{field.name})")
            lines.append("    return o")
        else:
            lines.append(f"    return _cls({', '.join(positional + keyword)})")
        source = "\n".join(lines) + "\n"
        exec(compile(source, f"<from_wire {cls.__qualname__}>", "exec"), ns)
        decoder: Decoder = ns["decode"]
    finally:
        _COMPILING_DECODERS.discard(cls)
    _DECODERS[cls] = decoder
    return decoder


# ---------------------------------------------------------------------------------------------
# Public API


def compile_message(cls: type) -> None:
    """Resolve and compile `cls`'s codec now, so a bad field type fails at import, not mid-RPC."""
    if not _is_message(cls):
        raise TypeError(f"{cls!r} is not a message dataclass")
    _message_encoder(cls)
    _message_decoder(cls)


def to_wire(obj: Any) -> dict[str, Any]:
    """The msgpack-able map of a message: field name -> wire value, recursively."""
    encoder = _ENCODERS.get(obj.__class__)
    if encoder is None:
        if not _is_message(obj.__class__):
            raise TypeError(f"to_wire expects a message dataclass, got {type(obj).__name__}")
        encoder = _message_encoder(obj.__class__)
    return typing.cast(dict[str, Any], encoder(obj))


def from_wire(cls: type[T], data: Any) -> T:
    """Decode a wire map into `cls`, strictly; SchemaError names the offending field."""
    decoder = _DECODERS.get(cls)
    if decoder is None:
        if not _is_message(cls):
            raise TypeError(f"from_wire expects a message dataclass, got {cls!r}")
        decoder = _message_decoder(cls)
    try:
        return typing.cast(T, decoder(data))
    except SchemaError as e:
        raise SchemaError(e.path, e.reason, cls.__name__) from None
