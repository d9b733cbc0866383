"""Schema codec, frame format and api registry: strict decoding, exact framing, no surprises."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from enum import IntEnum

import msgpack
import pytest

from cluster.protocol.api_keys import ApiKey
from cluster.protocol.frame import (
    FrameDecoder,
    FrameTooLargeError,
    MalformedFrameError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from cluster.protocol.registry import Registry, UnknownApiKeyError
from cluster.protocol.schema import SchemaError, from_wire, to_wire


class Color(IntEnum):
    RED = 1
    BLUE = 2


@dataclass(frozen=True, slots=True)
class Inner:
    id: int
    name: str = ""


@dataclass(frozen=True, slots=True)
class Everything:
    i: int
    s: str
    b: bool
    raw: bytes
    f: float
    u: uuid.UUID
    color: Color
    maybe_int: int | None
    maybe_uuid: uuid.UUID | None
    ints: list[int]
    names: tuple[str, ...]
    by_name: dict[str, int]
    by_id: dict[int, Inner]
    inner: Inner
    inners: list[Inner]
    maybe_inner: Inner | None
    colors: tuple[Color, ...]
    uuids: list[uuid.UUID]
    nested_lists: list[list[int]]
    defaulted: int = 7
    factory: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Tree:
    value: int
    children: list[Tree] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SmallRequest:
    cluster_id: str | None
    replica_id: int
    leader_epoch: int
    fetch_offset: int
    topic: str


@dataclass(frozen=True, slots=True)
class SmallResponse:
    error_code: int = 0
    error_message: str = ""
    high_watermark: int = -1


def _everything() -> Everything:
    return Everything(
        i=-(2**40),
        s="héllo",
        b=True,
        raw=b"\x00\xff",
        f=1.5,
        u=uuid.UUID("12345678-1234-5678-1234-567812345678"),
        color=Color.BLUE,
        maybe_int=None,
        maybe_uuid=uuid.UUID(int=1),
        ints=[1, 2, 3],
        names=("a", "b"),
        by_name={"x": 1},
        by_id={3: Inner(3, "c"), 4: Inner(4)},
        inner=Inner(1, "one"),
        inners=[Inner(2, "two")],
        maybe_inner=None,
        colors=(Color.RED, Color.BLUE),
        uuids=[uuid.UUID(int=5)],
        nested_lists=[[1], [], [2, 3]],
    )


def _roundtrip_msgpack(value: Everything) -> Everything:
    packed = msgpack.packb(to_wire(value), use_bin_type=True)
    data = msgpack.unpackb(packed, raw=False, strict_map_key=False)
    return from_wire(Everything, data)


def test_every_supported_type_round_trips_through_msgpack() -> None:
    original = _everything()
    decoded = _roundtrip_msgpack(original)
    assert decoded == original
    assert type(decoded.color) is Color
    assert type(decoded.colors[0]) is Color
    assert isinstance(decoded.names, tuple)
    assert isinstance(decoded.u, uuid.UUID)


def test_wire_form_uses_raw_uuid_bytes_and_plain_ints() -> None:
    wire = to_wire(_everything())
    assert wire["u"] == uuid.UUID("12345678-1234-5678-1234-567812345678").bytes
    assert len(wire["u"]) == 16
    assert type(wire["color"]) is int and wire["color"] == 2
    assert wire["colors"] == [1, 2]
    assert wire["by_id"] == {3: {"id": 3, "name": "c"}, 4: {"id": 4, "name": ""}}
    assert wire["defaulted"] == 7


def test_recursive_message_round_trips() -> None:
    tree = Tree(1, [Tree(2), Tree(3, [Tree(4)])])
    assert from_wire(Tree, to_wire(tree)) == tree


def test_missing_defaulted_fields_take_defaults_and_unknown_keys_are_ignored() -> None:
    wire = to_wire(_everything())
    del wire["defaulted"]
    del wire["factory"]
    wire["added_in_a_later_version"] = {"anything": [1, 2]}
    decoded = from_wire(Everything, wire)
    assert decoded.defaulted == 7
    assert decoded.factory == []


def test_missing_required_field_is_named() -> None:
    wire = to_wire(_everything())
    del wire["s"]
    with pytest.raises(SchemaError, match=r"Everything\.s'.*missing required field") as info:
        from_wire(Everything, wire)
    assert info.value.path == "s"


@pytest.mark.parametrize(
    ("name", "value", "path"),
    [
        ("i", True, "i"),  # bool is not an int
        ("b", 1, "b"),  # int is not a bool
        ("i", "1", "i"),
        ("s", b"x", "s"),
        ("raw", "x", "raw"),
        ("f", "1.0", "f"),
        ("u", b"short", "u"),
        ("color", 9, "color"),  # not a member of the enum
        ("color", True, "color"),
        ("maybe_int", False, "maybe_int"),
        ("ints", [1, True], "ints[1]"),
        ("names", "ab", "names"),
        ("by_name", {"x": "1"}, "by_name['x']"),
        ("by_name", {1: 1}, "by_name[1]"),
        ("by_id", {"3": {"id": 3}}, "by_id['3']"),
        ("inner", {"id": "one"}, "inner.id"),
        ("inner", {"name": "no id"}, "inner.id"),
        ("inner", [1], "inner"),
        ("inners", [{"id": 1}, {"id": None}], "inners[1].id"),
        ("maybe_inner", {"id": 1.5}, "maybe_inner.id"),
        ("nested_lists", [[1], [2, "x"]], "nested_lists[1][1]"),
        ("uuids", [b"0123456789abcdef", 5], "uuids[1]"),
        ("s", None, "s"),  # null only where the type says `| None`
    ],
)
def test_wrong_types_are_rejected_with_the_field_path(name: str, value: object, path: str) -> None:
    wire = to_wire(_everything())
    wire[name] = value
    with pytest.raises(SchemaError) as info:
        from_wire(Everything, wire)
    assert info.value.path == path
    assert path in str(info.value)


def test_int_is_accepted_for_float_fields_but_bool_is_not() -> None:
    wire = to_wire(_everything())
    wire["f"] = 3
    decoded = from_wire(Everything, wire)
    assert decoded.f == 3.0 and type(decoded.f) is float
    wire["f"] = False
    with pytest.raises(SchemaError, match="expected float"):
        from_wire(Everything, wire)


def test_body_that_is_not_a_map_is_rejected() -> None:
    with pytest.raises(SchemaError, match="expected a map"):
        from_wire(Inner, [1, "x"])


def test_unsupported_field_types_fail_at_compile_time() -> None:
    @dataclass(frozen=True, slots=True)
    class Bad:
        value: set[int]

    with pytest.raises(TypeError, match="unsupported"):
        to_wire(Bad({1}))


def test_small_message_codec_is_fast() -> None:
    request = SmallRequest("abc", 1, 5, 1234, "__cluster_metadata")
    wire = to_wire(request)
    assert from_wire(SmallRequest, wire) == request
    n = 20000
    start = time.perf_counter()
    for _ in range(n):
        from_wire(SmallRequest, to_wire(request))
    per_op_us = (time.perf_counter() - start) / n * 1e6
    print(f"\nschema codec: to_wire+from_wire of a 5-field message: {per_op_us:.2f} us")
    assert per_op_us > 0


# -- frames -----------------------------------------------------------------------------------


def test_request_and_response_frames_round_trip() -> None:
    frame = encode_request(ApiKey.VOTE, 2, 77, "node-3", {"cluster_id": "c", "epoch": 4})
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    decoder = FrameDecoder()
    (payload,) = list(decoder.feed(frame))
    assert decode_request(payload) == (52, 2, 77, "node-3", {"cluster_id": "c", "epoch": 4})
    response = encode_response(77, {"error_code": 0, "data": b"\x01"})
    (payload,) = list(decoder.feed(response))
    assert decode_response(payload) == (77, {"error_code": 0, "data": b"\x01"})
    assert decoder.buffered_bytes == 0


def test_decoder_reassembles_frames_split_at_every_byte() -> None:
    frames = [encode_request(ApiKey.FETCH, 0, i, "c", {"i": i, "pad": "x" * i}) for i in range(5)]
    stream = b"".join(frames)
    decoder = FrameDecoder()
    payloads: list[bytes] = []
    for i in range(len(stream)):
        payloads.extend(decoder.feed(stream[i : i + 1]))
    assert [decode_request(p)[2] for p in payloads] == [0, 1, 2, 3, 4]
    assert decoder.buffered_bytes == 0


def test_decoder_yields_complete_frames_from_one_chunk_and_keeps_the_partial_one() -> None:
    frames = b"".join(encode_response(i, {}) for i in range(3))
    extra = encode_response(9, {"k": 1})
    decoder = FrameDecoder()
    payloads = list(decoder.feed(frames + extra[:5]))
    assert [decode_response(p)[0] for p in payloads] == [0, 1, 2]
    assert decoder.buffered_bytes == 5
    (last,) = list(decoder.feed(extra[5:]))
    assert decode_response(last) == (9, {"k": 1})


def test_oversize_frame_is_refused_from_its_header_alone() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    ok = encode_response(1, {})
    header_only = (2048).to_bytes(4, "big")
    seen = []
    with pytest.raises(FrameTooLargeError) as info:
        for payload in decoder.feed(ok + header_only):
            seen.append(payload)
    assert len(seen) == 1  # the frame before the oversize one still counts
    assert info.value.size_bytes == 2048 and info.value.max_bytes == 1024


@pytest.mark.parametrize(
    "payload",
    [
        b"\xc1\xc1",  # 0xc1 is never used in msgpack
        msgpack.packb({"not": "an array"}),
        msgpack.packb([1, 2, 3]),
        msgpack.packb([True, 0, 1, "c", {}]),  # api_key a bool
        msgpack.packb([18, 0, 1, 5, {}]),  # client_id not a string
        msgpack.packb([18, 0, 1, "c", [1]]),  # body not a map
        msgpack.packb([18, 0, 1, "c", {}]) + b"\x00",  # trailing bytes
        b"",
    ],
)
def test_malformed_request_payloads_raise(payload: bytes) -> None:
    with pytest.raises(MalformedFrameError):
        decode_request(payload)


def test_null_client_id_reads_as_empty() -> None:
    payload = msgpack.packb([18, 0, 1, None, {}], use_bin_type=True)
    assert decode_request(payload)[3] == ""


def test_malformed_response_payload_raises() -> None:
    with pytest.raises(MalformedFrameError):
        decode_response(msgpack.packb(["1", {}]))


# -- registry ---------------------------------------------------------------------------------


def test_registry_maps_keys_and_classes_both_ways() -> None:
    registry = Registry()
    registry.register(ApiKey.FETCH, SmallRequest, SmallResponse, version=3)
    assert registry.request_type(ApiKey.FETCH) is SmallRequest
    assert registry.response_type(ApiKey.FETCH) is SmallResponse
    assert registry.api_key_of(SmallRequest(None, 1, 1, 1, "t")) is ApiKey.FETCH
    registration = registry.lookup(1)
    assert registration is not None and registration.version == 3
    assert registry.lookup(9999) is None
    with pytest.raises(UnknownApiKeyError):
        registry.request_type(ApiKey.VOTE)
    with pytest.raises(UnknownApiKeyError):
        registry.api_key_of(Inner(1))


def test_registry_rejects_conflicting_registration_but_allows_the_same_one() -> None:
    registry = Registry()
    registry.register(ApiKey.FETCH, SmallRequest, SmallResponse)
    registry.register(ApiKey.FETCH, SmallRequest, SmallResponse)  # idempotent re-import
    with pytest.raises(ValueError, match="already registered"):
        registry.register(ApiKey.FETCH, Inner, SmallResponse)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(ApiKey.VOTE, SmallRequest, SmallResponse)
    assert [r.api_key for r in registry.registrations()] == [ApiKey.FETCH]


def test_registry_enforces_the_response_convention() -> None:
    @dataclass(frozen=True, slots=True)
    class NoErrorCode:
        value: int = 0

    @dataclass(frozen=True, slots=True)
    class NotDefaulted:
        error_code: int = 0
        error_message: str = ""
        value: int = field(kw_only=True)

    registry = Registry()
    with pytest.raises(TypeError, match="error_code"):
        registry.register(ApiKey.FETCH, SmallRequest, NoErrorCode)
    with pytest.raises(TypeError, match="needs a default"):
        registry.register(ApiKey.FETCH, SmallRequest, NotDefaulted)
    assert registry.lookup(int(ApiKey.FETCH)) is None


def test_generic_error_body_decodes_into_a_response() -> None:
    response = from_wire(SmallResponse, {"error_code": 104, "error_message": "wrong cluster"})
    assert response == SmallResponse(104, "wrong cluster", -1)


@dataclass(frozen=True)
class PlainChecked:
    epoch: int
    voters: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.epoch < 0:
            raise ValueError("epoch must be >= 0")


def test_classes_without_slots_or_with_post_init_decode_through_their_init() -> None:
    assert from_wire(PlainChecked, {"epoch": 3, "voters": [1, 2]}) == PlainChecked(3, (1, 2))
    with pytest.raises(ValueError, match="epoch must be"):
        from_wire(PlainChecked, {"epoch": -1})
