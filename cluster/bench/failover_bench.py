"""`minikraft bench failover [--compare etcd]`: kill -9 of the leader to the first successful
commit through the new leader, repeated `kills` times (20; `--quick` 3), median and p99.

Both sides use the same election timeout: minikraft controller.quorum.election.timeout.ms=1000
(fetch.timeout.ms=2000, the followers' leader-loss detector when nothing else tells them; a
kill -9 resets their connections to the leader, which they notice at once and stand after a
random 0..minikraft.quorum.leader.lost.jitter.max.ms=200), etcd --election-timeout=1000
--heartbeat-interval=100. After each kill the victim is restarted on its own data and the next
kill waits until all 3 members are back, so every kill starts from a full quorum.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from cluster.bench.raft_bench import BENCH_PROPS
from cluster.bench.raft_workload import percentile
from cluster.bench.report import make_report, row
from cluster.client.admin_client import describe_quorum
from cluster.launch.local_cluster import LocalCluster, NodeSpec
from cluster.launch.readiness import wait_until_ready

ELECTION_TIMEOUT_MS = 1000
FETCH_TIMEOUT_MS = 2000
ETCD_HEARTBEAT_MS = 100
# A failover that has not committed within this long is reported as a failed kill.
FAILOVER_DEADLINE_S = 30.0
NOTE = (
    f"election timeout {ELECTION_TIMEOUT_MS} ms on both; minikraft fetch.timeout "
    f"{FETCH_TIMEOUT_MS} ms (a reset leader connection is noticed at once), etcd heartbeat "
    f"{ETCD_HEARTBEAT_MS} ms; kill -9 of the leader "
    "to the first commit through the new leader"
)


async def _first_commit(
    try_commit: Callable[[aiohttp.ClientSession, Any], Awaitable[bool]],
    survivors: list[Any],
    started: float,
) -> float:
    """Ask every survivor to commit, round after round, until one succeeds; seconds elapsed."""
    async with aiohttp.ClientSession() as session:
        while time.perf_counter() - started < FAILOVER_DEADLINE_S:
            outcomes = await asyncio.gather(
                *(try_commit(session, member) for member in survivors), return_exceptions=True
            )
            if any(outcome is True for outcome in outcomes):
                return time.perf_counter() - started
            await asyncio.sleep(0.01)
    raise TimeoutError(f"no commit through a new leader within {FAILOVER_DEADLINE_S:.0f}s")


# -- minikraft ------------------------------------------------------------------------------


async def _minikraft_commit(session: aiohttp.ClientSession, spec: NodeSpec) -> bool:
    url = f"http://{spec.host}:{spec.http_port}/v1/bench/raft"
    async with session.post(
        url, json={"records": 1, "concurrency": 1}, timeout=aiohttp.ClientTimeout(total=1.0)
    ) as response:
        return response.status == 200


async def _minikraft_failovers(cluster: LocalCluster, kills: int) -> list[float]:
    times_ms: list[float] = []
    for _ in range(kills):
        status = await wait_until_ready(cluster, 60)
        leader = cluster.node(f"controller-{status.leader_id}")
        survivors = [c for c in cluster.controllers if c is not leader]
        # Quorum fully caught up before the kill, so any survivor can win the election.
        await _wait_caught_up(cluster)
        started = time.perf_counter()
        cluster.kill(leader)
        times_ms.append(1000 * await _first_commit(_minikraft_commit, survivors, started))
        cluster.start_node(leader)
    return times_ms


async def _wait_caught_up(cluster: LocalCluster, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = await describe_quorum(cluster.bootstrap_controller, timeout_ms=1000)
        ends = [v.log_end_offset for v in status.voters]
        if len(ends) == len(cluster.controllers) and min(ends) >= status.high_watermark:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"voters not caught up after {timeout_s:.0f}s")


def run_minikraft_failovers(kills: int) -> list[float]:
    workdir = Path(tempfile.mkdtemp(prefix="minikraft-failover-"))
    props = {
        **BENCH_PROPS,
        "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
        "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS),
    }
    cluster = LocalCluster.plan(workdir, controllers=3, base_port=0, overrides=props)
    try:
        cluster.format()
        cluster.start()
        return asyncio.run(_minikraft_failovers(cluster, kills))
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


# -- etcd -----------------------------------------------------------------------------------


async def _etcd_failovers(kills: int) -> list[float]:
    from cluster.bench.peers.etcd import EtcdCluster, EtcdMember, put

    async def commit(session: aiohttp.ClientSession, member: EtcdMember) -> bool:
        await put(session, member, "bench/failover", timeout_s=1.0)
        return True

    times_ms: list[float] = []
    with EtcdCluster(
        election_timeout_ms=ELECTION_TIMEOUT_MS, heartbeat_ms=ETCD_HEARTBEAT_MS
    ) as cluster:
        for _ in range(kills):
            leader = await cluster.wait_ready(60)
            survivors = [m for m in cluster.members if m is not leader]
            started = time.perf_counter()
            cluster.kill(leader)
            times_ms.append(1000 * await _first_commit(commit, survivors, started))
            cluster.restart(leader)
    return times_ms


# -- the bench ------------------------------------------------------------------------------


def run_failover_bench(
    *, kills: int = 20, quick: bool = False, compare: str | None = None
) -> dict[str, Any]:
    if quick:
        kills = 3
    check_compare(compare)
    ours = run_minikraft_failovers(kills)
    theirs = asyncio.run(_etcd_failovers(kills)) if compare == "etcd" else None
    return failover_report("failover", NOTE, compare, ours, theirs, kills=kills)


def check_compare(compare: str | None) -> None:
    if compare not in (None, "etcd"):
        raise ValueError(f"bench failover compares with etcd, not {compare}")


def failover_report(
    label: str, note: str, compare: str | None, ours: list[float], theirs: list[float] | None,
    **extra: Any,
) -> dict[str, Any]:
    """The failover report: median and p99 of minikraft's times (ms), and of etcd's when it
    ran, with every sample."""
    ours = sorted(ours)
    theirs = None if theirs is None else sorted(theirs)
    results = [
        row(f"{label} median", "ms", "lower", percentile(ours, 0.5),
            None if theirs is None else percentile(theirs, 0.5)),
        row(f"{label} p99", "ms", "lower", percentile(ours, 0.99),
            None if theirs is None else percentile(theirs, 0.99)),
    ]
    return make_report(
        "failover", compare, results, [note], **extra,
        samples_ms={"minikraft": [round(t, 1) for t in ours],
                    "peer": None if theirs is None else [round(t, 1) for t in theirs]},
    )
