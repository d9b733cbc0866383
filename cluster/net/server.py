"""The RPC server: persistent, pipelined connections speaking the framed msgpack protocol, and,
on the same port, Kafka's wire protocol for real Kafka clients (transitional, issue 20 stage 1):
the first request of a connection says which. A msgpack request payload starts with 0x95 (a
fixarray of 5), a Kafka request's with 0x00 (the high byte of an int16 api key below 256).

Each request runs as its own task and its response is written when it finishes, matched by
correlation id. No request, however malformed, takes the process down: bad bodies get an error
response, garbage frames close only their own connection (ARCHITECTURE.md "Wire protocol").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from cluster.protocol.api_keys import ApiKey
from cluster.protocol.errors import Errors, KafkaError
from cluster.protocol.frame import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    FrameTooLargeError,
    MalformedFrameError,
    decode_request,
    encode_response,
)
from cluster.protocol.registry import Registry, default_registry
from cluster.protocol.schema import SchemaError, from_wire, to_wire
from kafkawire.connection import KafkaConnection, KafkaService
from kafkawire.faults import FaultInjector

logger = logging.getLogger(__name__)

_NODE_CLIENT_ID = re.compile(r"node-(\d+)")
DEFAULT_MAX_INFLIGHT_PER_CONNECTION = 1000
_SNIFF_BYTES = 5  # the size prefix and the payload's first byte
_MSGPACK_REQUEST_FIRST_BYTE = 0x95


def client_id_for_node(node_id: int) -> str:
    """The client id a node uses for its own RPCs, so peers (and the fault layer) know it."""
    return f"node-{node_id}"


def source_node_id_of(client_id: str) -> int | None:
    match = _NODE_CLIENT_ID.fullmatch(client_id)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class RequestContext:
    client_id: str
    peer: tuple[str, int] | None
    source_node_id: int | None
    api_version: int
    correlation_id: int


Handler = Callable[[ApiKey, Any, RequestContext], Awaitable[Any]]


def error_body(error: Errors, message: str) -> dict[str, Any]:
    """A body every response type decodes (the registry's response convention)."""
    return {"error_code": int(error), "error_message": message}


class _ServerConnection(asyncio.Protocol):
    def __init__(self, server: RpcServer) -> None:
        self._server = server
        self._decoder = FrameDecoder(server.max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self._reading_paused = False
        self._writing_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._sniffed = bytearray()  # bytes held until the first request says its protocol
        self._protocol_known = False
        self._kafka: KafkaConnection | None = None

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.connections.discard(self)
        if self._kafka is not None:
            self._kafka.connection_lost()
        self._wake_writers()
        # In-flight handlers finish (they may be mid-commit); their responses are discarded.

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_writers()

    def data_received(self, data: bytes) -> None:
        transport = self._transport
        assert transport is not None
        if not self._protocol_known:
            self._sniffed += data
            # An empty or oversize first frame says nothing of its protocol: the msgpack path
            # answers it (MESSAGE_TOO_LARGE) and closes, as before.
            size = int.from_bytes(self._sniffed[:4], "big") if len(self._sniffed) >= 4 else None
            undecidable = size is not None and (size == 0 or size > self._server.max_frame_bytes)
            if len(self._sniffed) < _SNIFF_BYTES and not undecidable:
                return
            data, self._sniffed = bytes(self._sniffed), bytearray()
            self._protocol_known = True
            service = self._server.kafka_service
            kafka = not undecidable and data[4] != _MSGPACK_REQUEST_FIRST_BYTE
            if kafka and service is not None:
                self._kafka = KafkaConnection(
                    transport, service, self._server.max_frame_bytes, self.peer, self._server.faults
                )
                self.tasks.add(self._kafka.task)
                self._kafka.task.add_done_callback(self.tasks.discard)
        if self._kafka is not None:
            self._kafka.data_received(data)
            return
        try:
            for payload in self._decoder.feed(data):
                self._dispatch(decode_request(payload))
        except FrameTooLargeError as e:
            logger.warning("Closing connection from %s: %s", self.peer, e)
            transport.write(encode_response(-1, error_body(Errors.MESSAGE_TOO_LARGE, str(e))))
            transport.close()
        except MalformedFrameError as e:
            logger.warning("Closing connection from %s: malformed frame: %s", self.peer, e)
            transport.close()

    def eof_received(self) -> bool | None:
        return None  # close our side too; in-flight responses are dropped

    # -- requests -------------------------------------------------------------------------------

    def _dispatch(self, frame: tuple[int, int, int, str, dict[str, Any]]) -> None:
        if self._transport is None or self._transport.is_closing():
            return
        task = asyncio.get_running_loop().create_task(self._serve(*frame))
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        if len(self.tasks) >= self._server.max_inflight_per_connection and not self._reading_paused:
            # Backpressure: a client that pipelines without bound waits in its socket buffer.
            self._reading_paused = True
            self._transport.pause_reading()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if (
            self._reading_paused
            and len(self.tasks) < self._server.max_inflight_per_connection
            and self._transport is not None
            and not self._transport.is_closing()
        ):
            self._reading_paused = False
            self._transport.resume_reading()

    async def _serve(
        self, api_key: int, api_version: int, correlation_id: int, client_id: str, body: dict
    ) -> None:
        ctx = RequestContext(
            client_id=client_id,
            peer=self.peer,
            source_node_id=source_node_id_of(client_id),
            api_version=api_version,
            correlation_id=correlation_id,
        )
        faults = self._server.faults
        if faults is not None and ctx.source_node_id is not None:
            if faults.drops_inbound(ctx.source_node_id):
                return  # silently ignored: the caller times out, as on a lossy network
            delay_ms = faults.delay_ms(ctx.source_node_id)
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
        response_body = await self._server.handle_body(api_key, body, ctx)
        try:
            frame = encode_response(correlation_id, response_body)
        except Exception as e:  # a handler put something msgpack cannot carry in its response
            logger.exception("Cannot encode the response to api key %s", api_key)
            frame = encode_response(
                correlation_id, error_body(Errors.UNKNOWN_SERVER_ERROR, f"cannot encode: {e}")
            )
        await self._write(frame)

    async def _write(self, frame: bytes) -> None:
        transport = self._transport
        if transport is None:
            return
        while self._writing_paused and not transport.is_closing():
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter
        if not transport.is_closing():
            transport.write(frame)

    def _wake_writers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()


class RpcServer:
    """Serves registered api keys on host:port through `handler`."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        *,
        cluster_id: str | None,
        node_id: int | None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        faults: FaultInjector | None = None,
        registry: Registry | None = None,
        max_inflight_per_connection: int = DEFAULT_MAX_INFLIGHT_PER_CONNECTION,
        kafka_service: KafkaService | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.max_frame_bytes = max_frame_bytes
        self.faults = faults
        self.registry = registry if registry is not None else default_registry()
        self.max_inflight_per_connection = max_inflight_per_connection
        self.kafka_service = kafka_service  # Kafka's protocol on this port too, when set
        self.connections: set[_ServerConnection] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        """Listen; returns the bound port (an ephemeral one when constructed with port 0)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _ServerConnection(self), self.host, self.port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        logger.info("Node %s serving RPC on %s:%d", self.node_id, self.host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stop listening, drop every connection and cancel in-flight handlers."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        connections = list(self.connections)
        tasks = [t for c in connections for t in c.tasks]
        for conn in connections:
            conn.abort()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()
        self.connections.clear()

    async def handle_body(self, api_key: int, body: dict[str, Any], ctx: RequestContext) -> dict:
        """The response body for one request body; every failure becomes an error body."""
        registration = self.registry.lookup(api_key)
        if registration is None:
            return error_body(Errors.UNSUPPORTED_VERSION, f"unsupported api key {api_key}")
        name = registration.api_key.name
        if ctx.api_version > registration.version or ctx.api_version < 0:
            return error_body(
                Errors.UNSUPPORTED_VERSION,
                f"{name} version {ctx.api_version} is not supported (0..{registration.version})",
            )
        request_cluster_id = body.get("cluster_id")
        if (
            request_cluster_id
            and self.cluster_id is not None
            and request_cluster_id != self.cluster_id
        ):
            return error_body(
                Errors.INCONSISTENT_CLUSTER_ID,
                f"request for cluster {request_cluster_id!r} reached node {self.node_id} "
                f"of cluster {self.cluster_id!r}",
            )
        try:
            request: Any = from_wire(registration.request_cls, body)
        except SchemaError as e:
            return error_body(Errors.INVALID_REQUEST, f"invalid {name} request: {e}")
        try:
            response = await self.handler(registration.api_key, request, ctx)
        except KafkaError as e:
            return error_body(e.error, e.message)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            logger.exception("Handler for %s from %s failed", name, ctx.client_id or ctx.peer)
            return error_body(Errors.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")
        if not isinstance(response, registration.response_cls):
            logger.error(
                "Handler for %s returned %s, expected %s",
                name,
                type(response).__name__,
                registration.response_cls.__name__,
            )
            return error_body(
                Errors.UNKNOWN_SERVER_ERROR, f"handler returned {type(response).__name__}"
            )
        try:
            return to_wire(response)
        except Exception as e:
            logger.exception("Cannot encode %s response", name)
            return error_body(Errors.UNKNOWN_SERVER_ERROR, f"cannot encode response: {e}")
