"""`minikraft chaos`: workload + scenario against a cluster started by `minikraft up --dir D`.

Order: create the run's topic; start the producers; run the scenario until its deadline; heal
everything (resume, lift network rules, restart what is down); stop the producers; wait, bounded,
for a healthy cluster; read everything back; write the summary. Rule 23: `ok` is false when an
acks=all write that was acked is not read back (and no unclean election was seen to excuse it).
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

import aiohttp

from cluster.chaos.process_faults import ProcessFaults
from cluster.chaos.scenarios import SCENARIOS, ChaosContext
from cluster.chaos.workload import ChaosWorkload, now_ms
from cluster.cli.health_cmd import check_health
from cluster.launch.local_cluster import LocalCluster, is_running

log = logging.getLogger(__name__)

JOURNAL_FILE = "chaos-acks.journal"
UNCLEAN_METRIC = "kafka_controller_unclean_leader_elections_total"


async def _unclean_elections(cluster: LocalCluster) -> int:
    """The active controller's unclean election counter (0 if no controller answers)."""
    total = 0
    timeout = aiohttp.ClientTimeout(total=2)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for spec in cluster.controllers:
            try:
                async with session.get(f"http://{spec.host}:{spec.http_port}/metrics") as resp:
                    text = await resp.text()
            except (aiohttp.ClientError, TimeoutError):
                continue
            for line in text.splitlines():
                if line.startswith(UNCLEAN_METRIC + " "):
                    total = max(total, int(float(line.split()[1])))
    return total


async def wait_recovered(cluster: LocalCluster, timeout_s: float) -> tuple[bool, float, str]:
    """Until `minikraft health` says healthy (quorum leader, brokers unfenced, no offline or
    under-min-ISR partition), bounded by timeout_s. Returns (recovered, seconds, last problem)."""
    bootstrap = ",".join(b.address for b in cluster.brokers)
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
) -> dict[str, Any]:
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {sorted(SCENARIOS)}")
    cluster = LocalCluster.load(directory)
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
        bootstrap_server=",".join(b.address for b in cluster.brokers),
        bootstrap_controller=cluster.bootstrap_controller,
        topic=topic,
        journal_path=journal_dir / JOURNAL_FILE,
        run_id=run_id,
        replication_factor=min(3, len(cluster.brokers)),
        min_insync_replicas=min(2, len(cluster.brokers)),
    )
    faults = ProcessFaults(cluster)
    ctx = ChaosContext(
        cluster, faults, random.Random(seed), time.monotonic() + duration_s, topic,
        workload.min_insync_replicas,
    )
    started_ms = now_ms()
    await workload.create_topic()
    stop = asyncio.Event()
    producing = asyncio.create_task(workload.run(stop))
    try:
        # A second of clean traffic first, so every fault hits a partition with data.
        await asyncio.sleep(min(1.0, duration_s / 4))
        faults.record("scenario-start", scenario=scenario, seed=seed)
        await SCENARIOS[scenario](ctx)
    except BaseException:
        # Never leave a node paused, cut off or down behind a failed run.
        await faults.heal_all()
        stop.set()
        await asyncio.gather(producing, return_exceptions=True)
        raise
    restarted = await faults.heal_all()
    faults.record("healed", restarted=restarted)
    healed_ms = now_ms()
    # Keep producing while the cluster recovers, so the windows show when writes resumed.
    recovered, recovery_s, problem = await wait_recovered(cluster, recovery_timeout_s)
    flowing = await workload.wait_writes_flow(
        healed_ms, max(1.0, recovery_timeout_s - recovery_s)
    )
    if not flowing:
        recovered, problem = False, problem or "a partition took no acks=all write after the heal"
    recovery_s = (now_ms() - healed_ms) / 1000
    stop.set()
    await producing
    read = await workload.read_back()
    result = workload.verify(read)
    unclean = await _unclean_elections(cluster)
    lost_excused = result["lost"] > 0 and unclean > 0
    summary = {
        "scenario": scenario,
        "seed": seed,
        "duration_s": duration_s,
        "run_id": run_id,
        "topic": topic,
        "started_ms": started_ms,
        "ended_ms": now_ms(),
        **result,
        "recovered": recovered,
        "recovery_s": round(recovery_s, 2),
        "recovery_problem": problem,
        "unclean_elections": unclean,
        "faults": faults.events,
        "notes": ctx.notes,
        "pids": {s.name: s.pid for s in cluster.all_nodes()},
        "journal": str(workload.journal_path),
        "ok": recovered and (result["lost"] == 0 or lost_excused),
    }
    out = cluster.dir / "chaos" / f"{scenario}-s{seed}-{run_id}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    summary["summary_file"] = str(out)
    return summary
