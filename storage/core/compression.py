"""Kafka's record batch compression codecs (attribute bits 0-2): the records section of a batch
is compressed as a whole.

gzip comes from the standard library; snappy, lz4 and zstd from `cramjam` (one native wheel for
the three). Snappy uses the xerial framing Kafka's Java client writes and reads raw snappy too
(librdkafka); lz4 is the LZ4 frame format Kafka has used since magic 1. A codec id Kafka does
not define, or a codec whose library is missing, raises UnsupportedCompressionError
(UNSUPPORTED_COMPRESSION_TYPE): never CorruptBatchError, so log recovery does not truncate a
good batch it merely cannot read.
"""

from __future__ import annotations

import struct
import zlib
from types import ModuleType

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_MASK = 0x07
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible 1
_XERIAL_BLOCK = 32 * 1024  # the Java client's block size


class UnsupportedCompressionError(ValueError):
    """A codec this process cannot apply (Kafka's UNSUPPORTED_COMPRESSION_TYPE)."""


def _cramjam() -> ModuleType:
    try:
        import cramjam
    except ImportError as exc:  # a deployment without the optional native wheel
        raise UnsupportedCompressionError(
            "snappy/lz4/zstd batches need the `cramjam` package (pip install cramjam)"
        ) from exc
    return cramjam


# Kafka's default levels (compression.gzip.level -1 is Deflater's default, 6).
DEFAULT_LEVELS = {GZIP: 6, LZ4: 9, ZSTD: 3}


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """`level`: compression.gzip/lz4/zstd.level (None or gzip's -1: Kafka's default)."""
    if codec == NONE:
        return data
    if level is None or (codec == GZIP and level == -1):
        level = DEFAULT_LEVELS.get(codec)
    if codec == GZIP:
        packer = zlib.compressobj(level or DEFAULT_LEVELS[GZIP], zlib.DEFLATED, 31)  # wbits 31: a gzip member
        return packer.compress(data) + packer.flush()
    if codec == SNAPPY:
        snappy = _cramjam().snappy
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == LZ4:
        return bytes(_cramjam().lz4.compress(data, level=level))
    if codec == ZSTD:
        return bytes(_cramjam().zstd.compress(data, level=level))
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: bytes) -> bytes:
    """Raises UnsupportedCompressionError for an unknown/unavailable codec, ValueError for garbage."""
    try:
        if codec == NONE:
            return data
        if codec == GZIP:
            return zlib.decompress(data, 47)  # wbits 47: gzip or zlib header
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(_cramjam().lz4.decompress(data))
        if codec == ZSTD:
            return bytes(_cramjam().zstd.decompress(data))
    except UnsupportedCompressionError:
        raise
    except Exception as exc:  # zlib.error, cramjam's DecompressionError, struct.error
        raise ValueError(f"{CODEC_NAMES[codec]} data does not decompress: {exc}") from exc
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    snappy = _cramjam().snappy
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(snappy.decompress_raw(data))
    out = bytearray()
    position = len(_XERIAL_HEADER)
    while position < len(data):
        (size,) = struct.unpack_from(">i", data, position)
        position += 4
        if size < 0 or position + size > len(data):
            raise ValueError("xerial snappy block cut off")
        out += bytes(snappy.decompress_raw(data[position : position + size]))
        position += size
    return bytes(out)
