"""The pytest plugin (issue 30 item 12): a user's own test file, run by pytester as a user's
suite would run it, gets a cluster laid out as its ini and command line say (broker ids 0 and
1 on chosen ports, a setting for one node), produces with confluent-kafka, kills -9 a broker,
restarts it and reads everything back; every process is gone when that session ends."""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import pytest

from cluster.launch.local_cluster import NodeSpec, free_ports, is_running

pytest.importorskip("confluent_kafka", reason="dev extra: confluent-kafka")
pytest_plugins = ("pytester",)

USERS_TESTS = '''
import json
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def test_the_layout_is_as_asked(minikraft_cluster, minikraft_bootstrap_servers, pytestconfig):
    assert minikraft_cluster.broker_ids == [0, 1]
    assert minikraft_cluster.controller_ids == [2]  # 1.., skipping the brokers' ids
    ports = [int(p) for p in pytestconfig.getoption("minikraft_broker_ports").split(",")]
    assert minikraft_bootstrap_servers == ",".join(f"127.0.0.1:{p}" for p in ports)
    assert minikraft_cluster.address(1) == f"127.0.0.1:{ports[1]}"
    own = minikraft_cluster.node(0).config
    other = minikraft_cluster.node(1).config
    assert "num.partitions=2" in open(own).read().splitlines()
    assert "num.partitions=2" not in open(other).read().splitlines()
    with open("pids.json", "w") as out:
        json.dump([s.pid for s in minikraft_cluster.cluster.all_nodes()], out)


def _produce(bootstrap, values):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failed = []
    for value in values:
        producer.produce("plugin", value, on_delivery=lambda e, m: e and failed.append(e))
    assert producer.flush(30) == 0 and not failed, failed


def test_produce_kill_restart_and_read_back(minikraft_cluster, minikraft_bootstrap_servers):
    admin = AdminClient({"bootstrap.servers": minikraft_bootstrap_servers})
    for future in admin.create_topics([NewTopic("plugin", 1, 2)]).values():
        future.result(30)
    _produce(minikraft_bootstrap_servers, [b"%d" % i for i in range(10)])
    minikraft_cluster.kill(0)
    assert not minikraft_cluster.is_running(0)
    minikraft_cluster.start(0)
    assert minikraft_cluster.is_running(0)
    _produce(minikraft_bootstrap_servers, [b"%d" % i for i in range(10, 20)])
    consumer = Consumer({"bootstrap.servers": minikraft_bootstrap_servers, "group.id": "g",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["plugin"])
    values, deadline = [], time.monotonic() + 30
    while len(values) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert sorted(int(v) for v in values) == list(range(20))
'''

USERS_INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
minikraft_broker_ids = 0,1
minikraft_node_set = 0:num.partitions=2
minikraft_set =
    broker.session.timeout.ms=3000
    broker.heartbeat.interval.ms=300
"""


def test_the_entry_point_names_the_plugin() -> None:
    found = {e.name: e.value for e in entry_points(group="pytest11")}
    assert found.get("minikraft") == "cluster.pytest_plugin"


def test_a_users_suite_gets_a_cluster_and_kills_and_restarts_a_broker(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(USERS_INI)
    pytester.makepyfile(test_users_suite=USERS_TESTS)
    ports = free_ports(2)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-q", "--minikraft-broker-ports", ",".join(map(str, ports)),
    )
    result.assert_outcomes(passed=2)
    pids = json.loads((pytester.path / "pids.json").read_text())
    assert len(pids) == 3
    # The session's end stopped every node it started (a pid is never reused this fast).
    for pid in pids:
        spec = NodeSpec("broker", 0, "", 0, 0, "", "", "", pid=pid)
        assert not is_running(spec), pid


def test_a_bad_option_is_one_clear_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_users_suite="def test_x(minikraft_cluster):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--minikraft-broker-ids", "0,0")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*minikraft: minikraft_broker_ids: '0,0' names a value twice*"])
    assert "Traceback" not in result.stdout.str()
