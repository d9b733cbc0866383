"""Group commit (issue 17): concurrent acks=all appends share fsyncs (on the loop by default, the
appends of one loop turn; in a worker thread on request, those of one round, where a woken
follower fetch answers before the fsync), and `sync()` returns only once everything appended
before it is on disk (rule 20)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from broker.runtime.group_commit import GroupCommit
from broker.runtime.partition_log import PartitionLog
from storage.core.record_batch import encode_batch
from tests.loop_turns import LoopTurns


def _batch(value: bytes) -> bytes:
    return encode_batch(0, 0, 0, [value])


async def test_in_a_thread_concurrent_syncs_share_fsync_rounds(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    commit = GroupCommit(log, in_thread=True)

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


async def test_in_a_thread_the_event_loop_keeps_running_during_an_fsync(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    commit = GroupCommit(log, in_thread=True)
    async with LoopTurns() as turns:
        started = time.perf_counter()
        for i in range(20):
            log.append_as_leader(_batch(b"x" * 4096 + b"%d" % i), 0, 1 << 20)
            await commit.sync()
        elapsed = time.perf_counter() - started
    assert log.flushed_offset == 20
    # The loop ran the counter while the fsyncs were in the worker thread.
    assert turns.count >= 20, (turns.count, elapsed)
    log.close()


@pytest.mark.parametrize("in_thread", [False, True])
async def test_sync_with_nothing_appended_does_not_fsync(tmp_path: Path, in_thread: bool) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    commit = GroupCommit(log, in_thread=in_thread)
    assert await commit.sync() == 0
    await commit.idle()
    assert commit.fsyncs == 0
    log.close()


async def test_on_the_loop_sync_fsyncs_at_once_what_is_unflushed(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    commit = GroupCommit(log)
    for i in range(3):
        log.append_as_leader(_batch(b"%d" % i), 0, 1 << 20)
    # The coroutine finishes at its first step, never suspending: the fsync ran on the loop.
    coroutine = commit.sync()
    with pytest.raises(StopIteration) as finished:
        coroutine.send(None)
    assert finished.value.value == 3 and log.flushed_offset == 3
    assert await commit.sync() == 3  # nothing new: no second fsync
    assert commit.fsyncs == 1
    log.close()


async def test_on_the_loop_grouped_syncs_of_one_turn_share_one_fsync(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, "t", 0)
    commit = GroupCommit(log)

    async def produce(i: int) -> int:
        log.append_as_leader(_batch(b"%d" % i), 0, 1 << 20)
        end = log.log_end_offset
        assert await commit.sync(group=True) >= end  # nothing acknowledged before it is on disk
        return end

    # Ten produces started in one turn: each appends, then the first to resume fsyncs for all.
    assert sorted(await asyncio.gather(*(produce(i) for i in range(10)))) == list(range(1, 11))
    assert commit.fsyncs == 1
    # A produce of a later turn gets an fsync of its own.
    assert await produce(10) == 11 and commit.fsyncs == 2 and log.flushed_offset == 11
    log.close()


async def test_in_a_thread_what_the_append_woke_runs_before_the_fsync(tmp_path: Path) -> None:
    # A parked follower fetch (an Event waiter, then its handler) answers before the leader's
    # fsync round starts, so the follower's hop and fsync overlap the leader's.
    log = PartitionLog(tmp_path, "t", 0)
    commit = GroupCommit(log, in_thread=True)
    changed = asyncio.Event()
    seen: list[tuple[str, int]] = []

    async def parked_fetch() -> None:
        # As KafkaApis._fetch long-polls: a task per partition's Event, awaited by asyncio.wait.
        await asyncio.wait([asyncio.ensure_future(changed.wait())], timeout=5)
        seen.append(("fetch answered", log.flushed_offset))

    fetch = asyncio.ensure_future(parked_fetch())
    await asyncio.sleep(0)
    log.append_as_leader(_batch(b"a"), 0, 1 << 20)
    changed.set()
    assert await commit.sync() == 1
    await fetch
    assert seen == [("fetch answered", 0)]  # it ran while the batch was not yet fsynced
    assert commit.fsyncs == 1
    log.close()
