"""The Kafka-protocol client nodes and tools use (kafkawire.client) against a real listener:
kio entities in and out, matched by correlation id, the fault layer on both sides, and transport
failures as Kafka errors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.metadata.v1.request import MetadataRequest

from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import VersionRange
from kafkawire.client import KafkaClient, client_id_for_node, source_node_id_of
from kafkawire.connection import KafkaRequestContext
from kafkawire.entities import build
from kafkawire.errors import Errors, KafkaError
from kafkawire.faults import FaultInjector
from kafkawire.messages import response_schema
from kafkawire.router import KafkaRouter
from kafkawire.server import KafkaServer

_DC = DescribeClusterRequest(include_cluster_authorized_operations=False)
# The served fixture: a listener, its fault injector, and the node ids its callers named.
Served = tuple[KafkaServer, FaultInjector, list[int | None]]
TABLE = {ApiKey.API_VERSIONS: VersionRange(0, 4), ApiKey.DESCRIBE_CLUSTER: VersionRange(0, 0)}


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    callers: list[int | None] = []

    async def describe_cluster(_body: Any, version: int, ctx: KafkaRequestContext) -> Any:
        callers.append(ctx.source_node_id)
        return build(
            response_schema(int(ApiKey.DESCRIBE_CLUSTER), version),
            cluster_id="c-1",
            controller_id=7,
            brokers=(),
        )

    router = KafkaRouter(TABLE)
    router.route(ApiKey.DESCRIBE_CLUSTER, describe_cluster)
    faults = FaultInjector()
    server = KafkaServer("127.0.0.1", 0, router.service(), faults=faults)
    await server.start()
    try:
        yield server, faults, callers
    finally:
        await server.stop()


def test_node_client_ids_round_trip() -> None:
    assert source_node_id_of(client_id_for_node(12)) == 12
    assert source_node_id_of("kafka-python") is None and source_node_id_of(None) is None


async def test_requests_of_several_apis_share_one_connection(served: Served) -> None:
    server, _, callers = served
    client = KafkaClient(client_id_for_node(4))
    try:
        versions, cluster = await asyncio.gather(
            client.request(
                ("127.0.0.1", server.port),
                ApiVersionsRequest(client_software_name="t", client_software_version="1"),
            ),
            client.request(f"127.0.0.1:{server.port}", _DC),
        )
        assert sorted(int(a.api_key) for a in versions.api_keys) == [18, 60]
        assert cluster.cluster_id == "c-1" and int(cluster.controller_id) == 7
        assert callers == [4]
        assert len(client.connected_addresses()) == 1
    finally:
        await client.close()


async def test_an_unserved_api_closes_the_connection_as_network_exception(served: Served) -> None:
    server, _, _ = served
    client = KafkaClient("t")
    try:
        with pytest.raises(KafkaError) as err:
            await client.request(("127.0.0.1", server.port), MetadataRequest(topics=None))  # type: ignore[arg-type]
        assert err.value.error == Errors.NETWORK_EXCEPTION
        # The listener keeps serving: the next request reconnects and is answered.
        again = await client.request(("127.0.0.1", server.port), _DC)
        assert again.cluster_id == "c-1"
    finally:
        await client.close()


async def test_inbound_drop_times_out_and_outbound_drop_never_sends(served: Served) -> None:
    server, server_faults, callers = served
    server_faults.drop(4, "inbound")
    client_faults = FaultInjector()
    client = KafkaClient(client_id_for_node(4), faults=client_faults)
    try:
        with pytest.raises(KafkaError) as err:
            await client.request(
                ("127.0.0.1", server.port), _DC, timeout_ms=200
            )
        assert err.value.error == Errors.REQUEST_TIMED_OUT and callers == []
        server_faults.heal()
        client_faults.drop(1, "outbound")
        with pytest.raises(KafkaError) as err:
            await client.request(
                ("127.0.0.1", server.port), _DC, timeout_ms=200, dest_node_id=1
            )
        assert err.value.error == Errors.REQUEST_TIMED_OUT and callers == []
        client_faults.heal()
        ok = await client.request(("127.0.0.1", server.port), _DC, dest_node_id=1)
        assert ok.cluster_id == "c-1" and callers == [4]
    finally:
        await client.close()


async def test_a_refused_connect_is_network_exception() -> None:
    client = KafkaClient("t", connect_timeout_ms=500)
    try:
        with pytest.raises(KafkaError) as err:
            await client.request(("127.0.0.1", 1), _DC, timeout_ms=500)
        assert err.value.error == Errors.NETWORK_EXCEPTION
    finally:
        await client.close()


async def test_ready_connects_first_and_raises_as_a_request_would(served: Served) -> None:
    """Kafka's awaitReady (issue 35: a fetcher builds its request only once connected): a
    refused connect is NETWORK_EXCEPTION; a listening peer is connected once, and the
    request that follows uses that connection."""
    server, _, callers = served
    client = KafkaClient("t", connect_timeout_ms=500)
    try:
        with pytest.raises(KafkaError) as err:
            await client.ready(("127.0.0.1", 1), timeout_ms=500)
        assert err.value.error == Errors.NETWORK_EXCEPTION
        await client.ready(f"127.0.0.1:{server.port}")
        assert client.connected_addresses() == [("127.0.0.1", server.port)]
        await client.ready(f"127.0.0.1:{server.port}")
        ok = await client.request(("127.0.0.1", server.port), _DC)
        assert ok.cluster_id == "c-1" and callers == [None]
        assert client.connected_addresses() == [("127.0.0.1", server.port)]
    finally:
        await client.close()


def test_the_router_refuses_an_unrouted_advertised_key() -> None:
    with pytest.raises(RuntimeError, match="DESCRIBE_CLUSTER"):
        KafkaRouter(TABLE).service()
    with pytest.raises(ValueError, match="not in this listener"):
        KafkaRouter(TABLE).route(ApiKey.METADATA, _never)


async def _never(_body: Any, _version: int, _ctx: KafkaRequestContext) -> Any:
    raise AssertionError("not routed")


async def test_send_writes_a_request_that_gets_no_response_acks_0(served: Served) -> None:
    """`send` (Produce with acks=0) writes without waiting; the served handler sees it and the
    connection's next request is matched to its own answer."""
    server, _, callers = served
    client = KafkaClient(client_id_for_node(5))
    try:
        await client.send(("127.0.0.1", server.port), _DC)
        answer = await client.request(("127.0.0.1", server.port), _DC)
        assert answer.cluster_id == "c-1" and callers == [5, 5]
        assert len(client.connected_addresses()) == 1
    finally:
        await client.close()


