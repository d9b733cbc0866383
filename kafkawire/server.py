"""A node's listener: TCP on host:port, every connection speaking Kafka's wire protocol through
one KafkaService (ApiVersions table + handler), with the node's fault layer on inbound requests
from other nodes. No request, however malformed, takes the process down: a bad frame closes only
its own connection (kafkawire.connection; ARCHITECTURE.md "Wire protocol").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import KW_ONLY, dataclass, field
from typing import cast

from kafkawire.connection import KafkaConnection, KafkaService
from kafkawire.faults import FaultInjector
from kafkawire.framing import DEFAULT_MAX_FRAME_BYTES
from kafkawire.loop import cancel_and_wait

logger = logging.getLogger(__name__)


class _Accepted(asyncio.Protocol):
    def __init__(self, server: KafkaServer) -> None:
        self._server = server
        self.connection: KafkaConnection | None = None
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        server = self._server
        self.connection = KafkaConnection(
            self._transport,
            server.service,
            server.max_frame_bytes,
            (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None,
            server.faults,
            server.listener_name,
        )
        server.accepted.add(self)

    def data_received(self, data: bytes) -> None:
        if self.connection is not None:
            self.connection.data_received(data)

    def eof_received(self) -> bool | None:
        return None  # close our side too; a response in flight is dropped

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.accepted.discard(self)
        if self.connection is not None:
            self.connection.connection_lost()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()


@dataclass(eq=False)
class KafkaServer:
    """Serves `service` on host:port (port 0: an ephemeral one, known after start())."""

    host: str
    port: int
    service: KafkaService
    _: KW_ONLY
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    faults: FaultInjector | None = None
    name: str = "node"
    listener_name: str | None = None
    accepted: set[_Accepted] = field(default_factory=set, init=False)
    _server: asyncio.Server | None = field(default=None, init=False)

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Accepted(self), self.host, self.port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        logger.info("%s serving Kafka's protocol on %s:%d", self.name, self.host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stop listening, drop every connection and cancel the requests in flight."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        accepted = list(self.accepted)
        tasks = [a.connection.task for a in accepted if a.connection is not None]
        for conn in accepted:
            conn.abort()
        await cancel_and_wait(*tasks)
        if server is not None:
            await server.wait_closed()
        self.accepted.clear()
