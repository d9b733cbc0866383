"""What `minikraft console` costs the nodes it watches (issue 37: under 5% CPU at 1,000
partitions): CPU time of every node process (utime + stime from /proc/PID/stat) over a window
without the console, then over a window with the console running and a page's event stream
open, alternating, on a cluster under D that has the partitions already.

    python -m cluster.bench.console_cost --dir D [--window-s 20] [--rounds 2] [--port 0]

Prints JSON: the nodes' CPU (percent of one core) without and with, the difference as a share
of the nodes' own CPU, and the console process's own CPU."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from cluster.launch.local_cluster import LocalCluster, free_ports

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """utime + stime of a process, seconds (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def nodes_cpu_s(cluster: LocalCluster) -> float:
    return sum(cpu_s(s.pid) for s in cluster.all_nodes() if s.pid)


async def read_stream(url: str, stop: asyncio.Event) -> int:
    """Hold the page's event stream open, as a browser tab does; bytes received."""
    received = 0

    async with aiohttp.ClientSession() as session, session.get(url) as response:

        async def pump() -> None:
            nonlocal received
            async for chunk in response.content.iter_any():
                received += len(chunk)

        task = asyncio.create_task(pump())
        await stop.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await task
    return received


async def window(cluster: LocalCluster, seconds: float, stream_url: str | None) -> dict[str, Any]:
    stop = asyncio.Event()
    reader = asyncio.create_task(read_stream(stream_url, stop)) if stream_url else None
    await asyncio.sleep(1.0 if reader else 0)  # past the first full message
    before, started = nodes_cpu_s(cluster), time.monotonic()
    await asyncio.sleep(seconds)
    used, elapsed = nodes_cpu_s(cluster) - before, time.monotonic() - started
    stop.set()
    streamed = await reader if reader else 0
    return {"nodes_cpu_pct": 100 * used / elapsed, "streamed_bytes": streamed}


async def _background_rate(pid: int, seconds: float) -> float:
    """CPU seconds per second the node spends with nothing asked of it (its fetchers, timers)."""
    before, started = cpu_s(pid), time.monotonic()
    await asyncio.sleep(seconds)
    return (cpu_s(pid) - before) / (time.monotonic() - started)


async def per_request_cpu_ms(cluster: LocalCluster, requests: int = 100) -> dict[str, Any]:
    """The CPU one poll's requests cost each node, measured with a signal far above the
    machine's noise: `requests` GET /v1/status in a row to each node (and as many
    DescribeQuorum to the quorum), the node's CPU time over them less what it spent anyway
    (its rate over the seconds before and after), divided by the count. The console sends
    one of each per node per interval."""
    from cluster.client.admin_client import describe_quorum

    out: dict[str, Any] = {}
    async with aiohttp.ClientSession() as session:
        for spec in cluster.all_nodes():
            assert spec.pid is not None
            url = f"http://{spec.host}:{spec.http_port}/v1/status"
            idle = await _background_rate(spec.pid, 3.0)
            before, started = cpu_s(spec.pid), time.monotonic()
            for _ in range(requests):
                async with session.get(url) as response:
                    await response.read()
            elapsed = time.monotonic() - started
            used = cpu_s(spec.pid) - before
            idle = (idle + await _background_rate(spec.pid, 3.0)) / 2
            out[spec.name] = round(1000 * max(0.0, used - idle * elapsed) / requests, 2)
    leader_pids = [s.pid for s in cluster.controllers if s.pid]

    def controllers_cpu() -> float:
        return sum(cpu_s(p) for p in leader_pids)

    before, started = controllers_cpu(), time.monotonic()
    await asyncio.sleep(3.0)
    idle = (controllers_cpu() - before) / (time.monotonic() - started)
    before, started = controllers_cpu(), time.monotonic()
    for _ in range(requests):
        await describe_quorum(cluster.bootstrap_controller, timeout_ms=3000)
    used, elapsed = controllers_cpu() - before, time.monotonic() - started
    out["describe_quorum_all_controllers"] = round(
        1000 * max(0.0, used - idle * elapsed) / requests, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--window-s", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--interval-s", type=float, default=1.0)
    args = parser.parse_args()
    cluster = LocalCluster.load(args.dir)
    port = free_ports(1)[0]
    without, with_console, console_cpu = [], [], []
    for _ in range(args.rounds):
        without.append(asyncio.run(window(cluster, args.window_s, None))["nodes_cpu_pct"])
        console = subprocess.Popen(
            [sys.executable, "-m", "cluster.cli.main", "console", "--dir", str(args.dir),
             "--port", str(port), "--interval-s", str(args.interval_s)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_ready(f"http://127.0.0.1:{port}/api/state", console)
            time.sleep(3)  # catching up with the log
            console_before, started = cpu_s(console.pid), time.monotonic()
            result = asyncio.run(window(cluster, args.window_s,
                                        f"http://127.0.0.1:{port}/events"))
            console_cpu.append(100 * (cpu_s(console.pid) - console_before)
                               / (time.monotonic() - started))
            with_console.append(result["nodes_cpu_pct"])
        finally:
            console.terminate()
            console.wait(15)
    per_request = asyncio.run(per_request_cpu_ms(cluster))
    per_poll_ms = sum(per_request.values())
    base = sum(without) / len(without)
    loaded = sum(with_console) / len(with_console)
    print(json.dumps({
        "partitions": sum(1 for _ in _partitions(args.dir)),
        "window_s": args.window_s, "rounds": args.rounds, "interval_s": args.interval_s,
        "nodes_cpu_pct_without": [round(v, 2) for v in without],
        "nodes_cpu_pct_with": [round(v, 2) for v in with_console],
        "added_pct_of_one_core": round(loaded - base, 2),
        "added_share_of_nodes_cpu_pct": round(100 * (loaded - base) / base, 1) if base else None,
        "console_process_cpu_pct": [round(v, 2) for v in console_cpu],
        "per_request_cpu_ms": per_request,
        # One poll per interval: every node's status plus one DescribeQuorum.
        "nodes_cpu_pct_per_poll_rate": round(per_poll_ms / 1000 / args.interval_s * 100, 2),
        "share_of_nodes_cpu_pct_per_poll_rate": round(
            100 * per_poll_ms / 1000 / args.interval_s * 100 / base, 1) if base else None,
    }, indent=2))


def _wait_ready(url: str, console: subprocess.Popen[bytes], timeout_s: float = 90.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and console.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("the console did not start")


def _partitions(directory: Path) -> list[str]:
    """The partitions a broker of the cluster hosts as leader or follower (its log dirs)."""
    cluster = LocalCluster.load(directory)
    names: set[str] = set()
    for broker in cluster.brokers:
        for path in Path(broker.dir).glob("*/*-[0-9]*"):
            if path.is_dir():
                names.add(path.name)
    return sorted(names)


if __name__ == "__main__":
    main()
