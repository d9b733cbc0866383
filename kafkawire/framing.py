"""Size-prefixed frames: a 4-byte big-endian length, then the payload (Kafka's framing).

The decoder checks the length against `socket.request.max.bytes` before it buffers a byte of the
body, so an oversize or garbage length closes the connection instead of eating memory.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
LENGTH_PREFIX = struct.Struct(">I")
PREFIX_BYTES = LENGTH_PREFIX.size


class FrameTooLargeError(ValueError):
    def __init__(self, size_bytes: int, max_bytes: int) -> None:
        super().__init__(
            f"frame of {size_bytes} bytes exceeds socket.request.max.bytes={max_bytes}"
        )
        self.size_bytes = size_bytes
        self.max_bytes = max_bytes


def frame(payload: bytes) -> bytes:
    """The payload with its size prefix."""
    return LENGTH_PREFIX.pack(len(payload)) + payload


class FrameDecoder:
    """Splits a byte stream into frame payloads; sans-IO, fed by the transport."""

    __slots__ = ("_buffer", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def peek(self, count: int) -> bytes:
        """The first `count` buffered bytes (fewer if not yet received), without consuming."""
        return bytes(self._buffer[:count])

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[bytes]:
        """Buffer `data`, yield every complete payload; FrameTooLargeError on an oversize header.

        Frames before an oversize one are yielded first, so their requests still count.
        """
        self._buffer += data
        return self._drain()

    def _drain(self) -> Iterator[bytes]:
        buffer = self._buffer
        pos = 0
        try:
            while len(buffer) - pos >= PREFIX_BYTES:
                (size,) = LENGTH_PREFIX.unpack_from(buffer, pos)
                if size > self.max_frame_bytes:
                    raise FrameTooLargeError(size, self.max_frame_bytes)
                end = pos + PREFIX_BYTES + size
                if end > len(buffer):
                    break
                payload = bytes(buffer[pos + PREFIX_BYTES : end])
                pos = end
                yield payload
        finally:
            if pos:
                del buffer[:pos]
