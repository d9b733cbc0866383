"""`minikraft chaos`: workload + scenario against a cluster started by `minikraft up --dir D`.

Order: note the metadata log's committed prefix; create the run's topic; start the producers;
run the scenario until its deadline; heal everything (resume, lift network rules, restart what
is down); wait, bounded, for a healthy cluster and for writes to flow; stop the producers; read
everything back; write the summary. Rule 23: an acked acks=all write that is not read back is
ATTRIBUTED when a committed metadata record of this run set its partition RECOVERING (an
unclean or designated election, cluster/chaos/attribution.py), and fails the run otherwise.
Rule 2: the metadata log's committed prefix from the start of the run must survive it.
With `--consumers N`, a consumer group reads the topic through the run (cluster/chaos/
group_consumers.py) and, after the read-back, drains it to the log end: every acked value must
have been read by some member (check `group_read_every_acked_record`); its journal is the audit's
input for committed offsets and skipped records.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from pathlib import Path
from typing import Any

from cluster.chaos.attribution import (
    attribute_losses,
    metadata_log_dirs,
    scan_recovering_elections,
)
from cluster.chaos.group_consumers import (
    CONSUMER_JOURNAL_FILE,
    GroupConsumers,
    group_client_problem,
    group_name,
)
from cluster.chaos.network_scenarios import NEMESES, NETNS_SCENARIOS, PROCESS_NEMESES
from cluster.chaos.process_faults import ProcessFaults
from cluster.chaos.scenarios import SCENARIOS, ChaosContext, Scenario
from cluster.chaos.workload import MINIKRAFT, ChaosWorkload
from cluster.client.admin_client import describe_quorum
from cluster.client.health import check_health
from cluster.client.producer import AckJournal
from cluster.launch.committed_prefix import committed_entries
from cluster.launch.local_cluster import COMPOSE, NETNS, LocalCluster, is_running
from cluster.launch.netns import network_faults_unavailable_reason
from kafkawire.clock import now_ms
from kafkawire.errors import KafkaError

log = logging.getLogger(__name__)

JOURNAL_FILE = "chaos-acks.journal"
PREFIX_WAIT_S = 30.0
ALL_SCENARIOS: dict[str, Scenario] = {**SCENARIOS, **NETNS_SCENARIOS}
# Faults after which the cluster has to recover: how long until writes flowed again is measured.
RECOVERY_EVENTS = frozenset({"restart", "resume", "heal-network", "net-heal"})
FAULT_EVENTS = frozenset({"kill", "pause", "terminate", "partition", "net-partition", "netem"})


def cuts_the_network(scenario: str, nemeses: list[str]) -> bool:
    """Whether this run applies network faults (nftables, tc), not only process faults."""
    if scenario == "nemesis":
        return not nemeses or any(n not in PROCESS_NEMESES for n in nemeses)
    return scenario in NETNS_SCENARIOS


# Scenarios that run the node's own CLI on its properties file (storage format, the disk mode):
# a compose node's configuration lives in its container's environment.
LOCAL_ONLY_SCENARIOS = frozenset({"power-loss", "disk-replace-controller", "voter-churn"})


def netns_only_problem(scenario: str, nemeses: list[str], network: str) -> str | None:
    """Why this scenario cannot run on this cluster's network (None when it can)."""
    if network == COMPOSE and scenario in LOCAL_ONLY_SCENARIOS:
        return f"scenario {scenario} needs a cluster started with `minikraft up`, not compose"
    if network == NETNS:
        return None
    if scenario == "nemesis":
        needs = sorted(n for n in nemeses if n not in PROCESS_NEMESES)
        if not nemeses or needs:
            return (
                f"nemeses {needs or 'by default'} cut the network and need a cluster started "
                f"with `minikraft up --network netns` (otherwise: --nemesis kill,pause,disconnect)"
            )
        return None
    if scenario in NETNS_SCENARIOS:
        return (
            f"scenario {scenario} is netns-only: it needs a cluster started with "
            f"`minikraft up --network netns` (this one runs on {network})"
        )
    return None


