"""The Kafka-protocol client every node and tool uses: one persistent pipelined connection per
address, shared by all callers.

A request is a kio request entity (its class names the api key and version); the answer is the
kio response entity of the same version, error codes and all: the caller decides what an error
means. Responses are matched by correlation id. A failed connect backs off exponentially with
jitter (50 ms doubling to 1 s by default), as Kafka's reconnect.backoff does, so callers that
retry do not spin. Transport failures surface as KafkaError: REQUEST_TIMED_OUT or
NETWORK_EXCEPTION (a listener closes the connection on a request it cannot serve, so an
unsupported version shows up as NETWORK_EXCEPTION with the address).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import socket
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, cast

from kafkawire.errors import Errors, KafkaError
from kafkawire.faults import FaultInjector
from kafkawire.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, FrameTooLargeError
from kafkawire.loop import cancel_and_wait
from kafkawire.messages import decode_response, encode_request, peek_correlation_id

logger = logging.getLogger(__name__)

Address = tuple[str, int]
_MAX_CORRELATION_ID = 0x7FFFFFFF
_NODE_CLIENT_ID = re.compile(r"node-(\d+)")


def client_id_for_node(node_id: int) -> str:
    """The client id a node uses for its own requests, so peers (and the fault layer) know it."""
    return f"node-{node_id}"


def source_node_id_of(client_id: str | None) -> int | None:
    match = _NODE_CLIENT_ID.fullmatch(client_id or "")
    return int(match.group(1)) if match else None


def parse_address(address: Address | str) -> Address:
    """`("h", 1)` or `"h:1"` / `"[::1]:1"` -> (host, port)."""
    if isinstance(address, tuple):
        return (address[0], int(address[1]))
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address must be host:port, got {address!r}")
    return (host.strip("[]"), int(port))


def format_address(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


@dataclass(slots=True)
class _Pending:
    future: asyncio.Future[Any]
    api_key: int
    version: int
    decode_in_thread: bool = False


@dataclass(frozen=True, slots=True)
class _Undecoded:
    """A response the caller decodes in a worker thread (KafkaClient.request)."""

    payload: bytes


class _ClientConnection(asyncio.Protocol):
    def __init__(self, client: KafkaClient, address: Address) -> None:
        self._client = client
        self.address = address
        self._decoder = FrameDecoder(client.max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, _Pending] = {}
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
                correlation_id = peek_correlation_id(payload)
                pending = self._pending.pop(correlation_id, None)
                if pending is None or pending.future.done():
                    continue  # timed out meanwhile: the answer is dropped
                if pending.decode_in_thread:
                    pending.future.set_result(_Undecoded(bytes(payload)))
                    continue
                try:
                    _, body = decode_response(payload, pending.api_key, pending.version)
                except Exception as exc:  # kio raises several types for garbage
                    pending.future.set_exception(
                        KafkaError(
                            Errors.UNKNOWN_SERVER_ERROR,
                            f"undecodable response from {format_address(self.address)}: {exc}",
                        )
                    )
                    continue
                pending.future.set_result(body)
        except (FrameTooLargeError, ValueError) as e:
            logger.warning("Closing connection to %s: bad response frame: %s", self.address, e)
            self._failure = KafkaError(Errors.NETWORK_EXCEPTION, f"bad response frame: {e}")
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._client._forget(self)
        failure = self._failure
        reason = f"connection to {format_address(self.address)} lost" + (
            f": {exc}" if exc else ""
        )
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            if not entry.future.done():
                entry.future.set_exception(
                    KafkaError(failure.error, failure.message)
                    if failure is not None
                    else KafkaError(Errors.NETWORK_EXCEPTION, reason)
                )

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    def _check_open(self) -> asyncio.Transport:
        if self.closed or self._transport is None or self._transport.is_closing():
            raise KafkaError(
                Errors.NETWORK_EXCEPTION, f"connection to {format_address(self.address)} is closed"
            )
        return self._transport

    def _correlation_id(self) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & _MAX_CORRELATION_ID
        return correlation_id

    def send(self, body: Any, client_id: str) -> None:
        """Write a request the peer answers with nothing (Produce with acks=0)."""
        self._check_open().write(encode_request(body, self._correlation_id(), client_id))

    async def call(
        self,
        body: Any,
        client_id: str,
        timeout_s: float,
        *,
        decode_in_thread: bool = False,
        encode_in_thread: bool = False,
    ) -> Any:
        loop = asyncio.get_running_loop()
        correlation_id = self._correlation_id()
        api_key, version = int(body.__api_key__), int(body.__version__)
        frame = (
            await asyncio.to_thread(encode_request, body, correlation_id, client_id)
            if encode_in_thread
            else encode_request(body, correlation_id, client_id)
        )
        transport = self._check_open()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending[correlation_id] = _Pending(future, api_key, version, decode_in_thread)
        timer = loop.call_later(timeout_s, _expire, future, api_key, self.address, timeout_s)
        try:
            transport.write(frame)
            answer = await future
        finally:
            timer.cancel()
            self._pending.pop(correlation_id, None)
        if not isinstance(answer, _Undecoded):
            return answer
        try:
            _, decoded = await asyncio.to_thread(decode_response, answer.payload, api_key, version)
        except Exception as exc:  # kio raises several types for garbage
            raise KafkaError(
                Errors.UNKNOWN_SERVER_ERROR,
                f"undecodable response from {format_address(self.address)}: {exc}",
            ) from exc
        return decoded


def _expire(future: asyncio.Future[Any], api_key: int, address: Address, timeout_s: float) -> None:
    if not future.done():
        future.set_exception(
            KafkaError(
                Errors.REQUEST_TIMED_OUT,
                f"api key {api_key} to {format_address(address)} got no response in "
                f"{int(timeout_s * 1000)} ms",
            )
        )


@dataclass(slots=True)
class _Backoff:
    failures: int
    next_attempt_at: float  # loop.time() seconds


@dataclass(eq=False)
class KafkaClient:
    """Sends kio request entities and returns the kio responses of the same version."""

    client_id: str
    _: KW_ONLY
    request_timeout_ms: int = 30000
    faults: FaultInjector | None = None
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    connect_timeout_ms: int = 10000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    rng: random.Random = field(default_factory=random.Random)  # the reconnect backoff's jitter
    _connections: dict[Address, _ClientConnection] = field(default_factory=dict, init=False)
    _connecting: dict[Address, asyncio.Task[_ClientConnection]] = field(
        default_factory=dict, init=False
    )
    _backoff: dict[Address, _Backoff] = field(default_factory=dict, init=False)
    _closed: bool = field(default=False, init=False)

    async def request(
        self,
        address: Address | str,
        body: Any,
        *,
        timeout_ms: int | None = None,
        dest_node_id: int | None = None,
        decode_in_thread: bool = False,
        encode_in_thread: bool = False,
    ) -> Any:
        """Send the kio request `body` to `address`; its kio response, error codes and all.
        `decode_in_thread`: the response is decoded in a worker thread, not on the loop (a
        response the caller knows to be big in entities, as a Fetch answer naming thousands
        of partitions: kio decodes one in about 20 us; the interpreter's switch interval
        then shares the CPU with the loop rather than the loop waiting; issue 35).
        `encode_in_thread`: the request is encoded in a worker thread (a Fetch naming
        thousands of partitions)."""
        addr = parse_address(address)
        timeout_s = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self.faults is not None and dest_node_id is not None:
            await self._apply_outbound_faults(dest_node_id, addr, timeout_s, deadline)
        conn = self._connections.get(addr)
        if conn is None or conn.closed:
            conn = await self._connection(addr, deadline)
        remaining_s = deadline - loop.time()
        if remaining_s <= 0:
            raise KafkaError(
                Errors.REQUEST_TIMED_OUT, f"no time left to send to {format_address(addr)}"
            )
        return await conn.call(
            body, self.client_id, remaining_s,
            decode_in_thread=decode_in_thread, encode_in_thread=encode_in_thread,
        )

    async def ready(self, address: Address | str, *, timeout_ms: int | None = None) -> None:
        """Kafka's NetworkClientUtils.awaitReady: return once a connection to `address` is
        up (made now, waiting out the reconnect backoff, if there is none), else raise as
        `request` does (NETWORK_EXCEPTION, REQUEST_TIMED_OUT). For a caller whose request
        costs to build: it asks first, and builds nothing for a peer that is down."""
        addr = parse_address(address)
        conn = self._connections.get(addr)
        if conn is not None and not conn.closed:
            return
        timeout_s = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        await self._connection(addr, asyncio.get_running_loop().time() + timeout_s)

    async def send(self, address: Address | str, body: Any, *, timeout_ms: int | None = None) -> None:
        """Send a request that gets no response (Kafka's Produce with acks=0): written once the
        connection is up; a connect failure raises as `request` does."""
        addr = parse_address(address)
        timeout_s = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        deadline = asyncio.get_running_loop().time() + timeout_s
        conn = self._connections.get(addr)
        if conn is None or conn.closed:
            conn = await self._connection(addr, deadline)
        conn.send(body, self.client_id)

    async def close(self) -> None:
        """Close every connection; pending requests fail with NETWORK_EXCEPTION."""
        self._closed = True
        await cancel_and_wait(*self._connecting.values())
        for conn in list(self._connections.values()):
            conn.close()
        self._connections.clear()
        # Let connection_lost run so waiters see NETWORK_EXCEPTION before close() returns.
        await asyncio.sleep(0)

    def disconnect(self, address: Address | str) -> None:
        """Drop the connection to one address (the next request reconnects)."""
        conn = self._connections.pop(parse_address(address), None)
        if conn is not None:
            conn.close()

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
                f"request to node {dest_node_id} at {format_address(addr)} dropped by the fault "
                f"layer; no response in {int(timeout_s * 1000)} ms",
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
                        f"connection to {format_address(addr)} failed {backoff.failures} "
                        "time(s); in reconnect backoff",
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
                Errors.REQUEST_TIMED_OUT, f"connecting to {format_address(addr)} timed out"
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
            backoff_ms *= self.rng.uniform(0.8, 1.2)
            self._backoff[addr] = _Backoff(failures, loop.time() + backoff_ms / 1000)
            logger.debug("Connect to %s failed (%s); backoff %.0f ms", addr, e, backoff_ms)
            raise KafkaError(
                Errors.NETWORK_EXCEPTION,
                f"cannot connect to {format_address(addr)}: {e or type(e).__name__}",
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
