"""analytics.phase_clock counts the CPU of child processes too (the JVM, Spark's workers)."""

from __future__ import annotations

import subprocess
import sys

from analytics.phase_clock import PhaseClock, TreeCpu

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
