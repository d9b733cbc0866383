"""`make demo`: a local cluster of 3 controllers and 3 brokers, a topic (RF=3, min ISR=2), a short
acks=all workload during which a broker and the active controller are killed with -9 and
restarted, a read-back of everything, the Spark audit, and a summary; then it stops the cluster.

Every step is the `minikraft` command a user would type (run as a subprocess), so the demo
exercises the same paths as the README.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
from rich.console import Console
from rich.table import Table

from cluster.chaos.process_faults import fault_event
from cluster.client.admin_client import QuorumStatus, describe_quorum
from cluster.launch.committed_prefix import compare_committed_prefixes
from cluster.launch.local_cluster import LocalCluster, NodeSpec
from cluster.launch.readiness import wait_until_ready
from kafkawire.errors import KafkaError

console = Console()
TOPIC = "demo"
RECORDS = 400


def minikraft(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def quorum_table(status: QuorumStatus, title: str) -> Table:
    table = Table(title=title)
    for column in ("node", "directory id", "log end offset", "status"):
        table.add_column(column)
    for row in status.replication_json():
        table.add_row(
            str(row["node_id"]), row["directory_id"], str(row["log_end_offset"]), row["status"]
        )
    return table


async def wait_for_new_leader(
    cluster: LocalCluster, old_epoch: int, timeout_s: float
) -> QuorumStatus:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            status = await describe_quorum(cluster.bootstrap_controller, timeout_ms=500)
            if status.leader_id is not None and status.leader_epoch > old_epoch:
                return status
        except KafkaError:
            pass
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no new leader within {timeout_s}s")


def acked_values(journal: Path) -> set[str]:
    """`<producer>-<seq>` of every record the producer saw acknowledged (its journal)."""
    acked: set[str] = set()
    if not journal.exists():
        return acked
    with journal.open("rb") as fh:
        for entry in msgpack.Unpacker(fh, raw=False, strict_map_key=False):
            if entry.get("event") == "ack" and entry.get("error") == "NONE":
                acked.add(f"{entry['producer_id']}-{entry['seq']}")
    return acked


def read_back(bootstrap: str) -> list[str]:
    """`<producer>-<seq>` of every record a consumer reads from the beginning."""
    consumed = minikraft(
        "consume", "--bootstrap-server", bootstrap, "--topic", TOPIC, "--from-beginning",
        "--timeout-ms", "8000", "--output", "json",
    )
    if not consumed.stdout.strip():
        raise RuntimeError(f"consume failed: {consumed.stderr.strip()}")
    records = json.loads(consumed.stdout)["records"]
    return [str(r["value"]).split(":", 1)[0] for r in records]


def record_fault(journal: Path, action: str, spec: NodeSpec) -> None:
    """One fault the demo injects, as a chaos event line (`minikraft chaos`'s fields: ts_ms,
    action, node, pid), appended to journal: the audit report marks it on every timeline
    (analytics.read.chaos_events reads `chaos/*.jsonl`)."""
    journal.parent.mkdir(parents=True, exist_ok=True)
    with journal.open("a", encoding="utf-8") as out:
        out.write(json.dumps(fault_event(action, spec)) + "\n")


def run_demo(directory: Path) -> int:
    if directory.exists():
        shutil.rmtree(directory)
    cluster = LocalCluster.plan(directory, controllers=3, brokers=3, base_port=0)
    cluster.format()
    cluster.start()
    try:
        with console.status("starting 3 controllers and 3 brokers..."):
            status = asyncio.run(wait_until_ready(cluster, 90))
        bootstrap = cluster.bootstrap_server
        console.print(
            f"[green]Cluster up[/green]: {cluster.cluster_id}, active controller "
            f"{status.leader_id} (epoch {status.leader_epoch}); brokers {bootstrap}"
        )
        console.print(
            quorum_table(
                asyncio.run(describe_quorum(cluster.bootstrap_controller)),
                "metadata quorum (brokers fetch it as observers)",
            )
        )
        created = minikraft(
            "topics", "--bootstrap-server", bootstrap, "create", "--topic",
            TOPIC, "--partitions", "3", "--replication-factor", "3",
            "--config", "min.insync.replicas=2",
        )
        if created.returncode != 0:
            raise RuntimeError(f"topic create failed: {created.stderr.strip()}")
        journal = directory / "journal" / "demo-acks.journal"
        journal.parent.mkdir(parents=True, exist_ok=True)
        producer = subprocess.Popen(
            [
                sys.executable, "-m", "cluster.cli.main", "produce", "--bootstrap-server",
                bootstrap, "--topic", TOPIC, "--acks", "all", "--num-records", str(RECORDS),
                "--record-size", "64", "--journal", str(journal), "--output", "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)
        victim = cluster.brokers[1]
        before = asyncio.run(describe_quorum(cluster.bootstrap_controller))
        active = cluster.node(f"controller-{before.leader_id}")
        console.print(
            f"[bold red]kill -9[/bold red] broker {victim.node_id} (pid {victim.pid}) and the "
            f"active controller {active.node_id} (pid {active.pid}), mid-workload"
        )
        faults = directory / "chaos" / "demo-faults.jsonl"  # the audit report marks these
        record_fault(faults, "kill", victim)
        cluster.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        record_fault(faults, "kill", active)
        cluster.kill(active, signal.SIGKILL)
        new_leader = asyncio.run(wait_for_new_leader(cluster, before.leader_epoch, 15))
        failover_ms = (time.monotonic() - killed_at) * 1000
        console.print(
            f"new active controller {new_leader.leader_id} in epoch {new_leader.leader_epoch} "
            f"after {failover_ms:.0f} ms"
        )
        time.sleep(1.0)
        for spec in (victim, active):
            cluster.start_node(spec)
            record_fault(faults, "restart", spec)
        cluster.write_cluster_file()
        console.print(f"restarted broker {victim.node_id} and controller {active.node_id}")
        out, err = producer.communicate(timeout=300)
        produced: dict[str, Any] = json.loads(out) if out.strip() else {"errors": {"stderr": err}}
        asyncio.run(wait_until_ready(cluster, 60))
        acked = acked_values(journal)
        read = read_back(bootstrap)
        lost = sorted(acked - set(read))
        duplicates = len(read) - len(set(read))
        final = asyncio.run(describe_quorum(cluster.bootstrap_controller))
        prefix = compare_committed_prefixes(cluster, final.high_watermark)
        with console.status("running the Spark audit over every metadata log..."):
            audited = minikraft(
                "audit", "--dir", str(directory), "--report", str(directory / "audit"),
                "--output", "json", timeout_s=900,
            )
        verdict = json.loads(audited.stdout).get("verdict", "error") if audited.stdout else "error"
        summary = {
            "records sent": produced.get("sent"),
            "acked (acks=all)": len(acked),
            "read back": len(set(read)),
            "acked but lost": len(lost),
            "duplicates": duplicates,
            "produce errors": produced.get("errors"),
            "controller failover": f"{failover_ms:.0f} ms",
            "controllers' committed prefixes agree": prefix.agree,
            "Spark audit verdict": verdict,
            "audit report": str(directory / "audit" / "index.html"),
        }
        table = Table(title="demo summary")
        table.add_column("what")
        table.add_column("value")
        for key, value in summary.items():
            table.add_row(key, str(value))
        console.print(table)
        return 0 if not lost and duplicates == 0 and prefix.agree and verdict == "clean" else 1
    finally:
        killed = cluster.stop()
        console.print(
            f"cluster stopped{' (killed ' + ', '.join(killed) + ')' if killed else ''}; "
            f"data, logs and journals kept in {directory}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default="demo-cluster")
    args = parser.parse_args()
    sys.exit(run_demo(Path(args.dir)))


if __name__ == "__main__":
    main()
