"""Quorum reconfiguration (KIP-853) on Apache Kafka and minikraft side by side: controller 1
formatted `--standalone`, controllers 2 and 3 `--no-initial-controllers` (observers), broker
101; add 2 and 3 as voters, replace a wiped disk (a follower's: its new directory id is an
observer until the old key is removed and the new one added; with two voters left, losing one
would leave no majority to do it), then remove one voter, the leader. The
requests are AddRaftVoter / RemoveRaftVoter / DescribeQuorum on Kafka's protocol (minikraft's
admin client, the same bytes to both; Kafka's kafka-metadata-quorum is tried in
tests/kafka_tools). Every observation is checked against tests/conformance/table.py."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cluster.apache_kafka import tools
from cluster.apache_kafka.cluster import ApacheKafkaCluster
from cluster.client.admin_client import QuorumStatus, add_voter, describe_quorum, remove_voter
from cluster.launch.local_cluster import NodeSpec
from cluster.launch.readiness import brokers_not_ready
from kafkawire.errors import KafkaError
from raft.core.replica_key import uuid_from_str
from tests.conformance.harness import (
    WAIT_S,
    Observed,
    Pair,
    Target,
    cluster_pair,
    ids,
    run_beside,
    wait_for,
)
from tests.conformance.table import assert_table
from tests.integration.conftest import minikraft

# A Kafka cluster starts in 30-70 s on two shared cores and a broker restarts in 10-30 s.
pytestmark = [
    pytest.mark.skipif(tools.skip_reason() is not None, reason=str(tools.skip_reason())),
    pytest.mark.timeout(900),
]

SCENARIO = "quorum-reconfiguration"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    yield from cluster_pair(Path(tmp_path_factory.mktemp("quorum")), controllers=3, brokers=1,
                            standalone=True, ready=quorum_of_one_ready)


def quorum_of_one_ready(t: Target) -> None:
    """A standalone quorum is ready when controller 1 leads and the broker is registered."""
    wait_quorum(t, lambda s: s.leader_id == 1, "controller 1 leading")
    deadline = time.monotonic() + WAIT_S
    while asyncio.run(brokers_not_ready(t.cluster)):
        assert time.monotonic() < deadline, f"{t.engine}: broker not registered"
        time.sleep(0.3)


def quorum(t: Target) -> QuorumStatus:
    return asyncio.run(describe_quorum(t.bootstrap_controller, timeout_ms=5000))


def wait_quorum(t: Target, predicate: Callable[[QuorumStatus], bool], what: str,
                ) -> QuorumStatus:
    return wait_for(f"{t.engine}: the quorum", lambda: quorum(t), predicate, what)


def voters(s: QuorumStatus) -> list[int]:
    return [v.replica_id for v in s.voters]


def observers(s: QuorumStatus) -> list[int]:
    return [o.replica_id for o in s.observers]


def shape(s: QuorumStatus) -> str:
    return f"voters {ids(voters(s))}, observers {ids(observers(s))}"


def directory_id(spec: NodeSpec) -> uuid.UUID:
    from raft.runtime.meta_properties import read_meta_properties

    meta = read_meta_properties(Path(spec.dir) / "metadata")
    assert meta is not None, spec.name
    return meta.directory_id


def add(t: Target, spec: NodeSpec, directory: uuid.UUID) -> str:
    """AddRaftVoter, asked again while the leader answers REQUEST_TIMED_OUT (a previous
    change not committed yet, or the new voter not caught up), as an operator would; the
    first other answer (whether a timeout came first is timing, so not part of it)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            asyncio.run(add_voter(t.bootstrap_controller, spec.node_id, directory,
                                  {"CONTROLLER": spec.address}, timeout_ms=30_000))
            answer = "OK"
        except KafkaError as exc:
            answer = exc.error.name
        if answer != "REQUEST_TIMED_OUT" or time.monotonic() > deadline:
            return answer
        time.sleep(1)


