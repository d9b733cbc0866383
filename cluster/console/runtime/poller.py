"""One poll of the cluster per interval, bounded: each node's GET /v1/status (timeout below the
interval, all at once), one DescribeQuorum to the quorum's leader, and the metadata log's new
committed bytes from disk. The result goes through the pure ConsoleState, which keeps only what
changed; subscribers (the page's SSE streams) get their filtered part of it.

A node that does not answer is shown as down (stopped, paused or cut off: the process table
says which); when no node answers the page says the cluster is down and how to start it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from cluster.chaos.attribution import metadata_log_dirs
from cluster.client.admin_client import describe_quorum
from cluster.console.core.metadata_view import MetadataView
from cluster.console.core.view import (
    ConsoleState,
    Tick,
    brokers_model,
    partition_rows,
    quorum_model,
)
from cluster.console.runtime.metadata_tail import MetadataTail
from cluster.launch.local_cluster import CLUSTER_FILE, LocalCluster, NodeSpec, is_running
from kafkawire.clock import now_ms
from kafkawire.errors import KafkaError

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def clean_shutdown_file_present(spec: NodeSpec) -> bool:
    """A stopped broker's clean-shutdown file (seed 001), in any of its log directories: what
    its next start will tell the controller."""
    root = Path(spec.dir)
    return any(root.glob(CLEAN_SHUTDOWN_FILE)) or any(root.glob(f"*/{CLEAN_SHUTDOWN_FILE}"))


class ClusterWatcher:
    def __init__(self, directory: Path, interval_s: float = 1.0) -> None:
        self.directory = directory
        self.interval_s = interval_s
        self.cluster = LocalCluster.load(directory)
        self._cluster_mtime = (directory / CLUSTER_FILE).stat().st_mtime
        self.view = MetadataView()
        self.tail = MetadataTail()
        self.state = ConsoleState()
        self.subscribers: set[Callable[[Tick], None]] = set()
        self.pending_faults: list[dict[str, Any]] = []
        self.node_states: dict[str, str] = {}  # node name -> running|stopped|paused|silent
        self.paused: Callable[[], set[str]] = set
        self.ticks = 0
        self.last_poll_ms = 0.0
        self._session: aiohttp.ClientSession | None = None
        self.changed = asyncio.Event()

    def reload_cluster(self) -> None:
        """cluster.json changes when a node is restarted (by the console, chaos or the CLI)."""
        path = self.directory / CLUSTER_FILE
        with contextlib.suppress(OSError, ValueError):
            mtime = path.stat().st_mtime
            if mtime != self._cluster_mtime:
                self.cluster = LocalCluster.load(self.directory)
                self._cluster_mtime = mtime

    async def _status(self, spec: NodeSpec) -> dict[str, Any] | None:
        assert self._session is not None
        url = f"http://{spec.host}:{spec.http_port}/v1/status"
        try:
            async with self._session.get(url) as response:
                if response.status != 200:
                    return None
                body: dict[str, Any] = await response.json()
                return body
        except (aiohttp.ClientError, TimeoutError, ValueError, OSError):
            return None

    async def _describe(self) -> dict[str, Any] | None:
        try:
            status = await describe_quorum(
                self.cluster.bootstrap_controller,
                timeout_ms=max(300, int(self.interval_s * 800)),
            )
        except (KafkaError, OSError, TimeoutError):
            return None
        data = status.status_json(cluster_id=None)
        replication = {(r["node_id"], r["directory_id"]): r for r in status.replication_json()}
        for voter in data["current_voters"]:
            voter["log_end_offset"] = replication.get(
                (voter["id"], voter["directory_id"]), {}).get("log_end_offset")
        return {
            "leader_id": data["leader_id"] if data["leader_id"] >= 0 else None,
            "leader_epoch": data["leader_epoch"],
            "high_watermark": data["high_watermark"],
            "voters": data["current_voters"],
            "observers": data["current_observers"],
            "could_be_voters": data["could_be_voters"],
        }

    async def poll_once(self) -> Tick:
        started = time.monotonic()
        self.reload_cluster()
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=max(0.3, self.interval_s * 0.8))
            self._session = aiohttp.ClientSession(timeout=timeout)
        nodes = self.cluster.all_nodes()
        statuses, described = await asyncio.gather(
            asyncio.gather(*(self._status(s) for s in nodes)), self._describe())
        by_name = dict(zip((s.name for s in nodes), statuses, strict=True))
        paused = self.paused()
        for spec in nodes:
            running = is_running(spec)
            self.node_states[spec.name] = (
                "paused" if spec.name in paused else
                "running" if by_name[spec.name] is not None else
                "silent" if running else "stopped")
        controller_status = {s.node_id: by_name[s.name] for s in self.cluster.controllers}
        broker_status = {s.node_id: by_name[s.name] for s in self.cluster.brokers}
        hwms = [s["high_watermark"] for s in controller_status.values()
                if s and isinstance(s.get("high_watermark"), int)]
        if described is not None and isinstance(described.get("high_watermark"), int):
            hwms.append(described["high_watermark"])
        high_watermark = max(hwms, default=0)
        dirs = metadata_log_dirs([Path(c.dir) for c in self.cluster.controllers])
        entries = await asyncio.to_thread(self.tail.read, dirs, high_watermark, self.view)
        rows = partition_rows(self.view, broker_status)
        quorum = quorum_model(self.view, controller_status, described)
        quorum["nodes"] = dict(self.node_states)
        quorum["cluster_id"] = self.cluster.cluster_id
        quorum["network"] = self.cluster.network
        brokers = brokers_model(
            self.view, [s.node_id for s in self.cluster.brokers], broker_status,
            {s.node_id: clean_shutdown_file_present(s) for s in self.cluster.brokers
             if by_name[s.name] is None},
        )
        down = None
        if not any(statuses):
            down = (f"No node of the cluster under {self.directory} answers: start it with "
                    f"`minikraft up --dir {self.directory} --detach` (or restart nodes here).")
        faults, self.pending_faults = self.pending_faults, []
        tick = self.state.advance(now_ms(), rows, quorum, brokers, entries, faults, down)
        self.ticks += 1
        self.last_poll_ms = (time.monotonic() - started) * 1000
        for subscriber in list(self.subscribers):
            subscriber(tick)
        return tick

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    await self.poll_once()
                except Exception:  # one bad tick never ends the console
                    log.exception("console: poll failed")
                self.changed.clear()
                remaining = self.interval_s - (time.monotonic() - started)
                # An action wakes the poller at once, so its effect shows without a wait.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), max(0.05, remaining))
        finally:
            if self._session is not None:
                await self._session.close()
