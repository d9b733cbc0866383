"""broker.runtime.isr_counts: the broker's ISR gauges kept as partitions change (issue 35)."""

from __future__ import annotations

import uuid
from typing import Any

from broker.core.messages import TopicIdPartition
from broker.runtime.isr_counts import IsrCounts


class _Hashes(uuid.UUID):
    """A topic id that counts how often a key holding it is hashed."""

    hashed = 0

    def __hash__(self) -> int:
        _Hashes.hashed += 1
        return super().__hash__()


class _State:
    def __init__(self, under_min_isr: bool, under_replicated: bool) -> None:
        self.is_under_min_isr = under_min_isr
        self.is_under_replicated = under_replicated


class _Hosted:
    def __init__(self, key: TopicIdPartition, state: _State) -> None:
        self.key = key
        self.state = state


def test_a_partition_in_neither_gauge_is_not_hashed_into_an_empty_one() -> None:
    """A restarted broker tracks each of its 100,000 partitions as it opens them, and a key's
    hash is its topic UUID's (Python code): discarding one from an empty set hashed it twice
    for nothing. The gauges still count and forget as before."""
    counts = IsrCounts()
    key = TopicIdPartition(_Hashes(int=7), 0)
    other = TopicIdPartition(_Hashes(int=8), 0)
    hosted: Any = _Hosted(key, _State(False, False))
    _Hashes.hashed = 0
    counts.track(hosted)
    assert _Hashes.hashed == 0
    counts.track(_Hosted(other, _State(True, True)))  # type: ignore[arg-type]
    assert counts.under_min_isr == {other} and counts.under_replicated == {other}
    hosted.state = _State(True, False)
    counts.track(hosted)
    assert counts.under_min_isr == {key, other} and counts.under_replicated == {other}
    hosted.state = _State(False, False)
    counts.track(hosted)
    assert counts.under_min_isr == {other}
    counts.forget(other)
    assert counts.under_min_isr == set() and counts.under_replicated == set()
