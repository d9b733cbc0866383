"""etcd as the Raft peer: 3 members of Debian's etcd-server on 127.0.0.1 (fsync on, etcd's
default: every commit is fsync'd by the leader and each follower before it counts), measured with
an aiohttp client over etcd 3.4's HTTP/JSON gRPC gateway (`POST /v3/kv/put`)."""

from __future__ import annotations

import asyncio
import base64
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from cluster.bench.peers.procs import PeerCluster, free_ports, require_binary, spawn, stop_pid
from cluster.bench.raft_workload import workload_summary

VALUE = b"x" * 16


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class EtcdMember:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    pid: int | None = None
    host: str = "127.0.0.1"  # a network namespace's address in the partition bench

    @property
    def client_url(self) -> str:
        return f"http://{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"


@dataclass
class EtcdCluster(PeerCluster):
    """Three members; `election_timeout_ms`/`heartbeat_ms` are matched to minikraft's."""

    election_timeout_ms: int = 1000
    heartbeat_ms: int = 100
    members: list[EtcdMember] = field(default_factory=list)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="etcd-bench-")))

    def __post_init__(self) -> None:
        self.binary = require_binary("etcd", "etcd-server")
        ports = free_ports(6)
        self.members = [
            EtcdMember(f"etcd{i}", ports[i], ports[3 + i], self.workdir / f"etcd{i}")
            for i in range(3)
        ]

    def _command(self, member: EtcdMember, state: str) -> list[str]:
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        return [
            self.binary,
            f"--name={member.name}",
            f"--data-dir={member.data_dir}",
            f"--listen-client-urls={member.client_url}",
            f"--advertise-client-urls={member.client_url}",
            f"--listen-peer-urls={member.peer_url}",
            f"--initial-advertise-peer-urls={member.peer_url}",
            f"--initial-cluster={initial}",
            f"--initial-cluster-state={state}",
            "--initial-cluster-token=minikraft-bench",
            f"--election-timeout={self.election_timeout_ms}",
            f"--heartbeat-interval={self.heartbeat_ms}",
            "--logger=zap",
            "--log-level=warn",
        ]

    def start(self) -> None:
        for member in self.members:
            member.pid = spawn(self._command(member, "new"), self.workdir / f"{member.name}.log")

    def restart(self, member: EtcdMember) -> None:
        """Start a killed member again on its own data dir (it rejoins the cluster)."""
        member.pid = spawn(self._command(member, "existing"), self.workdir / f"{member.name}.log")

    def kill(self, member: EtcdMember) -> None:
        stop_pid(member.pid, signal.SIGKILL)
        member.pid = None

    def stop(self) -> None:
        for member in self.members:
            stop_pid(member.pid)
            member.pid = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- client ----------------------------------------------------------------------------

    async def wait_ready(self, timeout_s: float = 30.0) -> EtcdMember:
        """Every member healthy and agreeing on a leader; returns the leader member."""
        deadline = time.monotonic() + timeout_s
        last = "no answer yet"
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                try:
                    leader_ids = set()
                    by_id: dict[str, EtcdMember] = {}
                    for member in self.members:
                        status = await _post(session, member, "/v3/maintenance/status", {}, 1.0)
                        leader_ids.add(status.get("leader"))
                        by_id[status["header"]["member_id"]] = member
                    leader = next(iter(leader_ids)) if len(leader_ids) == 1 else None
                    if leader in by_id:
                        return by_id[leader]
                    last = f"leaders reported: {leader_ids}"
                except (TimeoutError, aiohttp.ClientError, KeyError) as exc:
                    last = repr(exc)
                await asyncio.sleep(0.1)
        raise TimeoutError(f"etcd not ready after {timeout_s:.0f}s: {last}")


async def _post(
    session: aiohttp.ClientSession,
    member: EtcdMember,
    path: str,
    body: dict[str, Any],
    timeout_s: float,
) -> dict[str, Any]:
    async with session.post(
        member.client_url + path, json=body, timeout=aiohttp.ClientTimeout(total=timeout_s)
    ) as response:
        result: dict[str, Any] = await response.json(content_type=None)
        if response.status != 200 or "error" in result:
            raise aiohttp.ClientResponseError(
                response.request_info, (), status=response.status, message=str(result)
            )
        return result


async def put(
    session: aiohttp.ClientSession, member: EtcdMember, key: str, timeout_s: float = 10.0
) -> None:
    await _post(session, member, "/v3/kv/put", {"key": _b64(key.encode()), "value": _b64(VALUE)},
                timeout_s)


async def put_workload(member: EtcdMember, *, records: int, concurrency: int) -> dict[str, Any]:
    """`concurrency` clients each put one key at a time until `records` puts are committed:
    the same shape as minikraft's raft_workload, so the figures line up."""
    latencies_ms: list[float] = []
    remaining = records
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client(index: int) -> None:
            nonlocal remaining
            sequence = 0
            while remaining > 0:
                remaining -= 1
                sequence += 1
                started = time.perf_counter()
                await put(session, member, f"bench/{index}/{sequence % 1000}")
                latencies_ms.append((time.perf_counter() - started) * 1000)

        await put(session, member, "bench/warmup")
        started = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(concurrency)))
        elapsed_s = time.perf_counter() - started
    return workload_summary(latencies_ms, concurrency, elapsed_s)


async def run_etcd_raft_workloads(
    *, sequential_records: int, concurrent_records: int
) -> dict[str, dict[str, Any]]:
    """Sequential puts, then 16 and 64 concurrent clients, against the leader's client URL."""
    with EtcdCluster() as cluster:
        leader = await cluster.wait_ready()
        runs = {"c1": await put_workload(leader, records=sequential_records, concurrency=1)}
        for concurrency in (16, 64):
            runs[f"c{concurrency}"] = await put_workload(
                leader, records=concurrent_records, concurrency=concurrency
            )
    return runs
