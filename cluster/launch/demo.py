"""`make demo`: start a local quorum, show it, kill -9 the leader, show the failover and that
the survivors agree on the committed prefix, restart the killed node, then stop everything.

Grows with the project: brokers, a workload and the Spark audit join as their issues land.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cluster.cli.admin_client import QuorumStatus, describe_quorum
from cluster.launch.committed_prefix import compare_committed_prefixes
from cluster.launch.local_cluster import LocalCluster
from cluster.launch.readiness import wait_until_ready
from cluster.protocol.errors import KafkaError

console = Console()


def quorum_table(status: QuorumStatus, title: str) -> Table:
    table = Table(title=title)
    for column in ("voter", "directory id", "log end offset", "role"):
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


async def run_demo(directory: Path) -> int:
    if directory.exists():
        shutil.rmtree(directory)
    cluster = LocalCluster.plan(directory, controllers=3, brokers=0, base_port=0)
    cluster.format()
    cluster.start()
    try:
        with console.status("starting 3 controllers..."):
            status = await wait_until_ready(cluster, 60)
        console.print(
            f"[green]Quorum up[/green]: cluster {cluster.cluster_id}, leader "
            f"{status.leader_id}, epoch {status.leader_epoch}"
        )
        await asyncio.sleep(1.5)  # let NoOpRecords accumulate
        status = await describe_quorum(cluster.bootstrap_controller)
        console.print(
            quorum_table(status, f"quorum before the fault (HWM {status.response.high_watermark})")
        )
        hwm_before = status.response.high_watermark
        leader = cluster.node(f"controller-{status.leader_id}")
        console.print(
            f"[bold red]kill -9[/bold red] controller {leader.node_id} (pid {leader.pid}), the leader"
        )
        killed_at = time.monotonic()
        cluster.kill(leader, signal.SIGKILL)
        new_status = await wait_for_new_leader(cluster, status.leader_epoch, 15)
        failover_ms = (time.monotonic() - killed_at) * 1000
        console.print(
            f"New leader: controller {new_status.leader_id} in epoch {new_status.leader_epoch} "
            f"after {failover_ms:.0f} ms; HWM {new_status.response.high_watermark} (was {hwm_before})"
        )
        await asyncio.sleep(1.0)
        cluster.start_node(leader)
        cluster.write_cluster_file()
        console.print(f"restarted controller {leader.node_id} (pid {leader.pid})")
        await asyncio.sleep(2.0)
        final = await describe_quorum(cluster.bootstrap_controller)
        console.print(
            quorum_table(final, f"quorum after the restart (HWM {final.response.high_watermark})")
        )
        report = compare_committed_prefixes(cluster, final.response.high_watermark)
        verdict = "[green]agree[/green]" if report.agree else "[red]DISAGREE[/red]"
        console.print(
            f"Committed prefix (offsets below {report.checked_offsets}) across "
            f"{len(report.nodes)} controllers' logs: {verdict}"
        )
        ok = report.agree and new_status.response.high_watermark >= hwm_before
        return 0 if ok else 1
    finally:
        killed = cluster.stop()
        console.print(
            f"cluster stopped{' (killed ' + ', '.join(killed) + ')' if killed else ''}; "
            f"logs and data kept in {directory}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default="demo-cluster")
    args = parser.parse_args()
    sys.exit(asyncio.run(run_demo(Path(args.dir))))


if __name__ == "__main__":
    main()
