"""The RPC client: one persistent pipelined connection per address, shared by all callers.

Requests carry a correlation id; a protocol callback completes the waiting future. A failed
connect backs off exponentially with jitter (50 ms doubling to 1 s by default) so callers that
retry do not spin. Errors surface as KafkaError: REQUEST_TIMED_OUT, NETWORK_EXCEPTION, or
MESSAGE_TOO_LARGE when the server refused the frame. A response carrying a non-zero error_code is
returned as is: the caller decides what the error means.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
from dataclasses import dataclass
from typing import Any, cast

from cluster.protocol.errors import Errors, KafkaError
from cluster.protocol.frame import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    FrameTooLargeError,
    MalformedFrameError,
    decode_response,
    encode_request,
)
from cluster.protocol.registry import Registry, default_registry
from cluster.protocol.schema import SchemaError, from_wire, to_wire
from kafkawire.faults import FaultInjector

logger = logging.getLogger(__name__)

Address = tuple[str, int]
_MAX_CORRELATION_ID = 0x7FFFFFFF


def parse_address(address: Address | str) -> Address:
    """`("h", 1)` or `"h:1"` / `"[::1]:1"` -> (host, port)."""
    if isinstance(address, tuple):
        return (address[0], int(address[1]))
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address must be host:port, got {address!r}")
    return (host.strip("[]"), int(port))


def _format(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


class _ClientConnection(asyncio.Protocol):
    def __init__(self, client: RpcClient, address: Address) -> None:
        self._client = client
        self.address = address
        self._decoder = FrameDecoder(client.max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_correlation_id = 0
        self._failure: KafkaError | None = None
        self.closed = False

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        try:
            for payload in self._decoder.feed(data):
                correlation_id, body = decode_response(payload)
                if correlation_id == -1:
                    # The server refused our frame before reading it (MESSAGE_TOO_LARGE) and is
                    # closing the connection: every pending request fails with its error.
                    code = body.get("error_code", -1)
                    self._failure = KafkaError(
                        Errors.of(code if code.__class__ is int else -1),
                        str(body.get("error_message", "")),
                    )
                    continue
                future = self._pending.pop(correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(body)
        except (FrameTooLargeError, MalformedFrameError) as e:
            logger.warning("Closing connection to %s: bad response frame: %s", self.address, e)
            self._failure = KafkaError(Errors.NETWORK_EXCEPTION, f"bad response frame: {e}")
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._client._forget(self)
        failure = self._failure
        reason = f"connection to {_format(self.address)} lost" + (f": {exc}" if exc else "")
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                error = (
                    KafkaError(failure.error, failure.message)
                    if failure is not None
                    else KafkaError(Errors.NETWORK_EXCEPTION, reason)
                )
                future.set_exception(error)

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    async def call(
        self, api_key: int, api_version: int, client_id: str, body: dict, timeout_s: float
    ) -> dict[str, Any]:
        if self.closed or self._transport is None or self._transport.is_closing():
            raise KafkaError(
                Errors.NETWORK_EXCEPTION, f"connection to {_format(self.address)} is closed"
            )
        loop = asyncio.get_running_loop()
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & _MAX_CORRELATION_ID
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending[correlation_id] = future
        timer = loop.call_later(timeout_s, _expire, future, api_key, self.address, timeout_s)
        try:
            self._transport.write(
                encode_request(api_key, api_version, correlation_id, client_id, body)
            )
            return await future
        finally:
            timer.cancel()
            self._pending.pop(correlation_id, None)


def _expire(
    future: asyncio.Future[dict[str, Any]], api_key: int, address: Address, timeout_s: float
) -> None:
    if not future.done():
        future.set_exception(
            KafkaError(
                Errors.REQUEST_TIMED_OUT,
                f"api key {api_key} to {_format(address)} got no response in "
                f"{int(timeout_s * 1000)} ms",
            )
        )


@dataclass(slots=True)
class _Backoff:
    failures: int
    next_attempt_at: float  # loop.time() seconds


class RpcClient:
    """Sends registered requests and returns their registered responses."""

    def __init__(
        self,
        client_id: str,
        *,
        cluster_id: str | None,
        request_timeout_ms: int = 30000,
        faults: FaultInjector | None = None,
        registry: Registry | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        connect_timeout_ms: int = 10000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        rng: random.Random | None = None,
    ) -> None:
        self.client_id = client_id
        self.cluster_id = cluster_id
        self.request_timeout_ms = request_timeout_ms
        self.faults = faults
        self.registry = registry if registry is not None else default_registry()
        self.max_frame_bytes = max_frame_bytes
        self.connect_timeout_ms = connect_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self._rng = rng if rng is not None else random.Random()
        self._connections: dict[Address, _ClientConnection] = {}
        self._connecting: dict[Address, asyncio.Task[_ClientConnection]] = {}
        self._backoff: dict[Address, _Backoff] = {}
        self._closed = False

    async def request(
        self,
        address: Address | str,
        request_obj: Any,
        *,
        timeout_ms: int | None = None,
        dest_node_id: int | None = None,
    ) -> Any:
        """Send `request_obj` to `address`; the registered response object, error_code and all."""
        registration = self.registry.registration_of(request_obj)
        addr = parse_address(address)
        timeout_s = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        body = to_wire(request_obj)
        if self.cluster_id is not None and not body.get("cluster_id"):
            body["cluster_id"] = self.cluster_id
        if self.faults is not None and dest_node_id is not None:
            await self._apply_outbound_faults(dest_node_id, addr, timeout_s, deadline)
        conn = self._connections.get(addr)
        if conn is None or conn.closed:
            conn = await self._connection(addr, deadline)
        remaining_s = deadline - loop.time()
        if remaining_s <= 0:
            raise KafkaError(Errors.REQUEST_TIMED_OUT, f"no time left to send to {_format(addr)}")
        response_body = await conn.call(
            registration.api_key, registration.version, self.client_id, body, remaining_s
        )
        try:
            return from_wire(registration.response_cls, response_body)
        except SchemaError as e:
            raise KafkaError(
                Errors.UNKNOWN_SERVER_ERROR, f"malformed response from {_format(addr)}: {e}"
            ) from None

    async def close(self) -> None:
        """Close every connection; pending requests fail with NETWORK_EXCEPTION."""
        self._closed = True
        connecting = list(self._connecting.values())
        for task in connecting:
            task.cancel()
        if connecting:
            await asyncio.gather(*connecting, return_exceptions=True)
        for conn in list(self._connections.values()):
            conn.close()
        self._connections.clear()
        # Let connection_lost run so waiters see NETWORK_EXCEPTION before close() returns.
        await asyncio.sleep(0)

    def connected_addresses(self) -> list[Address]:
        return [a for a, c in self._connections.items() if not c.closed]

    # -- internals ------------------------------------------------------------------------------

    async def _apply_outbound_faults(
        self, dest_node_id: int, addr: Address, timeout_s: float, deadline: float
    ) -> None:
        assert self.faults is not None
        loop = asyncio.get_running_loop()
        if self.faults.drops_outbound(dest_node_id):
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            raise KafkaError(
                Errors.REQUEST_TIMED_OUT,
                f"request to node {dest_node_id} at {_format(addr)} dropped by the fault layer; "
                f"no response in {int(timeout_s * 1000)} ms",
            )
        delay_s = self.faults.delay_ms(dest_node_id) / 1000
        if delay_s:
            if loop.time() + delay_s >= deadline:
                await asyncio.sleep(max(0.0, deadline - loop.time()))
                raise KafkaError(
                    Errors.REQUEST_TIMED_OUT,
                    f"request to node {dest_node_id} delayed past its {int(timeout_s * 1000)} ms "
                    "timeout by the fault layer",
                )
            await asyncio.sleep(delay_s)

    async def _connection(self, addr: Address, deadline: float) -> _ClientConnection:
        if self._closed:
            raise KafkaError(Errors.NETWORK_EXCEPTION, "client is closed")
        loop = asyncio.get_running_loop()
        backoff = self._backoff.get(addr)
        if backoff is not None and addr not in self._connecting:
            wait_s = backoff.next_attempt_at - loop.time()
            if wait_s > 0:
                left_s = deadline - loop.time()
                await asyncio.sleep(max(0.0, min(wait_s, left_s)))
                if wait_s > left_s:
                    raise KafkaError(
                        Errors.NETWORK_EXCEPTION,
                        f"connection to {_format(addr)} failed {backoff.failures} time(s); "
                        "in reconnect backoff",
                    )
            conn = self._connections.get(addr)
            if conn is not None and not conn.closed:
                return conn  # another caller connected while we waited
        task = self._connecting.get(addr)
        if task is None:
            task = loop.create_task(self._connect(addr))
            self._connecting[addr] = task
            task.add_done_callback(_consume_exception)
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise KafkaError(
                Errors.REQUEST_TIMED_OUT, f"connecting to {_format(addr)} timed out"
            ) from None
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and current is not None and not current.cancelling():
                # close() cancelled the shared connect, not our caller.
                raise KafkaError(Errors.NETWORK_EXCEPTION, "client is closed") from None
            raise

    async def _connect(self, addr: Address) -> _ClientConnection:
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: _ClientConnection(self, addr), addr[0], addr[1]),
                self.connect_timeout_ms / 1000,
            )
        except (OSError, TimeoutError) as e:
            failures = self._backoff[addr].failures + 1 if addr in self._backoff else 1
            backoff_ms = min(
                self.reconnect_backoff_ms * 2 ** (failures - 1), self.reconnect_backoff_max_ms
            )
            # 20% jitter, as Kafka's reconnect.backoff does, so peers do not reconnect in step.
            backoff_ms *= self._rng.uniform(0.8, 1.2)
            self._backoff[addr] = _Backoff(failures, loop.time() + backoff_ms / 1000)
            logger.debug("Connect to %s failed (%s); backoff %.0f ms", addr, e, backoff_ms)
            raise KafkaError(
                Errors.NETWORK_EXCEPTION,
                f"cannot connect to {_format(addr)}: {e or type(e).__name__}",
            ) from None
        finally:
            self._connecting.pop(addr, None)
        conn = protocol
        if self._closed:
            conn.close()
            raise KafkaError(Errors.NETWORK_EXCEPTION, "client is closed")
        self._backoff.pop(addr, None)
        self._connections[addr] = conn
        return conn

    def _forget(self, conn: _ClientConnection) -> None:
        if self._connections.get(conn.address) is conn:
            del self._connections[conn.address]


def _consume_exception(task: asyncio.Task[Any]) -> None:
    # The shared connect task may fail after every waiter timed out; mark its error as seen.
    if not task.cancelled():
        task.exception()
