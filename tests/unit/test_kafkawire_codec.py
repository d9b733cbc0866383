"""kafkawire.codec against kio itself: for every entity kio has (every api key and version,
request and response, headers, data records) and minikraft's own schemas, the compiled writer's
bytes are kio's byte for byte and the compiled reader returns kio's entity and length. Then
garbage: truncated frames and lengths beyond the buffer raise, without allocating for them."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError
from kio.static.primitive import Records

from kafkawire import codec
from kafkawire.api_keys import ApiKey
from kafkawire.messages import (
    _CUSTOM,
    _CUSTOM_RESPONSES,
    UndecodableRequestError,
    decode_request,
    decode_response,
    encode_request,
    request_schema,
    response_schema,
)
from tests.unit.test_kafkawire import _sample

st.register_type_strategy(Records, st.binary(max_size=64))
# What kio's readers raise for garbage (struct errors become BufferUnderflow, a DecodeError).
GARBAGE = (DecodeError, ValueError)


def _kio_write(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _assert_same_as_kio(entity: Any) -> None:
    expected = _kio_write(entity)
    assert codec.writer(type(entity))(entity) == expected
    kio_entity, kio_size = entity_reader(type(entity))(expected, 0)
    entity_read, end = codec.reader(type(entity))(expected, 0)
    assert entity_read == kio_entity
    assert end == kio_size == len(expected)
    # At an offset, as headers and bodies share one payload.
    assert codec.reader(type(entity))(b"\x07\x07\x07" + expected, 3) == (kio_entity, 3 + kio_size)


def _kio_schemas(api_key: int) -> list[type]:
    schemas = []
    for version in schema_name_map[api_key_map[api_key]]:
        for load in (load_request_schema, load_response_schema):
            try:
                schemas.append(load(api_key, version))
            except KioIndexError:
                continue
    return schemas


@pytest.mark.parametrize("api_key", sorted(api_key_map), ids=lambda k: api_key_map[k])
def test_every_kio_request_and_response_is_byte_identical(api_key: int) -> None:
    schemas = _kio_schemas(api_key)
    assert schemas, f"kio has no schema for api key {api_key}"
    for schema in schemas:
        _assert_same_as_kio(_sample(schema))


def test_headers_and_minikraft_schemas_are_byte_identical() -> None:
    custom = [cls for pair in _CUSTOM.values() for cls in pair] + list(_CUSTOM_RESPONSES.values())
    headers = [RequestHeaderV1, RequestHeaderV2, ResponseHeaderV0, ResponseHeaderV1]
    for schema in custom + headers:
        _assert_same_as_kio(_sample(schema))
    # The null client id of a request header (a legacy nullable string in v2 too).
    _assert_same_as_kio(
        RequestHeaderV2(
            request_api_key=1,  # type: ignore[arg-type]
            request_api_version=17,  # type: ignore[arg-type]
            correlation_id=5,  # type: ignore[arg-type]
            client_id=None,
        )
    )


def test_kio_data_entities_are_byte_identical() -> None:
    """Records kio also defines (KRaft control records, group metadata...)."""
    from kio.index import load_entity_schema
    from kio.static.constants import EntityType

    checked = 0
    for name, versions in schema_name_map.items():
        for version, types_ in versions.items():
            if EntityType.data not in types_:
                continue
            schema = load_entity_schema(name, version, EntityType.data)
            _assert_same_as_kio(_sample(schema))
            checked += 1
    assert checked > 0


HOT = [
    (ApiKey.FETCH, 17, "request"),
    (ApiKey.FETCH, 17, "response"),
    (ApiKey.PRODUCE, 11, "request"),
    (ApiKey.METADATA, 12, "response"),
    (ApiKey.VOTE, 2, "request"),
    (ApiKey.VOTE, 2, "response"),
    (ApiKey.BEGIN_QUORUM_EPOCH, 1, "request"),
    (ApiKey.BEGIN_QUORUM_EPOCH, 1, "response"),
]


@pytest.mark.parametrize(("api_key", "version", "kind"), HOT, ids=lambda v: str(v))
def test_random_hot_messages_are_byte_identical(api_key: int, version: int, kind: str) -> None:
    schema = (request_schema if kind == "request" else response_schema)(int(api_key), version)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck),
              database=None)
    @given(st.from_type(schema))
    def same(entity: Any) -> None:
        _assert_same_as_kio(entity)

    same()


def test_default_tagged_fields_are_left_off_and_set_ones_travel() -> None:
    from kio.schema.fetch.v17 import request as fetch

    partition = fetch.FetchPartition(
        partition=0,  # type: ignore[arg-type]
        fetch_offset=10,  # type: ignore[arg-type]
        partition_max_bytes=100,  # type: ignore[arg-type]
    )
    plain = codec.writer(fetch.FetchPartition)(partition)
    assert plain[-1:] == b"\x00"  # no tagged fields
    import uuid

    tagged = fetch.FetchPartition(
        partition=0,  # type: ignore[arg-type]
        fetch_offset=10,  # type: ignore[arg-type]
        partition_max_bytes=100,  # type: ignore[arg-type]
        replica_directory_id=uuid.UUID(int=9),
    )
    wire = codec.writer(fetch.FetchPartition)(tagged)
    assert wire == plain[:-1] + b"\x01\x00\x10" + uuid.UUID(int=9).bytes
    _assert_same_as_kio(tagged)


def test_an_unknown_tag_is_refused_as_kio_refuses_it() -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    wire = b"\x02a\x02b" + b"\x01\x05\x01Z"
    with pytest.raises(KeyError):
        entity_reader(ApiVersionsRequest)(wire, 0)
    with pytest.raises(KeyError):
        codec.reader(ApiVersionsRequest)(wire, 0)


def test_lengths_beyond_the_buffer_raise_before_allocating() -> None:
    # A compact array claiming 2**34 items in a 5-byte body: kio's native reader tries to
    # allocate 128 GiB and aborts the process; ours refuses it.
    with pytest.raises(GARBAGE):
        codec.reader(MetadataRequest)(bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]), 0)
    with pytest.raises(GARBAGE):
        codec.reader(MetadataRequest)(bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), 0)
    # A compact string longer than what is left, a legacy array of 2**31-1.
    with pytest.raises(GARBAGE):
        codec.reader(MetadataRequest)(b"\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
                                      b"\x00\x00\x00\x00\x00\x7f", 0)
    legacy = request_schema(int(ApiKey.METADATA), 1)
    with pytest.raises(GARBAGE):
        codec.reader(legacy)(struct.pack(">i", 2**31 - 1), 0)


def test_every_truncation_of_a_request_is_undecodable() -> None:
    from tests.unit.test_kafkawire import _sample as sample

    for api_key, version in [(int(ApiKey.FETCH), 17), (int(ApiKey.METADATA), 12),
                             (int(ApiKey.PRODUCE), 11), (int(ApiKey.METADATA), 1)]:
        payload = encode_request(sample(request_schema(api_key, version)), 9, "c")[4:]
        assert decode_request(payload).body == sample(request_schema(api_key, version))
        for cut in range(len(payload)):
            with pytest.raises(UndecodableRequestError):
                decode_request(payload[:cut])


def test_a_truncated_response_raises() -> None:
    response = _sample(response_schema(int(ApiKey.FETCH), 17))
    from kafkawire.messages import encode_response

    payload = encode_response(response, 4)[4:]
    assert decode_response(payload, int(ApiKey.FETCH), 17) == (4, response)
    for cut in range(0, len(payload), 7):
        with pytest.raises(GARBAGE):
            decode_response(payload[:cut], int(ApiKey.FETCH), 17)
