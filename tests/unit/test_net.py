"""RpcServer, RpcClient and the fault layer over real sockets on 127.0.0.1 (ephemeral ports)."""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import msgpack
import pytest

from cluster.net import loop as net_loop
from cluster.net.client import RpcClient, parse_address
from cluster.net.server import RequestContext, RpcServer, client_id_for_node, source_node_id_of
from cluster.protocol.api_keys import ApiKey
from cluster.protocol.errors import Errors, KafkaError
from cluster.protocol.frame import FrameDecoder, decode_response, encode_request
from cluster.protocol.registry import Registry
from kafkawire.faults import FaultInjector

CLUSTER_ID = "test-cluster-AAAAAAAAAA"
SERVER_NODE_ID = 1


@dataclass(frozen=True, slots=True)
class EchoRequest:
    text: str
    delay_ms: int = 0
    fail: str = ""
    payload: bytes = b""
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class EchoResponse:
    error_code: int = 0
    error_message: str = ""
    text: str = ""
    client_id: str = ""
    source_node_id: int | None = None


@dataclass(frozen=True, slots=True)
class OrphanRequest:
    value: int


@dataclass(frozen=True, slots=True)
class OrphanResponse:
    error_code: int = 0
    error_message: str = ""


def _server_registry() -> Registry:
    registry = Registry()
    registry.register(ApiKey.API_VERSIONS, EchoRequest, EchoResponse)
    return registry


def _client_registry() -> Registry:
    # The client also knows a key the server does not serve, to provoke UNSUPPORTED_VERSION.
    registry = _server_registry()
    registry.register(ApiKey.METADATA, OrphanRequest, OrphanResponse)
    return registry


async def echo_handler(api_key: ApiKey, request: EchoRequest, ctx: RequestContext) -> EchoResponse:
    assert api_key is ApiKey.API_VERSIONS
    if request.delay_ms:
        await asyncio.sleep(request.delay_ms / 1000)
    if request.fail == "kafka":
        raise KafkaError(Errors.NOT_CONTROLLER, "node 1 is not the active controller")
    if request.fail == "crash":
        raise RuntimeError("boom")
    if request.fail == "wrong-type":
        return OrphanResponse()  # type: ignore[return-value]
    return EchoResponse(
        text=request.text, client_id=ctx.client_id, source_node_id=ctx.source_node_id
    )


class Cluster:
    """One server and the means to make clients for it; everything is closed at teardown."""

    def __init__(self, max_frame_bytes: int = 1024 * 1024) -> None:
        self.server_faults = FaultInjector()
        self.max_frame_bytes = max_frame_bytes
        self.server = self._new_server(0)
        self.clients: list[RpcClient] = []
        self.port = 0

    def _new_server(self, port: int) -> RpcServer:
        return RpcServer(
            "127.0.0.1",
            port,
            echo_handler,  # type: ignore[arg-type]
            cluster_id=CLUSTER_ID,
            node_id=SERVER_NODE_ID,
            max_frame_bytes=self.max_frame_bytes,
            faults=self.server_faults,
            registry=_server_registry(),
        )

    async def start(self) -> None:
        self.port = await self.server.start()

    async def restart(self) -> None:
        self.server = self._new_server(self.port)
        assert await self.server.start() == self.port

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def client(self, client_id: str = "node-7", **kwargs: object) -> RpcClient:
        kwargs.setdefault("cluster_id", CLUSTER_ID)
        kwargs.setdefault("registry", _client_registry())
        kwargs.setdefault("rng", random.Random(5))
        client = RpcClient(client_id, **kwargs)  # type: ignore[arg-type]
        self.clients.append(client)
        return client

    async def close(self) -> None:
        for client in self.clients:
            await client.close()
        await self.server.stop()


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    c = Cluster()
    await c.start()
    try:
        yield c
    finally:
        await c.close()


