"""Group commit for one partition log: one fsync in flight at a time, in a worker thread, and
every append made before it started rides along (issue 17).

A produce (acks=all) or a follower append awaits `sync()`: it returns once everything appended
before the call is on disk. While one fsync runs, the event loop keeps serving and appending; the
callers that arrive meanwhile share the next fsync. So N concurrent acks=all requests to a
partition cost about two fsyncs, not N, and none of them blocks the loop.

The fsync itself is PartitionLog.flush (DiskLog's rule: flush may run in a worker thread while the
loop appends; the flushed offset it reports is the log end captured when it started). Rule 20
holds as before: the core counts only `flushed_offset`, which advances after the fsync returns.
"""

from __future__ import annotations

import asyncio

from broker.runtime.partition_log import PartitionLog


class GroupCommit:
    __slots__ = ("_inflight", "_log", "fsyncs")

    def __init__(self, log: PartitionLog) -> None:
        self._log = log
        self._inflight: asyncio.Future[None] | None = None
        self.fsyncs = 0  # how many fsync rounds ran (a benchmark and a test read it)

    async def sync(self) -> int:
        """Wait until everything appended before this call is fsynced; the flushed offset."""
        log = self._log
        target = log.log_end_offset
        # A truncation meanwhile lowers the end: never wait for offsets that no longer exist.
        while log.flushed_offset < min(target, log.log_end_offset):
            inflight = self._inflight
            if inflight is None:
                inflight = self._inflight = asyncio.ensure_future(self._flush_round())
            await asyncio.shield(inflight)
        return log.flushed_offset

    async def idle(self) -> None:
        """Wait for the fsync in flight, if any (before truncating the log under it)."""
        inflight = self._inflight
        if inflight is not None:
            await asyncio.shield(inflight)

    async def _flush_round(self) -> None:
        try:
            self.fsyncs += 1
            await asyncio.to_thread(self._log.flush)
        finally:
            self._inflight = None