async def test_a_response_asked_to_be_decoded_in_a_thread_is_not_decoded_on_the_loop(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a Fetch answer naming thousands of partitions took kio 100 ms to decode on the
    loop; `decode_in_thread` decodes it in a worker thread, to the same entities. Others are
    decoded on the loop, as before."""
    from kafkawire import client as client_module

    threads: list[int] = []
    real = client_module.decode_response

    def decode(*args: Any) -> Any:
        threads.append(threading.get_ident())
        return real(*args)

    monkeypatch.setattr(client_module, "decode_response", decode)
    server, _, _ = served
    client = KafkaClient(client_id_for_node(4))
    try:
        inline = await client.request(("127.0.0.1", server.port), _DC)
        off_loop = await client.request(("127.0.0.1", server.port), _DC, decode_in_thread=True)
        assert off_loop == inline and off_loop.cluster_id == "c-1"
        assert threads[0] == threading.get_ident() != threads[1]
    finally:
        await client.close()


async def test_a_request_asked_to_be_encoded_in_a_thread_is_not_encoded_on_the_loop(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a follower's Fetch naming a create's 5,000 new partitions took kio 20-35 ms
    to build and encode on the loop; `encode_in_thread` encodes it in a worker thread, to the
    same frame. Others are encoded on the loop, as before."""
    from kafkawire import client as client_module

    threads: list[int] = []
    real = client_module.encode_request

    def encode(*args: Any) -> bytes:
        threads.append(threading.get_ident())
        return real(*args)

    monkeypatch.setattr(client_module, "encode_request", encode)
    server, _, _ = served
    client = KafkaClient(client_id_for_node(4))
    try:
        inline = await client.request(("127.0.0.1", server.port), _DC)
        off_loop = await client.request(("127.0.0.1", server.port), _DC, encode_in_thread=True)
        assert off_loop == inline and off_loop.cluster_id == "c-1"
        assert threads[0] == threading.get_ident() != threads[1]
    finally:
        await client.close()


async def test_a_big_request_is_decoded_and_answered_off_the_loop(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a leader decoded a follower's Fetch naming 5,000 new partitions (150 KB, 25
    ms of kio) and encoded its answer in one stretch on the loop. A request frame of
    IN_THREAD_FRAME_BYTES or more (every one here) is decoded, and its answer encoded, in a
    worker thread, in order with the connection's other requests."""
    from kafkawire import connection

    threads: dict[str, list[int]] = {"decode": [], "encode": []}
    real_decode, real_encode = connection.decode_request, connection.encode_response

    def decode(payload: bytes) -> Any:
        threads["decode"].append(threading.get_ident())
        return real_decode(payload)

    def encode(*args: Any) -> bytes:
        threads["encode"].append(threading.get_ident())
        return real_encode(*args)

    monkeypatch.setattr(connection, "decode_request", decode)
    monkeypatch.setattr(connection, "encode_response", encode)
    server, _, callers = served
    client = KafkaClient(client_id_for_node(4))
    try:
        inline = await client.request(("127.0.0.1", server.port), _DC)
        monkeypatch.setattr(connection, "IN_THREAD_FRAME_BYTES", 1)
        answers = await asyncio.gather(
            *(client.request(("127.0.0.1", server.port), _DC) for _ in range(3))
        )
        assert answers == [inline] * 3 and callers == [4] * 4
        loop_thread = threading.get_ident()
        assert threads["decode"][0] == threads["encode"][0] == loop_thread
        assert loop_thread not in threads["decode"][1:] + threads["encode"][1:]
    finally:
        await client.close()
