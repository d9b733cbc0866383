"""`minikraft up` as a user runs it (CLI.md "Nodes and a local cluster"): 3 controllers and 3
brokers by default; detached, then `minikraft health` exits 0 and `down` leaves no process; in
the foreground it streams every node's log with the node's name in front and Ctrl-C (SIGINT)
stops every node it started."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from cluster.launch.local_cluster import CLUSTER_FILE, LocalCluster, free_ports, is_running
from tests.integration.conftest import REPO, minikraft

READY_TIMEOUT_S = 90


def test_up_defaults_health_and_down_leaves_no_process(tmp_path: Path) -> None:
    directory = tmp_path / "up"
    up = minikraft("up", "--dir", str(directory), "--base-port", "0", "--detach",
                   "--timeout-s", str(READY_TIMEOUT_S), "--output", "json",
                   timeout=READY_TIMEOUT_S + 30)
    cluster = LocalCluster.load(directory) if (directory / CLUSTER_FILE).exists() else None
    try:
        assert up.returncode == 0, up.stderr
        summary = json.loads(up.stdout)
        assert cluster is not None
        assert [c.node_id for c in cluster.controllers] == [1, 2, 3]
        assert [b.node_id for b in cluster.brokers] == [101, 102, 103]
        assert set(summary["pids"]) == {s.name for s in cluster.all_nodes()}
        deadline = time.monotonic() + 30
        while True:
            health = minikraft("health", "--bootstrap-server", summary["bootstrap_server"],
                               "--output", "json")
            if health.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert health.returncode == 0, health.stdout + health.stderr
    finally:
        down = minikraft("down", "--dir", str(directory), "--output", "json", timeout=60)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["still_running"] == []
    assert sorted(json.loads(down.stdout)["stopped"]) == sorted(s.name for s in cluster.all_nodes())
    assert not any(is_running(s) for s in LocalCluster.load(directory).all_nodes())


def test_up_in_the_foreground_streams_logs_and_stops_all_on_ctrl_c(tmp_path: Path) -> None:
    directory = tmp_path / "fg"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cluster.cli.main", "up", "--dir", str(directory),
         "--base-port", "0", "--timeout-s", str(READY_TIMEOUT_S)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # Started as a shell's background job or under nohup would start it: SIGINT ignored.
        # Ctrl-C must still stop the cluster (up takes SIGINT explicitly).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")),
                              daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S + 30
        prefixes = {f"{name:>13} | " for name in
                    ("controller-1", "controller-2", "controller-3",
                     "broker-101", "broker-102", "broker-103")}
        seen: set[str] = set()
        while time.monotonic() < deadline and proc.poll() is None:
            seen = {p for p in prefixes if any(line.startswith(p) for line in list(lines))}
            if seen == prefixes:
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read()  # type: ignore[union-attr]
        assert seen == prefixes, sorted(prefixes - seen)
        cluster = LocalCluster.load(directory)
        assert len(cluster.running()) == 6
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        reader.join(timeout=5)
        assert proc.returncode == 0, proc.stderr.read()  # type: ignore[union-attr]
        assert not any(is_running(s) for s in cluster.all_nodes())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if (directory / CLUSTER_FILE).exists():
            LocalCluster.load(directory).stop()


def test_up_lays_out_chosen_ids_ports_and_one_nodes_setting(tmp_path: Path) -> None:
    """Issue 30 item 12: brokers 0, 1, 2 on non-consecutive ports of our choosing (a client's
    test suite expects 9092, 9095, 9098), one controller, and num.partitions for broker 1 only,
    which that broker honours when it auto-creates a topic."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    directory = tmp_path / "laid-out"
    picked = free_ports(9)
    ports = [picked[0], picked[3], picked[6]]  # free, and not one after another
    up = minikraft(
        "up", "--dir", str(directory), "--base-port", "0", "--detach", "--output", "json",
        "--controllers", "1", "--broker-ids", "0,1,2",
        "--broker-ports", ",".join(map(str, ports)), "--node-set", "1:num.partitions=3",
        "--timeout-s", str(READY_TIMEOUT_S), timeout=READY_TIMEOUT_S + 30,
    )
    cluster = LocalCluster.load(directory) if (directory / CLUSTER_FILE).exists() else None
    try:
        assert up.returncode == 0, up.stderr
        assert cluster is not None
        addresses = [f"127.0.0.1:{p}" for p in ports]
        assert json.loads(up.stdout)["bootstrap_server"] == ",".join(addresses)
        assert [(b.node_id, b.address) for b in cluster.brokers] == list(
            zip([0, 1, 2], addresses, strict=True)
        )
        assert [c.node_id for c in cluster.controllers] == [3]  # 1.. skipping broker ids
        admin = AdminClient({"bootstrap.servers": addresses[0]})
        listed = admin.list_topics(timeout=10).brokers
        assert {b.id: f"{b.host}:{b.port}" for b in listed.values()} == dict(
            zip([0, 1, 2], addresses, strict=True)
        )
        # Broker 1 alone was given num.partitions=3: a topic it auto-creates has 3.
        producer = Producer({"bootstrap.servers": addresses[1]})
        producer.produce("made-by-broker-1", b"x")
        assert producer.flush(30) == 0
        made = admin.list_topics("made-by-broker-1", timeout=10).topics["made-by-broker-1"]
        assert len(made.partitions) == 3
    finally:
        down = minikraft("down", "--dir", str(directory), "--output", "json", timeout=60)
    assert down.returncode == 0 and json.loads(down.stdout)["still_running"] == []


def test_up_refuses_a_layout_it_cannot_start_in_one_line(tmp_path: Path) -> None:
    """Usage errors (exit 2, one line, nothing written): a node id twice, a port in use (every
    message is pinned in tests/unit/test_layout.py)."""
    busy = socket.create_server(("127.0.0.1", 0))
    try:
        port = busy.getsockname()[1]
        for args, says in [
            (["--broker-ids", "0,1", "--controller-ids", "1"], "node ids [1]"),
            (["--brokers", "1", "--broker-ports", str(port), "--base-port", "0"],
             f"[{port}] on 127.0.0.1 are in use"),
        ]:
            done = minikraft("up", "--dir", str(tmp_path / "never"), "--detach", *args)
            assert done.returncode == 2, (args, done.stderr)
            assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    finally:
        busy.close()
    assert not (tmp_path / "never" / CLUSTER_FILE).exists()
