"""Frames: a 4-byte big-endian length, then a msgpack array.

Request `[api_key, api_version, correlation_id, client_id, body]`, response
`[correlation_id, body]` (ARCHITECTURE.md "Wire protocol"). The decoder checks the length
against `socket.request.max.bytes` before it buffers a byte of the body.
"""

from __future__ import annotations

from typing import Any

import msgpack

from kafkawire.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    LENGTH_PREFIX,
    FrameDecoder,
    FrameTooLargeError,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "FrameDecoder",
    "FrameTooLargeError",
    "MalformedFrameError",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
]


class MalformedFrameError(ValueError):
    """The payload is not msgpack, or not the array shape a frame must have."""


def _pack(value: Any) -> bytes:
    payload: bytes = msgpack.packb(value, use_bin_type=True)
    return LENGTH_PREFIX.pack(len(payload)) + payload


def _unpack(payload: bytes | bytearray | memoryview) -> Any:
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False, use_list=True)
    except Exception as e:  # msgpack raises several unrelated types for garbage
        raise MalformedFrameError(
            f"undecodable msgpack payload ({type(e).__name__}: {e})"
        ) from None


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str, body: dict[str, Any]
) -> bytes:
    return _pack([int(api_key), api_version, correlation_id, client_id, body])


def encode_response(correlation_id: int, body: dict[str, Any]) -> bytes:
    return _pack([correlation_id, body])


def _is_int(value: object) -> bool:
    return value.__class__ is int


def decode_request(
    payload: bytes | bytearray | memoryview,
) -> tuple[int, int, int, str, dict[str, Any]]:
    """(api_key, api_version, correlation_id, client_id, body); MalformedFrameError otherwise."""
    frame = _unpack(payload)
    if frame.__class__ is not list or len(frame) != 5:
        raise MalformedFrameError("a request frame is a 5-element array")
    api_key, api_version, correlation_id, client_id, body = frame
    if not (_is_int(api_key) and _is_int(api_version) and _is_int(correlation_id)):
        raise MalformedFrameError("api_key, api_version and correlation_id must be ints")
    if client_id is None:
        client_id = ""  # Kafka's client id is a nullable string
    if client_id.__class__ is not str:
        raise MalformedFrameError("client_id must be a string")
    if body.__class__ is not dict:
        raise MalformedFrameError("request body must be a map")
    return api_key, api_version, correlation_id, client_id, body


def decode_response(payload: bytes | bytearray | memoryview) -> tuple[int, dict[str, Any]]:
    """(correlation_id, body); MalformedFrameError otherwise."""
    frame = _unpack(payload)
    if frame.__class__ is not list or len(frame) != 2:
        raise MalformedFrameError("a response frame is a 2-element array")
    correlation_id, body = frame
    if not _is_int(correlation_id) or body.__class__ is not dict:
        raise MalformedFrameError("a response frame is [int correlation_id, map body]")
    return correlation_id, body
