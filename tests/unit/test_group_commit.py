"""Group commit (issue 17): concurrent acks=all appends share fsyncs, run off the event loop, and
`sync()` returns only once everything appended before it is on disk (rule 20)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from broker.runtime.group_commit import GroupCommit
from broker.runtime.partition_log import PartitionLog
from raft.core.record_batch import encode_batch


def _batch(value: bytes) -> bytes:
    return encode_batch(0, 0, 0, [value])


async def test_concurrent_syncs_share_fsync_rounds(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    commit = GroupCommit(log)

    async def produce(i: int) -> int:
        log.append_as_leader(_batch(b"%d" % i), 0, 1 << 20)
        end = log.log_end_offset
        flushed = await commit.sync()
        assert flushed >= end  # nothing acknowledged before it is on disk
        return end

    ends = await asyncio.gather(*(produce(i) for i in range(40)))
    assert sorted(ends) == list(range(1, 41))
    assert log.flushed_offset == 40
    # 40 appends, all but the first arriving while a round runs: a handful of fsyncs, not 40.
    assert 1 <= commit.fsyncs <= 5, commit.fsyncs
    log.close()


async def test_the_event_loop_keeps_running_during_an_fsync(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    commit = GroupCommit(log)
    ticks = 0
    stop = False

    async def ticker() -> None:
        nonlocal ticks
        while not stop:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    started = time.perf_counter()
    for i in range(20):
        log.append_as_leader(_batch(b"x" * 4096 + b"%d" % i), 0, 1 << 20)
        await commit.sync()
    elapsed = time.perf_counter() - started
    stop = True
    await task
    assert log.flushed_offset == 20
    # The loop ran the ticker while the fsyncs were in the worker thread.
    assert ticks >= 20, (ticks, elapsed)
    log.close()


async def test_sync_with_nothing_appended_does_not_fsync(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    commit = GroupCommit(log)
    assert await commit.sync() == 0
    await commit.idle()
    assert commit.fsyncs == 0
    log.close()
