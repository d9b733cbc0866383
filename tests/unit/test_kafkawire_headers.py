"""The request and response headers are read and written by hand on every request (a kio entity
per header cost more than the header): they must be byte-for-byte kio's, and a header the fast
path does not cover (tagged fields, bad UTF-8) goes through kio's reader as before."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v1.response import MetadataResponse as MetadataResponseV1
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.static.primitive import i16, i32

from kafkawire import codec
from kafkawire.framing import frame
from kafkawire.messages import (
    UndecodableRequestError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)

CLIENT_IDS = st.one_of(st.none(), st.text(max_size=40))
CORRELATION_IDS = st.integers(-(2**31), 2**31 - 1)


def _kio_request(body: Any, correlation_id: int, client_id: str | None, flexible: bool) -> bytes:
    header_cls: Any = RequestHeaderV2 if flexible else RequestHeaderV1
    header = header_cls(
        request_api_key=i16(int(body.__api_key__)),
        request_api_version=i16(int(body.__version__)),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    return frame(codec.writer(header_cls)(header) + codec.writer(type(body))(body))


@settings(max_examples=200)
@given(correlation_id=CORRELATION_IDS, client_id=CLIENT_IDS, flexible=st.booleans())
def test_requests_are_kios_bytes_and_read_back(
    correlation_id: int, client_id: str | None, flexible: bool
) -> None:
    body: Any = (
        MetadataRequestV12(topics=None, allow_auto_topic_creation=True,
                           include_topic_authorized_operations=False)
        if flexible
        else MetadataRequestV1(topics=None)
    )
    wire = encode_request(body, correlation_id, client_id)
    assert wire == _kio_request(body, correlation_id, client_id, flexible)
    request = decode_request(wire[4:])
    assert (request.header.correlation_id, request.header.client_id) == (correlation_id, client_id)
    assert (request.header.api_key, request.header.api_version) == (3, 12 if flexible else 1)
    assert request.body == body


@settings(max_examples=100)
@given(correlation_id=CORRELATION_IDS, flexible=st.booleans())
def test_responses_are_kios_bytes_and_read_back(correlation_id: int, flexible: bool) -> None:
    body: Any = (
        MetadataResponseV12(throttle_time=datetime.timedelta(0), brokers=(),
                            cluster_id=None, controller_id=i32(-1), topics=())
        if flexible
        else MetadataResponseV1(brokers=(), controller_id=i32(-1), topics=())
    )
    header: Any = (
        ResponseHeaderV1(correlation_id=i32(correlation_id))
        if flexible
        else ResponseHeaderV0(correlation_id=i32(correlation_id))
    )
    wire = encode_response(body, correlation_id)
    assert wire == frame(codec.writer(type(header))(header) + codec.writer(type(body))(body))
    assert decode_response(wire[4:], 3, 12 if flexible else 1) == (correlation_id, body)


def test_a_header_with_tagged_fields_goes_through_kios_reader() -> None:
    body = MetadataRequestV12(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )
    plain = encode_request(body, 7, "tagged")[4:]
    client_end = 8 + 2 + len("tagged")
    # A tagged field (tag 5, 2 bytes) where the header had none: not the fast path's case, so
    # kio's reader decides, and it names the tag it does not know.
    with_tag = plain[:client_end] + b"\x01\x05\x02ab" + plain[client_end + 1 :]
    with pytest.raises(UndecodableRequestError, match="tagged field tag: 5"):
        decode_request_header(with_tag)


@pytest.mark.parametrize(
    "payload",
    [
        b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x09ab",  # client_id shorter than its length
        b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x02\xff\xfe",  # client_id not UTF-8
        b"\x00\x03\x00\x01\x00\x00\x00\x01\x00",  # half a length
    ],
)
def test_a_bad_header_is_undecodable_not_a_crash(payload: bytes) -> None:
    with pytest.raises(UndecodableRequestError):
        decode_request(payload)
