"""Group commit for one partition log: `sync()` returns once everything appended before the call
is on disk (issue 17). The append waiting for it counts toward the HWM only once flushed
(rule 20, decided by the core: broker.core.high_watermark).

Where the fsync runs is the broker's choice (`minikraft.log.flush.in.thread`):
- on the event loop (default). A leader's produce asks for a grouped sync: it lets one loop turn
  pass, so every produce read from the sockets in the same turn appends first, and the first of
  them to resume fsyncs for all (the others find their offsets flushed and go on). A woken
  follower fetch reads after that turn (purgatory._TURNS_BEFORE_READ), so it carries every
  batch of the group. A follower's append needs no grouping (one fetch in flight per partition):
  it fsyncs at once.
- in a worker thread: one fsync round at a time; the first caller opens it, the round first lets
  the loop run what is ready (a woken follower fetch answers, so the follower's hop and fsync
  overlap the leader's), and every append made before the round starts rides along.
Measured on the 2-core machine (BENCHMARKS.md, session 12), 8 one-record acks=all producers: the
grouped leader fsync took throughput from 2.1-2.5k to 2.6-3.4k records/s and broker CPU per
record from 317-377 to 267-352 us, against an fsync per produce at once; two turns instead of
one, or the fetch reading before the fsync, answered followers with smaller batches (367-498 us
of CPU per record). The worker thread costs nearly three times the CPU per record (761-768
us: executor hand-off, GIL hand-back, context switches and the extra, smaller follower
fetches); an fsync on the loop blocks it for about 0.1-0.2 ms. The thread pays only where fsyncs
are slow and cores plentiful.
"""

from __future__ import annotations

import asyncio

from broker.runtime.partition_log import PartitionLog

# Loop turns a worker-thread round waits before its fsync: a woken fetch needs two (its
# Event.wait, then the handler that writes the answer) before the bytes leave for the follower.
_TURNS_BEFORE_FSYNC = 2
# Loop turns a grouped on-loop fsync waits: the produces handled in this turn append first.
_TURNS_BEFORE_GROUPED_FSYNC = 1


class GroupCommit:
    __slots__ = ("_in_thread", "_inflight", "_log", "fsyncs")

    def __init__(self, log: PartitionLog, *, in_thread: bool = False) -> None:
        self._log = log
        self._in_thread = in_thread
        self._inflight: asyncio.Future[None] | None = None
        self.fsyncs = 0  # how many fsync rounds ran (a benchmark and a test read it)

    async def sync(self, *, group: bool = False) -> int:
        """Wait until everything appended before this call is fsynced; the flushed offset.
        `group`: on the loop, share the fsync with the appends of this loop turn (a leader's
        produce); in a worker thread every sync is grouped."""
        log = self._log
        if not self._in_thread:
            if group:
                for _ in range(_TURNS_BEFORE_GROUPED_FSYNC):
                    await asyncio.sleep(0)
            # A truncation during the turn lowers the end: the flush covers what is left.
            if log.flushed_offset < log.log_end_offset:
                self.fsyncs += 1
                log.flush()
            return log.flushed_offset
        target = log.log_end_offset
        # A truncation meanwhile lowers the end: never wait for offsets that no longer exist.
        while log.flushed_offset < min(target, log.log_end_offset):
            inflight = self._inflight
            if inflight is None:
                inflight = self._inflight = asyncio.ensure_future(self._flush_round())
            await asyncio.shield(inflight)
        return log.flushed_offset

    async def idle(self) -> None:
        """Wait for the fsync round in flight, if any (before truncating the log under it)."""
        inflight = self._inflight
        if inflight is not None:
            await asyncio.shield(inflight)

    async def _flush_round(self) -> None:
        try:
            for _ in range(_TURNS_BEFORE_FSYNC):
                await asyncio.sleep(0)
            self.fsyncs += 1
            await asyncio.to_thread(self._log.flush)
        finally:
            self._inflight = None
