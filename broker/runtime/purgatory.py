"""What a broker's requests wait on, after Kafka's DelayedOperationPurgatory: acks=all produces
waiting for the high watermark (DelayedProduce) and fetches waiting for data (DelayedFetch:
fetch.min.bytes / fetch.max.wait.ms). Each waiter is one future and one timer, owned here; what
completes a produce is the partition core's decision (PartitionReady.completed_acks, rule 20),
what wakes a fetch is its partitions' news (HostedPartition.notify*).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from broker.runtime.hosted_partition import HostedPartition
from kafkawire.errors import Errors
from raft.runtime.parked_fetches import ParkedFetches, park

# Loop turns a woken fetch lets pass before it reads the log: produces already read from their
# sockets in this turn append first, so one answer carries them all. Batching only: what counts
# toward the HWM is the core's (broker.core.high_watermark), whenever the follower reads.
# Measured (BENCHMARKS.md, session 5): reading at once made followers fetch smaller batches more
# often than the msgpack tree did (strace: 2.3x its log reads, 1.4x its fsyncs per record); two
# turns took back about 15% of the brokers' CPU per one-record acks=all produce. A leader's
# grouped fsync runs one turn after its appends (group_commit), so the read comes after it too:
# reading before or beside it cost about 40-60% more CPU per record (session 12).
_TURNS_BEFORE_READ = 2

T = TypeVar("T")


class ProducePurgatory:
    """acks=all produces waiting for the HWM to pass their last offset: one future each,
    completed by the core's PartitionReady (complete) or by the request's timeout."""

    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Future[Errors]] = {}
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._waiting)

    async def wait(
        self, timeout_ms: int, watch: Callable[[int], None], cancel: Callable[[int], object]
    ) -> Errors:
        """Park a produce under a new id: `watch(id)` hands the id to the core (which may complete
        it at once); NONE once completed, the core's error, or REQUEST_TIMED_OUT after
        timeout_ms, when `cancel(id)` tells the core to stop waiting for it. One timer per
        produce (wait_for and shield would add a task and two futures)."""
        ack_id = next(self._ids)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Errors] = loop.create_future()
        self._waiting[ack_id] = future
        timer = loop.call_later(timeout_ms / 1000, self.complete, ack_id, Errors.REQUEST_TIMED_OUT)
        watch(ack_id)
        try:
            error = await future
        finally:
            timer.cancel()
            self._waiting.pop(ack_id, None)
        if error is Errors.REQUEST_TIMED_OUT:
            cancel(ack_id)
        return error

    def complete(self, ack_id: int, error: Errors) -> None:
        future = self._waiting.pop(ack_id, None)
        if future is not None and not future.done():
            future.set_result(error)

    def fail_all(self, error: Errors) -> None:
        """Shutdown: every waiting produce is answered with `error`."""
        for ack_id in list(self._waiting):
            self.complete(ack_id, error)


async def wait_for_change(
    partitions: Iterable[HostedPartition],
    timeout_s: float,
    *,
    follower: bool,
    also: ParkedFetches | None = None,
) -> None:
    """Park until one of the partitions has news for this fetch (a follower's or a consumer's)
    or the timeout passes (one future and one timer however many partitions:
    raft.runtime.parked_fetches), then let _TURNS_BEFORE_READ loop turns pass. `also`: a
    group of its own the fetch wakes on too (a follower session's, for the partitions it
    skips: HostedPartition.changed)."""
    groups = [hosted.parked(follower) for hosted in partitions]
    if also is not None:
        groups.append(also)
    await park(groups, timeout_s)
    for _ in range(_TURNS_BEFORE_READ):
        await asyncio.sleep(0)


async def delayed_fetch(
    read: Callable[[bool], Awaitable[tuple[T, bool]]],
    partitions: Callable[[], Iterable[HostedPartition]],
    max_wait_ms: int,
    *,
    follower: bool,
    also: ParkedFetches | None = None,
) -> T:
    """Kafka's DelayedFetch: `read(first)` reads every partition of the request and says whether
    the fetch is satisfied (fetch.min.bytes reached, an error, a diverging epoch); until it is,
    park on `partitions()` and read again, at most max_wait_ms in all. `first` is True for the
    request's first read only (a follower's position counts once per request)."""
    deadline = time.monotonic() + max(0, max_wait_ms) / 1000
    first = True
    while True:
        result, satisfied = await read(first)
        first = False
        remaining = deadline - time.monotonic()
        if satisfied or remaining <= 0:
            return result
        await wait_for_change(partitions(), remaining, follower=follower, also=also)
