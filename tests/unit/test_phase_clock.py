"""cluster.bench.phase_clock counts the CPU of child processes too (the JVM, Spark's workers), and
reads the CPU of given processes (bench produce's servers)."""

from __future__ import annotations

import subprocess
import sys

from cluster.bench.phase_clock import CpuSince, PhaseClock, TreeCpu, cpu_seconds

# Burns 0.4 s of CPU, then stays a moment (what it used before its last sample counts).
BURN = ("import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
        "time.sleep(1)\n")


def test_a_child_process_cpu_is_in_the_phase() -> None:
    """Sampled while it runs: a grandchild (the shell's child) counts too, although nobody
    in this process's tree waits for it as a child of ours."""
    clock = PhaseClock()
    clock("child burns 0.4 s of CPU")
    child = subprocess.Popen(["/bin/sh", "-c", f"{sys.executable} -c '{BURN}'; true"])
    assert child.wait(timeout=60) == 0
    clock("idle")
    clock.finish()
    (name, wall, cpu), (idle_name, _wall, idle_cpu) = clock.phases
    assert (name, idle_name) == ("child burns 0.4 s of CPU", "idle")
    assert cpu >= 0.35 and wall >= cpu * 0.5
    assert 0 <= idle_cpu < 0.2
    assert clock.total()[1] == cpu + idle_cpu
    assert [p["phase"] for p in clock.to_json()] == [name, idle_name]


def test_tree_cpu_never_goes_back() -> None:
    cpu = TreeCpu()
    before = cpu.total()
    subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=60)
    assert cpu.total() >= before


BURN_THEN_WAIT = (
    "import sys, time\nend = time.process_time() + 0.4\n"
    "while time.process_time() < end: pass\nprint('burned', flush=True)\nsys.stdin.read()\n"
)


def test_cpu_seconds_of_given_processes() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BURN_THEN_WAIT], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline() == b"burned\n"
        burned = cpu_seconds([child.pid])
        assert burned is not None and 0.35 <= burned < 10
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait(timeout=60)
        # The child waits on stdin meanwhile; a reaped process counts nothing.
        both = cpu_seconds([child.pid, gone.pid])
        assert both is not None and abs(both - burned) < 0.05
        waiting = CpuSince([child.pid])
        spent = waiting.spent()  # it waits on stdin: nothing more
        assert spent is not None and 0 <= spent < 0.05
        assert CpuSince([]).spent() is None  # no processes, no figure
    finally:
        child.stdin.close()
        child.wait(timeout=60)
