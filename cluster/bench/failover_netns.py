"""`minikraft bench failover --network netns [--compare etcd]`: the leader cut off by a network
partition (nftables in its namespace: its packets are dropped, no connection is reset, as when a
switch port dies), to the first successful commit through a new leader; minikraft's 3
controllers and etcd's 3 members each in their own network namespace, same election timeout as
`bench failover` (cluster/bench/failover_bench.py, whose commit probes this reuses). After each
cut the partition is healed and the next one waits for the whole quorum to be back.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from cluster.bench.failover_bench import (
    ELECTION_TIMEOUT_MS,
    ETCD_HEARTBEAT_MS,
    FETCH_TIMEOUT_MS,
    _first_commit,
    _minikraft_commit,
    _wait_caught_up,
    check_compare,
    failover_report,
)
from cluster.bench.raft_bench import BENCH_PROPS
from cluster.chaos.netns_faults import NetnsFaults, isolate, set_drop_rules
from cluster.client.admin_client import QuorumStatus, describe_quorum
from cluster.launch.local_cluster import NETNS, LocalCluster
from cluster.launch.netns import NetnsPlan, netns_unavailable_reason
from cluster.launch.readiness import wait_until_ready
from kafkawire.errors import KafkaError

NOTE = (
    f"netns: the leader isolated by nftables drops (no reset); election timeout "
    f"{ELECTION_TIMEOUT_MS} ms on both; minikraft fetch.timeout {FETCH_TIMEOUT_MS} ms, etcd "
    f"heartbeat {ETCD_HEARTBEAT_MS} ms; cut to the first commit through a new leader"
)


def _ignore(*_args: Any, **_kwargs: Any) -> None:
    return None


async def _agreed_leader(cluster: LocalCluster, timeout_s: float = 30.0) -> QuorumStatus:
    """The leader every controller that answers agrees on. After a heal the old leader may still
    answer as leader of its stale epoch until the new leader reaches it: cutting it off then
    would time a failover that already happened."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answers = []
        for spec in cluster.controllers:
            with contextlib.suppress(KafkaError):
                answers.append(await describe_quorum(spec.address, timeout_ms=1000))
        views = {(a.leader_id, a.leader_epoch) for a in answers}
        if len(answers) == len(cluster.controllers) and len(views) == 1 and answers[0].leader_id:
            return answers[0]
        await asyncio.sleep(0.1)
    raise TimeoutError(f"controllers did not agree on a leader within {timeout_s:.0f}s")


async def _minikraft_partitions(cluster: LocalCluster, cuts: int) -> list[float]:
    faults = NetnsFaults(cluster, _ignore)
    names = [c.name for c in cluster.controllers]
    times_ms: list[float] = []
    for _ in range(2 * cuts):  # bounded: a cut that missed the leader is tried again
        if len(times_ms) == cuts:
            break
        await wait_until_ready(cluster, 60)
        await _wait_caught_up(cluster)
        before = await _agreed_leader(cluster)
        leader = cluster.node(f"controller-{before.leader_id}")
        survivors = [c for c in cluster.controllers if c is not leader]
        # The clock starts before the rules go in: the first rule in already cuts the leader.
        started = time.perf_counter()
        await faults.partition(isolate(leader.name, names), "isolate-leader")
        try:
            elapsed_ms = 1000 * await _first_commit(_minikraft_commit, survivors, started)
            after = await describe_quorum(
                ",".join(s.address for s in survivors), timeout_ms=1000
            )
        finally:
            await faults.heal()
        # Leadership had already moved before the cut (no election in between): not a sample.
        if after.leader_epoch > before.leader_epoch:
            times_ms.append(elapsed_ms)
    return times_ms


def run_minikraft_partitions(cuts: int) -> list[float]:
    workdir = Path(tempfile.mkdtemp(prefix="minikraft-failover-netns-"))
    props = {
        **BENCH_PROPS,
        "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
        "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS),
    }
    cluster = LocalCluster.plan(
        workdir, controllers=3, base_port=0, overrides=props, network=NETNS
    )
    try:
        cluster.create_network()
        cluster.format()
        cluster.start()
        return asyncio.run(_minikraft_partitions(cluster, cuts))
    finally:
        cluster.stop()
        cluster.remove_network()
        shutil.rmtree(workdir, ignore_errors=True)


# -- etcd -----------------------------------------------------------------------------------


async def _etcd_partitions(cuts: int) -> list[float]:
    from cluster.bench.peers.etcd import EtcdCluster, EtcdMember, put

    class NetnsEtcdCluster(EtcdCluster):
        """EtcdCluster with each member in its own namespace, at its own address."""

        def __post_init__(self) -> None:
            super().__post_init__()
            self.plan = NetnsPlan.for_directory(self.workdir)
            self.members = [
                EtcdMember(m.name, 2379, 2380, m.data_dir, host=self.plan.node_address(i))
                for i, m in enumerate(self.members)
            ]
            self.plan.create([(m.name, i + 1, m.host) for i, m in enumerate(self.members)])

        def _command(self, member: EtcdMember, state: str) -> list[str]:
            return self.plan.exec_prefix(member.name) + super()._command(member, state)

        def stop(self) -> None:
            super().stop()
            self.plan.remove()

    async def commit(session: aiohttp.ClientSession, member: EtcdMember) -> bool:
        await put(session, member, "bench/failover", timeout_s=1.0)
        return True

    times_ms: list[float] = []
    cluster = NetnsEtcdCluster(election_timeout_ms=ELECTION_TIMEOUT_MS, heartbeat_ms=ETCD_HEARTBEAT_MS)
    with cluster:
        addresses = {m.name: m.host for m in cluster.members}
        for _ in range(cuts):
            leader = await cluster.wait_ready(60)
            survivors = [m for m in cluster.members if m is not leader]
            grudge = isolate(leader.name, list(addresses))
            started = time.perf_counter()
            await asyncio.gather(*(
                set_drop_rules(cluster.plan, name, [addresses[d] for d in sorted(dropped)])
                for name, dropped in grudge.items()
            ))
            try:
                times_ms.append(1000 * await _first_commit(commit, survivors, started))
            finally:
                for name in addresses:
                    await set_drop_rules(cluster.plan, name, [])
    return times_ms


def run_netns_failover_bench(*, cuts: int = 20, compare: str | None = None) -> dict[str, Any]:
    reason = netns_unavailable_reason()
    if reason is not None:
        raise ValueError(reason)
    check_compare(compare)
    ours = run_minikraft_partitions(cuts)
    theirs = asyncio.run(_etcd_partitions(cuts)) if compare == "etcd" else None
    return failover_report(
        "failover (partition)", NOTE, compare, ours, theirs, kills=cuts, network=NETNS
    )
