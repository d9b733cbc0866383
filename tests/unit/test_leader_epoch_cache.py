"""storage.core.leader_epoch_cache: Kafka's LeaderEpochFileCache and the follower's truncation
decision (rule 22)."""

from __future__ import annotations

import pytest

from storage.core.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_END_OFFSET,
    EpochEndOffset,
    EpochEntry,
    LeaderEpochCache,
    diverging_epoch,
    follower_truncation,
)


def cache(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(EpochEntry(e, s) for e, s in pairs)


def test_assign_appends_and_ignores_repeats() -> None:
    c = LeaderEpochCache()
    assert c.assign(1, 0)
    assert c.assign(2, 10)
    assert not c.assign(2, 15)  # same epoch, later offset: nothing to learn
    assert c.entries() == (EpochEntry(1, 0), EpochEntry(2, 10))
    assert c.latest_epoch() == 2


def test_assign_removes_non_monotonic_entries() -> None:
    c = cache((1, 0), (2, 10), (3, 20))
    assert c.assign(3, 15)  # same epoch, earlier start: replaces it
    assert c.entries() == (EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(3, 15))
    assert c.assign(4, 10)  # start not above epoch 2's: epochs 2 and 3 go
    assert c.entries() == (EpochEntry(1, 0), EpochEntry(4, 10))


def test_assign_rejects_negative_values() -> None:
    with pytest.raises(ValueError):
        LeaderEpochCache().assign(-1, 0)


def test_end_offset_for_epoch_matches_kafka() -> None:
    c = cache((1, 0), (3, 10), (5, 20))
    assert c.end_offset_for_epoch(5, 30) == EpochEndOffset(5, 30)  # latest: the log end
    assert c.end_offset_for_epoch(3, 30) == EpochEndOffset(3, 20)
    assert c.end_offset_for_epoch(4, 30) == EpochEndOffset(3, 20)  # floor epoch 3
    assert c.end_offset_for_epoch(0, 30) == EpochEndOffset(0, 0)  # below the first
    assert c.end_offset_for_epoch(6, 30) == UNDEFINED_EPOCH_END_OFFSET
    assert c.end_offset_for_epoch(UNDEFINED_EPOCH, 30) == UNDEFINED_EPOCH_END_OFFSET
    assert LeaderEpochCache().end_offset_for_epoch(1, 0) == UNDEFINED_EPOCH_END_OFFSET


def test_truncate_from_end_and_start() -> None:
    c = cache((1, 0), (3, 10), (5, 20))
    assert c.truncate_from_end(20)
    assert c.entries() == (EpochEntry(1, 0), EpochEntry(3, 10))
    assert not c.truncate_from_end(25)
    c = cache((1, 0), (3, 10), (5, 20))
    assert c.truncate_from_start(15)
    assert c.entries() == (EpochEntry(3, 15), EpochEntry(5, 20))
    assert not c.truncate_from_start(15)
    assert c.truncate_from_start(20)
    assert c.entries() == (EpochEntry(5, 20),)


def test_epoch_lookups() -> None:
    c = cache((1, 0), (3, 10))
    assert c.epoch_for_offset(9) == 1
    assert c.epoch_for_offset(10) == 3
    assert c.start_offset_of(3) == 10
    assert c.start_offset_of(2) is None


def test_follower_truncates_to_the_leaders_end_of_a_shared_epoch() -> None:
    follower = cache((1, 0), (2, 10))
    # Leader: epoch 2 ended at 14 (then epoch 3 began); the follower had written to 18 in 2.
    decision = follower_truncation(EpochEndOffset(2, 14), follower, 18, 5)
    assert (decision.offset, decision.complete) == (14, True)


def test_follower_that_never_saw_the_leaders_epoch_asks_again() -> None:
    follower = cache((1, 0), (3, 10))
    # Leader never had epoch 3: its largest epoch <= 3 is 2, ending at 12.
    decision = follower_truncation(EpochEndOffset(2, 12), follower, 20, 5)
    assert (decision.offset, decision.complete) == (10, False)


def test_follower_with_undefined_answer_falls_back_to_its_hwm() -> None:
    decision = follower_truncation(UNDEFINED_EPOCH_END_OFFSET, cache((1, 0)), 20, 7)
    assert (decision.offset, decision.complete) == (7, True)


def test_follower_never_truncates_past_its_own_end() -> None:
    follower = cache((2, 0))
    decision = follower_truncation(EpochEndOffset(2, 50), follower, 20, 0)
    assert (decision.offset, decision.complete) == (20, True)


def test_diverging_epoch_on_the_leader() -> None:
    leader = cache((1, 0), (2, 10), (4, 30))
    assert diverging_epoch(leader, 25, 2, 40) is None  # epoch 2 ends at 30 >= 25
    assert diverging_epoch(leader, 35, 2, 40) == EpochEndOffset(2, 30)
    assert diverging_epoch(leader, 20, 3, 40) == EpochEndOffset(2, 30)  # unknown epoch 3
    assert diverging_epoch(leader, 35, 4, 40) is None
    assert diverging_epoch(leader, 35, UNDEFINED_EPOCH, 40) is None
