"""analytics.engine.gc_pause: the collector's setting inside fewer_collections, and the previous one
back after the last of nested uses."""

from __future__ import annotations

import gc
from collections.abc import Iterator

from analytics.engine.gc_pause import THRESHOLD, fewer_collections


def test_threshold_and_freeze_inside_and_restored_after() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with fewer_collections():
        assert gc.get_threshold() == THRESHOLD
        assert gc.get_freeze_count() > frozen
        with fewer_collections():  # nested: the same setting
            assert gc.get_threshold() == THRESHOLD
        assert gc.get_threshold() == THRESHOLD  # the outer use still runs
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen


def test_restored_when_the_body_raises() -> None:
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before


def test_a_generator_keeps_the_setting_while_it_is_consumed() -> None:
    before = gc.get_threshold()

    def rows() -> Iterator[tuple[int, int, int]]:
        with fewer_collections():
            yield gc.get_threshold()
            yield gc.get_threshold()

    assert list(rows()) == [THRESHOLD, THRESHOLD]
    assert gc.get_threshold() == before
