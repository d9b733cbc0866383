"""Wall and CPU time per phase of an audit, for `bench audit` on a shared machine.

Wall time alone says little when other jobs share the cores: the CPU the audit itself used is
what a change to it moves. An audit is a process tree (this Python process, the forked staging
pool, Spark's launcher and JVM, Spark's Python daemon and workers), and its processes come and
go: Spark kills its Python daemon at the end, and the daemon's workers are then re-parented out
of the tree, their CPU in nobody's "children" time. So a sampler thread reads /proc every
SAMPLE_S for every descendant of this process and keeps each one's last-seen user + system
time (keyed by pid and start time: pids are reused); the tree's CPU is this process's own plus
the sum of those. What a process uses between its last sample and its exit is missed (at most
SAMPLE_S of it per process). Without /proc (not Linux) only this process and its reaped
children count.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PROC = Path("/proc")
SAMPLE_S = 0.25


def _stat(pid: int | str) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from the state on (the name may hold spaces)


def cpu_seconds(pids: Iterable[int]) -> float | None:
    """User + system CPU seconds of these processes so far (None without /proc: not Linux).
    `bench produce` reads its servers' with it around each load."""
    if not _PROC.is_dir():
        return None
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:  # [11], [12]: utime, stime in clock ticks
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


class CpuSince:
    """The CPU given processes use from construction to `spent()` (None without /proc)."""

    def __init__(self, pids: Iterable[int]) -> None:
        self._pids = list(pids)
        self._start = cpu_seconds(self._pids)

    def spent(self) -> float | None:
        end = cpu_seconds(self._pids)
        if self._start is None or end is None or not self._pids:
            return None
        return end - self._start


class TreeCpu:
    """CPU seconds of this process and every descendant seen so far (see the module doc)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, str], float] = {}
        self._lock = threading.Lock()
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def sample(self) -> None:
        if not _PROC.is_dir():
            return
        children: dict[int, list[tuple[int, list[str]]]] = {}
        for entry in _PROC.iterdir():
            if entry.name.isdigit():
                fields = _stat(entry.name)
                if fields is not None:
                    children.setdefault(int(fields[1]), []).append((int(entry.name), fields))
        found: dict[tuple[int, str], float] = {}
        todo = [os.getpid()]
        while todo:
            for pid, fields in children.get(todo.pop(), []):
                # [11], [12]: utime, stime in clock ticks; [19]: start time (pid reuse)
                found[(pid, fields[19])] = (int(fields[11]) + int(fields[12])) / self._tick
                todo.append(pid)
        with self._lock:
            for key, cpu in found.items():
                self._seen[key] = max(cpu, self._seen.get(key, 0.0))

    def total(self) -> float:
        self.sample()
        times = os.times()
        with self._lock:
            descendants = sum(self._seen.values())
        if not _PROC.is_dir():
            descendants = times.children_user + times.children_system
        return times.user + times.system + descendants


@dataclass
class PhaseClock:
    """A progress callback (run_audit's `progress`): each message starts a phase; `phases`
    holds (name, wall s, CPU s) of the finished ones, `finish` ends the last. A daemon thread
    samples the process tree while phases run."""

    phases: list[tuple[str, float, float]] = field(default_factory=list)
    _current: tuple[str, float, float] | None = None
    _cpu: TreeCpu = field(default_factory=TreeCpu)
    _stop: threading.Event = field(default_factory=threading.Event)
    _sampler: threading.Thread | None = None

    def __call__(self, message: str) -> None:
        if self._sampler is None:
            self._stop.clear()
            self._sampler = threading.Thread(target=self._sample, name="phase-clock",
                                             daemon=True)
            self._sampler.start()
        now, cpu = time.monotonic(), self._cpu.total()
        if self._current is not None:
            name, started, cpu_started = self._current
            self.phases.append((name, now - started, cpu - cpu_started))
        self._current = (message, now, cpu)

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._cpu.sample()

    def finish(self) -> None:
        if self._current is not None:
            self("")
            self._current = None
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(timeout=10)
            self._sampler = None

    def to_json(self) -> list[dict[str, Any]]:
        return [{"phase": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
                for name, wall, cpu in self.phases]

    def total(self) -> tuple[float, float]:
        return sum(p[1] for p in self.phases), sum(p[2] for p in self.phases)