async def _raw_exchange(port: int, data: bytes, timeout_s: float = 2.0) -> tuple[list, bytes]:
    """Send raw bytes; return the response frames decoded and whatever followed until EOF."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        received = bytearray()
        async with asyncio.timeout(timeout_s):
            while chunk := await reader.read(65536):
                received += chunk
        frames = [decode_response(p) for p in FrameDecoder().feed(bytes(received))]
        return frames, bytes(received)
    finally:
        writer.close()


async def _raw_request(port: int, body: dict, api_key: int = ApiKey.API_VERSIONS) -> dict:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(encode_request(api_key, 0, 42, "raw", body))
        await writer.drain()
        async with asyncio.timeout(2):
            size = int.from_bytes(await reader.readexactly(4), "big")
            correlation_id, response = decode_response(await reader.readexactly(size))
        assert correlation_id == 42
        return response
    finally:
        writer.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- basics -----------------------------------------------------------------------------------


async def test_round_trip_names_the_source_node(cluster: Cluster) -> None:
    client = cluster.client("node-7")
    response = await client.request(cluster.address, EchoRequest("hello"))
    assert response == EchoResponse(text="hello", client_id="node-7", source_node_id=7)
    admin = cluster.client("minikraft-cli", cluster_id=None)
    response = await admin.request(f"127.0.0.1:{cluster.port}", EchoRequest("hi"))
    assert response.error_code == 0 and response.source_node_id is None


def test_client_ids_and_addresses_parse() -> None:
    assert client_id_for_node(12) == "node-12"
    assert source_node_id_of("node-12") == 12
    assert source_node_id_of("node-x") is None and source_node_id_of("xnode-1") is None
    assert parse_address("localhost:9092") == ("localhost", 9092)
    assert parse_address("[::1]:9093") == ("::1", 9093)
    assert parse_address(("h", 1)) == ("h", 1)
    with pytest.raises(ValueError):
        parse_address("no-port")


async def test_200_pipelined_requests_share_one_connection_and_match(cluster: Cluster) -> None:
    client = cluster.client()
    rng = random.Random(7)
    requests = [EchoRequest(f"r{i}", delay_ms=rng.randrange(0, 30)) for i in range(200)]
    responses = await asyncio.gather(*(client.request(cluster.address, r) for r in requests))
    assert [r.text for r in responses] == [r.text for r in requests]
    assert client.connected_addresses() == [cluster.address]
    assert len(cluster.server.connections) == 1


async def test_pipelined_requests_are_served_concurrently(cluster: Cluster) -> None:
    client = cluster.client()
    start = time.monotonic()
    responses = await asyncio.gather(
        *(client.request(cluster.address, EchoRequest(str(i), delay_ms=200)) for i in range(20))
    )
    elapsed_s = time.monotonic() - start
    assert [r.text for r in responses] == [str(i) for i in range(20)]
    assert elapsed_s < 2.0  # serially this would take 4 s


async def test_request_timeout_then_the_connection_still_works(cluster: Cluster) -> None:
    client = cluster.client()
    with pytest.raises(KafkaError) as info:
        await client.request(cluster.address, EchoRequest("slow", delay_ms=400), timeout_ms=50)
    assert info.value.error is Errors.REQUEST_TIMED_OUT
    response = await client.request(cluster.address, EchoRequest("fast"))
    assert response.text == "fast"
    await asyncio.sleep(0.45)  # the late answer arrives and is discarded
    assert (await client.request(cluster.address, EchoRequest("again"))).text == "again"


async def test_client_reconnects_after_server_restart(cluster: Cluster) -> None:
    client = cluster.client()
    assert (await client.request(cluster.address, EchoRequest("before"))).text == "before"
    await cluster.server.stop()
    with pytest.raises(KafkaError) as info:
        await client.request(cluster.address, EchoRequest("down"), timeout_ms=1000)
    assert info.value.error is Errors.NETWORK_EXCEPTION
    await cluster.restart()
    text = None
    for _ in range(40):  # bounded: backoff is at most 1 s and the server is already up
        try:
            text = (await client.request(cluster.address, EchoRequest("after"))).text
            break
        except KafkaError as e:
            assert e.error is Errors.NETWORK_EXCEPTION
            await asyncio.sleep(0.05)
    assert text == "after"


async def test_reconnect_backs_off_exponentially() -> None:
    port = _closed_port()
    client = RpcClient("node-7", cluster_id=None, registry=_client_registry(), rng=random.Random(1))
    try:
        elapsed = []
        for _ in range(4):
            start = time.monotonic()
            with pytest.raises(KafkaError) as info:
                await client.request(("127.0.0.1", port), EchoRequest("x"), timeout_ms=3000)
            assert info.value.error is Errors.NETWORK_EXCEPTION
            elapsed.append(time.monotonic() - start)
        # First attempt fails at once; then waits of ~50, ~100, ~200 ms (+-20% jitter).
        assert elapsed[1] >= 0.035 and elapsed[2] >= 0.075 and elapsed[3] >= 0.15
        assert elapsed[3] > elapsed[1]
    finally:
        await client.close()


async def test_backoff_longer_than_the_timeout_fails_fast_with_network_exception() -> None:
    port = _closed_port()
    client = RpcClient(
        "node-7",
        cluster_id=None,
        registry=_client_registry(),
        reconnect_backoff_ms=1000,
        rng=random.Random(1),
    )
    try:
        with pytest.raises(KafkaError):
            await client.request(("127.0.0.1", port), EchoRequest("x"))
        start = time.monotonic()
        with pytest.raises(KafkaError) as info:
            await client.request(("127.0.0.1", port), EchoRequest("x"), timeout_ms=100)
        assert info.value.error is Errors.NETWORK_EXCEPTION
        assert "backoff" in info.value.message
        assert time.monotonic() - start < 0.5
    finally:
        await client.close()


async def test_close_fails_pending_requests(cluster: Cluster) -> None:
    client = cluster.client()
    pending = asyncio.ensure_future(client.request(cluster.address, EchoRequest("x", delay_ms=500)))
    await asyncio.sleep(0.05)
    await client.close()
    with pytest.raises(KafkaError) as info:
        await pending
    assert info.value.error is Errors.NETWORK_EXCEPTION
    with pytest.raises(KafkaError) as info:
        await client.request(cluster.address, EchoRequest("after close"))
    assert info.value.error is Errors.NETWORK_EXCEPTION


# -- error responses --------------------------------------------------------------------------


async def test_unknown_api_key_gets_unsupported_version(cluster: Cluster) -> None:
    client = cluster.client()
    response = await client.request(cluster.address, OrphanRequest(3))
    assert isinstance(response, OrphanResponse)
    assert response.error_code == Errors.UNSUPPORTED_VERSION
    assert "api key 3" in response.error_message
    raw = await _raw_request(cluster.port, {}, api_key=4242)
    assert raw["error_code"] == Errors.UNSUPPORTED_VERSION


async def test_newer_api_version_than_registered_is_unsupported(cluster: Cluster) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", cluster.port)
    try:
        writer.write(encode_request(ApiKey.API_VERSIONS, 5, 1, "raw", {"text": "v5"}))
        size = int.from_bytes(await reader.readexactly(4), "big")
        _, body = decode_response(await reader.readexactly(size))
    finally:
        writer.close()
    assert body["error_code"] == Errors.UNSUPPORTED_VERSION


async def test_wrong_field_type_gets_invalid_request_naming_the_field(cluster: Cluster) -> None:
    body = await _raw_request(cluster.port, {"text": "ok", "delay_ms": True})
    assert body["error_code"] == Errors.INVALID_REQUEST
    assert "delay_ms" in body["error_message"]
    body = await _raw_request(cluster.port, {"delay_ms": 1})
    assert body["error_code"] == Errors.INVALID_REQUEST
    assert "text" in body["error_message"] and "missing" in body["error_message"]


async def test_cluster_id_mismatch_is_refused(cluster: Cluster) -> None:
    stranger = cluster.client(cluster_id="another-cluster")
    response = await stranger.request(cluster.address, EchoRequest("x"))
    assert response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    assert response.text == ""
    own = cluster.client()
    assert (await own.request(cluster.address, EchoRequest("x"))).error_code == 0
    body = await _raw_request(cluster.port, {"text": "no cluster id"})
    assert body["error_code"] == 0 and body["text"] == "no cluster id"


async def test_handler_errors_become_error_responses(cluster: Cluster) -> None:
    client = cluster.client()
    response = await client.request(cluster.address, EchoRequest("x", fail="kafka"))
    assert response.error_code == Errors.NOT_CONTROLLER
    assert response.error_message == "node 1 is not the active controller"
    response = await client.request(cluster.address, EchoRequest("x", fail="crash"))
    assert response.error_code == Errors.UNKNOWN_SERVER_ERROR
    assert "boom" in response.error_message
    response = await client.request(cluster.address, EchoRequest("x", fail="wrong-type"))
    assert response.error_code == Errors.UNKNOWN_SERVER_ERROR
    assert (await client.request(cluster.address, EchoRequest("alive"))).text == "alive"


async def test_oversize_frame_gets_message_too_large_and_server_keeps_serving() -> None:
    small = Cluster(max_frame_bytes=1024)
    await small.start()
    try:
        frames, _ = await _raw_exchange(small.port, (10_000_000).to_bytes(4, "big") + b"xx")
        assert len(frames) == 1
        correlation_id, body = frames[0]
        assert correlation_id == -1
        assert body["error_code"] == Errors.MESSAGE_TOO_LARGE  # and then EOF: the loop ended
        client = small.client()
        with pytest.raises(KafkaError) as info:
            await client.request(small.address, EchoRequest("big", payload=b"\x00" * 4096))
        assert info.value.error is Errors.MESSAGE_TOO_LARGE
        assert (await client.request(small.address, EchoRequest("small"))).text == "small"
    finally:
        await small.close()


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x03\xc1\xc1\xc1",  # not msgpack
        b"\x00\x00\x00\x02\x91\x01",  # msgpack, but not a request array
        b"\x00\x00\x00\x00",  # an empty frame
    ],
)
async def test_garbage_closes_the_connection_and_server_keeps_serving(
    cluster: Cluster, garbage: bytes
) -> None:
    frames, received = await _raw_exchange(cluster.port, garbage)
    assert frames == [] and received == b""
    client = cluster.client()
    assert (await client.request(cluster.address, EchoRequest("still here"))).text == "still here"


async def test_malformed_msgpack_after_a_valid_request_still_answers_the_first() -> None:
    c = Cluster()
    await c.start()
    try:
        good = encode_request(ApiKey.API_VERSIONS, 0, 9, "raw", {"text": "first"})
        reader, writer = await asyncio.open_connection("127.0.0.1", c.port)
        writer.write(good)
        size = int.from_bytes(await reader.readexactly(4), "big")
        assert decode_response(await reader.readexactly(size)) == (
            9,
            {
                "error_code": 0,
                "error_message": "",
                "text": "first",
                "client_id": "raw",
                "source_node_id": None,
            },
        )
        writer.write(b"\x00\x00\x00\x01\xc1")
        async with asyncio.timeout(2):
            assert await reader.read() == b""
        writer.close()
    finally:
        await c.close()


# -- fault layer ------------------------------------------------------------------------------


async def test_outbound_drop_times_out_only_requests_to_that_node(cluster: Cluster) -> None:
    faults = FaultInjector()
    client = cluster.client(faults=faults)
    faults.drop(SERVER_NODE_ID)
    with pytest.raises(KafkaError) as info:
        await client.request(
            cluster.address, EchoRequest("x"), timeout_ms=100, dest_node_id=SERVER_NODE_ID
        )
    assert info.value.error is Errors.REQUEST_TIMED_OUT
    assert faults.dropped_outbound_count == 1
    # A request to another node id, or without one, is untouched.
    assert (await client.request(cluster.address, EchoRequest("y"), dest_node_id=2)).text == "y"
    assert (await client.request(cluster.address, EchoRequest("z"))).text == "z"
    faults.heal()
    response = await client.request(cluster.address, EchoRequest("h"), dest_node_id=1)
    assert response.text == "h"


async def test_inbound_drop_and_partition_ignore_requests_from_those_nodes(
    cluster: Cluster,
) -> None:
    node7 = cluster.client("node-7")
    node8 = cluster.client("node-8")
    cluster.server_faults.drop(7, direction="inbound")
    with pytest.raises(KafkaError) as info:
        await node7.request(cluster.address, EchoRequest("x"), timeout_ms=100)
    assert info.value.error is Errors.REQUEST_TIMED_OUT
    assert (await node8.request(cluster.address, EchoRequest("8"))).text == "8"
    cluster.server_faults.heal()
    assert (await node7.request(cluster.address, EchoRequest("7"))).text == "7"
    cluster.server_faults.partition([7, 8])
    for client in (node7, node8):
        with pytest.raises(KafkaError) as info:
            await client.request(cluster.address, EchoRequest("x"), timeout_ms=100)
        assert info.value.error is Errors.REQUEST_TIMED_OUT
    assert cluster.server_faults.dropped_inbound_count == 3
    cluster.server_faults.heal([8])
    assert (await node8.request(cluster.address, EchoRequest("8"))).text == "8"
    with pytest.raises(KafkaError):
        await node7.request(cluster.address, EchoRequest("x"), timeout_ms=100)


async def test_delay_holds_requests_in_both_directions(cluster: Cluster) -> None:
    faults = FaultInjector()
    client = cluster.client("node-7", faults=faults)
    faults.delay(SERVER_NODE_ID, 150)
    start = time.monotonic()
    await client.request(cluster.address, EchoRequest("x"), dest_node_id=SERVER_NODE_ID)
    assert time.monotonic() - start >= 0.14
    with pytest.raises(KafkaError) as info:
        await client.request(cluster.address, EchoRequest("x"), timeout_ms=100, dest_node_id=1)
    assert info.value.error is Errors.REQUEST_TIMED_OUT
    faults.heal()
    cluster.server_faults.delay(7, 150)
    start = time.monotonic()
    await client.request(cluster.address, EchoRequest("x"))
    assert time.monotonic() - start >= 0.14
    cluster.server_faults.delay(7, 0)
    start = time.monotonic()
    await client.request(cluster.address, EchoRequest("x"))
    assert time.monotonic() - start < 0.14


def test_fault_rules_round_trip_through_json() -> None:
    faults = FaultInjector()
    assert not faults.active
    faults.drop(2)
    faults.drop(3, direction="outbound")
    faults.partition([4, 5])
    faults.delay(6, 25)
    rules = faults.rules()
    assert rules == {
        "drop_outbound": [2, 3],
        "drop_inbound": [2],
        "partition": [4, 5],
        "delay_ms": {"6": 25},
    }
    other = FaultInjector()
    other.apply_json(rules)
    assert other.rules() == rules
    assert other.drops_outbound(3) and not other.drops_inbound(3)
    assert other.drops_inbound(4) and other.drops_outbound(5)
    assert other.delay_ms(6) == 25 and other.delay_ms(None) == 0
    other.apply_json({"drop": [9]})
    assert other.rules()["drop_outbound"] == [9] and other.rules()["partition"] == []
    bad_documents: list[dict[str, object]] = [
        {"drop": 1},
        {"delay_ms": {"1": -5}},
        {"typo": []},
        {"partition": ["x"]},
    ]
    for bad in bad_documents:
        with pytest.raises(ValueError):
            other.apply_json(bad)
    assert other.rules()["drop_inbound"] == [9]  # a rejected document changes nothing
    with pytest.raises(ValueError):
        faults.drop(1, direction="sideways")
    faults.heal()
    assert not faults.active


# -- latency, for the report (printed, not asserted on time) ----------------------------------


async def _measure_round_trips(n: int) -> float:
    server = RpcServer(
        "127.0.0.1",
        0,
        echo_handler,
        cluster_id=CLUSTER_ID,
        node_id=1,  # type: ignore[arg-type]
        registry=_server_registry(),
    )
    port = await server.start()
    client = RpcClient("node-2", cluster_id=CLUSTER_ID, registry=_client_registry())
    try:
        request = EchoRequest("ping")
        await client.request(("127.0.0.1", port), request)
        start = time.perf_counter()
        for _ in range(n):
            response = await client.request(("127.0.0.1", port), request)
        assert response.text == "ping"
        return (time.perf_counter() - start) / n * 1e6
    finally:
        await client.close()
        await server.stop()


async def test_round_trip_latency_asyncio() -> None:
    latency_us = await _measure_round_trips(500)
    print(f"\nRPC round trip over loopback (asyncio loop): {latency_us:.0f} us")
    assert latency_us > 0


def test_round_trip_latency_uvloop() -> None:
    async def main() -> tuple[str, float]:
        return type(asyncio.get_running_loop()).__module__, await _measure_round_trips(500)

    loop_module, latency_us = net_loop.run(main())
    print(f"\nRPC round trip over loopback ({loop_module}): {latency_us:.0f} us")
    assert loop_module.startswith("uvloop")


def test_msgpack_frames_carry_int_map_keys() -> None:
    # strict_map_key=False is what lets dict[int, T] fields cross the wire.
    payload = msgpack.packb([1, {3: {"a": 1}}], use_bin_type=True)
    frame = len(payload).to_bytes(4, "big") + payload
    (decoded,) = list(FrameDecoder().feed(frame))
    assert decode_response(decoded) == (1, {3: {"a": 1}})


async def test_close_during_connect_fails_waiters_with_network_exception() -> None:
    # A listener that never accepts keeps the connect pending long enough to close mid-way.
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(0)
    client = RpcClient("node-7", cluster_id=None, registry=_client_registry())
    try:
        address = blackhole.getsockname()
        pending = asyncio.ensure_future(client.request(address, EchoRequest("x")))
        await asyncio.sleep(0)
        await client.close()
        with pytest.raises(KafkaError) as info:
            await pending
        assert info.value.error is Errors.NETWORK_EXCEPTION
    finally:
        blackhole.close()
