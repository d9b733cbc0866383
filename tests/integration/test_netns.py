"""`minikraft up --network netns`: every node a real process in its own network namespace, with
its own address on a bridge the command creates, and chaos cutting and degrading the network
itself (nftables, tc/NFQUEUE inside the namespaces). Needs root and a kernel that accepts
`ip netns add`, and for the faults nft, tc and iptables (`make system-deps`): skipped with that
reason where they are missing. Addresses come from cluster/launch/netns.py, the one module that
holds the private test range."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.chaos.netns_delay import READY_LINE
from cluster.launch.local_cluster import CLUSTER_FILE, LocalCluster, is_running, wait_exit
from cluster.launch.netns import (
    NetnsPlan,
    net_id,
    netns_unavailable_reason,
    network_faults_unavailable_reason,
)
from tests.integration.conftest import REPO, minikraft

UNAVAILABLE = netns_unavailable_reason()
needs_netns = pytest.mark.skipif(
    UNAVAILABLE is not None, reason=f"network namespaces unavailable here: {UNAVAILABLE}"
)
# Chaos's network faults exec nft, tc and iptables inside the namespaces (issue 30: a machine
# without `make system-deps` has `ip` but not those).
NO_FAULTS = network_faults_unavailable_reason()
needs_network_faults = pytest.mark.skipif(
    NO_FAULTS is not None, reason=f"network faults unavailable here: {NO_FAULTS}"
)
FAST = [
    "--set", "broker.session.timeout.ms=3000", "--set", "broker.heartbeat.interval.ms=500",
    "--set", "replica.lag.time.max.ms=3000",
]
SEED = 3
RUN_S = "10"


def up(directory: Path, *extra: str) -> dict[str, Any]:
    done = minikraft(
        "up", "--dir", str(directory), "--network", "netns", "--detach", "--base-port", "0",
        "--timeout-s", "60", "--output", "json", *FAST, *extra, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def down(directory: Path) -> dict[str, Any]:
    done = minikraft("down", "--dir", str(directory), "--output", "json", timeout=60)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def netns_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if UNAVAILABLE is not None:
        pytest.skip(f"network namespaces unavailable here: {UNAVAILABLE}")
    directory = tmp_path_factory.mktemp("netns")
    try:
        up(directory)
        yield directory
    finally:
        stopped = down(directory)
        final = LocalCluster.load(directory)
        assert stopped["still_running"] == []
        assert not any(is_running(s) for s in final.all_nodes())
        assert NetnsPlan.for_directory(directory, final.netns_subnet).leftovers() == []


def _netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def run_chaos(directory: Path, *args: str, duration_s: str = RUN_S) -> dict[str, Any]:
    done = minikraft(
        "chaos", "--dir", str(directory), "--seed", str(SEED), "--duration-s", duration_s,
        "--recovery-timeout-s", "60", "--output", "json", *args, timeout=240,
    )
    assert done.stdout, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == 0, (summary["recovery_problem"], summary["checks"],
                                  done.stderr[-3000:])
    assert summary["ok"] is True and summary["recovered"] is True
    assert summary["network"] == "netns"
    assert summary["acked"] > 0
    assert summary["lost"] == 0 and summary["lost_unattributed"] == 0
    assert summary["read_back_distinct"] >= summary["acked"]
    # Time to recover after the heal is measured and bounded by the recovery timeout.
    assert 0 <= summary["recovery_healthy_s"] <= summary["recovery_s"] < 60
    healed = [e for e in summary["faults"] if e["action"] == "net-heal"]
    assert healed, summary["faults"]
    after = [r for r in summary["recovery_after_faults"] if r["action"] == "net-heal"]
    assert len(after) == len(healed) and all(r["recovered"] for r in after)
    return summary


@needs_netns
def test_each_node_runs_in_its_own_namespace_with_its_own_address(netns_dir: Path) -> None:
    data = json.loads((netns_dir / CLUSTER_FILE).read_text())
    cluster = LocalCluster.load(netns_dir)
    plan = cluster.netns
    assert data["network"] == "netns" and plan is not None
    assert plan.id == net_id(netns_dir) and data["netns"]["bridge"] == plan.bridge
    nodes = cluster.all_nodes()
    assert [n.host for n in nodes] == [plan.node_address(i) for i in range(len(nodes))]
    assert data["bootstrap_controller"] == ",".join(
        f"{plan.node_address(i)}:{c.port}" for i, c in enumerate(cluster.controllers)
    )
    host_ns = _netns_inode(os.getpid())
    for spec in nodes:
        assert spec.pid is not None
        inode = _netns_inode(spec.pid)
        assert inode == os.stat(f"/run/netns/{plan.namespace(spec.name)}").st_ino
        assert inode != host_ns
        # Reachable from the host namespace, at the node's own address.
        with socket.create_connection((spec.host, spec.port), timeout=3):
            pass
    assert all(len(name) <= 15 for name in plan.links())


@needs_netns
def leader_epoch(directory: Path) -> int:
    bootstrap = LocalCluster.load(directory).bootstrap_controller
    done = minikraft("metadata-quorum", "--bootstrap-controller", bootstrap, "describe",
                     "--status", "--output", "json")
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)["leader_epoch"])


@needs_network_faults
def test_partition_leader_moves_the_controller_leadership(netns_dir: Path) -> None:
    epoch_before = leader_epoch(netns_dir)
    summary = run_chaos(netns_dir, "--scenario", "partition-leader")
    cuts = [e for e in summary["faults"] if e["action"] == "net-partition"]
    assert cuts and all(e["kind"] == "isolate-leader" for e in cuts)
    for cut in cuts:
        isolated = cut["node"]
        others = {s.name for s in LocalCluster.load(netns_dir).all_nodes()} - {isolated}
        assert set(cut["grudge"][isolated]) == others
        assert all(cut["grudge"][o] == [isolated] for o in others)
    # The isolated leader could not stay leader: the majority side elected a new one.
    assert all(e["node"].startswith("controller-") for e in cuts)
    assert leader_epoch(netns_dir) > epoch_before


@needs_network_faults
def test_partition_halves_splits_each_quorum(netns_dir: Path) -> None:
    summary = run_chaos(netns_dir, "--scenario", "partition-halves")
    cuts = [e for e in summary["faults"] if e["action"] == "net-partition"]
    assert cuts
    for cut in cuts:
        assert cut["kind"] == "majority-minority"
        minority, majority = set(cut["minority"]), set(cut["majority"])
        assert len([n for n in minority if n.startswith("controller")]) == 1
        assert len([n for n in majority if n.startswith("controller")]) == 2
        for node in minority:
            assert set(cut["grudge"][node]) == majority


@needs_network_faults
def test_netem_loss_slows_the_network_and_loses_nothing_acked(netns_dir: Path) -> None:
    summary = run_chaos(netns_dir, "--scenario", "netem-loss")
    netem = next(e for e in summary["faults"] if e["action"] == "netem")
    assert (netem["loss_pct"], netem["delay_ms"], netem["jitter_ms"]) == (10.0, 50.0, 20.0)
    assert len(netem["nodes"]) == 6


@pytest.mark.slow
@needs_network_faults
def test_nemesis_mixes_kills_pauses_and_network_faults(netns_dir: Path) -> None:
    summary = run_chaos(netns_dir, "--nemesis", "kill,pause,partition-random-halves,netem")
    assert summary["scenario"] == "nemesis"
    rounds = [e["nemesis"] for e in summary["faults"] if e["action"] == "nemesis-round"]
    assert rounds and set(rounds) <= {"kill", "pause", "partition-random-halves", "netem"}
    done = {e["action"] for e in summary["faults"]}
    expected = {"kill": "kill", "pause": "pause", "partition-random-halves": "net-partition",
                "netem": "netem"}
    assert {expected[r] for r in rounds} <= done  # every round chosen did fault something
    assert all(is_running(s) for s in LocalCluster.load(netns_dir).all_nodes())


@pytest.mark.slow
@pytest.mark.timeout(2400)
@needs_network_faults
def test_long_network_chaos_then_a_clean_audit(netns_dir: Path) -> None:
    long_s = os.environ.get("CHAOS_LONG_S", "30")
    for args in (["--scenario", "partition-leader"], ["--scenario", "partition-halves"],
                 ["--scenario", "partition-bridge"], ["--scenario", "netem-loss"],
                 ["--nemesis", ",".join(["kill", "pause", "partition-random-halves",
                                         "partition-majorities-ring", "partition-one-way",
                                         "netem"])]):
        run_chaos(netns_dir, *args, duration_s=long_s)
    done = minikraft("audit", "--dir", str(netns_dir), "--output", "json", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["verdict"] == "clean"


@needs_netns
def test_down_removes_namespaces_veths_and_bridge_after_a_kill_9(tmp_path: Path) -> None:
    directory = tmp_path / "crashed"
    summary = up(directory, "--controllers", "1", "--brokers", "1")
    cluster = LocalCluster.load(directory)
    plan = cluster.netns
    assert plan is not None
    assert len(plan.namespaces()) == 2 and plan.bridge in plan.links()
    for pid in summary["pids"].values():
        os.kill(pid, signal.SIGKILL)
        wait_exit(pid, 5.0)
    # A crashed run's namespaces are still there: the next `up` starts over on them.
    assert plan.leftovers()
    again = up(directory)
    assert again["network"] == "netns"
    for pid in again["pids"].values():
        os.kill(pid, signal.SIGKILL)
        wait_exit(pid, 5.0)
    result = down(directory)
    assert result["still_running"] == []
    assert plan.bridge in result["network_removed"]
    assert plan.leftovers() == []
    ids = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    assert plan.prefix not in ids.stdout


def test_up_netns_as_non_root_is_one_clear_line(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        done = minikraft("up", "--dir", str(tmp_path), "--network", "netns", "--detach")
    else:
        # Drop to nobody for this one command, as a non-root user would run it.
        done = subprocess.run(
            ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
             sys.executable, "-m", "cluster.cli.main", "up", "--dir", str(tmp_path / "c"),
             "--network", "netns", "--detach"],
            capture_output=True, text=True, timeout=60, cwd=REPO,
        )
    assert done.returncode == 2
    assert "needs root" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_chaos_without_nft_or_iptables_is_one_clear_line(tmp_path: Path) -> None:
    """Issue 30: on a netns cluster, network chaos on a PATH without nft/iptables refuses at
    once, naming the commands and their packages (exit 2), before any fault or workload."""
    cluster = LocalCluster.plan(tmp_path, controllers=1, brokers=1, base_port=0, network="netns")
    (tmp_path / "config").mkdir()
    cluster.write_cluster_file()  # a netns cluster as `up` records it (not started)
    only_ip = tmp_path / "bin"
    only_ip.mkdir()
    ip = shutil.which("ip")
    if ip is not None:
        (only_ip / "ip").symlink_to(ip)
    done = subprocess.run(
        [sys.executable, "-m", "cluster.cli.main", "chaos", "--dir", str(tmp_path),
         "--scenario", "partition-leader"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
        env={**os.environ, "PATH": str(only_ip)},
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    if UNAVAILABLE is None:  # root with `ip netns add`: the tools are what is missing
        assert "`iptables`, `nft`" in done.stderr and "apt-get install" in done.stderr
    else:
        assert UNAVAILABLE.split(":")[0] in done.stderr


def test_the_capability_probe_names_why_netns_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in (netns_unavailable_reason() or "")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "`ip`" in (netns_unavailable_reason() or "")


def test_netns_only_scenarios_on_loopback_are_usage_errors(tmp_path: Path) -> None:
    cluster = LocalCluster.plan(tmp_path, controllers=1, brokers=1, base_port=0)
    (tmp_path / "config").mkdir()
    cluster.write_cluster_file()  # a loopback cluster as `up` records it (not started)
    for args in (["--scenario", "partition-leader"], ["--scenario", "netem-loss"],
                 ["--nemesis", "kill,partition-random-halves"]):
        done = minikraft("chaos", "--dir", str(tmp_path), *args)
        assert done.returncode == 2, done.stderr
        assert "--network netns" in done.stderr and "Traceback" not in done.stderr
    unknown = minikraft("chaos", "--dir", str(tmp_path), "--nemesis", "meteor")
    assert unknown.returncode == 2 and "unknown nemesis" in unknown.stderr


@needs_network_faults
def test_the_delay_fallback_delays_packets(tmp_path: Path) -> None:
    """Without sch_netem (this kernel's case) latency comes from the NFQUEUE delayer: a TCP
    connect into a delayed namespace takes at least the delay minus the jitter."""
    plan = NetnsPlan.for_directory(tmp_path)
    plan.create([("probe", 1, plan.node_address(0))])
    listener = subprocess.Popen(
        [*plan.exec_prefix("probe"), sys.executable, "-c",
         "import socket,time;s=socket.create_server(('0.0.0.0',7000));time.sleep(30)"],
    )
    delayer = None
    try:
        delayer = subprocess.Popen(
            [*plan.exec_prefix("probe"), sys.executable, "-m", "cluster.chaos.netns_delay",
             "--delay-ms", "80", "--jitter-ms", "10"], cwd=REPO, stdout=subprocess.PIPE, text=True,
        )
        # Queue packets only once the delayer has bound the queue (until then --queue-bypass
        # lets them through undelayed; a fixed 1 s pause was too short at load 12).
        assert delayer.stdout is not None
        assert delayer.stdout.readline().strip() == READY_LINE
        subprocess.run(
            [*plan.exec_prefix("probe"), "iptables", "-w", "5", "-A", "OUTPUT", "-j", "NFQUEUE",
             "--queue-num", "0", "--queue-bypass"], check=True, timeout=10,
        )
        started = time.monotonic()
        with socket.create_connection((plan.node_address(0), 7000), timeout=5):
            elapsed = time.monotonic() - started
        assert elapsed >= 0.065, elapsed
    finally:
        for proc in (delayer, listener):
            if proc is not None:
                proc.kill()
                proc.wait(5)
        plan.remove()
    assert plan.leftovers() == []


def test_bench_network_netns_is_for_failover_only() -> None:
    done = minikraft("bench", "raft", "--network", "netns", "--quick")
    assert done.returncode == 2 and "failover only" in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
@needs_network_faults
def test_bench_failover_with_the_leader_partitioned_away() -> None:
    done = minikraft("bench", "failover", "--network", "netns", "--quick", "--compare", "etcd",
                     "--output", "json", timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["network"] == "netns" and report["kills"] == 3
    samples = report["samples_ms"]
    assert len(samples["minikraft"]) == 3 and len(samples["peer"]) == 3
    # A partitioned leader is only noticed by a timeout: no failover beats the election timeout.
    assert min(samples["minikraft"]) >= 500
