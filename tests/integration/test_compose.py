"""docker-compose.yml and the Dockerfile: checked as files (always), then run under a real Docker
engine (skipped with the reason where there is none; cluster/launch/docker_engine.py starts a
private dockerd as root and builds a Debian stand-in base where python:3.11-slim cannot be
pulled).

Under the engine, in order, on one project: the image is built from the Dockerfile, `compose up
-d` brings 3 controllers and 3 brokers to healthy; confluent-kafka (default settings, acks=all)
writes 2,000 records through the published 127.0.0.1 ports while `docker kill` takes down the
partition leader's broker and the active controller, `compose start` brings them back, and every
acked record is read back; `minikraft chaos --compose` runs 30 s of docker kill, pause and
network disconnect; then `compose down`, and `minikraft audit` over the bind-mounted data
directory is clean and shows the faults. Compose v1 (Debian's docker-compose 1.29) is what this
machine has; v2 is used where the CLI has it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.chaos.process_faults import fault_event
from cluster.client.admin_client import describe_quorum
from cluster.client.producer import AckJournal
from cluster.launch import docker_engine
from cluster.launch.compose import (
    ComposeFile,
    check_consistency,
    dockerfile_entrypoint,
    interpolate,
    load_compose,
)
from cluster.launch.compose_project import ComposeProject, compose_command, run_docker
from cluster.launch.local_cluster import free_ports

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
CONTROLLERS = ["controller-1", "controller-2", "controller-3"]
BROKERS = ["broker-1", "broker-2", "broker-3"]
PORT_VARIABLES = [f"MINIKRAFT_CONTROLLER_{i}_PORT" for i in (1, 2, 3)] + [
    f"MINIKRAFT_BROKER_{i}_PORT" for i in (1, 2, 3)
] + [f"MINIKRAFT_{role}_{i}_HTTP_PORT" for role in ("CONTROLLER", "BROKER") for i in (1, 2, 3)]
HEALTHY_TIMEOUT_S = 600.0  # cold start took 353 s at load average 34 on 2 cores
RECORDS = 2000
IMAGE_MAX_BYTES = 300 * 1024 * 1024

# Building the base image and the image can take minutes on a fresh machine.
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def compose() -> ComposeFile:
    return load_compose(COMPOSE, {})


# -- the files ----------------------------------------------------------------------------------


def test_compose_defines_three_controllers_and_three_brokers(compose: ComposeFile) -> None:
    assert sorted(compose.services) == sorted(CONTROLLERS + BROKERS)
    roles = {n: s.environment["KAFKA_PROCESS_ROLES"] for n, s in compose.services.items()}
    assert {roles[n] for n in CONTROLLERS} == {"controller"}
    assert {roles[n] for n in BROKERS} == {"broker"}
    ids = {n: int(s.environment["KAFKA_NODE_ID"]) for n, s in compose.services.items()}
    assert [ids[n] for n in CONTROLLERS] == [1, 2, 3]
    assert [ids[n] for n in BROKERS] == [101, 102, 103]


def test_compose_file_is_consistent(compose: ComposeFile) -> None:
    assert check_consistency(compose) == []
    moved = load_compose(COMPOSE, {"MINIKRAFT_BROKER_2_PORT": "26999"})
    assert check_consistency(moved) == []
    advertised = moved.services["broker-2"].environment["KAFKA_ADVERTISED_LISTENERS"]
    assert advertised == "INTERNAL://broker-2:9092,EXTERNAL://127.0.0.1:26999"


def test_compose_follows_the_deployment_rules(compose: ComposeFile) -> None:
    raw = yaml.safe_load(COMPOSE.read_text())
    assert "name" not in raw and "version" not in raw  # Compose v1 refuses `name:`
    cluster_ids = {s.environment["CLUSTER_ID"] for s in compose.services.values()}
    assert len(cluster_ids) == 1
    for name, svc in compose.services.items():
        assert svc.command[-1] == "--format-if-needed", name
        assert svc.ports and all(p.host_ip == "127.0.0.1" for p in svc.ports), name
        assert svc.healthcheck is not None and "/health" in " ".join(svc.healthcheck.test), name
        if name in BROKERS:
            assert set(svc.depends_on) == set(CONTROLLERS)
            assert set(svc.depends_on.values()) == {"service_healthy"}
            assert svc.environment["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    initial = compose.services["controller-1"].environment["KAFKA_INITIAL_CONTROLLERS"]
    assert all(
        compose.services[c].environment["KAFKA_INITIAL_CONTROLLERS"] == initial
        for c in CONTROLLERS
    )
    assert dockerfile_entrypoint(DOCKERFILE) == ["python", "-m", "cluster.launch.container_init"]
    assert "ARG BASE_IMAGE=python:3.11-slim" in DOCKERFILE.read_text()


def test_dockerfile_copies_every_package_the_wheel_holds() -> None:
    # The first image built on an engine died with `No module named 'kafkawire'` (issue 31).
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    copied = set(re.findall(r"^COPY (\w+) ", DOCKERFILE.read_text(), re.MULTILINE))
    assert set(packages) <= copied, set(packages) - copied
    assert "tests" not in copied
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignored and all(f"!{p}" in ignored for p in packages)


def test_consistency_check_finds_broken_definitions(compose: ComposeFile) -> None:
    broken = copy.deepcopy(compose)
    broken.services["broker-1"].depends_on["controller-9"] = "service_healthy"
    broken.services["broker-2"].ports = list(broken.services["broker-1"].ports)
    broken.services["broker-3"].environment["KAFKA_NODE_ID"] = "1"
    broken.services["controller-2"].environment["KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS"] = (
        "broker-1:9092"
    )
    broken.services["controller-3"].volumes = [
        ("./compose-data/controller-1", "/var/lib/minikraft")
    ]
    broken.services["broker-1"].environment["KAFKA_ADVERTISED_LISTENERS"] = (
        "INTERNAL://broker-1:9092,EXTERNAL://127.0.0.1:5"
    )
    broken.services["broker-2"].environment["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] = (
        "CONTROLLER:PLAINTEXT,INTERNAL:SSL,EXTERNAL:PLAINTEXT"
    )
    # A private-range address (never contacted: the checker must only refuse it), built from
    # parts so no literal private address sits in the source.
    private = ".".join(("192", "168", "1", "5"))
    broken.services["broker-3"].environment["KAFKA_HTTP_LISTENER"] = f"{private}:8080"
    problems = "\n".join(check_consistency(broken))
    assert "depends_on unknown service controller-9" in problems
    assert "host port 19092 also published by broker-1" in problems
    assert "KAFKA_NODE_ID 1 also used by controller-1" in problems
    assert "quorum bootstrap 'broker-1:9092' is not a controller" in problems
    assert "data directory ./compose-data/controller-1 also used by controller-1" in problems
    assert "advertises 127.0.0.1:5 for EXTERNAL, which is not published" in problems
    assert "broker-2: the node refuses its config" in problems and "PLAINTEXT only" in problems
    assert "private-range IP" in problems


def test_interpolation_follows_compose() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("${SET:-d}/${EMPTY:-d}/${UNSET:-d}", env) == "x/d/d"
    assert interpolate("${EMPTY-d}/${UNSET-d}/$SET/$$SET", env) == "/d/x/$SET"
    assert interpolate({"a": ["${SET}"]}, env) == {"a": ["x"]}


def test_every_compose_implementation_here_accepts_the_file_unchanged() -> None:
    implementations = []
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True,
                                 timeout=30).returncode == 0:
        implementations.append([docker, "compose"])
    if shutil.which("docker-compose"):
        implementations.append([str(shutil.which("docker-compose"))])
    if not implementations:
        pytest.skip("neither `docker compose` (v2) nor `docker-compose` (v1) is installed "
                    "(sudo make system-deps installs docker-compose)")
    for command in implementations:
        done = subprocess.run([*command, "-f", str(COMPOSE), "config", "--services"],
                              capture_output=True, text=True, timeout=60, cwd=REPO)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        assert sorted(done.stdout.split()) == sorted(CONTROLLERS + BROKERS)


# -- under a real engine ------------------------------------------------------------------------


@dataclass
class Run:
    """One compose project of this module: its engine, image, data directory and ports."""

    engine: docker_engine.Engine
    project: ComposeProject
    data: Path
    ports: dict[str, int]
    image: str
    figures: dict[str, Any] = field(default_factory=dict)
    down: bool = False

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[f'MINIKRAFT_BROKER_{i}_PORT']}" for i in (1, 2, 3))

    @property
    def bootstrap_controller(self) -> str:
        return ",".join(
            f"127.0.0.1:{self.ports[f'MINIKRAFT_CONTROLLER_{i}_PORT']}" for i in (1, 2, 3)
        )

    def container(self, service: str) -> str:
        return str(self.project.containers()[service]["Id"])

    def wait_healthy(self, timeout_s: float = HEALTHY_TIMEOUT_S) -> float:
        started = time.monotonic()
        states: dict[str, str] = {}
        while time.monotonic() - started < timeout_s:
            states = self.project.health()
            if sorted(states) == sorted(CONTROLLERS + BROKERS) and set(states.values()) == {
                "healthy"
            }:
                return time.monotonic() - started
            exited = [s for s, state in states.items() if state == "exited"]
            assert not exited, f"exited: {exited}\n{self.logs(exited)}"
            time.sleep(1.0)
        raise AssertionError(f"not healthy after {timeout_s}s: {states}\n{self.logs(list(states))}")

    def logs(self, services: list[str]) -> str:
        return "\n".join(
            subprocess.run([*self.project.command, "-f", str(COMPOSE), "-p", self.project.name,
                            "logs", "--tail", "30", s], env=self.project.env,
                           capture_output=True, text=True, timeout=60).stdout
            for s in services
        )


def _engine_or_skip() -> tuple[docker_engine.Engine, str]:
    try:
        engine = docker_engine.engine()
    except docker_engine.EngineError as exc:
        pytest.skip(f"no Docker engine: {exc}")
    if compose_command(engine.env()) is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed "
                    "(sudo make system-deps installs docker-compose)")
    try:
        return engine, docker_engine.base_image(engine)
    except docker_engine.EngineError as exc:
        if engine.pid is not None:
            docker_engine.stop_private(engine.pid)
        pytest.skip(f"no base image for the Dockerfile: {exc}")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    engine, base = _engine_or_skip()
    image = f"minikraft:test-{uuid.uuid4().hex[:8]}"
    data = tmp_path_factory.mktemp("compose") / "data"
    data.mkdir()
    ports = dict(zip(PORT_VARIABLES, free_ports(len(PORT_VARIABLES)), strict=True))
    env = {**engine.env(), **{k: str(v) for k, v in ports.items()},
           "MINIKRAFT_DATA_DIR": str(data), "MINIKRAFT_IMAGE": image,
           "MINIKRAFT_BASE_IMAGE": base}
    project = ComposeProject(COMPOSE, f"mk{uuid.uuid4().hex[:8]}", env)
    result = Run(engine, project, data, ports, image)
    try:
        started = time.monotonic()
        # The Dockerfile as a user's `compose up --build` builds it; host networking because
        # this machine reaches PyPI only from its own network namespace (issue 31).
        docker_engine.docker(engine, "build", "--network", "host", "--build-arg",
                             f"BASE_IMAGE={base}", "-t", image, str(REPO), timeout_s=900)
        result.figures["build_s"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        project.compose("up", "-d", timeout_s=HEALTHY_TIMEOUT_S)
        result.wait_healthy()
        result.figures["cold_start_to_healthy_s"] = round(time.monotonic() - started, 1)
        yield result
    finally:
        if not result.down:
            with_logs = result.logs(CONTROLLERS + BROKERS)
            print(with_logs[-20000:])
            subprocess.run([*project.command, "-f", str(COMPOSE), "-p", project.name, "down",
                            "--timeout", "5"], env=env, capture_output=True, timeout=300)
        docker_engine.docker(engine, "image", "rm", "-f", image, check=False)
        # The nodes wrote as uid 1000: root removes it, anyone else leaves it to the temp dir.
        shutil.rmtree(data, ignore_errors=True)
        print(f"compose figures: {result.figures}")
        if engine.pid is not None:  # the private dockerd this fixture started
            docker_engine.stop_private(engine.pid)


def test_image_is_small_and_its_nodes_run_unprivileged(run: Run) -> None:
    size = int(docker_engine.docker(run.engine, "image", "inspect", "--format", "{{.Size}}",
                                    run.image).stdout)
    run.figures["image_mb"] = round(size / 1e6, 1)
    assert size < IMAGE_MAX_BYTES
    probe = (
        "import os, shutil, importlib.util as u; "
        "print(os.stat('/proc/1').st_uid, shutil.which('gcc'), shutil.which('pip', "
        "path='/opt/minikraft/bin'), u.find_spec('tests'), u.find_spec('pyspark'))"
    )
    out = docker_engine.docker(run.engine, "exec", run.container("broker-1"), "python", "-c",
                               probe).stdout.split()
    assert out == ["1000", "None", "None", "None", "None"]  # the node's uid, nothing to build


def _leader_of(bootstrap: str, topic: str) -> int:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return int(metadata.topics[topic].partitions[0].leader)


def test_acked_writes_survive_docker_kill_of_the_leader_broker_and_active_controller(
    run: Run,
) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "compose-kill"
    admin = AdminClient({"bootstrap.servers": run.bootstrap})
    # Every broker is advertised on its published 127.0.0.1 port: no /etc/hosts entry needed.
    brokers = admin.list_topics(timeout=30).brokers
    assert sorted((b.host, b.port) for b in brokers.values()) == sorted(
        ("127.0.0.1", run.ports[f"MINIKRAFT_BROKER_{i}_PORT"]) for i in (1, 2, 3)
    )
    created = admin.create_topics(
        [NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})]
    )
    created[topic].result(30)
    journal = AckJournal(run.data / "journal" / "compose-kill-acks.journal")
    events = (run.data / "chaos").resolve()
    events.mkdir(exist_ok=True)
    acked: set[str] = set()

    def delivered(err: Any, message: Any) -> None:
        producer_id, _, seq = message.value().decode().partition("-")
        entry = {"event": "ack", "producer_id": producer_id, "seq": int(seq), "topic": topic,
                 "partition": 0, "acks": -1, "idempotent": False, "ts": int(time.time() * 1000)}
        if err is None:
            acked.add(message.value().decode())
            epoch = message.leader_epoch()
            entry.update(error="NONE", offset=message.offset(),
                         leader_epoch=-1 if epoch is None else epoch)
        else:
            entry.update(error=str(err.name()), offset=-1, leader_epoch=-1)
        journal.write(entry)

    producer = Producer({"bootstrap.servers": run.bootstrap, "acks": "all"})

    def send(seqs: range) -> None:
        for seq in seqs:
            value = f"kill-{seq}"
            journal.write({"event": "send", "producer_id": "kill", "seq": seq, "topic": topic,
                           "partition": 0, "acks": -1, "value": value, "idempotent": False,
                           "ts": int(time.time() * 1000)})
            producer.produce(topic, value.encode(), partition=0, on_delivery=delivered)
            producer.poll(0)
            time.sleep(0.002)

    faults: list[dict[str, Any]] = []
    try:
        send(range(0, 700))
        assert producer.flush(60) == 0
        leader_broker = f"broker-{_leader_of(run.bootstrap, topic) - 100}"
        quorum = asyncio.run(describe_quorum(run.bootstrap_controller, timeout_ms=10000))
        active = f"controller-{quorum.leader_id}"
        killed_at = time.monotonic()
        for service in (leader_broker, active):
            run_docker(["kill", run.container(service)], run.project.env)
            faults.append({**fault_event("kill", how="docker kill"), "node": service})
        send(range(700, 1400))  # queued and retried by librdkafka until a new leader takes them
        run.project.compose("start", leader_broker, active)
        faults.append({**fault_event("restart", how="compose start"),
                       "nodes": [leader_broker, active]})
        send(range(1400, RECORDS))
        assert producer.flush(240) == 0
        run.figures["kill_to_all_acked_s"] = round(time.monotonic() - killed_at, 1)
    finally:
        journal.close()
        (events / "compose-kill.jsonl").write_text(
            "".join(json.dumps(f) + "\n" for f in faults)
        )
    assert len(acked) == RECORDS  # librdkafka retries until each is acked (no timeout here)
    assert _leader_of(run.bootstrap, topic) != -1
    consumer = Consumer({"bootstrap.servers": run.bootstrap, "group.id": f"read-{topic}",
                         "auto.offset.reset": "earliest"})
    read: set[str] = set()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 120
        while not acked <= read and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                read.add(message.value().decode())
    finally:
        consumer.close()
    assert acked - read == set()
    run.wait_healthy()


def test_chaos_kill_pause_disconnect_against_the_compose_cluster(run: Run) -> None:
    # Seed 1's first three nemesis rounds are kill, pause, disconnect (each about 5-12 s).
    done = subprocess.run(
        [sys.executable, "-m", "cluster.cli.main", "chaos", "--dir", str(run.data),
         "--compose", str(COMPOSE), "--project-name", run.project.name,
         "--nemesis", "kill,pause,disconnect", "--seed", "1", "--duration-s", "30",
         "--recovery-timeout-s", "180", "--client", "confluent-kafka", "--output", "json"],
        env=run.project.env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    summary = json.loads(done.stdout)
    actions = [(f["action"], f.get("how")) for f in summary["faults"]]
    assert ("kill", None) in actions and "pause" in [a for a, _ in actions]
    assert ("partition", "docker network disconnect") in actions
    assert "heal-network" in [a for a, _ in actions]
    assert summary["lost_unattributed"] == 0 and summary["acked"] > 0
    assert summary["network"] == "compose"
    run.figures["chaos"] = {"acked": summary["acked"], "recovery_s": summary["recovery_s"]}
    cluster = json.loads((run.data / "cluster.json").read_text())
    assert cluster["compose"]["project"] == run.project.name
    run.wait_healthy()


def _console_state(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url + "api/state", timeout=10) as answer:
        state: dict[str, Any] = json.loads(answer.read())
    return state


def test_console_watches_the_compose_cluster_and_pauses_a_container(run: Run) -> None:
    """`minikraft console --dir <data dir>`: the nodes' status through their published HTTP
    listeners, the metadata log from the bind-mounted controller directories, and a pause
    clicked on the page going through the engine (docker pause)."""
    from cluster.launch.local_cluster import LocalCluster

    port = free_ports(1)[0]
    url = f"http://127.0.0.1:{port}/"
    console = subprocess.Popen(
        [sys.executable, "-m", "cluster.cli.main", "console", "--dir", str(run.data),
         "--compose", str(COMPOSE), "--project-name", run.project.name, "--port", str(port)],
        cwd=REPO, env=run.project.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    try:
        deadline = time.monotonic() + 60
        state: dict[str, Any] = {}
        while time.monotonic() < deadline:
            assert console.poll() is None, console.communicate()[1][-3000:]
            try:
                state = _console_state(url)
            except OSError:
                time.sleep(0.5)
                continue
            nodes = state["quorum"].get("nodes", {})
            if (set(nodes.values()) == {"running"} and len(nodes) == 6
                    and state["quorum"].get("leader_id") is not None and state["rows"]):
                break
            time.sleep(0.5)
        # cluster.json, (re)written from the engine: every node's published HTTP listener.
        assert all(s.http_port > 0 for s in LocalCluster.load(run.data).all_nodes())
        assert state.get("down") is None, state.get("down")
        assert state["quorum"]["network"] == "compose"
        assert len(state["quorum"]["controllers"]) == 3
        assert all(c["up"] and c["log_end_offset"] > 0 for c in state["quorum"]["controllers"])
        brokers = state["brokers"]
        assert [b["id"] for b in brokers] == [101, 102, 103]
        assert all(b["up"] and b["fenced"] is False and b["epoch"] > 0 for b in brokers), brokers
        # The metadata log, read from the bind mounts, has the topics the earlier tests wrote.
        assert any(e["type"] == "TopicRecord" for e in state["log"])
        assert state["rows"] and all(r["leader"] in (101, 102, 103) for r in state["rows"])
        request = json.dumps({"action": "pause", "node": "broker-103"}).encode()
        import urllib.request

        for body in (request, json.dumps({"action": "resume", "node": "broker-103"}).encode()):
            post = urllib.request.Request(url + "api/action", data=body, method="POST",
                                          headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(post, timeout=60) as answer:
                assert json.loads(answer.read())["ok"] is True
            if body is request:
                paused = run.project.containers()["broker-3"]["State"]
                assert paused["Paused"] is True, paused
                deadline = time.monotonic() + 15
                while _console_state(url)["quorum"]["nodes"]["broker-103"] != "paused":
                    assert time.monotonic() < deadline, "the page never showed the pause"
                    time.sleep(0.3)
        assert run.project.containers()["broker-3"]["State"]["Paused"] is False
    finally:
        console.terminate()
        try:
            console.wait(15)
        except subprocess.TimeoutExpired:
            console.kill()
            console.wait(5)
    run.wait_healthy()


def test_audit_over_the_data_after_compose_down_is_clean(run: Run) -> None:
    started = time.monotonic()
    run.project.compose("down", "--timeout", "15")
    run.down = True
    run.figures["down_s"] = round(time.monotonic() - started, 1)
    assert run.project.containers() == {}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cluster.cli.main", "audit", "--dir", str(run.data),
         "--output", "json"],
        capture_output=True, text=True, timeout=600, env={**os.environ},
    )
    run.figures["audit_s"] = round(time.monotonic() - started, 1)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    report = json.loads(done.stdout)
    violated = [r for r in report["rules"] if r.get("violation_count")]
    assert report["verdict"] == "clean", json.dumps(violated, indent=1)[:8000]
    assert report["inputs"]["nodes"] == 6 and report["inputs"]["broker_journals"] == 3
    rules = {r["rule"]: r for r in report["rules"]}
    assert rules[23]["checked"] >= RECORDS  # every acked write of both runs was looked for
    sources = {f["source"] for f in report["faults"]}
    assert "compose-kill.jsonl" in sources and any(s.startswith("nemesis-") for s in sources)
    kills = [f for f in report["faults"] if f["action"] == "kill"]
    assert any(f.get("how") == "docker kill" for f in kills) and len(kills) >= 3
