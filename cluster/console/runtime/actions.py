"""What the page's buttons do, through the same code as chaos and the CLI, journaled like chaos.

- Process faults (kill -9, clean stop, restart, pause, resume) and network cuts (isolate, heal)
  go through cluster/chaos/process_faults.py's ProcessFaults, whose events are the chaos
  journal's: every event is appended to `D/chaos/console-<session>.jsonl`, which the audit's
  report reads like a chaos run's summary (analytics/read/chaos_events.py), so its timelines mark
  what was done from the page.
- Elections go through the CLI's run_elections (ElectLeaders v3), the unclean-recovery tool
  through the CLI's run_recovery, the controller disk replacement (seed 003) through the CLI
  itself (`storage format --no-initial-controllers`, `metadata-quorum add-voter` /
  `remove-voter`) as an operator types it, the audit through `minikraft audit`.
- The workload is chaos's ChaosWorkload (journaled sends and acks, read back at the end to count
  lost acked writes), with the acks and rate chosen on the page, and bounded in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from cluster.chaos.attribution import metadata_log_dirs, scan_recovering_elections
from cluster.chaos.netns_faults import isolate
from cluster.chaos.process_faults import ProcessFaults
from cluster.chaos.workload import ChaosWorkload
from cluster.client.elections import run_elections
from cluster.client.unclean_recovery import run_recovery, target_json
from cluster.console.runtime.poller import ClusterWatcher
from cluster.launch.local_cluster import NETNS, NodeSpec, is_running
from kafkawire import constants
from raft.core.replica_key import uuid_to_str
from raft.runtime.meta_properties import read_meta_properties

log = logging.getLogger(__name__)

ELECTION_TYPES = {
    "PREFERRED": constants.ELECTION_PREFERRED,
    "UNCLEAN": constants.ELECTION_UNCLEAN,
    "DESIGNATED": constants.ELECTION_DESIGNATED,
}

WORKLOAD_MAX_S = 600.0  # a workload left running stops by itself (every load loop bounded)
WORKLOAD_JOURNAL = "console-acks.journal"
REPLACE_WAIT_S = 60.0


class ActionError(ValueError):
    """A request the page made that cannot be done (shown to the user as is)."""


class ConsoleActions:
    def __init__(self, watcher: ClusterWatcher) -> None:
        self.watcher = watcher
        self.faults = ProcessFaults(watcher.cluster)
        self.session = uuid.uuid4().hex[:6]
        self.journal = watcher.directory / "chaos" / f"console-{self.session}.jsonl"
        self._journaled = 0
        self.workload: ChaosWorkload | None = None
        self._workload_stop: asyncio.Event | None = None
        self._workload_task: asyncio.Task[None] | None = None
        self.workload_result: dict[str, Any] | None = None
        self.audits: list[dict[str, Any]] = []
        self.busy: set[str] = set()
        self.history: list[dict[str, Any]] = []
        watcher.paused = lambda: set(self.faults.paused)

    # -- journal ------------------------------------------------------------------------------

    def _flush_events(self) -> None:
        """New ProcessFaults events to the console's chaos journal and to the page."""
        new = self.faults.events[self._journaled:]
        if not new:
            return
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        with self.journal.open("a", encoding="utf-8") as handle:
            for event in new:
                handle.write(json.dumps({**event, "source": "console"}) + "\n")
        self._journaled = len(self.faults.events)
        self.watcher.pending_faults.extend(new)
        self.watcher.changed.set()

    def record(self, action: str, spec: NodeSpec | None = None, **extra: Any) -> None:
        self.faults.record(action, spec, **extra)
        self._flush_events()

    # -- dispatch -----------------------------------------------------------------------------

    def _node(self, name: Any) -> NodeSpec:
        self.faults.cluster = self.watcher.cluster
        if self.faults.net is not None:
            self.faults.net.cluster = self.watcher.cluster
        for spec in self.watcher.cluster.all_nodes():
            if spec.name == name or str(spec.node_id) == str(name):
                return spec
        raise ActionError(f"no node {name!r} in this cluster")

    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        kind = str(request.get("action", ""))
        handler: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = {
            "kill": self._kill, "stop": self._stop, "restart": self._restart,
            "pause": self._pause, "resume": self._resume, "isolate": self._isolate,
            "heal": self._heal, "elect": self._elect, "unclean-recovery": self._recover,
            "replace-controller": self._replace_controller,
            "workload-start": self._workload_start, "workload-stop": self._workload_stop_action,
            "audit": self._audit, "create-topic": self._create_topic,
            "produce": self._produce, "kill-many": self._kill_many,
        }.get(kind)
        if handler is None:
            raise ActionError(f"unknown action {kind!r}")
        started = time.time()
        try:
            result = await handler(request)
        finally:
            self._flush_events()
        entry = {"ts_ms": int(started * 1000), "action": kind,
                 "took_ms": int((time.time() - started) * 1000), "result": result}
        self.history.append(entry)
        self.watcher.changed.set()
        return result

    # -- processes ----------------------------------------------------------------------------

    async def _kill(self, request: dict[str, Any]) -> dict[str, Any]:
        spec = self._node(request.get("node"))
        if not is_running(spec):
            raise ActionError(f"{spec.name} is not running")
        await self.faults.kill(spec)
        self._flush_events()
        return {"node": spec.name, "killed": not is_running(spec)}

    async def _kill_many(self, request: dict[str, Any]) -> dict[str, Any]:
        """kill -9 several nodes at once (every ISR member dying together)."""
        specs = [self._node(n) for n in request.get("nodes") or []]
        if not specs:
            raise ActionError("no nodes named")
        await asyncio.gather(*(self.faults.kill(s) for s in specs if is_running(s)))
        return {"killed": [s.name for s in specs if not is_running(s)]}

    async def _stop(self, request: dict[str, Any]) -> dict[str, Any]:
        spec = self._node(request.get("node"))
        if not is_running(spec):
            raise ActionError(f"{spec.name} is not running")
        clean = await self.faults.terminate(spec)
        return {"node": spec.name, "clean": clean}

    async def _restart(self, request: dict[str, Any]) -> dict[str, Any]:
        spec = self._node(request.get("node"))
        if is_running(spec):
            raise ActionError(f"{spec.name} is running: stop or kill it first")
        pid = await asyncio.to_thread(self.faults.restart, spec)
        return {"node": spec.name, "pid": pid}

    async def _pause(self, request: dict[str, Any]) -> dict[str, Any]:
        spec = self._node(request.get("node"))
        if not is_running(spec):
            raise ActionError(f"{spec.name} is not running")
        self.faults.pause(spec)
        return {"node": spec.name, "paused": spec.name in self.faults.paused}

    async def _resume(self, request: dict[str, Any]) -> dict[str, Any]:
        spec = self._node(request.get("node"))
        if spec.name not in self.faults.paused:
            raise ActionError(f"{spec.name} is not paused")
        self.faults.resume(spec)
        return {"node": spec.name, "paused": False}

    async def _isolate(self, request: dict[str, Any]) -> dict[str, Any]:
        """Cut a node off from every other node: nftables in its namespace (netns mode), else
        the nodes' own fault layer (loopback); clients still reach it, as in Jepsen."""
        spec = self._node(request.get("node"))
        others = [s for s in self.watcher.cluster.all_nodes() if s.name != spec.name]
        if self.watcher.cluster.network == NETNS and self.faults.net is not None:
            await self.faults.net.partition(
                isolate(spec.name, [s.name for s in others]), "isolate", node=spec.name)
            return {"node": spec.name, "how": "nftables"}
        await self.faults.partition(spec, [s for s in others if is_running(s)])
        return {"node": spec.name, "how": "fault layer"}

    async def _heal(self, _request: dict[str, Any]) -> dict[str, Any]:
        restarted = await self.faults.heal_all()
        return {"restarted": restarted}

    # -- elections and recovery ----------------------------------------------------------------

    def _bootstrap_server(self) -> str:
        return self.watcher.cluster.bootstrap_server

    async def _elect(self, request: dict[str, Any]) -> dict[str, Any]:
        kind = str(request.get("type", "")).upper()
        if kind not in ELECTION_TYPES:
            raise ActionError(f"election type must be one of {sorted(ELECTION_TYPES)}")
        topic, partition = str(request.get("topic", "")), request.get("partition")
        if not topic or not isinstance(partition, int):
            raise ActionError("an election names a topic and a partition")
        leader = request.get("leader")
        if kind == "DESIGNATED" and not isinstance(leader, int):
            raise ActionError("a DESIGNATED election names the new leader")
        self.record(f"election-{kind.lower()}", topic=topic, partition=partition,
                    **({"leader": leader} if kind == "DESIGNATED" else {}))
        try:
            results = await asyncio.to_thread(
                run_elections, self._bootstrap_server(), ELECTION_TYPES[kind],
                [(topic, partition, leader if kind == "DESIGNATED" else None)])
        except SystemExit as exc:  # the CLI's fail(): its message went to stderr
            raise ActionError(f"the election request failed (exit {exc.code})") from exc
        return {"results": results}

    async def _recover(self, request: dict[str, Any]) -> dict[str, Any]:
        """`minikraft unclean-recovery --automated-recovery --all-offline-partitions`."""
        duration_ms = int(request.get("duration_ms", 5000))
        self.record("unclean-recovery", duration_ms=duration_ms)
        targets, _stopped = await run_recovery(
            self._bootstrap_server(), None, duration_ms, 3, automated=True,
            bootstrap_controller=self.watcher.cluster.bootstrap_controller)
        return {"partitions": [target_json(t) for t in targets]}

    # -- seed 003: replace a controller's failed disk -------------------------------------------

    async def _cli(self, *args: str) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cluster.cli.main", *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), REPLACE_WAIT_S)
        return int(process.returncode or 0), (out + err).decode(errors="replace")

    async def _replace_controller(self, request: dict[str, Any]) -> dict[str, Any]:
        """Seed 003's walk for a failed disk: kill, wipe the metadata directory, format it with
        a new directory id (no voter set), start it as an observer, add the new key as a voter,
        remove the old key."""
        spec = self._node(request.get("node"))
        if spec.role != "controller":
            raise ActionError("only a controller's disk is replaced this way")
        if "replace" in self.busy:
            raise ActionError("a replacement is already running")
        self.busy.add("replace")
        steps: list[dict[str, Any]] = []
        try:
            metadata = Path(spec.dir) / "metadata"
            meta = read_meta_properties(metadata)
            old = None if meta is None else meta.directory_id
            if old is None:
                raise ActionError(f"{spec.name}'s metadata directory is not formatted")
            old_id = uuid_to_str(old)
            if is_running(spec):
                await self.faults.kill(spec)
            steps.append({"step": "kill", "ok": not is_running(spec)})
            await asyncio.to_thread(shutil.rmtree, metadata, True)
            self.record("wipe-disk", spec, path=str(metadata), old_directory_id=old_id)
            steps.append({"step": "wipe", "ok": not metadata.exists()})
            code, out = await self._cli("storage", "format", "--config", spec.config,
                                        "--cluster-id", self.watcher.cluster.cluster_id,
                                        "--no-initial-controllers")
            steps.append({"step": "format", "ok": code == 0, "output": out[-500:]})
            if code != 0:
                return {"steps": steps}
            new_meta = read_meta_properties(metadata)
            assert new_meta is not None
            new_id = uuid_to_str(new_meta.directory_id)
            spec.directory_id = new_id
            await self._restart({"node": spec.name})
            steps.append({"step": "start as observer", "ok": is_running(spec),
                          "directory_id": new_id})
            bootstrap = ",".join(c.address for c in self.watcher.cluster.controllers
                                 if c.name != spec.name)
            deadline = time.monotonic() + REPLACE_WAIT_S
            while True:  # AddVoter needs the observer known to the leader, with its endpoint
                code, out = await self._cli("metadata-quorum", "--bootstrap-controller",
                                            bootstrap, "add-voter", "--replica-id",
                                            str(spec.node_id), "--replica-uuid", new_id)
                if code == 0 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(1.0)
            self.record("add-voter", spec, directory_id=new_id, ok=code == 0)
            steps.append({"step": "add-voter", "ok": code == 0, "output": out[-500:]})
            if code != 0:
                return {"steps": steps}
            code, out = await self._cli("metadata-quorum", "--bootstrap-controller", bootstrap,
                                        "remove-voter", "--replica-id", str(spec.node_id),
                                        "--replica-uuid", old_id)
            self.record("remove-voter", spec, directory_id=old_id, ok=code == 0)
            steps.append({"step": "remove-voter", "ok": code == 0, "output": out[-500:]})
            return {"steps": steps, "old_directory_id": old_id, "new_directory_id": new_id}
        finally:
            self.busy.discard("replace")

    # -- topics and workload ------------------------------------------------------------------

    async def _create_topic(self, request: dict[str, Any]) -> dict[str, Any]:
        """`topics create` through a broker (CreateTopics), min.insync.replicas as asked."""
        from cluster.client.broker_client import create_topic, data_client

        topic = str(request.get("topic", "")).strip()
        if not topic:
            raise ActionError("a topic name is needed")
        partitions = int(request.get("partitions", 1))
        rf = int(request.get("replication_factor", min(3, len(self.watcher.cluster.brokers))))
        min_isr = int(request.get("min_isr", min(2, rf)))
        client = data_client(f"console-{self.session}")
        try:
            await create_topic(client, self._bootstrap_server(), topic, partitions, rf,
                               {"min.insync.replicas": str(min_isr)})
        finally:
            await client.close()
        return {"topic": topic, "partitions": partitions, "replication_factor": rf,
                "min_isr": min_isr}

    async def _produce(self, request: dict[str, Any]) -> dict[str, Any]:
        """`minikraft produce --acks all --num-records N` (at most 10,000)."""
        from cluster.client.producer import produce_records

        topic = str(request.get("topic", "")).strip()
        count = max(1, min(int(request.get("num_records", 100)), 10_000))
        result = await produce_records(self._bootstrap_server(), topic, acks=-1,
                                       num_records=count, record_size=100)
        return {"topic": topic, "sent": result["sent"], "acked": result["acked"],
                "errors": result["errors"]}

    def workload_status(self) -> dict[str, Any] | None:
        if self.workload is None:
            return None
        stats = self.workload.producers
        errors: dict[str, int] = {}
        for s in stats:
            for name, n in s.errors.items():
                errors[name] = errors.get(name, 0) + n
        return {
            "topic": self.workload.topic, "acks": self.workload.acks,
            "records_per_s": self.workload.records_per_s,
            "running": self._workload_task is not None and not self._workload_task.done(),
            "sent": sum(s.sent for s in stats), "acked": sum(len(s.acked) for s in stats),
            "errors": errors, "result": self.workload_result,
        }

    async def _workload_start(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._workload_task is not None and not self._workload_task.done():
            raise ActionError("a workload is running: stop it first")
        acks = int(request.get("acks", -1))
        if acks not in (-1, 0, 1):
            raise ActionError("acks is -1 (all), 0 or 1")
        rate = float(request.get("records_per_s", 50))
        max_s = min(float(request.get("max_s", WORKLOAD_MAX_S)), WORKLOAD_MAX_S)
        cluster = self.watcher.cluster
        run_id = uuid.uuid4().hex[:6]
        journal_dir = cluster.dir / "journal"
        journal_dir.mkdir(parents=True, exist_ok=True)
        rf = min(3, len(cluster.brokers))
        self.workload = ChaosWorkload(
            bootstrap_server=self._bootstrap_server(),
            bootstrap_controller=cluster.bootstrap_controller,
            topic=str(request.get("topic") or f"console-{run_id}"),
            journal_path=journal_dir / WORKLOAD_JOURNAL, run_id=run_id,
            partitions=int(request.get("partitions", 3)), replication_factor=rf,
            min_insync_replicas=min(2, rf), acks=acks, records_per_s=rate,
        )
        self.workload_result = None
        await self.workload.create_topic()
        self._workload_stop = asyncio.Event()
        self.record("workload-start", topic=self.workload.topic, acks=acks,
                    records_per_s=rate)
        self._workload_task = asyncio.create_task(self._run_workload(self._workload_stop, max_s))
        return {"topic": self.workload.topic}

    async def _run_workload(self, stop: asyncio.Event, max_s: float) -> None:
        assert self.workload is not None
        producing = asyncio.create_task(self.workload.run(stop))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max_s)
        stop.set()
        await producing

    async def _workload_stop_action(self, _request: dict[str, Any]) -> dict[str, Any]:
        if self.workload is None or self._workload_stop is None or self._workload_task is None:
            raise ActionError("no workload was started")
        self._workload_stop.set()
        await self._workload_task
        read = await self.workload.read_back()
        result = self.workload.verify(read)
        cluster = self.watcher.cluster
        scan = await asyncio.to_thread(
            scan_recovering_elections,
            metadata_log_dirs([Path(c.dir) for c in cluster.controllers]),
            self.watcher.view.next_offset)
        elections = [e.to_json() for e in scan.elections if e.topic == self.workload.topic]
        self.workload_result = {
            "sent": result["sent"], "acked": result["acked"], "lost": result["lost"],
            "duplicated": result["duplicated"], "lost_values": result["lost_values"][:20],
            "recovering_elections": elections,
        }
        self.record("workload-stop", topic=self.workload.topic, acked=result["acked"],
                    lost=result["lost"])
        return self.workload_result

    async def stop_workload(self) -> None:
        if self._workload_stop is not None:
            self._workload_stop.set()
        if self._workload_task is not None:
            with contextlib.suppress(Exception):
                await self._workload_task

    # -- audit --------------------------------------------------------------------------------

    async def _audit(self, _request: dict[str, Any]) -> dict[str, Any]:
        """`minikraft audit --dir D --report D/console-audit/<n>`; the page links the report."""
        if "audit" in self.busy:
            raise ActionError("an audit is already running")
        self.busy.add("audit")
        try:
            number = len(self.audits) + 1
            report = self.watcher.directory / "console-audit" / f"{self.session}-{number}"
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cluster.cli.main", "audit", "--dir",
                str(self.watcher.directory), "--report", str(report), "--output", "json",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await process.communicate()
            verdict = None
            with contextlib.suppress(ValueError):
                verdict = json.loads(out.decode()).get("verdict")
            audit = {"number": number, "exit": process.returncode, "verdict": verdict,
                     "report": f"/audit/{report.name}/index.html"
                     if (report / "index.html").exists() else None,
                     "stderr": err.decode(errors="replace")[-800:]}
            self.audits.append(audit)
            return audit
        finally:
            self.busy.discard("audit")