def remove(t: Target, spec: NodeSpec, directory: uuid.UUID) -> str:
    try:
        asyncio.run(remove_voter(t.bootstrap_controller, spec.node_id, directory,
                                 timeout_ms=30_000))
        return "OK"
    except KafkaError as exc:
        return exc.error.name


def observer_with(t: Target, node_id: int, what: str) -> QuorumStatus:
    return wait_quorum(t, lambda s: node_id in observers(s), what)


def format_new_disk(t: Target, spec: NodeSpec) -> uuid.UUID:
    """`storage format --no-initial-controllers` with each cluster's own storage tool."""
    if isinstance(t.cluster, ApacheKafkaCluster):
        return uuid_from_str(t.cluster.format_node(spec, ["--no-initial-controllers"]))
    result = minikraft("storage", "format", "--config", spec.config, "--cluster-id",
                       t.cluster.cluster_id, "--no-initial-controllers")
    assert result.returncode == 0, result.stderr
    return directory_id(spec)


def reconfiguration(t: Target) -> Observed:
    o: Observed = {}
    c2, c3 = (t.cluster.node(f"controller-{i}") for i in (2, 3))
    status = wait_quorum(t, lambda s: {2, 3} <= set(observers(s)), "2 and 3 observing")
    o["formatted: 1 --standalone, 2 and 3 --no-initial-controllers"] = (
        f"leader {status.leader_id}, {shape(status)}")
    o["AddRaftVoter 2"] = add(t, c2, directory_id(c2))
    status = wait_quorum(t, lambda s: 2 in voters(s), "voter 2")
    o["after adding 2"] = shape(status)
    o["AddRaftVoter 3"] = add(t, c3, directory_id(c3))
    status = wait_quorum(t, lambda s: 3 in voters(s), "voter 3")
    o["after adding 3"] = shape(status)
    o["AddRaftVoter 3 again"] = add(t, c3, directory_id(c3))
    o["RemoveRaftVoter 2 with a wrong directory id"] = remove(t, c2, uuid.uuid4())

    # -- a wiped disk, while three vote (of two voters, one lost leaves no majority) ------------
    follower = c3 if status.leader_id != 3 else c2
    old = directory_id(follower)
    t.cluster.kill(follower, signal.SIGKILL)
    shutil.rmtree(Path(follower.dir) / "metadata")
    new = format_new_disk(t, follower)
    t.cluster.start_node(follower)
    status = wait_quorum(
        t, lambda s: follower.node_id in observers(s) and s.leader_id is not None,
        "the new disk observing")
    o["the wiped follower, restarted: an observer / still a voter (its old key)"] = (
        f"{follower.node_id in observers(status)} / {follower.node_id in voters(status)}")
    o["AddRaftVoter the new disk before removing the old key"] = add(t, follower, new)
    o["RemoveRaftVoter the old key"] = remove(t, follower, old)
    o["AddRaftVoter the new disk"] = add(t, follower, new)
    status = wait_quorum(
        t, lambda s: any(v.replica_id == follower.node_id and v.replica_directory_id == new
                         for v in s.voters),
        "the new key voting")
    o["after the replacement"] = f"voters {ids(voters(status))}, the new disk votes: True"

    # -- remove one: the leader ------------------------------------------------------------
    leader = t.cluster.node(f"controller-{status.leader_id}")
    o["RemoveRaftVoter the leader"] = remove(t, leader, directory_id(leader))
    status = wait_quorum(t, lambda s: leader.node_id not in voters(s) and s.leader_id not in (
        None, leader.node_id), "the leader removed, a new leader")
    o["after removing the leader: voters, a new leader among them"] = (
        f"{len(voters(status))} voters, {status.leader_id in voters(status)}")
    return o


def test_quorum_reconfiguration(pair: Pair) -> None:
    observed = run_beside(pair, reconfiguration)
    assert_table({e: {SCENARIO: observed[e]} for e in observed})
