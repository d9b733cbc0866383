"""Wall and CPU time per phase of an audit, for `bench audit` on a shared machine.

Wall time alone says little when other jobs share the cores: the CPU the audit itself used is
what a change to it moves. An audit is a process tree (this Python process, the forked staging
pool, the JVM, Spark's Python workers), so CPU is read from /proc for this process and every
descendant alive at the phase's end, each with what its own reaped children used (the JVM
reaps Spark's Python workers), plus what this process's reaped children used (os.times). A
descendant that has exited but is not yet reaped is missed until it is: close enough for
phases of seconds. Without /proc (not Linux) only this process and its reaped children count.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PROC = Path("/proc")


def _stat(pid: int | str) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from the state on (the name may hold spaces)


def tree_cpu_s() -> float:
    """CPU seconds (user + system) of this process and its descendants so far."""
    times = os.times()
    total = times.user + times.system + times.children_user + times.children_system
    if not _PROC.is_dir():
        return total
    children: dict[int, list[tuple[int, float]]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(entry.name)
        if fields is None:
            continue
        # fields[1] is the parent pid; [11], [12] utime and stime, [13], [14] those of its
        # reaped children, in clock ticks.
        children.setdefault(int(fields[1]), []).append(
            (int(entry.name), sum(int(v) for v in fields[11:15]) / tick))
    todo = [os.getpid()]
    while todo:
        for child, cpu in children.get(todo.pop(), []):
            total += cpu
            todo.append(child)
    return total


@dataclass
class PhaseClock:
    """A progress callback (run_audit's `progress`): each message starts a phase; `phases`
    holds (name, wall s, CPU s) of the finished ones, `finish` ends the last."""

    phases: list[tuple[str, float, float]] = field(default_factory=list)
    _current: tuple[str, float, float] | None = None

    def __call__(self, message: str) -> None:
        now, cpu = time.monotonic(), tree_cpu_s()
        if self._current is not None:
            name, started, cpu_started = self._current
            self.phases.append((name, now - started, cpu - cpu_started))
        self._current = (message, now, cpu)

    def finish(self) -> None:
        if self._current is not None:
            self("")
            self._current = None

    def to_json(self) -> list[dict[str, Any]]:
        return [{"phase": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
                for name, wall, cpu in self.phases]

    def total(self) -> tuple[float, float]:
        return sum(p[1] for p in self.phases), sum(p[2] for p in self.phases)