def recovery_after_faults(
    events: list[dict[str, Any]], windows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """For each restart, resume or network heal: how long after it the last partition that was
    unavailable at that moment took an acks=all write again (0 when none was unavailable).
    `interrupted`: a new fault came before that, so the figure includes it."""
    result = []
    fault_times = [e["ts_ms"] for e in events if e["action"] in FAULT_EVENTS]
    for event in events:
        if event["action"] not in RECOVERY_EVENTS:
            continue
        ts = event["ts_ms"]
        open_then = [w for w in windows if w["start_ms"] <= ts <= w["end_ms"]]
        slowest = max(open_then, key=lambda w: w["end_ms"], default=None)
        result.append({
            "action": event["action"], "node": event.get("node"), "ts_ms": ts,
            "recovered_after_ms": 0 if slowest is None else slowest["end_ms"] - ts,
            "partition": None if slowest is None else slowest["partition"],
            "recovered": slowest is None or bool(slowest["recovered"]),
            "interrupted": slowest is not None
            and any(ts < t < slowest["end_ms"] for t in fault_times),
        })
    return result


async def metadata_high_watermark(cluster: LocalCluster, timeout_s: float = 30.0) -> int:
    """The quorum's high watermark as its leader reports it (bounded retry)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            status = await describe_quorum(cluster.bootstrap_controller, timeout_ms=3000)
            if status.leader_id is not None and status.high_watermark >= 0:
                return int(status.high_watermark)
        except KafkaError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("no metadata quorum leader reported a high watermark")
        await asyncio.sleep(0.3)


def committed_prefix(cluster: LocalCluster, below: int) -> dict[int, tuple[int, bytes]]:
    """Union of every controller's entries below `below` (they agree there, rule 2)."""
    union: dict[int, tuple[int, bytes]] = {}
    for directory in metadata_log_dirs([Path(c.dir) for c in cluster.controllers]):
        if directory.is_dir():
            for offset, entry in committed_entries(directory, below).items():
                union.setdefault(offset, entry)
    return union


def check_prefix(
    cluster: LocalCluster, reference: dict[int, tuple[int, bytes]]
) -> tuple[bool, str]:
    """Every controller's entries at the reference offsets equal the reference, and each offset
    is held by a majority of the controllers (committed means replicated to a majority)."""
    if not reference:
        return True, ""
    below = max(reference) + 1
    holders = dict.fromkeys(reference, 0)
    for spec, directory in zip(
        cluster.controllers, metadata_log_dirs([Path(c.dir) for c in cluster.controllers]),
        strict=True,
    ):
        entries = committed_entries(directory, below) if directory.is_dir() else {}
        for offset, entry in entries.items():
            if offset in reference:
                if entry != reference[offset]:
                    return False, f"{spec.name}: offset {offset} changed (epoch {entry[0]})"
                holders[offset] += 1
    majority = len(cluster.controllers) // 2 + 1
    short = sorted(o for o, n in holders.items() if n < majority)
    if short:
        return False, f"offsets {short[0]}..{short[-1]} held by fewer than {majority} controllers"
    return True, ""


async def wait_prefix(
    cluster: LocalCluster, reference: dict[int, tuple[int, bytes]], timeout_s: float
) -> tuple[bool, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        ok, problem = check_prefix(cluster, reference)
        if ok or time.monotonic() > deadline:
            return ok, problem
        await asyncio.sleep(0.5)


async def wait_recovered(cluster: LocalCluster, timeout_s: float) -> tuple[bool, float, str]:
    """Until `minikraft health` says healthy (quorum leader, brokers unfenced, no offline or
    under-min-ISR partition), bounded by timeout_s. Returns (recovered, seconds, last problem)."""
    bootstrap = cluster.bootstrap_server
    started = time.monotonic()
    last = "no answer"
    while time.monotonic() - started < timeout_s:
        code, report = await check_health(bootstrap, timeout_ms=2000)
        if code == 0:
            return True, time.monotonic() - started, ""
        last = "; ".join(report.get("problems", [])) or str(report.get("status"))
        await asyncio.sleep(0.5)
    return False, time.monotonic() - started, last


async def run_chaos(
    directory: Path,
    scenario: str,
    seed: int,
    duration_s: float,
    *,
    recovery_timeout_s: float = 60.0,
    nemeses: list[str] | None = None,
    client: str = MINIKRAFT,
    idempotence: bool = True,
    consumers: int = 0,
    group: str | None = None,
) -> dict[str, Any]:
    if scenario not in ALL_SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {sorted(ALL_SCENARIOS)}")
    group_problem = group_client_problem(client, consumers)
    if group_problem is not None:
        raise ValueError(group_problem)
    unknown = sorted(set(nemeses or []) - set(NEMESES))
    if unknown:
        raise ValueError(f"unknown nemesis {unknown}; known: {sorted(NEMESES)}")
    cluster = LocalCluster.load(directory)
    problem = netns_only_problem(scenario, list(nemeses or []), cluster.network)
    if problem is not None:
        raise ValueError(problem)
    if cluster.network == NETNS and cuts_the_network(scenario, list(nemeses or [])):
        # Before any fault: a missing nft/tc/iptables is one clear line, not a failed exec
        # half-way through a run.
        missing = network_faults_unavailable_reason()
        if missing is not None:
            raise ValueError(missing)
    if not cluster.brokers:
        raise ValueError(f"the cluster under {directory} has no brokers (minikraft up --brokers 3)")
    down = [s.name for s in cluster.all_nodes() if not is_running(s)]
    if down:
        raise ValueError(f"not running: {down} (minikraft up --dir {directory})")
    run_id = uuid.uuid4().hex[:6]
    topic = f"chaos-{scenario}-s{seed}-{run_id}"
    journal_dir = cluster.dir / "journal"
    journal_dir.mkdir(parents=True, exist_ok=True)
    workload = ChaosWorkload(
        bootstrap_server=cluster.bootstrap_server,
        bootstrap_controller=cluster.bootstrap_controller,
        topic=topic,
        journal_path=journal_dir / JOURNAL_FILE,
        run_id=run_id,
        replication_factor=min(3, len(cluster.brokers)),
        min_insync_replicas=min(2, len(cluster.brokers)),
        client=client,
        idempotence=idempotence,
    )
    group_journal = AckJournal(journal_dir / CONSUMER_JOURNAL_FILE) if consumers else None
    readers = None if group_journal is None else GroupConsumers(
        client=client, bootstrap_server=workload.bootstrap_server, topic=topic,
        group=group_name(run_id, group), members=consumers, journal=group_journal, run_id=run_id,
    )
    faults = ProcessFaults(cluster)
    ctx = ChaosContext(
        cluster, faults, random.Random(seed), time.monotonic() + duration_s, topic,
        workload.min_insync_replicas, nemeses=list(nemeses or []),
    )
    started_ms = now_ms()
    metadata_start = await metadata_high_watermark(cluster)
    prefix = committed_prefix(cluster, metadata_start)
    await workload.create_topic()
    stop = asyncio.Event()
    producing = asyncio.create_task(workload.run(stop))
    stop_reading = asyncio.Event()
    reading = None if readers is None else asyncio.create_task(readers.run(stop_reading))
    try:
        # A second of clean traffic first, so every fault hits a partition with data.
        await asyncio.sleep(min(1.0, duration_s / 4))
        faults.record("scenario-start", scenario=scenario, seed=seed)
        await ALL_SCENARIOS[scenario](ctx)
    except BaseException:
        # Never leave a node paused, cut off or down behind a failed run.
        await faults.heal_all()
        stop.set()
        stop_reading.set()
        await asyncio.gather(producing, *([reading] if reading else []), return_exceptions=True)
        if group_journal is not None:
            group_journal.close()
        raise
    restarted = await faults.heal_all()
    faults.record("healed", restarted=restarted)
    healed_ms = now_ms()
    # One monotonic clock for both recovery times (healthy, then writes flowing), so the first
    # can never read later than the second (a wall-clock ms and a monotonic start did, in CI).
    healed_at = time.monotonic()
    # Keep producing while the cluster recovers, so the windows show when writes resumed.
    recovered, healthy_s, problem = await wait_recovered(cluster, recovery_timeout_s)
    flowing = await workload.wait_writes_flow(
        healed_ms, max(1.0, recovery_timeout_s - healthy_s)
    )
    if not flowing:
        recovered, problem = False, problem or "a partition took no acks=all write after the heal"
    # Time to recover after the final heal: every partition has a leader and ISR >= min ISR
    # (`health`), and then an acks=all write succeeded on every partition.
    recovery_s = time.monotonic() - healed_at
    stop.set()
    await producing
    read = await workload.read_back()
    result = workload.verify(read)
    group_summary: dict[str, Any] | None = None
    if readers is not None and reading is not None and group_journal is not None:
        try:
            drained = await readers.drain(recovery_timeout_s)
        finally:
            stop_reading.set()
            await reading
            group_journal.close()
        group_summary = readers.summary([v for s in workload.producers for v in s.acked], drained)
    metadata_end = await metadata_high_watermark(cluster)
    scan = scan_recovering_elections(
        metadata_log_dirs([Path(c.dir) for c in cluster.controllers]), metadata_end,
        since_offset=metadata_start,
    )
    attributed, unexplained = attribute_losses(result["lost_by_partition"], topic, scan.elections)
    prefix_ok, prefix_problem = await wait_prefix(cluster, prefix, PREFIX_WAIT_S)
    if group_summary is not None:
        # Every acked value was read by some member of the group (nothing skipped); a value the
        # group read twice (after a rebalance, at-least-once) is counted, not a fault.
        ctx.check(
            "group_read_every_acked_record",
            group_summary["drained"] and group_summary["acked_unread"] == 0,
            drained=group_summary["drained"], acked_unread=group_summary["acked_unread"],
        )
    checks = {
        **ctx.checks,
        "metadata_committed_prefix": {
            "ok": prefix_ok, "offsets": len(prefix), "problem": prefix_problem,
        },
    }
    summary = {
        "scenario": scenario,
        "seed": seed,
        "duration_s": duration_s,
        "run_id": run_id,
        "topic": topic,
        "started_ms": started_ms,
        "ended_ms": now_ms(),
        **result,
        "lost_attributed": sum(a["lost"] for a in attributed.values()),
        "attributed_losses": attributed,
        "lost_unattributed": sum(len(v) for v in unexplained.values()),
        "unattributed_values": sorted(v for vs in unexplained.values() for v in vs)[:100],
        "recovering_elections": [
            e.to_json() for e in scan.elections if e.topic == topic
        ],
        "metadata_offsets": {"start": metadata_start, "end": metadata_end},
        "recovered": recovered,
        "recovery_s": round(recovery_s, 2),
        "recovery_healthy_s": round(healthy_s, 2),
        "recovery_problem": problem,
        "recovery_after_faults": recovery_after_faults(
            faults.events, result["unavailability_windows"]
        ),
        "network": cluster.network,
        "nemeses": list(nemeses or []),
        "client": client,
        "consumer_group": group_summary,
        "checks": checks,
        "faults": faults.events,
        "notes": ctx.notes,
        "pids": {s.name: s.pid for s in cluster.all_nodes()},
        "journal": str(workload.journal_path),
        "consumer_journal": None if readers is None else str(journal_dir / CONSUMER_JOURNAL_FILE),
        "ok": recovered and not unexplained and all(c["ok"] for c in checks.values()),
    }
    out = cluster.dir / "chaos" / f"{scenario}-s{seed}-{run_id}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    summary["summary_file"] = str(out)
    return summary
