"""Group commit for one partition log: `sync()` returns once everything appended before the call
is on disk (rule 20: the core counts only `flushed_offset`) (issue 17).

Where the fsync runs is the broker's choice (`minikraft.log.flush.in.thread`):
- on the event loop (default): the caller fsyncs at once if anything is unflushed. While the
  loop is blocked in the fsync, produces and follower fetches queue up in the sockets and are
  served together afterwards, so each follower fetch carries several batches and each fsync
  covers every append made before it: the group commit comes from the blocked loop.
- in a worker thread: one fsync round at a time; the first caller opens it, the round first lets
  the loop run what is ready (a woken follower fetch answers, so the follower's hop and fsync
  overlap the leader's), and every append made before the round starts rides along.
Measured on the 2-core machine (BENCHMARKS.md, session 5), the worker thread cost about 1.5 ms of
CPU per one-record acks=all produce across the three brokers (executor hand-off, GIL hand-back,
context switches and the extra, smaller follower fetches), which roughly halved one-record
throughput; an fsync on the loop blocks it for about 0.3 ms. The thread pays only where fsyncs
are slow and cores plentiful.
"""

from __future__ import annotations

import asyncio

from broker.runtime.partition_log import PartitionLog

# Loop turns a worker-thread round waits before its fsync: a woken fetch needs two (its
# Event.wait, then the handler that writes the answer) before the bytes leave for the follower.
_TURNS_BEFORE_FSYNC = 2


class GroupCommit:
    __slots__ = ("_in_thread", "_inflight", "_log", "fsyncs")

    def __init__(self, log: PartitionLog, *, in_thread: bool = False) -> None:
        self._log = log
        self._in_thread = in_thread
        self._inflight: asyncio.Future[None] | None = None
        self.fsyncs = 0  # how many fsync rounds ran (a benchmark and a test read it)

    async def sync(self) -> int:
        """Wait until everything appended before this call is fsynced; the flushed offset."""
        log = self._log
        if not self._in_thread:
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
