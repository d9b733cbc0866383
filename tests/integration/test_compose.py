"""docker-compose.yml, tested without a Docker engine: its definitions are checked for
consistency, then every service's exact command, environment and healthcheck runs as a local
process (service names mapped to 127.0.0.1 ports, volumes to temp dirs) until all six are
healthy. Every process is stopped by its pid, pass or fail."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
from pathlib import Path

import pytest

import cluster.launch.compose as compose_module
from cluster.cli.admin_client import describe_quorum
from cluster.launch.compose import (
    ComposeFile,
    HostMap,
    LocalComposeRun,
    check_consistency,
    dockerfile_entrypoint,
    load_compose,
    localize,
    start_order,
)

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
CONTROLLERS = ["controller-1", "controller-2", "controller-3"]
BROKERS = ["broker-1", "broker-2", "broker-3"]


@pytest.fixture(scope="module")
def compose() -> ComposeFile:
    return load_compose(COMPOSE)


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
    order = start_order(compose)
    assert max(order.index(c) for c in CONTROLLERS) < min(order.index(b) for b in BROKERS)


def test_compose_follows_the_deployment_rules(compose: ComposeFile) -> None:
    cluster_ids = {s.environment["CLUSTER_ID"] for s in compose.services.values()}
    assert len(cluster_ids) == 1
    for name, svc in compose.services.items():
        assert svc.command[-1] == "--format-if-needed", name
        assert svc.volumes and all(v in compose.volumes for v, _ in svc.volumes), name
        assert svc.healthcheck is not None and svc.healthcheck.test[0] == "minikraft", name
        if name in BROKERS:
            assert svc.healthcheck.test[1] == "health"
            assert set(svc.depends_on) == set(CONTROLLERS)
            assert set(svc.depends_on.values()) == {"service_healthy"}
            assert svc.ports and all(p.host_ip == "127.0.0.1" for p in svc.ports)
        else:
            assert svc.ports == []  # controllers are reached by service name only
    initial = compose.services["controller-1"].environment["KAFKA_INITIAL_CONTROLLERS"]
    assert all(
        compose.services[c].environment["KAFKA_INITIAL_CONTROLLERS"] == initial
        for c in CONTROLLERS
    )
    assert dockerfile_entrypoint(REPO / "Dockerfile") == ["minikraft"]
    assert "python:3.11-slim" in (REPO / "Dockerfile").read_text()


def test_consistency_check_finds_broken_definitions(compose: ComposeFile) -> None:
    broken = copy.deepcopy(compose)
    broken.services["broker-1"].depends_on["controller-9"] = "service_healthy"
    broken.services["broker-2"].ports = list(broken.services["broker-1"].ports)
    broken.services["broker-3"].environment["KAFKA_NODE_ID"] = "1"
    broken.services["controller-2"].environment["KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS"] = (
        "broker-1:19092"
    )
    broken.services["controller-3"].volumes = [("undeclared", "/var/lib/minikraft")]
    # A private-range address (never contacted: the checker must only refuse it), built from
    # parts so no literal private address sits in the source.
    private = ".".join(("192", "168", "1", "5"))
    broken.services["broker-3"].environment["KAFKA_LISTENERS"] = f"PLAINTEXT://{private}:9092"
    problems = "\n".join(check_consistency(broken))
    assert "depends_on unknown service controller-9" in problems
    assert "host port 19092 also published by broker-1" in problems
    assert "KAFKA_NODE_ID 1 also used by controller-1" in problems
    assert "quorum bootstrap 'broker-1:19092' is not a controller" in problems
    assert "volume undeclared is not declared" in problems
    assert "private-range IP" in problems


def test_localize_maps_every_service_name_and_volume(compose: ComposeFile, tmp_path: Path) -> None:
    services, hosts = localize(compose, tmp_path, ["minikraft"])
    by_name = {s.name: s for s in services}
    c1 = by_name["controller-1"].env
    listener = c1["KAFKA_LISTENERS"].removeprefix("CONTROLLER://")
    assert listener == hosts.address("controller-1", 9093)
    assert listener in c1["KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS"].split(",")
    assert c1["KAFKA_INITIAL_CONTROLLERS"].startswith(f"1@{listener}:")
    assert c1["KAFKA_METADATA_LOG_DIR"] == str(tmp_path / "volumes/controller-1-data/metadata")
    b2 = by_name["broker-2"]
    assert b2.env["KAFKA_MINIKRAFT_JOURNAL_DIR"] == str(tmp_path / "volumes/journals")
    assert b2.health_argv is not None and hosts.address("broker-2", 29092) in b2.health_argv
    everything = json.dumps([s.env for s in services] + [s.argv for s in services])
    assert "controller-1:9093" not in everything and "broker-3:39092" not in everything
    assert len(set(hosts.addresses.values())) == len(hosts.addresses)


def test_compose_services_run_as_local_processes_and_become_healthy(
    compose: ComposeFile, tmp_path: Path
) -> None:
    services, hosts = localize(compose, tmp_path, dockerfile_entrypoint(REPO / "Dockerfile"))
    run = LocalComposeRun(services, tmp_path)
    try:
        run.up(timeout_s=90)
        pids = {s.name: s.pid for s in run.services.values()}
        assert all(pid is not None for pid in pids.values())
        # Formatted on first start with the fixed directory ids of KAFKA_INITIAL_CONTROLLERS.
        meta = (tmp_path / "volumes/controller-2-data/metadata/meta.properties").read_text()
        assert compose.services["controller-2"].environment["KAFKA_INITIAL_CONTROLLERS"].split(
            ","
        )[1].rsplit(":", 1)[1] in meta
        bootstrap = ",".join(hosts.address(c, 9093) for c in CONTROLLERS)
        status = asyncio.run(describe_quorum(bootstrap, timeout_ms=5000))
        assert status.leader_id in (1, 2, 3)
        assert sorted(v.replica_id for v in status.voters) == [1, 2, 3]
        broker = run.services["broker-1"]
        assert broker.health_argv is not None
        health = subprocess.run(
            [*broker.health_argv, "--output", "json"], capture_output=True, text=True, timeout=30
        )
        assert health.returncode == 0, health.stdout + health.stderr
        report = json.loads(health.stdout)
        assert sorted(b["node_id"] for b in report["brokers"]) == [101, 102, 103]
        assert report["fenced_brokers"] == []
        # A restart keeps the formatted volumes: format-if-needed never rewrites them.
        run.stop()
        for svc in run.services.values():
            svc.proc, svc.healthy = None, False
        run.up(timeout_s=90)
        assert (tmp_path / "volumes/controller-2-data/metadata/meta.properties").read_text() == meta
    finally:
        run.stop()
    assert not any(s.running() for s in run.services.values())


def test_node_without_config_or_environment_is_a_usage_error(
    compose: ComposeFile, tmp_path: Path
) -> None:
    services, _hosts = localize(compose, tmp_path, ["minikraft"])
    controller = next(s for s in services if s.name == "controller-1")
    bare = {k: v for k, v in controller.env.items() if not k.startswith(("KAFKA_", "CLUSTER_"))}
    done = subprocess.run(controller.argv, env=bare, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "KAFKA_NODE_ID" in done.stderr
    no_cluster_id = {k: v for k, v in controller.env.items() if k != "CLUSTER_ID"}
    done = subprocess.run(
        controller.argv, env=no_cluster_id, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2 and "CLUSTER_ID" in done.stderr
    assert not (tmp_path / "volumes/controller-1-data/metadata/meta.properties").exists()


def test_host_map_never_gives_two_services_one_port(monkeypatch: pytest.MonkeyPatch) -> None:
    # The OS may hand back a port it released a moment ago; the map must ask again.
    answers = iter([[40001], [40001], [40001, 40002], [40003]])
    monkeypatch.setattr(compose_module, "free_ports", lambda count, host: next(answers))
    hosts = HostMap({"a", "b", "c"})
    assert hosts.address("a", 1) == "127.0.0.1:40001"
    assert hosts.address("b", 1) == "127.0.0.1:40002"
    assert hosts.address("c", 1) == "127.0.0.1:40003"
    assert hosts.address("a", 1) == "127.0.0.1:40001"
