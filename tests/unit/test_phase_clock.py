"""analytics.phase_clock counts the CPU of child processes too (the JVM, Spark's workers)."""

from __future__ import annotations

import subprocess
import sys

from analytics.phase_clock import PhaseClock, tree_cpu_s

BURN = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"


def test_a_child_process_cpu_is_in_the_phase() -> None:
    clock = PhaseClock()
    clock("child burns 0.4 s of CPU")
    child = subprocess.Popen([sys.executable, "-c", BURN])
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
    before = tree_cpu_s()
    subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=60)
    assert tree_cpu_s() >= before
