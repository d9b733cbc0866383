"""The wall clock in milliseconds, as Kafka's Time.SYSTEM.milliseconds(): the one a runtime
reads and passes into a core (a core never reads a clock; the layering test keeps it out)."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)


def monotonic_ms() -> int:
    """A clock that only moves forward, for intervals (Kafka's Time.nanoseconds())."""
    return int(time.monotonic() * 1000)
