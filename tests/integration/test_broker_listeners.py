"""Brokers with two listeners, as in docker compose (Kafka's INTERNAL/EXTERNAL pattern), on
127.0.0.1 processes: every request is answered with the brokers' endpoints on the listener it
came in on (Kafka's request.context.listenerName), so confluent-kafka bootstrapping from the
EXTERNAL listener is sent to EXTERNAL addresses only, for Metadata and for its group
coordinator, and the brokers replicate among themselves on INTERNAL
(inter.broker.listener.name). EXTERNAL is advertised as `localhost` and INTERNAL as 127.0.0.1,
so the answers show which listener they describe."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from cluster.launch.local_cluster import LocalCluster, free_ports
from cluster.launch.readiness import wait_until_ready


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, list[int]]]:
    c = LocalCluster.plan(tmp_path_factory.mktemp("listeners") / "c", controllers=1, brokers=2,
                          base_port=0)
    external = free_ports(len(c.brokers))
    for spec, port in zip(c.brokers, external, strict=True):
        spec.extra.update({
            "listeners": f"INTERNAL://127.0.0.1:{spec.port},EXTERNAL://127.0.0.1:{port}",
            "advertised.listeners": f"INTERNAL://127.0.0.1:{spec.port},"
                                    f"EXTERNAL://localhost:{port}",
            "listener.security.protocol.map":
                "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
        })
    c.format()
    c.start()
    try:
        asyncio.run(wait_until_ready(c, 40))
        yield c, external
    finally:
        c.stop()
        assert not c.running(), "processes left behind"


def _brokers(bootstrap: str) -> list[tuple[str, int]]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    return sorted((b.host, b.port) for b in metadata.brokers.values())


def test_metadata_names_brokers_on_the_listener_asked(
    cluster: tuple[LocalCluster, list[int]],
) -> None:
    c, external = cluster
    assert _brokers(f"127.0.0.1:{external[0]}") == [("localhost", p) for p in sorted(external)]
    internal = sorted(b.port for b in c.brokers)
    assert _brokers(c.brokers[0].address) == [("127.0.0.1", p) for p in internal]


def test_a_client_on_the_external_listener_writes_replicates_and_reads_as_a_group(
    cluster: tuple[LocalCluster, list[int]],
) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    _c, external = cluster
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in external)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics(
        [NewTopic("both", 2, 2, config={"min.insync.replicas": "2"})]
    )["both"].result(20)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    acked: list[str] = []
    for i in range(50):
        producer.produce("both", f"v{i}".encode(),
                         on_delivery=lambda e, m: acked.append(m.value().decode()) if e is None
                         else None)
    assert producer.flush(30) == 0
    assert len(acked) == 50  # acks=all at min ISR 2: the follower fetched on INTERNAL
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "external-readers",
                         "auto.offset.reset": "earliest"})
    read: set[str] = set()
    try:
        consumer.subscribe(["both"])
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                read.add(message.value().decode())
            if read == set(acked):
                break
        # Committed through the coordinator FindCoordinator named on EXTERNAL (localhost).
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=10)
    finally:
        consumer.close()
    assert read == set(acked)
    assert sum(max(0, tp.offset) for tp in committed) == 50
