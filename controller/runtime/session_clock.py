"""SessionClock: the active controller's clock for broker sessions, which stops while its own
event loop is held (issue 35).

Kafka takes a broker's heartbeat on a request-handler thread ("so that if the main controller
thread is backlogged, the last contact time update still gets through", BrokerHeartbeatTracker).
A minikraft node has one event loop: while it is held (a slice that ran long, the process not
scheduled on a loaded machine), heartbeats wait unread in the socket, and a session timed on the
wall clock would lapse for the controller's own stall, fencing a live broker and rewriting all
its partitions (issue 35's 100K run: half the controllers' time went there). This clock counts
only the time the loop was free to read them: wall time minus the loop's stalls, as a sampler
measures them, plus the stall in progress (a sampler overdue) so that a session check that runs
before the sampler after a stall does not count it either. A dead broker is still fenced after
`broker.session.timeout.ms` of time the controller was listening.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kafkawire.loop import cancel_and_wait

SAMPLE_INTERVAL_S = 0.05
# Lateness below this is the timer's own jitter, not a stall (about 2% of the samples' period).
JITTER_S = 0.002


class SessionClock:
    def __init__(
        self,
        interval_s: float = SAMPLE_INTERVAL_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_s = interval_s
        self._monotonic = monotonic
        self._origin = monotonic()
        self._stalled_s = 0.0
        self._next_sample = self._origin + interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._next_sample = self._monotonic() + self.interval_s
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    @property
    def stalled_ms(self) -> float:
        """Loop time lost so far, the stall in progress included."""
        overdue = 0.0
        if self._task is not None:
            overdue = max(0.0, self._monotonic() - self._next_sample - JITTER_S)
        return (self._stalled_s + overdue) * 1000

    def now_ms(self) -> int:
        """Milliseconds of listening time since the clock was made."""
        return round((self._monotonic() - self._origin) * 1000 - self.stalled_ms)

    def record_wakeup(self, now: float) -> None:
        """The sampler woke at `now`, due at the previous `_next_sample`: the lateness was a
        stall (exposed for tests)."""
        self._stalled_s += max(0.0, now - self._next_sample - JITTER_S)
        self._next_sample = now + self.interval_s

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(max(0.0, self._next_sample - self._monotonic()))
            self.record_wakeup(self._monotonic())
