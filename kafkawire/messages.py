"""Encode and decode any Kafka request or response by (api key, version), with kio's schemas
and kafkawire.codec's compiled writers and readers (kio's bytes and entities, faster; lengths
beyond the frame refused before anything is allocated).

Request header v1 (non-flexible bodies) or v2 (flexible: tagged fields); response header v0, or
v1 for flexible bodies except ApiVersions, whose response header is always v0 so a client that
does not yet know the broker's versions can read it (KIP-511). A frame that does not parse is an
`UndecodableRequestError`: the listener closes that connection, never the process.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1

from kafkawire import codec, describe_topic_partitions, elect_leaders_v3, get_replica_log_info
from kafkawire.api_keys import ApiKey
from kafkawire.errors import Errors

_I16 = struct.Struct(">h")
_REQUEST_PREFIX = struct.Struct(">Ihhi")  # frame length, then _API_HEAD
_I32 = struct.Struct(">i")
_RESPONSE_PREFIX = struct.Struct(">Ii")  # frame length, correlation id
_API_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id: every header starts so
_CUSTOM: dict[tuple[int, int], tuple[type, type]] = {
    (int(ApiKey.GET_REPLICA_LOG_INFO), 0): (
        get_replica_log_info.GetReplicaLogInfoRequest,
        get_replica_log_info.GetReplicaLogInfoResponse,
    ),
    (int(ApiKey.ELECT_LEADERS), 3): (
        elect_leaders_v3.ElectLeadersRequest,
        elect_leaders_v3.ElectLeadersResponse,
    ),
}
# DescribeTopicPartitions v0 keeps kio's request; its response carries minikraft's tagged fields.
_CUSTOM_RESPONSES: dict[tuple[int, int], type] = {
    (int(ApiKey.DESCRIBE_TOPIC_PARTITIONS), 0): (
        describe_topic_partitions.DescribeTopicPartitionsResponse
    ),
}


def error_code(error: Errors | int) -> ErrorCode:
    """kio's ErrorCode for one of ours (Kafka's numbers); a code kio lacks (minikraft's own
    REQUEST_LIMIT_REACHED) travels as UNKNOWN_SERVER_ERROR."""
    code = int(error)
    known = _ERROR_CODES.get(code)
    if known is not None:
        return known
    try:
        known = ErrorCode(code)
    except ValueError:
        known = ErrorCode.unknown_server_error
    _ERROR_CODES[code] = known
    return known


# Kafka's codes by number, as error_code found them: the Enum call was a third of answering
# an AlterPartition's partition (thousands a request at 100,000 partitions, issue 35). Bounded:
# a code outside kio's enum is stored once as UNKNOWN_SERVER_ERROR.
_ERROR_CODES: dict[int, ErrorCode] = {}


def error_message(error: Errors | int, message: str | None) -> str | None:
    """The message to send beside error_code(error): a code kio lacks travels as
    UNKNOWN_SERVER_ERROR with its name first in the message, so our own clients recover it
    (`wire_error`) and other clients read the name."""
    try:
        ErrorCode(int(error))
    except ValueError:
        name = Errors.of(int(error)).name
        return f"{name}: {message}" if message else name
    return message or None


def wire_error(code: int, message: str | None) -> Errors:
    """The error a response's code and message stand for (inverse of error_message)."""
    error = Errors.of(int(code))
    if error is Errors.UNKNOWN_SERVER_ERROR and message:
        name = message.split(":", 1)[0]
        own = Errors.__members__.get(name)
        if own is not None:
            return own
    return error


class UndecodableRequestError(ValueError):
    """The frame is not a request this node can parse (closes the connection)."""


class UnknownApiError(UndecodableRequestError):
    """No schema exists for this (api key, version)."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class KafkaRequest:
    header: RequestHeader
    body: Any  # a kio request entity


@cache
def request_schema(api_key: int, version: int) -> type:
    """kio's request dataclass for (api key, version); UnknownApiError if there is none."""
    custom = _CUSTOM.get((api_key, version))
    if custom is not None:
        return custom[0]
    try:
        return load_request_schema(api_key, version)
    except KioIndexError:
        raise UnknownApiError(f"no request schema for api key {api_key} v{version}") from None
    except Exception as exc:  # pragma: no cover - kio's dynamic import failing is a bug
        raise UnknownApiError(f"api key {api_key} v{version}: {exc}") from exc


@cache
def response_schema(api_key: int, version: int) -> type:
    custom = _CUSTOM.get((api_key, version))
    if custom is not None:
        return custom[1]
    custom_response = _CUSTOM_RESPONSES.get((api_key, version))
    if custom_response is not None:
        return custom_response
    try:
        return load_response_schema(api_key, version)
    except KioIndexError:
        raise UnknownApiError(f"no response schema for api key {api_key} v{version}") from None


