"""A node's Kafka listener (kafkawire.server): a connection is answered in order,
ApiVersions-downgraded, or closed on anything it cannot serve, and the listener keeps serving."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v1.request import MetadataRequest

from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import CONTROLLER_API_VERSIONS, VersionRange, api_versions_response
from kafkawire.connection import KafkaRequestContext, KafkaService
from kafkawire.errors import Errors
from kafkawire.messages import KafkaRequest, decode_response, encode_request
from kafkawire.router import KafkaRouter
from kafkawire.server import KafkaServer


async def _serve(service: KafkaService) -> AsyncIterator[KafkaServer]:
    server = KafkaServer("127.0.0.1", 0, service)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


# A listener that serves ApiVersions only (Metadata is not in its table).
ONLY_API_VERSIONS = {ApiKey.API_VERSIONS: CONTROLLER_API_VERSIONS[ApiKey.API_VERSIONS]}


@pytest.fixture
async def controller_like() -> AsyncIterator[KafkaServer]:
    async for server in _serve(KafkaRouter(ONLY_API_VERSIONS).service()):
        yield server


async def _exchange(port: int, *frames: bytes, responses: int = 1) -> list[bytes | None]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"".join(frames))
        out: list[bytes | None] = []
        for _ in range(responses):
            try:
                size = struct.unpack(">I", await asyncio.wait_for(reader.readexactly(4), 5))[0]
                out.append(await reader.readexactly(size))
            except asyncio.IncompleteReadError:
                out.append(None)  # closed by the server
        return out
    finally:
        writer.close()


def _api_versions(correlation_id: int) -> bytes:
    return encode_request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        correlation_id,
        "t",
    )


async def test_api_versions_is_answered_and_an_old_msgpack_frame_closes_only_its_connection(
    controller_like: KafkaServer,
) -> None:
    [payload] = await _exchange(controller_like.port, _api_versions(5))
    assert payload is not None
    correlation_id, body = decode_response(payload, int(ApiKey.API_VERSIONS), 3)
    assert correlation_id == 5 and body.error_code == Errors.NONE
    assert [int(a.api_key) for a in body.api_keys] == [int(ApiKey.API_VERSIONS)]
    # minikraft's old msgpack framing (a fixarray of 5 after the size) is not Kafka's protocol:
    # that connection closes, the listener keeps serving Kafka.
    msgpack_frame = struct.pack(">I", 6) + bytes([0x95, 0, 0, 0, 0xA0, 0x80])
    assert await _exchange(controller_like.port, msgpack_frame) == [None]
    [again] = await _exchange(controller_like.port, _api_versions(6))
    assert again is not None and decode_response(again, 18, 3)[0] == 6


async def test_an_api_the_listener_does_not_serve_closes_only_that_connection(
    controller_like: KafkaServer,
) -> None:
    metadata = encode_request(MetadataRequest(topics=None), 6, "t")  # type: ignore[arg-type]
    assert await _exchange(controller_like.port, metadata) == [None]
    [payload] = await _exchange(controller_like.port, _api_versions(7))
    assert payload is not None and decode_response(payload, 18, 3)[0] == 7


async def test_pipelined_kafka_requests_are_answered_in_order() -> None:
    """A slow first request does not let the second overtake it (kafka-python relies on it)."""

    async def handle(request: KafkaRequest, _ctx: KafkaRequestContext) -> Any:
        if request.header.correlation_id == 1:
            await asyncio.sleep(0.2)
        return api_versions_response(table, request.header.api_version)

    table = {ApiKey.API_VERSIONS: VersionRange(0, 4)}
    async for server in _serve(KafkaService(table, handle)):
        first, second = await _exchange(
            server.port, _api_versions(1), _api_versions(2), responses=2
        )
        assert first is not None and second is not None
        assert decode_response(first, 18, 3)[0] == 1
        assert decode_response(second, 18, 3)[0] == 2


async def test_a_handler_returning_none_sends_nothing_acks_0() -> None:
    async def handle(request: KafkaRequest, _ctx: KafkaRequestContext) -> Any:
        if request.header.correlation_id == 1:
            return None  # as Produce with acks=0
        return api_versions_response(table, request.header.api_version)

    table = {ApiKey.API_VERSIONS: VersionRange(0, 4)}
    async for server in _serve(KafkaService(table, handle)):
        [payload] = await _exchange(server.port, _api_versions(1), _api_versions(2))
        assert payload is not None and decode_response(payload, 18, 3)[0] == 2
