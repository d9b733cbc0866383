"""One client connection speaking Kafka's wire protocol on a node's listener.

Requests are served one at a time, in order, and answered in order, as a Kafka broker does (it
mutes a channel until the response is sent): clients such as kafka-python match responses to
requests by position. ApiVersions of a version above ours is answered with v0,
UNSUPPORTED_VERSION and our table (KIP-511); an unknown api key, an unsupported version of any
other api, an undecodable frame or an oversize frame closes this connection only, as Kafka does
(ARCHITECTURE.md "Wire protocol"). acks=0 produce gets no response (the handler returns None).

A request from another node (client id `node-<id>`) passes the fault layer first: a dropped one
is never answered (the caller times out, as on a lossy network), a delayed one waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import VersionRange, api_versions_response
from kafkawire.client import source_node_id_of
from kafkawire.errors import Errors
from kafkawire.faults import FaultInjector
from kafkawire.framing import FrameDecoder, FrameTooLargeError
from kafkawire.messages import (
    KafkaRequest,
    UndecodableRequestError,
    decode_request,
    encode_response,
    peek_header,
)

logger = logging.getLogger(__name__)

MAX_QUEUED_REQUESTS = 100  # then reading pauses: a client pipelining without bound waits
# A request frame this big is decoded, and its answer encoded, in a worker thread rather than in
# one stretch on the loop (the interpreter's switch interval then shares the CPU with the loop):
# a follower's Fetch naming the 5,000 new partitions of a create is about 165 KB (33 bytes a
# partition), 25 ms of kio decoding, and its answer names them all again; 32 KiB is about the
# 1,000 partitions from which the follower builds it off the loop (issue 35). Not a Produce: its
# records are bytes, cheap to decode, and its latency would pay the thread hop.
IN_THREAD_FRAME_BYTES = 32 * 1024


@dataclass(frozen=True, slots=True)
class KafkaRequestContext:
    peer: tuple[str, int] | None
    client_id: str | None = None
    source_node_id: int | None = None  # the calling node, when its client id says node-<id>
    # The listener the connection came in on (Kafka's request.context.listenerName): Metadata,
    # DescribeCluster and FindCoordinator answer with the brokers' endpoints on that listener.
    listener_name: str | None = None


class KafkaService:
    """What a node serves on Kafka's protocol: its ApiVersions table and one handler."""

    def __init__(
        self,
        api_versions: Mapping[ApiKey, VersionRange],
        handle: Callable[[KafkaRequest, KafkaRequestContext], Awaitable[Any | None]],
    ) -> None:
        self.api_versions = api_versions
        self.handle = handle


class KafkaConnection:
    """Kafka-protocol side of one accepted connection; fed bytes by the listener's Protocol."""

    def __init__(
        self,
        transport: asyncio.Transport,
        service: KafkaService,
        max_frame_bytes: int,
        peer: tuple[str, int] | None,
        faults: FaultInjector | None = None,
        listener_name: str | None = None,
    ) -> None:
        self._transport = transport
        self._faults = faults
        self._service = service
        self._decoder = FrameDecoder(max_frame_bytes)
        self._ctx = KafkaRequestContext(peer, listener_name=listener_name)
        self._queue: asyncio.Queue[KafkaRequest | _Immediate | _Undecoded] = asyncio.Queue()
        self._paused = False
        self._worker: asyncio.Task[None] = asyncio.get_running_loop().create_task(self._serve())
        self.closed = False

    @property
    def task(self) -> asyncio.Task[None]:
        return self._worker

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            for payload in self._decoder.feed(data):
                self._accept(payload)
                if self.closed:
                    return
        except FrameTooLargeError as exc:
            self.close(str(exc))

    def _accept(self, payload: bytes) -> None:
        table = self._service.api_versions
        try:
            api_key, version, correlation_id = peek_header(payload)
        except UndecodableRequestError as exc:
            self.close(str(exc))
            return
        if api_key == ApiKey.API_VERSIONS and version not in table[ApiKey.API_VERSIONS]:
            # KIP-511: answer in v0 with the error and our table; the body may be unparseable.
            response = api_versions_response(table, 0, Errors.UNSUPPORTED_VERSION)
            self._queue.put_nowait(_Immediate(response, correlation_id))
            return
        # ApiKey is an IntEnum: the table answers for a plain int key.
        versions = table.get(api_key)  # type: ignore[call-overload]
        if versions is None:
            self.close(f"unknown api key {api_key}")
            return
        if version not in versions:
            self.close(
                f"UNSUPPORTED_VERSION: {ApiKey(api_key).name} v{version} "
                f"(this listener serves {table[ApiKey(api_key)]})"
            )
            return
        item: KafkaRequest | _Undecoded
        if len(payload) >= IN_THREAD_FRAME_BYTES and api_key != ApiKey.PRODUCE:
            item = _Undecoded(payload)
        else:
            try:
                item = decode_request(payload)
            except UndecodableRequestError as exc:
                self.close(str(exc))
                return
        self._queue.put_nowait(item)
        if self._queue.qsize() >= MAX_QUEUED_REQUESTS and not self._paused:
            self._paused = True
            self._transport.pause_reading()

    async def _serve(self) -> None:
        while not self.closed:
            item = await self._queue.get()
            if self._paused and self._queue.qsize() < MAX_QUEUED_REQUESTS // 2:
                self._paused = False
                with contextlib.suppress(RuntimeError):
                    self._transport.resume_reading()
            if isinstance(item, _Immediate):
                self._write(encode_response(item.body, item.correlation_id))
                continue
            in_thread = isinstance(item, _Undecoded)
            if isinstance(item, _Undecoded):
                try:
                    item = await asyncio.to_thread(decode_request, item.payload)
                except UndecodableRequestError as exc:
                    self.close(str(exc))
                    return
            header = item.header
            ctx = KafkaRequestContext(
                self._ctx.peer, header.client_id, source_node_id_of(header.client_id),
                self._ctx.listener_name,
            )
            faults = self._faults
            if faults is not None and ctx.source_node_id is not None:
                if faults.drops_inbound(ctx.source_node_id):
                    continue
                delay_ms = faults.delay_ms(ctx.source_node_id)
                if delay_ms:
                    await asyncio.sleep(delay_ms / 1000)
            try:
                response = await self._service.handle(item, ctx)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception(
                    "Kafka handler for api key %s v%s from %s failed; closing the connection",
                    header.api_key,
                    header.api_version,
                    header.client_id,
                )
                self.close("handler failed")
                return
            if response is None:
                continue  # acks=0: Kafka sends nothing back
            try:
                frame = (
                    await asyncio.to_thread(encode_response, response, header.correlation_id)
                    if in_thread
                    else encode_response(response, header.correlation_id)
                )
            except Exception:
                logger.exception("Cannot encode the response to api key %s", header.api_key)
                self.close("cannot encode response")
                return
            self._write(frame)

    def _write(self, frame: bytes) -> None:
        if not self._transport.is_closing():
            self._transport.write(frame)

    def close(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        logger.warning("Closing Kafka connection from %s: %s", self._ctx.peer, reason)
        self._transport.close()
        self._worker.cancel()

    def connection_lost(self) -> None:
        self.closed = True
        self._worker.cancel()


@dataclass(frozen=True, slots=True)
class _Undecoded:
    """A big request frame, decoded in a worker thread when its turn comes (in order)."""

    payload: bytes


@dataclass(frozen=True, slots=True)
class _Immediate:
    """A response decided at the frame (ApiVersions of an unknown version), queued in order."""

    body: Any
    correlation_id: int
