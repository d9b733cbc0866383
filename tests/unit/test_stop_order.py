"""LocalCluster.stop: brokers are signalled and waited for before any controller is signalled
(Kafka's order: a broker's controlled shutdown needs a controller that still answers), and a
broker that will not stop is SIGKILLed without taking the controllers' own time away."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from cluster.launch.local_cluster import CONTROLLER_STOP_FLOOR_S, LocalCluster

# A node stand-in: on SIGTERM it writes when it got the signal, lingers, writes when it leaves.
NODE = """
import signal, sys, time
out, linger, ignore = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "ignore"
def on_term(*_):
    if ignore:
        return
    open(out, "a").write(f"term {time.time()}\\n")
    time.sleep(linger)
    open(out, "a").write(f"exit {time.time()}\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
open(out, "a").write("ready\\n")
while True:
    time.sleep(0.05)
"""


def _start(out: Path, linger_s: float, ignore: bool = False) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", NODE, str(out), str(linger_s),
                             "ignore" if ignore else "obey"])
    deadline = time.monotonic() + 20
    while not (out.exists() and "ready" in out.read_text()):
        assert time.monotonic() < deadline, "stand-in node never started"
        time.sleep(0.02)
    return proc


def _events(out: Path) -> dict[str, float]:
    return {kind: float(at) for kind, at in
            (line.split() for line in out.read_text().splitlines() if line != "ready")}


def _cluster(tmp_path: Path, brokers: list[subprocess.Popen[bytes]],
             controllers: list[subprocess.Popen[bytes]]) -> LocalCluster:
    cluster = LocalCluster.plan(tmp_path / "c", controllers=len(controllers),
                                brokers=len(brokers), base_port=0)
    for spec, proc in zip(cluster.brokers + cluster.controllers, brokers + controllers, strict=True):
        spec.pid = proc.pid
    return cluster


def test_controllers_are_signalled_only_after_every_broker_exited(tmp_path: Path) -> None:
    outs = [tmp_path / f"{name}.out" for name in ("b1", "b2", "c1")]
    procs = [_start(outs[0], 0.6), _start(outs[1], 0.3), _start(outs[2], 0.0)]
    try:
        killed = _cluster(tmp_path, procs[:2], procs[2:]).stop(timeout_s=15)
        assert killed == []
        brokers_left = max(_events(out)["exit"] for out in outs[:2])
        assert _events(outs[2])["term"] >= brokers_left, [_events(o) for o in outs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_broker_that_ignores_sigterm_is_killed_and_the_controller_still_stops_cleanly(
    tmp_path: Path,
) -> None:
    outs = [tmp_path / "b.out", tmp_path / "c.out"]
    procs = [_start(outs[0], 0.0, ignore=True), _start(outs[1], 0.5)]
    try:
        started = time.monotonic()
        killed = _cluster(tmp_path, procs[:1], procs[1:]).stop(timeout_s=1.0)
        assert killed == ["broker-101"]
        controller = _events(outs[1])
        assert "exit" in controller  # it had its own time to stop, and used it
        assert time.monotonic() - started < 1.0 + CONTROLLER_STOP_FLOOR_S + 5
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
