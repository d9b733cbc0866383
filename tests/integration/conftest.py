"""Real processes on 127.0.0.1 with ephemeral ports; every cluster a test starts is stopped by
pid when the test ends, pass or fail."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.runtime.partition_log import LogDirCheckpoints
from cluster.client.admin_client import QuorumStatus, describe_quorum
from cluster.launch.local_cluster import CLUSTER_FILE, LocalCluster, NodeSpec
from cluster.launch.readiness import wait_until_ready
from kafkawire.errors import KafkaError

REPO = Path(__file__).resolve().parents[2]


def minikraft(
    *args: str, timeout: float = 60, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


UP_READY_TIMEOUT_S = 90


@contextlib.contextmanager
def detached_up(directory: Path, *args: str) -> Iterator[tuple[LocalCluster, str]]:
    """`minikraft up --detach` into `directory` with `args` added (say "--set", "k=v"), as a
    user runs it: (the cluster, its bootstrap servers); stopped after, even when a test fails."""
    result = minikraft(
        "up", "--dir", str(directory), "--base-port", "0", "--detach",
        "--timeout-s", str(UP_READY_TIMEOUT_S), "--output", "json", *args,
        timeout=UP_READY_TIMEOUT_S + 30,
    )
    cluster = LocalCluster.load(directory) if (directory / CLUSTER_FILE).exists() else None
    try:
        assert result.returncode == 0, result.stderr
        assert cluster is not None
        yield cluster, json.loads(result.stdout)["bootstrap_server"]
    finally:
        if cluster is not None:
            cluster.stop()
            assert not cluster.running(), "processes left behind"


def restart_node(cluster: LocalCluster, spec: NodeSpec, ready_s: float = 60) -> None:
    """Start a killed node again and return only once the cluster is whole: the quorum has a
    leader and every broker is registered and unfenced in every broker's metadata. A test that
    kills a node of a module's cluster ends with this: the next test would otherwise create a
    replication-factor-3 topic while the restarted broker is still fenced, and the controller
    answers INVALID_REPLICATION_FACTOR."""
    cluster.start_node(spec)
    cluster.write_cluster_file()
    asyncio.run(wait_until_ready(cluster, ready_s))


def describe(c: LocalCluster, topic: str, bootstrap: str | None = None) -> dict[str, Any]:
    """`topics describe --topic T --output json`'s first partition (as CLI.md prints it), asked
    of every controller unless `bootstrap` names one."""
    # A standby controller may answer before it replayed a just-created topic: ask again.
    for _attempt in range(20):
        result = minikraft(
            "topics", "--bootstrap-controller", bootstrap or c.bootstrap_controller,
            "describe", "--topic", topic,
            "--output", "json",
        )
        if "UNKNOWN_TOPIC_OR_PARTITION" not in result.stderr:
            break
        time.sleep(0.1)
    assert result.returncode == 0, result.stderr
    partitions: list[dict[str, Any]] = json.loads(result.stdout)
    return partitions[0]


def wait_describe(
    c: LocalCluster, topic: str, predicate: Callable[[dict[str, Any]], bool], timeout_s: float,
    *, ask: Callable[[LocalCluster, str], dict[str, Any]] = describe, poll_s: float = 0.2,
) -> dict[str, Any]:
    """`ask` (describe through the CLI, unless the test asks in-process) until predicate holds,
    bounded by timeout_s; a Kafka error on the way is asked again."""
    deadline = time.monotonic() + timeout_s
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            last = ask(c, topic)
            if last and predicate(last):
                return last
        except KafkaError as exc:
            last = {"error": str(exc)}
        time.sleep(poll_s)
    raise AssertionError(f"{topic} never matched within {timeout_s}s; last {last}")


def log_start_on_disk(cluster: LocalCluster, topic: str, partition: int = 0) -> dict[int, int | None]:
    """Each broker's checkpointed log start offset of the partition (None: not checkpointed)."""
    found: dict[int, int | None] = {}
    for broker in cluster.brokers:
        offsets: dict[tuple[str, int], int] = {}
        for checkpoint in Path(broker.dir).rglob("log-start-offset-checkpoint"):
            offsets.update(LogDirCheckpoints(checkpoint.parent).read_log_start_offsets())
        found[broker.node_id] = offsets.get((topic, partition))
    return found


class Deliveries:
    """A confluent-kafka producer's on_delivery callback that keeps what was acked (each value
    read as an int: these tests number their records) and the errors of what failed."""

    def __init__(self) -> None:
        self.acked: list[int] = []
        self.failed: list[Any] = []

    def __call__(self, err: Any, message: Any) -> None:
        if err is None:
            self.acked.append(int(message.value()))
        else:
            self.failed.append(err)


def set_faults(spec: NodeSpec, rules: dict[str, Any]) -> None:
    """Replace a node's fault rules (its POST /v1/faults, kafkawire.faults)."""
    request = urllib.request.Request(
        f"http://{spec.host}:{spec.http_port}/v1/faults",
        data=json.dumps(rules).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def start_cluster(
    directory: Path, controllers: int = 3, *, brokers: int = 0, ready_s: float = 30,
    **overrides: str,
) -> LocalCluster:
    """A formatted, started cluster whose every node is ready within `ready_s`; stopped again
    when it is not."""
    cluster = LocalCluster.plan(
        directory, controllers=controllers, brokers=brokers, base_port=0, overrides=overrides
    )
    cluster.format()
    cluster.start()
    try:
        asyncio.run(wait_until_ready(cluster, ready_s))
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextlib.contextmanager
def running_cluster(
    directory: Path, controllers: int = 3, **kwargs: Any
) -> Iterator[LocalCluster]:
    """start_cluster's cluster, stopped after (even when a test fails), no process left."""
    cluster = start_cluster(directory, controllers, **kwargs)
    try:
        yield cluster
    finally:
        cluster.stop()
        assert not cluster.running(), "processes left behind"


def quorum(cluster: LocalCluster, timeout_ms: int = 3000) -> QuorumStatus:
    return asyncio.run(describe_quorum(cluster.bootstrap_controller, timeout_ms=timeout_ms))


def wait_for(predicate_status, cluster: LocalCluster, timeout_s: float) -> QuorumStatus:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            status = quorum(cluster, timeout_ms=500)
            if predicate_status(status):
                return status
            last = status.response
        except KafkaError as exc:
            last = exc
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout_s}s; last: {last}")


@pytest.fixture
def cluster3(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "c") as cluster:
        yield cluster
