"""The order of `minikraft bench kafka`'s measurements: every line is measured on each cluster
in turn, the order reversed on every repetition (Kafka, minikraft, minikraft, Kafka, ...: ABBA),
with the load average taken at each measurement, so a change in the machine's load (six other
engineers share its two cores) falls on both sides alike instead of on whichever went first.

Pure bookkeeping: what to run next, and the samples each side took with their loads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from cluster.bench.kafka_engines import load_average, progress

T = TypeVar("T")


def order(engines: Sequence[str], rep: int) -> list[str]:
    """The engines in the order of repetition `rep`: as given on even ones, reversed on odd ones
    (A B, B A, A B, ...: each side is as often first as last)."""
    return list(engines) if rep % 2 == 0 else list(reversed(engines))


@dataclass
class Taken(Generic[T]):
    """One measurement of one engine: what it returned and the load average right after it."""

    value: T
    load: list[float]


@dataclass
class Interleaved(Generic[T]):
    """Each engine's measurements of one line, in the order they were taken."""

    samples: dict[str, list[Taken[T]]] = field(default_factory=dict)
    sequence: list[str] = field(default_factory=list)  # engines in the order measured

    def values(self, engine: str) -> list[T]:
        return [t.value for t in self.samples.get(engine, [])]

    def loads(self, engine: str) -> list[list[float]]:
        return [t.load for t in self.samples.get(engine, [])]

    def count(self, engine: str) -> int:
        return len(self.samples.get(engine, []))


def mean_load(loads: Sequence[Sequence[float]]) -> list[float]:
    """The 1, 5 and 15 minute load averages averaged over a line's measurements."""
    if not loads:
        return []
    return [round(sum(load[i] for load in loads) / len(loads), 2) for i in range(3)]


def interleave(engines: Sequence[str], reps: int, measure: Callable[[str, int], T],
               name: str, *, phase_end: float | None = None,
               clock: Callable[[], float] = time.monotonic) -> Interleaved[T]:
    """Up to `reps` repetitions of `measure(engine, rep)` on every engine in ABBA order.

    With `phase_end` (a `clock` time), a repetition is not begun when the previous one's length
    would carry it past phase_end (the first always runs): a run bounded in time makes the
    largest number of repetitions that fits, each one whole on both sides."""
    out: Interleaved[T] = Interleaved({e: [] for e in engines})
    last_rep_s = 0.0
    for rep in range(reps):
        if rep > 0 and phase_end is not None and clock() + last_rep_s > phase_end:
            progress(f"{name}: {rep} of {reps} repetitions fit the run's time budget")
            break
        started = clock()
        for engine in order(engines, rep):
            value = measure(engine, rep)
            load = load_average()
            out.samples[engine].append(Taken(value, load))
            out.sequence.append(engine)
            shown = f" = {value:.4g}" if isinstance(value, float) else ""
            progress(f"{engine}: {name} {rep + 1}/{reps}{shown} (load {load})")
        last_rep_s = clock() - started
    return out
