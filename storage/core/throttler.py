"""Kafka's Throttler (storage/internals/utils/Throttler.java), pure: the caller reports what it
did (bytes read or written) and gets how long to sleep so that its average rate stays at the
desired one. The log cleaner's I/O goes through one (`log.cleaner.io.max.bytes.per.second`,
checked every 300 ms as Kafka's LogCleaner does); the clock is the caller's (nanoseconds).

Kafka's rule: once a check interval has passed and something was observed, if the rate over the
period is above the desired one, sleep for what brings the period to the desired rate; either
way a new period starts after the check (so its clock is read again after the sleep).
"""

from __future__ import annotations

from dataclasses import dataclass

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
CLEANER_CHECK_INTERVAL_MS = 300  # LogCleaner's Throttler(maxIoBytesPerSecond, 300, ...)
UNLIMITED = 1.7976931348623157e308  # Double.MAX_VALUE, the config's default


@dataclass(slots=True)
class Throttler:
    desired_rate_per_s: float
    period_start_ns: int
    check_interval_ms: int = CLEANER_CHECK_INTERVAL_MS
    observed_so_far: float = 0.0
    total_observed: float = 0.0  # what was ever observed (metrics, tests)

    def observe(self, amount: float, now_ns: int) -> int:
        """Record `amount` units done by now; milliseconds to sleep (0: none). After a sleep,
        call `period_restarted` with the clock read after it (Kafka reads it again)."""
        self.total_observed += amount
        self.observed_so_far += amount
        elapsed_ns = now_ns - self.period_start_ns
        if elapsed_ns <= self.check_interval_ms * NS_PER_MS or self.observed_so_far <= 0:
            return 0
        sleep_ms = 0
        rate = self.observed_so_far * NS_PER_S / elapsed_ns
        if rate > self.desired_rate_per_s:
            desired_per_ms = self.desired_rate_per_s / 1000
            elapsed_ms = elapsed_ns // NS_PER_MS
            sleep_ms = max(0, round(self.observed_so_far / desired_per_ms - elapsed_ms))
        self.period_start_ns = now_ns
        self.observed_so_far = 0.0
        return sleep_ms

    def period_restarted(self, now_ns: int) -> None:
        self.period_start_ns = now_ns
