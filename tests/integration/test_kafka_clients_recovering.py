"""KIP-704 seen by real Kafka clients: while an uncleanly elected leader is RECOVERING, Produce,
Fetch and ListOffsets on Kafka's protocol get NOT_LEADER_OR_FOLLOWER (rule 21); a librdkafka
producer that sends meanwhile retries by itself and succeeds once the partition is RECOVERED.

Slow (a cluster of its own, two brokers killed, an unclean election): `make test-slow`.
"""

from __future__ import annotations

import datetime
import signal
from collections.abc import Callable
from typing import Any

import pytest

from cluster.launch.local_cluster import LocalCluster
from kafkawire.errors import Errors
from kafkawire.messages import decode_response, encode_request
from tests.integration.test_broker_processes import broker, restart
from tests.integration.test_broker_recovery_processes import (
    clusters,  # noqa: F401  (the fixture)
    create_topic,
    set_faults,
    wait_describe,
)
from tests.integration.test_kafka_clients import _connect, _produce_request, _read_frame

confluent_kafka = pytest.importorskip("confluent_kafka", reason="dev extra: confluent-kafka")

pytestmark = pytest.mark.slow


def _fetch_request(
    topic: str,
    partitions: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    isolation_level: int = 1,
) -> Any:
    """A consumer's Fetch v12 from offset 0 of partitions 0..partitions-1, no wait."""
    from kio.schema.fetch.v12 import request as fetch_v12

    return fetch_v12.FetchRequest(
        replica_id=-1,  # type: ignore[arg-type]
        max_wait=datetime.timedelta(0),  # type: ignore[arg-type]
        min_bytes=1,  # type: ignore[arg-type]
        max_bytes=max_bytes,  # type: ignore[arg-type]
        isolation_level=isolation_level,  # type: ignore[arg-type]
        session_id=0,  # type: ignore[arg-type]
        session_epoch=-1,  # type: ignore[arg-type]
        topics=(
            fetch_v12.FetchTopic(
                topic=topic,  # type: ignore[arg-type]
                partitions=tuple(
                    fetch_v12.FetchPartition(
                        partition=p,  # type: ignore[arg-type]
                        current_leader_epoch=-1,  # type: ignore[arg-type]
                        fetch_offset=0,  # type: ignore[arg-type]
                        last_fetched_epoch=-1,  # type: ignore[arg-type]
                        log_start_offset=-1,  # type: ignore[arg-type]
                        partition_max_bytes=partition_max_bytes,  # type: ignore[arg-type]
                    )
                    for p in range(partitions)
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def _list_offsets_request(topic: str) -> Any:
    from kio.schema.list_offsets.v7 import request as list_offsets_v7

    return list_offsets_v7.ListOffsetsRequest(
        replica_id=-1,  # type: ignore[arg-type]
        isolation_level=1,  # type: ignore[arg-type]
        topics=(
            list_offsets_v7.ListOffsetsTopic(
                name=topic,  # type: ignore[arg-type]
                partitions=(
                    list_offsets_v7.ListOffsetsPartition(
                        partition_index=0,  # type: ignore[arg-type]
                        current_leader_epoch=-1,  # type: ignore[arg-type]
                        timestamp=-1,  # type: ignore[arg-type]
                    ),
                ),
            ),
        ),
    )


def _ask(address: str, request: Any) -> Any:
    with _connect(address) as sock:
        sock.sendall(encode_request(request, 21, "kip704"))
        payload = _read_frame(sock)
    assert payload is not None
    return decode_response(payload, int(request.__api_key__), int(request.__version__))[1]


def _produce(bs: str, acks: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bs, "acks": acks})
    failed: list[Any] = []
    for value in values:
        producer.produce(
            "kip704", value, on_delivery=lambda e, _m: failed.append(e) if e else None
        )
    assert producer.flush(30) == 0
    assert failed == []


def test_clients_get_not_leader_while_recovering_and_succeed_once_recovered(
    clusters: Callable[[dict[str, str]], LocalCluster],  # noqa: F811
) -> None:
    c = clusters(
        {
            "broker.session.timeout.ms": "8000",
            "controller.quorum.request.timeout.ms": "6000",
            "controller.quorum.fetch.timeout.ms": "8000",
        }
    )
    create_topic(c, "kip704", "unclean.leader.election.enable=true")
    bs = c.bootstrap_server
    _produce(bs, "all", [b"before-%d" % i for i in range(10)])
    state = wait_describe(c, "kip704", lambda p: len(p["isr"]) == 3, 30)
    leader = state["leader"]
    stale, other = [b for b in (101, 102, 103) if b != leader]
    set_faults(broker(c, leader), {"drop_inbound": [stale]})
    _produce(bs, "1", [b"only-old-isr-%d" % i for i in range(3)])
    wait_describe(c, "kip704", lambda p: sorted(p["isr"]) == sorted([leader, other]), 30)

    # The new leader's requests to the controllers are held 1.5 s: RECOVERING lasts to probe.
    for controller in c.controllers:
        set_faults(controller, {"delay_ms": {str(stale): 1500}})
    for broker_id in (leader, other):
        c.kill(broker(c, broker_id), signal.SIGKILL)
    wait_describe(
        c, "kip704",
        lambda p: p["leader"] == stale and p["leader_recovery_state"] == "RECOVERING", 40,
    )
    address = broker(c, stale).address
    produced = _ask(address, _produce_request("kip704", b"", 1))
    fetched = _ask(address, _fetch_request("kip704"))
    listed = _ask(address, _list_offsets_request("kip704"))
    not_leader = Errors.NOT_LEADER_OR_FOLLOWER
    # An empty record set is refused for the partition state first (rule 21 before validation).
    assert produced.responses[0].partition_responses[0].error_code == not_leader
    assert fetched.responses[0].partitions[0].error_code == not_leader
    assert listed.topics[0].partitions[0].error_code == not_leader

    # librdkafka retries NOT_LEADER_OR_FOLLOWER by itself: delivered once RECOVERED.
    _produce(bs, "1", [b"during-recovery"])
    recovered = wait_describe(
        c, "kip704", lambda p: p["leader_recovery_state"] == "RECOVERED", 30
    )
    assert recovered["leader"] == stale
    for controller in c.controllers:
        set_faults(controller, {})
    # Rule 20: with ISR [stale] below min ISR 2 the record is acked (acks=1) but invisible
    # until the old ISR members rejoin and the HWM passes it.
    for broker_id in (leader, other):
        restart(c, broker(c, broker_id))
    wait_describe(c, "kip704", lambda p: sorted(p["isr"]) == [101, 102, 103], 60)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False}
    )
    values: list[bytes] = []
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition("kip704", 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        for _attempt in range(30):
            values += [m.value() for m in consumer.consume(100, timeout=1) if m.error() is None]
            if b"during-recovery" in values:
                break
    finally:
        consumer.close()
    assert b"during-recovery" in values
    assert [v for v in values if v.startswith(b"before-")] == [b"before-%d" % i for i in range(10)]
