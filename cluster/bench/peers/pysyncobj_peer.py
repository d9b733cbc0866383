"""PySyncObj as the Raft peer: 3 nodes (separate processes on 127.0.0.1) replicating a counter.
PySyncObj keeps its journal in memory and never fsyncs by default, so it is paired with minikraft
run with `minikraft.raft.fsync=false`. Like minikraft's bench, the workload runs inside the
leader: each node serves POST /bench on a small HTTP port and the leader drives `concurrency`
outstanding `incr` commands, each resubmitted from the commit callback of the previous one.

Run as `python -m cluster.bench.peers.pysyncobj_peer --port P --partners P2,P3 --http-port H`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cluster.bench.peers.procs import PeerCluster, PeerMissing, free_ports, spawn
from cluster.bench.raft_workload import workload_summary

# Matched to minikraft's controller.quorum.election.timeout.ms (1000, randomised up to 2x).
ELECTION_MIN_S, ELECTION_MAX_S = 1.0, 2.0


def _counter_class() -> Any:
    from pysyncobj import SyncObj, replicated

    class Counter(SyncObj):  # type: ignore[misc]
        def __init__(self, self_address: str, partners: list[str], conf: Any) -> None:
            super().__init__(self_address, partners, conf)
            self._value = 0

        @replicated  # type: ignore[misc]
        def incr(self, amount: int) -> int:
            self._value += amount
            return self._value

    return Counter


def run_workload(counter: Any, records: int, concurrency: int) -> dict[str, Any]:
    """`concurrency` chains of incr commands; each chain submits its next on its commit."""
    latencies_ms: list[float] = []
    errors: list[Any] = []
    lock = threading.Lock()
    done = threading.Event()
    submitted = 0

    def submit() -> None:
        nonlocal submitted
        with lock:
            if submitted >= records:
                return
            submitted += 1
        started = time.perf_counter()

        def on_commit(_result: Any, error: Any) -> None:
            with lock:
                latencies_ms.append((time.perf_counter() - started) * 1000)
                if error:
                    errors.append(error)
                finished = len(latencies_ms) >= records
            if finished:
                done.set()
            else:
                submit()

        counter.incr(1, callback=on_commit)

    started = time.perf_counter()
    for _ in range(min(concurrency, records)):
        submit()
    done.wait(timeout=600)
    elapsed_s = time.perf_counter() - started
    return workload_summary(latencies_ms, concurrency, elapsed_s, errors=len(errors))


def serve_node(
    port: int, partner_ports: list[int], http_port: int, append_entries_period_s: float | None
) -> None:
    from pysyncobj import SyncObjConf

    # PySyncObj's leader sends new entries every appendEntriesPeriod (0.1 s by default), which
    # bounds its commit latency from below; None keeps its default.
    tuned = {} if append_entries_period_s is None else {
        "appendEntriesPeriod": append_entries_period_s
    }
    conf = SyncObjConf(
        dynamicMembershipChange=False,
        raftMinTimeout=ELECTION_MIN_S,
        raftMaxTimeout=ELECTION_MAX_S,
        **tuned,
    )
    counter = _counter_class()(
        f"127.0.0.1:{port}", [f"127.0.0.1:{p}" for p in partner_ports], conf
    )

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            return

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply(200, {"ready": counter.isReady(), "leader": counter._isLeader()})

        def do_POST(self) -> None:
            params = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not counter._isLeader():
                self._reply(409, {"error": "NOT_LEADER"})
                return
            self._reply(200, run_workload(counter, int(params["records"]),
                                          int(params["concurrency"])))

    ThreadingHTTPServer(("127.0.0.1", http_port), Handler).serve_forever()


@dataclass
class PySyncObjCluster(PeerCluster):
    append_entries_period_s: float | None = None
    pids: list[int] = field(default_factory=list)
    http_ports: list[int] = field(default_factory=list)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="pysyncobj-")))

    def start(self) -> None:
        try:
            import pysyncobj  # noqa: F401
        except ImportError as exc:
            raise PeerMissing("pysyncobj not installed: make bench-deps") from exc
        ports = free_ports(6)
        raft_ports, self.http_ports = ports[:3], ports[3:]
        for i in range(3):
            partners = ",".join(str(p) for j, p in enumerate(raft_ports) if j != i)
            period = self.append_entries_period_s
            tuned = [] if period is None else ["--append-entries-period-s", str(period)]
            self.pids.append(spawn(
                [sys.executable, "-m", "cluster.bench.peers.pysyncobj_peer",
                 "--port", str(raft_ports[i]), "--partners", partners,
                 "--http-port", str(self.http_ports[i]), *tuned],
                self.workdir / f"node{i}.log",
            ))

    def _get(self, http_port: int) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/", timeout=1) as response:
            result: dict[str, Any] = json.loads(response.read())
        return result

    def wait_leader(self, timeout_s: float = 30.0) -> int:
        """The http port of the leader once every node is ready (applied the log so far)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                states = [self._get(port) for port in self.http_ports]
                leaders = [p for p, s in zip(self.http_ports, states, strict=True) if s["leader"]]
                if len(leaders) == 1 and all(s["ready"] for s in states):
                    return leaders[0]
            except (OSError, urllib.error.URLError, ValueError):
                pass
            time.sleep(0.1)
        raise TimeoutError(f"no PySyncObj leader after {timeout_s:.0f}s (logs in {self.workdir})")

    def workload(self, http_port: int, records: int, concurrency: int) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{http_port}/bench",
            data=json.dumps({"records": records, "concurrency": concurrency}).encode(),
        )
        with urllib.request.urlopen(request, timeout=600) as response:
            result: dict[str, Any] = json.loads(response.read())
        return result


async def run_pysyncobj_workloads(
    *, sequential_records: int, concurrent_records: int,
    append_entries_period_s: float | None = None,
) -> dict[str, dict[str, Any]]:
    with PySyncObjCluster(append_entries_period_s) as cluster:
        leader = await asyncio.to_thread(cluster.wait_leader)
        await asyncio.to_thread(cluster.workload, leader, 200, 8)  # warm up
        runs = {"c1": await asyncio.to_thread(cluster.workload, leader, sequential_records, 1)}
        for concurrency in (16, 64):
            runs[f"c{concurrency}"] = await asyncio.to_thread(
                cluster.workload, leader, concurrent_records, concurrency
            )
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--partners", required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--append-entries-period-s", type=float, default=None)
    args = parser.parse_args()
    serve_node(
        args.port,
        [int(p) for p in args.partners.split(",")],
        args.http_port,
        args.append_entries_period_s,
    )


if __name__ == "__main__":
    main()
