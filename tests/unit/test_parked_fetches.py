"""Parked long-poll fetches (raft/runtime/parked_fetches.py, the Raft leader's and the
brokers'): a wake reaches every fetch parked before it, however many park after it; one fetch
watching several logs is woken by any of them and leaves none behind; a fetch nobody wakes
answers at its timeout."""

from __future__ import annotations

import asyncio

from raft.runtime.parked_fetches import ParkedFetches, park


async def test_a_wake_reaches_fetches_parked_before_it_even_if_another_parks_at_once() -> None:
    parked = ParkedFetches()
    first = asyncio.ensure_future(park((parked,), 5.0))
    second = asyncio.ensure_future(park((parked,), 5.0))
    await asyncio.sleep(0)  # both parked
    assert len(parked) == 2
    # What the driver does in one step: a voter's fetch moves the high watermark (wake), then
    # that fetch parks itself. Each fetch parked before the wake answers; the late one waits
    # for the next wake. (The shared Event this replaced was cleared by the late park, and a
    # parked fetch whose wait had not started yet slept to its max wait: the real-process
    # regression test is test_kafka_clients' test_every_broker_reads_a_new_topic_...)
    parked.wake_all()
    late = asyncio.ensure_future(park((parked,), 5.0))
    done, _pending = await asyncio.wait({first, second}, timeout=1.0)
    assert done == {first, second}
    assert first.result() is True and second.result() is True
    assert not late.done()  # parked after the wake: it waits for the next one
    parked.wake_all()
    assert await asyncio.wait_for(late, 1.0) is True
    assert len(parked) == 0


async def test_one_fetch_on_several_logs_is_woken_by_any_and_leaves_none_behind() -> None:
    logs = [ParkedFetches(), ParkedFetches()]
    fetch = asyncio.ensure_future(park(logs, 5.0))
    await asyncio.sleep(0)
    assert [len(g) for g in logs] == [1, 1]
    logs[1].wake_all()
    assert await asyncio.wait_for(fetch, 1.0) is True
    assert [len(g) for g in logs] == [0, 0]


async def test_a_fetch_nobody_wakes_answers_at_its_timeout_and_leaves_nothing_behind() -> None:
    parked = ParkedFetches()
    assert await park((parked,), 0.01) is False
    assert len(parked) == 0
    parked.wake_all()  # nothing parked: nothing to do


async def test_a_cancelled_fetch_leaves_nothing_behind() -> None:
    parked = ParkedFetches()
    task = asyncio.ensure_future(park((parked,), 5.0))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert len(parked) == 0


async def test_a_group_with_nothing_parked_holds_no_set() -> None:
    # Issue 35: a broker has two groups for each of 100,000 partitions, nearly all empty.
    parked = ParkedFetches()
    assert parked._waiters is None
    fetch = asyncio.ensure_future(park((parked,), 5.0))
    await asyncio.sleep(0)
    assert len(parked) == 1
    parked.wake_all()
    assert await asyncio.wait_for(fetch, 1.0) is True
    assert parked._waiters is None
    assert await park((parked,), 0.01) is False
    assert parked._waiters is None
