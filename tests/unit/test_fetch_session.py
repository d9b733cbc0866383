"""KIP-227 fetch sessions (broker/core/fetch_session.py), both ends, as Kafka's
FetchSessionTest / FetchSessionHandlerTest check them."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from broker.core.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSessionCache,
    FetchSessionHandler,
    SentPartition,
    answer_changed,
    next_epoch,
)
from kafkawire.errors import Errors


@dataclass(frozen=True)
class Topic:
    topic: str


@dataclass(frozen=True)
class Part:
    partition: int
    fetch_offset: int = 0


ORDERS = Topic("orders")


def _ids() -> itertools.count[int]:
    return itertools.count(41)


def test_a_full_fetch_opens_a_session_and_an_incremental_one_updates_it() -> None:
    cache = FetchSessionCache(max_slots=10)
    ids = _ids()
    full = cache.new_context(
        0, INITIAL_EPOCH, [(ORDERS, Part(0)), (ORDERS, Part(1))], [],
        privileged=True, now_ms=0, new_session_id=lambda: next(ids),
    )
    assert (full.error, full.session_id, full.incremental) == (Errors.NONE, 41, False)
    assert [c.request.partition for c in full.partitions] == [0, 1]
    # Epoch 1: partition 1 moved on, partition 0 forgotten, partition 2 added.
    step = cache.new_context(
        41, 1, [(ORDERS, Part(1, 7)), (ORDERS, Part(2))], [("orders", 0)],
        privileged=True, now_ms=5, new_session_id=lambda: next(ids),
    )
    assert step.incremental and step.session_id == 41
    assert [(c.request.partition, c.request.fetch_offset) for c in step.partitions] == [
        (1, 7), (2, 0),
    ]
    # The same epoch again is refused, an unknown session too.
    again = cache.new_context(
        41, 1, [], [], privileged=True, now_ms=6, new_session_id=lambda: next(ids)
    )
    assert again.error is Errors.INVALID_FETCH_SESSION_EPOCH
    unknown = cache.new_context(
        99, 1, [], [], privileged=True, now_ms=6, new_session_id=lambda: next(ids)
    )
    assert unknown.error is Errors.FETCH_SESSION_ID_NOT_FOUND
    # FINAL closes it: a sessionless full fetch.
    final = cache.new_context(
        41, FINAL_EPOCH, [(ORDERS, Part(0))], [],
        privileged=True, now_ms=7, new_session_id=lambda: next(ids),
    )
    assert (final.session_id, len(cache)) == (0, 0)


def test_a_full_cache_evicts_a_stale_session_then_a_smaller_consumer_one() -> None:
    cache = FetchSessionCache(max_slots=1, eviction_ms=100)
    ids = _ids()

    def open_(privileged: bool, size: int, now: int) -> int:
        parts = [(ORDERS, Part(i)) for i in range(size)]
        return cache.new_context(
            0, INITIAL_EPOCH, parts, [], privileged=privileged, now_ms=now,
            new_session_id=lambda: next(ids),
        ).session_id

    assert open_(False, 2, 0) == 41
    assert open_(False, 1, 10) == 0  # not stale, not smaller: no session, sessionless answer
    assert open_(False, 3, 20) == 42  # a larger consumer session takes the slot
    assert open_(True, 1, 30) == 43  # a follower's session is privileged
    assert open_(False, 9, 40) == 0  # a follower's session is never evicted but when stale
    assert open_(False, 1, 200) == 44


def test_an_incremental_answer_carries_only_partitions_with_news() -> None:
    cached = CachedPartition(ORDERS, Part(0))
    assert answer_changed(cached, 0, False, 10, 0)  # first answer: HWM and start are new
    assert not answer_changed(cached, 0, False, 10, 0)
    assert answer_changed(cached, 0, True, 10, 0)  # records
    assert answer_changed(cached, 0, False, 11, 0)  # the HWM moved
    assert answer_changed(cached, 0, False, 11, 4)  # DeleteRecords moved the start
    assert answer_changed(cached, int(Errors.NOT_LEADER_OR_FOLLOWER), False, 11, 4)


def test_the_fetcher_sends_only_what_changed_and_starts_again_after_an_error() -> None:
    handler = FetchSessionHandler()
    a, b = ("t", 0), ("t", 1)
    at = {a: SentPartition(0, 1, -1, 100), b: SentPartition(0, 1, -1, 100)}
    first = handler.build(at)
    assert (first.epoch, first.send, first.forget, first.full) == (INITIAL_EPOCH, [a, b], [], True)
    handler.handle_response(Errors.NONE, 41, first)
    moved = {a: SentPartition(5, 1, 1, 100)}  # a appended, b no longer fetched
    second = handler.build(moved)
    assert (second.session_id, second.epoch, second.send, second.forget) == (41, 1, [a], [b])
    handler.handle_response(Errors.NONE, 41, second)
    third = handler.build(moved)
    assert (third.epoch, third.send, third.forget) == (2, [], [])
    handler.handle_response(Errors.FETCH_SESSION_ID_NOT_FOUND, 0, third)
    fourth = handler.build(moved)
    assert (fourth.epoch, fourth.send) == (INITIAL_EPOCH, [a])
    handler.handle_response(Errors.NONE, 0, fourth)  # the leader had no slot: sessionless
    assert handler.build(moved).full


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1
    assert next_epoch((1 << 31) - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_session_takes_the_partitions_of_a_big_fetch_in_slices() -> None:
    """Issue 35: a follower's Fetch after a create names its 5,000 new partitions, and the
    leader's session took them in one stretch of its loop (15 ms of CPU). new_context_steps
    yields every UPDATE_SLICE_PARTITIONS partitions, moves the epoch on before it yields (no
    other request can use it meanwhile), and ends with the context new_context gives."""
    from broker.core.fetch_session import UPDATE_SLICE_PARTITIONS

    count = 5 * UPDATE_SLICE_PARTITIONS
    requests = [(ORDERS, Part(p)) for p in range(count)]
    results = []
    for sliced in (False, True):
        cache = FetchSessionCache(max_slots=10)
        ids = _ids()
        cache.new_context(0, INITIAL_EPOCH, [(ORDERS, Part(count))], [], privileged=True,
                          now_ms=0, new_session_id=ids.__next__)
        if not sliced:
            results.append(cache.new_context(41, 1, requests, [], privileged=True, now_ms=1,
                                             new_session_id=ids.__next__))
            continue
        steps = cache.new_context_steps(41, 1, requests, [], privileged=True, now_ms=1,
                                        new_session_id=ids.__next__)
        yields = 0
        while True:
            try:
                next(steps)
            except StopIteration as done:
                results.append(done.value)
                break
            yields += 1
            assert cache.sessions[41].epoch == 2  # taken before the first yield
        assert yields == count // UPDATE_SLICE_PARTITIONS
    whole, sliced_context = results
    assert [c.request.partition for c in sliced_context.partitions] == [
        c.request.partition for c in whole.partitions
    ] == [count, *range(count)]
    assert (sliced_context.session_id, sliced_context.incremental) == (41, True)
