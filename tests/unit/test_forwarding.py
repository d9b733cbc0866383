"""kafkawire.forwarding against real listeners: the first answer from the node that can answer
(NOT_CONTROLLER from a standby and an unreachable address are passed over, round after round,
until the timeout), and which error codes mean "not me" for which API."""

from __future__ import annotations

import asyncio
import datetime
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.describe_quorum.v2 import response as dq
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta

from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import VersionRange
from kafkawire.client import KafkaClient
from kafkawire.connection import KafkaRequestContext
from kafkawire.entities import NO_THROTTLE, build, item_type
from kafkawire.errors import Errors, KafkaError
from kafkawire.forwarding import request_active, wrong_node
from kafkawire.messages import error_code, response_schema
from kafkawire.router import KafkaRouter
from kafkawire.server import KafkaServer

TABLE = {ApiKey.API_VERSIONS: VersionRange(0, 4), ApiKey.CREATE_PARTITIONS: VersionRange(0, 3)}
BODY = CreatePartitionsRequest(
    topics=(CreatePartitionsTopic(name=TopicName("t"), count=i32(2), assignments=None),),
    timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
    validate_only=False,
)


def _answer(error: Errors) -> Any:
    schema = response_schema(int(ApiKey.CREATE_PARTITIONS), 3)
    result = build(item_type(schema, "results"), name="t", error_code=error_code(error))
    return build(schema, throttle_time=NO_THROTTLE, results=(result,))


async def _serve(error: Errors, asked: list[Errors]) -> KafkaServer:
    async def create_partitions(_body: Any, _version: int, _ctx: KafkaRequestContext) -> Any:
        asked.append(error)
        return _answer(error)

    router = KafkaRouter(TABLE)
    router.route(ApiKey.CREATE_PARTITIONS, create_partitions)
    server = KafkaServer("127.0.0.1", 0, router.service())
    await server.start()
    return server


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def nodes() -> AsyncIterator[tuple[str, str, list[Errors]]]:
    asked: list[Errors] = []
    standby = await _serve(Errors.NOT_CONTROLLER, asked)
    active = await _serve(Errors.NONE, asked)
    try:
        yield f"127.0.0.1:{standby.port}", f"127.0.0.1:{active.port}", asked
    finally:
        await standby.stop()
        await active.stop()


async def test_the_active_controller_answers_past_a_gone_node_and_a_standby(
    nodes: tuple[str, str, list[Errors]],
) -> None:
    standby, active, asked = nodes
    gone = f"127.0.0.1:{_closed_port()}"
    client = KafkaClient("node-9")
    try:
        response = await request_active(
            client, lambda: [(gone, 3), (standby, 1), (active, 2)], BODY, timeout_ms=5000
        )
    finally:
        await client.close()
    assert Errors.of(int(response.results[0].error_code)) is Errors.NONE
    assert asked == [Errors.NOT_CONTROLLER, Errors.NONE]


async def test_a_controller_that_becomes_active_later_is_found_by_a_later_round(
    nodes: tuple[str, str, list[Errors]],
) -> None:
    standby, active, asked = nodes
    rounds: list[int] = []

    def candidates() -> list[tuple[str, int | None]]:
        rounds.append(1)  # the active one is learned only in the third round
        return [(standby, None)] + ([(active, None)] if len(rounds) >= 3 else [])

    client = KafkaClient("node-9")
    try:
        await request_active(client, candidates, BODY, timeout_ms=5000)
    finally:
        await client.close()
    assert len(rounds) == 3
    assert asked == [Errors.NOT_CONTROLLER] * 3 + [Errors.NONE]


async def test_only_standbys_time_out_with_not_controller(
    nodes: tuple[str, str, list[Errors]],
) -> None:
    standby, _, asked = nodes
    client = KafkaClient("node-9")
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(KafkaError) as info:
            await request_active(client, lambda: [(standby, None)], BODY, timeout_ms=400)
    finally:
        await client.close()
    assert info.value.error is Errors.NOT_CONTROLLER
    assert 0.3 <= loop.time() - started < 2.0
    assert len(asked) >= 2  # retried, bounded by the timeout


def _quorum(partition_error: Errors) -> Any:
    partition = build(
        dq.PartitionData,
        partition_index=0,
        error_code=error_code(partition_error),
        error_message=None,
        leader_id=-1,
        leader_epoch=0,
        high_watermark=0,
        current_voters=(),
        observers=(),
    )
    return build(
        dq.DescribeQuorumResponse,
        error_code=error_code(Errors.NONE),
        error_message=None,
        topics=(build(dq.TopicData, topic_name="__cluster_metadata", partitions=(partition,)),),
        nodes=(),
    )


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: _answer(Errors.NOT_CONTROLLER), Errors.NOT_CONTROLLER),
        (lambda: _answer(Errors.NONE), None),
        # Only the Raft APIs take NOT_LEADER_OR_FOLLOWER as "ask the leader".
        (lambda: _answer(Errors.NOT_LEADER_OR_FOLLOWER), None),
        (lambda: _quorum(Errors.NOT_LEADER_OR_FOLLOWER), Errors.NOT_LEADER_OR_FOLLOWER),
        (lambda: _quorum(Errors.NONE), None),
    ],
)
def test_which_answers_mean_ask_another_node(
    make: Callable[[], Any], expected: Errors | None
) -> None:
    assert wrong_node(make()) is expected
