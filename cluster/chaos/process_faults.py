"""Faults on the processes of a local cluster: kill, pause, terminate, restart and network cuts.

Every signal goes to the pid recorded in cluster.json, and only while that pid still runs the
node's config (LocalCluster.kill / is_running): never a name match. Network cuts go through each
node's fault layer (POST /v1/faults on its HTTP port) on loopback, through the kernel inside the
node namespaces in netns mode (cluster/chaos/netns_faults.py). On a docker compose cluster the
same faults go through the engine instead (cluster/chaos/compose_faults.py: docker kill, stop,
pause, start, network disconnect). Every fault is recorded as an event with the time it
happened, so the summary can line faults up with unavailability windows.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from cluster.chaos.compose_faults import ComposeNodes
from cluster.chaos.netns_faults import NetnsFaults
from cluster.launch.local_cluster import (
    COMPOSE,
    NETNS,
    LocalCluster,
    NodeSpec,
    is_running,
    send_signal,
)
from kafkawire.clock import now_ms

log = logging.getLogger(__name__)

SIGTERM_WAIT_S = 15.0


def fault_event(action: str, spec: NodeSpec | None = None, **extra: Any) -> dict[str, Any]:
    """One chaos event as the run summaries and the audit report read it (analytics.
    read.chaos_events): ts_ms, action, the node's name and pid, anything extra."""
    event = {"ts_ms": now_ms(), "action": action, **extra}
    if spec is not None:
        event["node"] = spec.name
        event["pid"] = spec.pid
    return event


