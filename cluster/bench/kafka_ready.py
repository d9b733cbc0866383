"""The Ready line of `minikraft bench kafka`: from launch to the first acks=all write
acknowledged on a new topic, on a cold cluster (fresh directories, nothing formatted).

Launch is the plan, the format (Kafka's StorageTool, one JVM per node in parallel; minikraft's
in process) and the six processes started; then a librdkafka admin client creates the topic
(RF 3, min ISR 2), asked again every 100 ms while too few brokers are registered, and a
librdkafka producer sends one acks=all record until it is acknowledged. The same again through
a pytest fixture: a pytest process whose one test creates the topic and writes the record,
given its cluster by minikraft's own plugin (cluster/pytest_plugin.py) or, for Kafka, by a
session fixture that starts the same Kafka cluster and waits until Metadata lists its three
brokers (as a Testcontainers Kafka module waits for its broker).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cluster.bench.kafka_clients import create_topic, produce_one
from cluster.bench.kafka_engines import (
    FLUSH_RELAXED,
    KAFKA,
    MINIKRAFT_ONLY,
    SHARED,
    plan,
    progress,
)
from cluster.launch import fork_server
from cluster.launch.local_cluster import LocalCluster

READY_TIMEOUT_S = 600.0
READY_TOPIC = "bench-ready"


def first_write(cluster: LocalCluster, deadline: float) -> None:
    bootstrap = cluster.bootstrap_server
    create_topic(bootstrap, READY_TOPIC, 1, deadline)
    produce_one(bootstrap, READY_TOPIC, deadline)


# Apache Kafka's brokers sometimes never finish starting on this machine under heavy load (all
# three wait in BrokerServer.startup for "the controller to acknowledge that we are caught up"
# while the controllers re-elect); such a start is stopped after START_TIMEOUT_S, counted in
# `hung_starts` and tried again, at most START_ATTEMPTS times.
START_TIMEOUT_S = 300.0
START_ATTEMPTS = 3
hung_starts: dict[str, int] = {}


def cold_start(engine: str, directory: Path) -> tuple[float, LocalCluster]:
    """Seconds from launch to the first acknowledged write; the cluster is left running."""
    for attempt in range(1, START_ATTEMPTS + 1):
        target = directory if attempt == 1 else directory.with_name(
            f"{directory.name}-attempt{attempt}")
        started = time.monotonic()
        cluster = plan(engine, target)
        try:
            cluster.format()
            cluster.start()
            first_write(cluster, started + START_TIMEOUT_S)
        except TimeoutError as exc:
            cluster.stop()
            hung_starts[engine] = hung_starts.get(engine, 0) + 1
            progress(f"{engine}: start {attempt} not ready in {START_TIMEOUT_S:.0f} s ({exc}); "
                     f"kept in {target}")
            if attempt == START_ATTEMPTS:
                raise
            continue
        except BaseException:
            cluster.stop()
            raise
        return time.monotonic() - started, cluster
    raise AssertionError("unreachable")


def cold_start_seconds(engine: str, forked: bool = False) -> float:
    """One cold start, stopped and removed afterwards. `forked`: minikraft's nodes forked from
    one interpreter that imports their code once (cluster/launch/fork_server.py, as the pytest
    plugin and minikraft's own suite start them) instead of six execs (`minikraft up`)."""
    directory = Path(tempfile.mkdtemp(prefix=f"bench-kafka-ready-{engine}-"))
    own_server = forked and fork_server.active() is None
    try:
        if own_server:
            fork_server.enable()  # started cold, inside the timed launch (its first spawn)
        seconds, cluster = cold_start(engine, directory)
        cluster.stop()
        return seconds
    finally:
        if own_server:
            fork_server.disable()
        shutil.rmtree(directory, ignore_errors=True)


_TEST = '''
import os, time
from pathlib import Path
from cluster.bench.kafka_ready import READY_TIMEOUT_S, READY_TOPIC
from cluster.bench.kafka_clients import create_topic, produce_one

def test_first_write(bench_bootstrap):
    deadline = time.monotonic() + READY_TIMEOUT_S
    create_topic(bench_bootstrap, READY_TOPIC, 1, deadline)
    produce_one(bench_bootstrap, READY_TOPIC, deadline)
    Path(os.environ["BENCH_READY_FILE"]).write_text(repr(time.time()))
'''

_MINIKRAFT_CONFTEST = '''
import pytest

@pytest.fixture(scope="session")
def bench_bootstrap(minikraft_bootstrap_servers):
    return minikraft_bootstrap_servers
'''

_KAFKA_CONFTEST = '''
import time
import pytest
from confluent_kafka.admin import AdminClient
from cluster.bench.kafka_clients import PROBE, wait_brokers
from cluster.bench.kafka_engines import KAFKA, plan
from cluster.bench.kafka_ready import START_TIMEOUT_S

@pytest.fixture(scope="session")
def bench_bootstrap(tmp_path_factory):
    cluster = plan(KAFKA, tmp_path_factory.mktemp("kafka"))
    cluster.format()
    try:
        cluster.start()
        bootstrap = cluster.bootstrap_server
        admin = AdminClient({"bootstrap.servers": bootstrap, **PROBE})
        wait_brokers(admin, 3, time.monotonic() + START_TIMEOUT_S)
        yield bootstrap
    finally:
        cluster.stop()
'''


def fixture_seconds(engine: str) -> float:
    """Seconds from launching `pytest` to its test's first acknowledged write."""
    directory = Path(tempfile.mkdtemp(prefix=f"bench-kafka-fixture-{engine}-"))
    try:
        (directory / "pytest.ini").write_text("[pytest]\n")
        (directory / "test_ready.py").write_text(_TEST)
        (directory / "conftest.py").write_text(
            _KAFKA_CONFTEST if engine == KAFKA else _MINIKRAFT_CONFTEST)
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                "--basetemp", str(directory / "tmp"), "test_ready.py"]
        if engine != KAFKA:
            args += ["--minikraft-controllers", "3", "--minikraft-brokers", "3",
                     "--minikraft-timeout-s", str(int(READY_TIMEOUT_S))]
            for key, value in {**SHARED, **MINIKRAFT_ONLY, **FLUSH_RELAXED}.items():
                args += ["--minikraft-set", f"{key}={value}"]
        marker = directory / "ready"
        env = {**os.environ, "BENCH_READY_FILE": str(marker)}
        for attempt in range(1, START_ATTEMPTS + 1):
            started = time.time()
            proc = subprocess.run(args, cwd=directory, env=env, capture_output=True, text=True,
                                  timeout=READY_TIMEOUT_S + 120)
            if proc.returncode == 0 and marker.exists():
                return float(marker.read_text()) - started
            hung = "TimeoutError" in proc.stdout and attempt < START_ATTEMPTS
            if engine != KAFKA or not hung:
                raise RuntimeError(f"pytest fixture run ({engine}) failed: {proc.stdout[-800:]}")
            hung_starts[engine] = hung_starts.get(engine, 0) + 1
            progress(f"{engine}: fixture start {attempt} not ready, tried again")
        raise AssertionError("unreachable")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