def peek_header(payload: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request payload, before choosing schemas."""
    if len(payload) < _API_HEAD.size:
        raise UndecodableRequestError(f"request of {len(payload)} bytes has no header")
    api_key, api_version, correlation_id = _API_HEAD.unpack_from(payload, 0)
    return int(api_key), int(api_version), int(correlation_id)


def peek_correlation_id(payload: bytes) -> int:
    """The correlation id a response payload starts with (both response headers do)."""
    if len(payload) < 4:
        raise UndecodableRequestError(f"response of {len(payload)} bytes has no header")
    return int.from_bytes(payload[:4], "big", signed=True)


def _is_flexible(schema: type) -> bool:
    return bool(getattr(schema, "__flexible__", False))


@cache
def request_header_is_v2(api_key: int, version: int) -> bool:
    """Header v2 for flexible request versions, v1 otherwise. An ApiVersions version newer
    than any schema still parses its header as v2 (Kafka: ApiVersions v3+ is flexible)."""
    if api_key == ApiKey.API_VERSIONS:
        return version >= 3
    return _is_flexible(request_schema(api_key, version))


def decode_request_header(payload: bytes) -> tuple[RequestHeader, int]:
    """The header and the offset where the body starts."""
    api_key, api_version, correlation_id = peek_header(payload)
    v2 = request_header_is_v2(api_key, api_version)
    # Read by hand on every request: key, version, correlation id, then client_id (a nullable
    # int16-length string in both versions) and, in v2, tagged fields (almost always none).
    offset = _API_HEAD.size
    if len(payload) >= offset + 2:
        (length,) = _I16.unpack_from(payload, offset)
        end = offset + 2 + max(length, 0)
        if end + v2 <= len(payload) and (not v2 or payload[end] == 0):
            try:
                client_id = None if length < 0 else payload[offset + 2 : end].decode()
            except UnicodeDecodeError:
                pass  # kio's reader below names the problem
            else:
                header = RequestHeader(api_key, api_version, correlation_id, client_id)
                return header, end + v2
    header_cls = RequestHeaderV2 if v2 else RequestHeaderV1
    kio_header: Any
    try:
        kio_header, size = codec.reader(header_cls)(payload, 0)
    except Exception as exc:  # kio raises several types for garbage
        raise UndecodableRequestError(f"undecodable request header: {exc}") from None
    return (
        RequestHeader(
            int(kio_header.request_api_key),
            int(kio_header.request_api_version),
            int(kio_header.correlation_id),
            kio_header.client_id,
        ),
        size,
    )


def decode_request(payload: bytes) -> KafkaRequest:
    """Header and kio body of one request payload; UndecodableRequestError if either fails."""
    header, offset = decode_request_header(payload)
    schema = request_schema(header.api_key, header.api_version)
    body: Any
    try:
        body, _end = codec.reader(schema)(payload, offset)
    except Exception as exc:  # kio raises several types for garbage
        raise UndecodableRequestError(
            f"undecodable api key {header.api_key} v{header.api_version} body: {exc}"
        ) from None
    return KafkaRequest(header, body)


def _write(entity: Any) -> bytes:
    entity_type: type = type(entity)
    return codec.writer(entity_type)(entity)


def encode_request(body: Any, correlation_id: int, client_id: str | None) -> bytes:
    """A framed request for a kio request entity (its class knows api key and version)."""
    api_key, version = int(body.__api_key__), int(body.__version__)
    client = b"\xff\xff" if client_id is None else _string(client_id)
    tags = b"\x00" if request_header_is_v2(api_key, version) else b""  # no tagged fields
    payload = _write(body)
    head = _REQUEST_PREFIX.pack(
        _API_HEAD.size + len(client) + len(tags) + len(payload), api_key, version, correlation_id
    )
    return b"".join((head, client, tags, payload))


def _string(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


@cache
def response_header_is_v1(api_key: int, version: int) -> bool:
    if api_key == ApiKey.API_VERSIONS:
        return False  # always v0 (KIP-511)
    return _is_flexible(response_schema(api_key, version))


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body already encoded (the payload after the header), for a handler that
    answers the same big response again (a broker's Metadata of every topic, issue 35)."""

    api_key: int
    version: int
    payload: bytes

    @classmethod
    def of(cls, body: Any) -> EncodedResponse:
        return cls(int(body.__api_key__), int(body.__version__), _write(body))


def encoded_with_items(body: Any, items: Sequence[bytes], fields_after: int) -> EncodedResponse:
    """`body`, a response whose array field is empty, encoded with `items` (each an entity's
    own bytes, codec.writer) in that array; `fields_after`: the bytes of the fields after the
    array (tagged fields aside). A handler answering an array of big, mostly unchanged entries
    writes only the new ones (a broker's Metadata of every topic, issue 35)."""
    api_key, version = int(body.__api_key__), int(body.__version__)
    flexible = response_header_is_v1(api_key, version)
    payload = _write(body)
    empty = b"\x01" if flexible else b"\x00\x00\x00\x00"  # compact array or int32 count
    at = len(payload) - fields_after - flexible - len(empty)
    if payload[at : at + len(empty)] != empty:
        raise ValueError(f"no empty array {fields_after} bytes before the end of {type(body)}")
    count = codec.uvarint(len(items) + 1) if flexible else _I32.pack(len(items))
    return EncodedResponse(
        api_key, version, b"".join((payload[:at], count, *items, payload[at + len(empty) :]))
    )


def encode_response(body: Any, correlation_id: int) -> bytes:
    """A framed response for a kio response entity (or an EncodedResponse)."""
    if type(body) is EncodedResponse:
        payload, api_key, version = body.payload, body.api_key, body.version
    else:
        payload, api_key, version = _write(body), int(body.__api_key__), int(body.__version__)
    if response_header_is_v1(api_key, version):
        # Header v1: the correlation id, then no tagged fields.
        return _RESPONSE_PREFIX.pack(len(payload) + 5, correlation_id) + b"\x00" + payload
    return _RESPONSE_PREFIX.pack(len(payload) + 4, correlation_id) + payload


def decode_response(payload: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, kio body) of one response payload to a request of (api key, version)."""
    correlation_id = peek_correlation_id(payload)
    offset = 4
    if response_header_is_v1(api_key, version):
        if len(payload) > 4 and payload[4] == 0:
            offset = 5  # no tagged fields
        else:
            _header, offset = codec.reader(ResponseHeaderV1)(payload, 0)
    body: Any
    body, _end = codec.reader(response_schema(api_key, version))(payload, offset)
    return correlation_id, body
