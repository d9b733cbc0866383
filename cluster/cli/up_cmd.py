"""`minikraft up` / `minikraft down` (CLI.md "Nodes and a local cluster")."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from pathlib import Path

import click
from rich.console import Console

from cluster.launch.layout import (
    LayoutError,
    parse_ids,
    parse_node_setting,
    parse_ports,
    parse_setting,
    plan_layout,
)
from cluster.launch.local_cluster import (
    CLUSTER_FILE,
    COMPOSE,
    LOOPBACK,
    NETNS,
    NETWORKS,
    LocalCluster,
    ports_in_use,
)
from cluster.launch.netns import NetnsError, netns_unavailable_reason
from cluster.launch.readiness import wait_until_ready
from cluster.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, fail, output_option

console = Console(stderr=True)


@click.command()
@click.option("--dir", "directory", required=True, type=click.Path(file_okay=False))
@click.option(
    "--controllers", default=None, type=click.IntRange(1, 9), help="[default: 3, or as many ids "
    "as --controller-ids names]",
)
@click.option(
    "--brokers", default=None, type=click.IntRange(0, 9), help="[default: 3, or as many ids as "
    "--broker-ids names]",
)
@click.option(
    "--controller-ids", default=None,
    help="the controllers' node ids, e.g. 1,2,3 [default: 1.. skipping broker ids]",
)
@click.option(
    "--broker-ids", default=None,
    help="the brokers' node ids, e.g. 0,1,2 [default: 101.. skipping controller ids]",
)
@click.option(
    "--controller-ports", default=None,
    help="each controller's listener port, in --controller-ids order, e.g. 9093,9096,9099",
)
@click.option(
    "--broker-ports", default=None,
    help="each broker's listener port, in --broker-ids order, e.g. 9092,9095,9098",
)
@click.option(
    "--base-port", default=19090, show_default=True, type=int,
    help="ports not given above: controllers base+1.., brokers base+101.., HTTP base+201.. and "
    "base+301..; 0 picks free ports (from MINIKRAFT_PORT_RANGE when set)",
)
@click.option("--detach", is_flag=True, help="start, wait until ready, and return")
@click.option("--timeout-s", default=60.0, show_default=True, type=float)
@click.option("--set", "overrides", multiple=True, help="extra node property k=v (repeatable)")
@click.option(
    "--node-set", "node_sets", multiple=True,
    help="a property for one node, ID:k=v, over --set (repeatable)",
)
@click.option(
    "--network", type=click.Choice(NETWORKS), default=None,
    help=f"{LOOPBACK} (default): every node on 127.0.0.1; {NETNS}: one network namespace "
    "(own address on a bridge) per node, root only",
)
@click.option("--console", "with_console", is_flag=True,
              help="then serve `minikraft console` on 127.0.0.1 (--console-port) in the "
              "foreground instead of streaming logs; Ctrl-C stops it (and the cluster, unless "
              "--detach)")
@click.option("--console-port", default=8070, show_default=True, type=click.IntRange(0, 65535))
@output_option
def up(
    directory: str,
    controllers: int | None,
    brokers: int | None,
    controller_ids: str | None,
    broker_ids: str | None,
    controller_ports: str | None,
    broker_ports: str | None,
    base_port: int,
    detach: bool,
    timeout_s: float,
    overrides: tuple[str, ...],
    node_sets: tuple[str, ...],
    network: str | None,
    with_console: bool,
    console_port: int,
    output: str,
) -> None:
    """Start a local cluster, each node its own process, and wait until it is ready."""
    root = Path(directory)
    if network == NETNS:
        _require_netns()  # before anything else, so a non-root user gets this one line
    try:
        extra = dict(parse_setting(item) for item in overrides)
        layout = plan_layout(
            controllers=controllers,
            brokers=brokers,
            controller_ids=None if controller_ids is None
            else parse_ids(controller_ids, "--controller-ids"),
            broker_ids=None if broker_ids is None else parse_ids(broker_ids, "--broker-ids"),
            controller_ports=None if controller_ports is None
            else parse_ports(controller_ports, "--controller-ports"),
            broker_ports=None if broker_ports is None
            else parse_ports(broker_ports, "--broker-ports"),
            node_settings=[parse_node_setting(item) for item in node_sets],
        )
    except LayoutError as exc:
        fail(str(exc), EXIT_USAGE)
    if (root / CLUSTER_FILE).exists():
        cluster = LocalCluster.load(root)
        if cluster.network == COMPOSE:
            fail(f"{root} holds a docker compose cluster: docker compose up", EXIT_USAGE)
        if cluster.running():
            fail(
                f"a cluster is already running under {root} (minikraft down --dir {root})",
                EXIT_USAGE,
            )
        if network is not None and network != cluster.network:
            fail(
                f"the cluster under {root} was created with --network {cluster.network}",
                EXIT_USAGE,
            )
    else:
        try:
            cluster = LocalCluster.plan(
                root, base_port=base_port, overrides=extra, network=network or LOOPBACK,
                layout=layout,
            )
        except LayoutError as exc:
            fail(str(exc), EXIT_USAGE)
        busy = [] if cluster.netns is not None else ports_in_use(layout.explicit_ports())
        if busy:
            fail(f"port(s) {busy} on 127.0.0.1 are in use by another process", EXIT_USAGE)
    if cluster.network == NETNS:
        _require_netns()
        try:
            cluster.create_network()
        except NetnsError as exc:
            cluster.remove_network()
            fail(f"--network netns: {exc}")
    cluster.format()
    cluster.start()
    try:
        with console.status("waiting for the quorum to elect a leader...") as status:
            state = asyncio.run(
                wait_until_ready(cluster, timeout_s, progress=lambda m: status.update(m))
            )
    except TimeoutError as exc:
        killed = cluster.stop()
        cluster.remove_network()
        fail(f"cluster not ready: {exc}; stopped it (killed: {killed}); logs in {root / 'logs'}")
    except KeyboardInterrupt:
        # Ctrl-C while waiting: the nodes run in their own sessions, so stop them by pid here.
        killed = cluster.stop()
        cluster.remove_network()
        fail(f"interrupted; stopped the cluster (killed: {killed})")
    summary = {
        "cluster_id": cluster.cluster_id,
        "dir": str(cluster.dir),
        "bootstrap_controller": cluster.bootstrap_controller,
        "bootstrap_server": cluster.bootstrap_server,
        "leader_id": state.leader_id,
        "leader_epoch": state.leader_epoch,
        "pids": {s.name: s.pid for s in cluster.all_nodes()},
        "network": cluster.network,
    }
    if output == "json":
        emit_json(summary)
    else:
        console.print(
            f"[green]cluster {cluster.cluster_id} ready[/green]: leader controller {state.leader_id} "
            f"in epoch {state.leader_epoch}; bootstrap controller {cluster.bootstrap_controller}"
        )
    if with_console:
        from cluster.cli.console_cmd import run_console

        try:
            run_console(cluster.dir, "127.0.0.1", console_port, 1.0)
        finally:
            if not detach:
                cluster.stop()
                cluster.remove_network()
        sys.exit(EXIT_OK)
    if detach:
        sys.exit(EXIT_OK)
    _follow_logs(cluster)


def _require_netns() -> None:
    reason = netns_unavailable_reason()
    if reason is not None:
        fail(reason, EXIT_USAGE)


def _follow_logs(cluster: LocalCluster) -> None:
    """Stream every node's log with its name in front until Ctrl-C, then stop them all."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # Ctrl-C is how a foreground cluster stops, even when `up` inherited SIGINT ignored (a
    # shell's background job, nohup, some CI runners): take it explicitly.
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    offsets = {spec.name: 0 for spec in cluster.all_nodes()}
    try:
        while not stop.is_set():
            for spec in cluster.all_nodes():
                path = Path(spec.log_file)
                if not path.exists():
                    continue
                with path.open("rb") as fh:
                    fh.seek(offsets[spec.name])
                    chunk = fh.read()
                    offsets[spec.name] += len(chunk)
                for line in chunk.decode(errors="replace").splitlines():
                    sys.stdout.write(f"{spec.name:>13} | {line}\n")
            sys.stdout.flush()
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    killed = cluster.stop()
    cluster.remove_network()
    console.print(
        f"stopped the cluster{' (had to kill ' + ', '.join(killed) + ')' if killed else ''}"
    )


@click.command()
@click.option("--dir", "directory", required=True, type=click.Path(file_okay=False))
@output_option
def down(directory: str, output: str) -> None:
    """Stop every process of the local cluster under --dir, by its recorded pid."""
    root = Path(directory)
    if not (root / CLUSTER_FILE).exists():
        fail(f"no {CLUSTER_FILE} under {root}", EXIT_USAGE)
    cluster = LocalCluster.load(root)
    if cluster.network == COMPOSE:
        fail(f"{root} holds a docker compose cluster: docker compose down", EXIT_USAGE)
    running = [s.name for s in cluster.running()]
    killed = cluster.stop()
    left = [s.name for s in cluster.running()]
    # netns: the namespaces, veths and bridge go too, also those a crashed `up` left behind.
    removed = cluster.remove_network() if not left else []
    if output == "json":
        emit_json(
            {"stopped": running, "killed": killed, "still_running": left,
             "network_removed": removed}
        )
    else:
        console.print(
            f"stopped {len(running)} processes" + (f" (killed {killed})" if killed else "")
            + (f"; removed {len(removed)} namespaces and links" if removed else "")
        )
    if left:
        sys.exit(EXIT_FAILED)
