"""ComposeNodes' engine calls, with the docker CLI replaced by a recorder: the pause that falls
back to SIGSTOP when the cgroup freezer cannot freeze the node (seen under heavy disk load on a
real engine), and the reconnect that restores a node's aliases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster.chaos import compose_faults
from cluster.chaos.compose_faults import ComposeFaultError, ComposeNodes
from cluster.launch.local_cluster import COMPOSE, LocalCluster, NodeSpec


def _nodes(
    monkeypatch: pytest.MonkeyPatch, fail: set[str]
) -> tuple[ComposeNodes, list[tuple[str, ...]]]:
    spec = NodeSpec("broker", 101, "127.0.0.1", 1, 0, "/d", "", "", extra={"container": "c" * 64})
    cluster = LocalCluster(Path("/d"), "id", [], [spec], network=COMPOSE)
    calls: list[tuple[str, ...]] = []

    def docker(self: ComposeNodes, *args: str, timeout_s: float = 0) -> str:
        calls.append(args)
        if args[0] in fail:
            raise ComposeFaultError(f"docker {args[0]}: OCI runtime failed: unable to freeze")
        if args[0] == "inspect":
            networks: dict[str, Any] = {"p_default": {"Aliases": ["broker-1", "c" * 12]}}
            return json.dumps([{"NetworkSettings": {"Networks": networks}}])
        return ""

    monkeypatch.setattr(ComposeNodes, "docker", docker)
    monkeypatch.setattr(compose_faults.time, "sleep", lambda _s: None)
    return ComposeNodes(cluster), calls


def test_pause_is_docker_pause_and_falls_back_to_sigstop(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, calls = _nodes(monkeypatch, set())
    spec = nodes.cluster.brokers[0]
    assert nodes.pause(spec) == "docker pause"
    nodes.unpause(spec)
    assert [c[0] for c in calls] == ["pause", "unpause"]

    nodes, calls = _nodes(monkeypatch, {"pause"})
    how = nodes.pause(spec)
    assert how.startswith("SIGSTOP (docker pause failed:") and "unable to freeze" in how
    nodes.unpause(spec)
    assert [c[0] for c in calls] == ["pause"] * compose_faults.PAUSE_ATTEMPTS + ["kill", "kill"]
    assert calls[-2][1:3] == ("--signal", "STOP") and calls[-1][1:3] == ("--signal", "CONT")


def test_disconnect_then_reconnect_keeps_the_service_alias(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nodes, calls = _nodes(monkeypatch, set())
    spec = nodes.cluster.brokers[0]
    assert nodes.disconnect(spec) == ["p_default"]
    nodes.reconnect(spec)
    assert calls[1] == ("network", "disconnect", "p_default", "c" * 64)
    assert calls[2] == ("network", "connect", "--alias", "broker-1", "p_default", "c" * 64)
    nodes.reconnect(spec)  # nothing left to reconnect
    assert len(calls) == 3
