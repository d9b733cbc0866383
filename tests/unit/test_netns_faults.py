"""The shapes of Jepsen's partition nemeses as grudges, the rules and qdisc arguments they turn
into, the netns names (15-char interface limit), and the recovery time after each fault."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from cluster.chaos.netns_delay import NFNL_SUBSYS_QUEUE, NFQA_PACKET_HDR, _attr, _packet_ids
from cluster.chaos.netns_faults import (
    Netem,
    bridge,
    halves,
    isolate,
    majorities_ring,
    nft_ruleset,
    one_way,
)
from cluster.chaos.runner import netns_only_problem, recovery_after_faults
from cluster.launch import netns
from cluster.launch.netns import IFNAME_MAX, TEST_RANGE, NetnsPlan

CONTROLLERS = ["controller-1", "controller-2", "controller-3"]
BROKERS = ["broker-101", "broker-102", "broker-103"]
NODES = CONTROLLERS + BROKERS


def sees(grudge: dict[str, set[str]], a: str, b: str) -> bool:
    return b not in grudge.get(a, set()) and a not in grudge.get(b, set())


def test_isolate_cuts_one_node_from_every_other_both_ways() -> None:
    grudge = isolate("controller-2", NODES)
    assert grudge["controller-2"] == set(NODES) - {"controller-2"}
    assert all(grudge[n] == {"controller-2"} for n in NODES if n != "controller-2")


def test_halves_put_a_minority_of_each_quorum_on_one_side() -> None:
    grudge, majority, minority = halves([CONTROLLERS, BROKERS])
    assert sorted(minority) == ["broker-101", "controller-1"]
    assert len(majority) == 4
    assert all(not sees(grudge, a, b) for a in majority for b in minority)
    assert all(sees(grudge, a, b) for a in majority for b in majority)


def test_bridge_keeps_one_node_per_quorum_seeing_both_sides() -> None:
    grudge, bridges = bridge([CONTROLLERS, BROKERS])
    assert bridges == ["controller-2", "broker-102"]
    assert not sees(grudge, "controller-1", "controller-3")
    assert all(sees(grudge, b, n) for b in bridges for n in NODES)


@pytest.mark.parametrize("n", [3, 5, 6, 7])
def test_majorities_ring_every_node_sees_a_distinct_majority(n: int) -> None:
    nodes = [f"n{i}" for i in range(n)]
    grudge = majorities_ring(nodes)
    views = [frozenset(b for b in nodes if sees(grudge, a, b)) for a in nodes]
    assert all(len(v) >= n // 2 + 1 for v in views)
    if n >= 5:
        assert len(set(views)) == n  # no two nodes share their majority
        assert any(v != frozenset(nodes) for v in views)


def test_one_way_only_the_victims_drop() -> None:
    grudge = one_way(["broker-101"], ["controller-1", "controller-2"])
    assert grudge == {"broker-101": {"controller-1", "controller-2"}}


def test_nft_ruleset_replaces_the_table_atomically() -> None:
    addresses = [str(TEST_RANGE.network_address + 11), str(TEST_RANGE.network_address + 12)]
    ruleset = nft_ruleset(addresses, 10.0)
    lines = ruleset.splitlines()
    assert lines[:2] == ["table inet minikraft", "delete table inet minikraft"]
    assert f"ip saddr {{ {addresses[0]}, {addresses[1]} }} drop" in ruleset
    assert "numgen random mod 1000 < 100 drop" in ruleset
    assert nft_ruleset([], 0.0).splitlines() == lines[:2]  # heal: the table is gone


def test_netem_arguments_are_tc_netem_arguments() -> None:
    profile = Netem(loss_pct=10.0, delay_ms=50.0, jitter_ms=20.0, rate_kbit=2000)
    assert profile.tc_args() == ["delay", "50.0ms", "20.0ms", "loss", "10.0%", "rate", "2000kbit"]
    assert profile.to_json() == {"loss_pct": 10.0, "delay_ms": 50.0, "jitter_ms": 20.0,
                                 "rate_kbit": 2000}


def test_names_carry_the_directory_id_and_fit_the_interface_limit(tmp_path: Path) -> None:
    plan = NetnsPlan.for_directory(tmp_path, str(next(TEST_RANGE.subnets(new_prefix=24))))
    assert plan.namespace("broker-109").startswith(plan.prefix + "-")
    for name in (plan.bridge, plan.veth_host(109), plan.veth_node(109)):
        assert name.startswith(plan.prefix) and len(name) <= IFNAME_MAX
    addresses = [plan.host_address] + [plan.node_address(i) for i in range(18)]
    assert len(set(addresses)) == 19
    other = NetnsPlan.for_directory(tmp_path / "other", str(plan.subnet))
    assert other.id != plan.id


def test_recovery_after_each_fault_is_measured_from_the_windows() -> None:
    windows = [
        {"partition": 0, "start_ms": 1000, "end_ms": 5000, "recovered": True},
        {"partition": 2, "start_ms": 1500, "end_ms": 9000, "recovered": True},
    ]
    events = [
        {"action": "kill", "ts_ms": 900, "node": "broker-101"},
        {"action": "restart", "ts_ms": 2000, "node": "broker-101"},
        {"action": "net-heal", "ts_ms": 9500},
    ]
    result = recovery_after_faults(events, windows)
    assert [(r["action"], r["recovered_after_ms"], r["partition"]) for r in result] == [
        ("restart", 7000, 2), ("net-heal", 0, None)
    ]
    assert [r["interrupted"] for r in result] == [False, False]
    # A fault before the partition recovered: the figure includes it, and says so.
    later = recovery_after_faults([*events, {"action": "pause", "ts_ms": 4000}], windows)
    assert later[0]["interrupted"] is True


def test_network_scenarios_are_refused_on_loopback_only() -> None:
    assert "netns-only" in (netns_only_problem("partition-halves", [], "loopback") or "")
    assert netns_only_problem("partition-halves", [], "netns") is None
    assert netns_only_problem("kill-broker", [], "loopback") is None
    assert netns_only_problem("nemesis", ["kill", "pause"], "loopback") is None
    assert "partition-random-halves" in (
        netns_only_problem("nemesis", ["kill", "partition-random-halves"], "loopback") or ""
    )


def test_missing_fault_tools_are_named_with_their_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: a machine with `ip` but without `make system-deps` (no nft, no iptables) must
    say so, not pass the netns probe and fail later on `exec of "iptables" failed`."""
    monkeypatch.setattr(netns, "netns_unavailable_reason", lambda: None)
    only_ip = tmp_path / "bin"
    only_ip.mkdir()
    (only_ip / "ip").write_text("#!/bin/sh\n")
    (only_ip / "tc").write_text("#!/bin/sh\n")
    for tool in ("ip", "tc"):
        (only_ip / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(only_ip))
    assert netns.missing_fault_tools() == ["iptables", "nft"]
    reason = netns.network_faults_unavailable_reason() or ""
    assert "`iptables`, `nft`" in reason and "apt-get install iptables nftables" in reason
    (only_ip / "nft").symlink_to(only_ip / "ip")
    (only_ip / "iptables").symlink_to(only_ip / "ip")
    assert netns.network_faults_unavailable_reason() is None
    monkeypatch.setattr(netns, "netns_unavailable_reason", lambda: "needs root")
    assert netns.network_faults_unavailable_reason() == "needs root"


def test_the_delayer_reads_packet_ids_from_nfqueue_messages() -> None:
    def packet(packet_id: int) -> bytes:
        attrs = _attr(NFQA_PACKET_HDR, struct.pack("!IHB", packet_id, 0x0800, 3))
        body = struct.pack("!BBH", 2, 0, 0) + attrs
        return struct.pack("=IHHII", 16 + len(body), NFNL_SUBSYS_QUEUE << 8, 0, 0, 0) + body

    assert _packet_ids(packet(7) + packet(8)) == [7, 8]
    assert _packet_ids(packet(7)[:10]) == []  # a truncated read yields nothing, no error