@dataclass
class ProcessFaults:
    cluster: LocalCluster
    events: list[dict[str, Any]] = field(default_factory=list)
    paused: dict[str, int] = field(default_factory=dict)  # node name -> pid held by SIGSTOP
    cut: set[str] = field(default_factory=set)  # nodes with fault-layer rules in force
    # netns mode: faults on the network itself (nftables, tc) inside the node namespaces.
    net: NetnsFaults | None = None
    # compose: the containers, through the engine
    compose: ComposeNodes | None = None

    def __post_init__(self) -> None:
        if self.cluster.network == NETNS and self.net is None:
            self.net = NetnsFaults(self.cluster, self.record)
        if self.cluster.network == COMPOSE and self.compose is None:
            self.compose = ComposeNodes(self.cluster)

    def record(self, action: str, spec: NodeSpec | None = None, **extra: Any) -> None:
        event = fault_event(action, spec, **extra)
        self.events.append(event)
        log.info("chaos: %s", event)

    # -- signals --------------------------------------------------------------------------------

    async def kill(self, spec: NodeSpec) -> None:
        """SIGKILL: no flush, no controlled shutdown."""
        if not is_running(spec):
            return
        self.record("kill", spec)
        assert spec.pid is not None
        if self.compose is not None:
            await asyncio.to_thread(self.compose.kill, spec)  # docker kill
        else:
            send_signal(spec.pid, signal.SIGKILL)
        await self.wait_exit(spec, 5.0)

    async def terminate(self, spec: NodeSpec) -> bool:
        """SIGTERM (clean shutdown); SIGKILL after SIGTERM_WAIT_S. True if it exited cleanly."""
        if not is_running(spec):
            return True
        self.record("terminate", spec)
        assert spec.pid is not None
        if self.compose is not None:  # docker stop: SIGTERM, SIGKILL after the grace time
            clean = await asyncio.to_thread(self.compose.stop, spec, SIGTERM_WAIT_S)
            if not clean:
                self.record("kill-after-terminate-timeout", spec)
            return clean
        send_signal(spec.pid, signal.SIGTERM)
        if await self.wait_exit(spec, SIGTERM_WAIT_S):
            return True
        self.record("kill-after-terminate-timeout", spec)
        send_signal(spec.pid, signal.SIGKILL)
        await self.wait_exit(spec, 5.0)
        return False

    async def wait_exit(self, spec: NodeSpec, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not is_running(spec):
                return True
            await asyncio.sleep(0.05)
        return not is_running(spec)

    def pause(self, spec: NodeSpec) -> None:
        """SIGSTOP: the process holds its sockets but answers nothing (a GC pause, a VM stall)."""
        if spec.pid is None or not is_running(spec):
            return
        if self.compose is not None:
            # docker pause: the cgroup freezer (SIGSTOP when it cannot freeze the node)
            self.record("pause", spec, how=self.compose.pause(spec))
        else:
            self.record("pause", spec)
            send_signal(spec.pid, signal.SIGSTOP)
        self.paused[spec.name] = spec.pid

    def resume(self, spec: NodeSpec) -> None:
        pid = self.paused.pop(spec.name, None)
        if pid is not None and pid == spec.pid and is_running(spec):
            if self.compose is not None:
                self.compose.unpause(spec)
            else:
                send_signal(pid, signal.SIGCONT)
            self.record("resume", spec)

    def restart(self, spec: NodeSpec) -> int:
        """Start the node again with its own config and data (a stopped node only)."""
        if is_running(spec):
            return spec.pid or 0
        # compose: docker start, the container's own data and network
        if self.compose is not None:
            pid = self.compose.start(spec)
        else:
            pid = self.cluster.start_node(spec)
        self.cluster.write_cluster_file()
        self.record("restart", spec)
        return pid

    # -- network --------------------------------------------------------------------------------

    async def set_faults(self, spec: NodeSpec, rules: dict[str, Any]) -> None:
        url = f"http://{spec.host}:{spec.http_port}/v1/faults"
        timeout = aiohttp.ClientTimeout(total=3)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, json=rules) as response,
        ):
            if response.status != 200:
                raise RuntimeError(f"{spec.name}: POST /v1/faults -> {response.status}")

    async def partition(self, spec: NodeSpec, peers: list[NodeSpec]) -> None:
        """Cut spec off from peers, both ways (each side drops the other)."""
        peer_ids = sorted(p.node_id for p in peers)
        if self.compose is not None:
            # A container is cut off its networks as a whole, from every peer at once.
            networks = await asyncio.to_thread(self.compose.disconnect, spec)
            self.record("partition", spec, peers=peer_ids, how="docker network disconnect",
                        networks=networks)
            self.cut.add(spec.name)
            return
        self.record("partition", spec, peers=peer_ids)
        await self.set_faults(spec, {"partition": peer_ids})
        self.cut.add(spec.name)
        for peer in peers:
            await self.set_faults(peer, {"partition": [spec.node_id]})
            self.cut.add(peer.name)

    async def heal_network(self) -> None:
        """Clear every fault-layer rule this run set; a node that cannot be reached is skipped
        (a restarted process starts with no rules)."""
        for spec in self.cluster.all_nodes():
            if self.compose is not None and spec.name in self.cut:
                # Reconnected even when it is down: a stopped container keeps its networks.
                await asyncio.to_thread(self.compose.reconnect, spec)
                continue
            if spec.name not in self.cut or not is_running(spec):
                continue
            try:
                await self.set_faults(spec, {})
            except (aiohttp.ClientError, TimeoutError, RuntimeError) as exc:
                log.warning("chaos: could not heal %s: %s", spec.name, exc)
        if self.cut:
            self.record("heal-network", nodes=sorted(self.cut))
        self.cut.clear()

    async def heal_all(self) -> list[str]:
        """Resume what is paused, lift every network rule, and start what is not running."""
        for spec in self.cluster.all_nodes():
            if spec.name in self.paused:
                self.resume(spec)
        await self.heal_network()
        if self.net is not None:
            await self.net.heal()
        restarted = []
        for spec in self.cluster.all_nodes():
            if not is_running(spec):
                self.restart(spec)
                restarted.append(spec.name)
        return restarted
