"""The log cleaner's two limits, after Kafka's LogCleaner: the offset map holds only what
`log.cleaner.dedupe.buffer.size` gives (Cleaner.buildOffsetMapForSegment stops when it is full,
the rest is the next round's), and `log.cleaner.io.max.bytes.per.second` throttles its reads and
writes (Kafka's Throttler, checked every 300 ms). Over a real partition log and the broker's
LogManager."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from broker.core.partition_state import Role
from broker.runtime.log_manager import (
    CLEANER_OFFSET_CHECKPOINT,
    LogManager,
    LogManagerSettings,
    cleaner_settings,
)
from broker.runtime.partition_log import PartitionLog, read_offset_checkpoint
from controller.core import config_control
from kafkawire.config import ConfigError
from storage.core.log_cleaner import OffsetMap, build_offset_map, offset_map_capacity
from storage.core.log_retention import RetentionConfig
from storage.core.record_batch import Record, decode_batch, encode_batch, iter_segment_batches
from storage.core.throttler import Throttler
from tests.loop_turns import LoopTurns, turns_between

NOW = 1_000_000
KEYS = 40


def test_throttler_sleeps_what_brings_a_period_to_the_desired_rate() -> None:
    ms = 1_000_000
    throttler = Throttler(1000.0, period_start_ns=0)  # 1000 bytes/s, checked every 300 ms
    assert throttler.observe(900, 200 * ms) == 0  # inside the check interval: no check yet
    # 1,500 bytes in 400 ms is 3,750 B/s: sleep until 1,500 bytes took 1,500 ms.
    assert throttler.observe(600, 400 * ms) == 1100
    throttler.period_restarted(1500 * ms)
    assert throttler.observe(200, 1900 * ms) == 0  # 500 B/s: under the rate, no sleep
    assert throttler.total_observed == 1700


def test_a_full_offset_map_stops_at_the_last_batch_mapped_whole() -> None:
    # Kafka's maxDesiredMapSize: 24 bytes a slot, 0.9 of the slots.
    assert offset_map_capacity(128 * 1024 * 1024) == int(128 * 1024 * 1024 // 24 * 0.9)
    assert offset_map_capacity(24 * 10) == 9
    batches = [
        decode_batch(encode_batch(base, 0, NOW, [Record(b"k%d" % (base + i), b"v") for i in range(3)]))[0]
        for base in (0, 3, 6)
    ]
    whole = build_offset_map([(9, batches)], 0, 9)
    assert (len(whole), whole.latest_offset) == (9, 8)
    capped = build_offset_map([(9, batches)], 0, 9, max_entries=5)
    # The second batch's third key does not fit: the round cleans offsets 0-2 only.
    assert capped.full and len(capped) == 5 and capped.latest_offset == 2
    assert OffsetMap(max_entries=5).add_batch(batches[0], 9) is False


def test_a_dedupe_buffer_too_small_for_one_key_is_refused_as_kafkas_cleaner_refuses_it() -> None:
    refused = config_control.broker_config_error("log.cleaner.dedupe.buffer.size", "47")
    assert refused is not None and "offset map is too small" in refused[1]
    assert config_control.broker_config_error("log.cleaner.dedupe.buffer.size", "48") is None
    assert config_control.broker_config_error("log.cleaner.io.max.bytes.per.second", "1e6") is None
    bad_rate = config_control.broker_config_error("log.cleaner.io.max.bytes.per.second", "x")
    assert bad_rate is not None and "DOUBLE" in bad_rate[1]
    settings = {"log.cleaner.dedupe.buffer.size": "10"}
    with pytest.raises(ConfigError, match="offset map is too small"):
        cleaner_settings(settings.get, retention_check_interval_ms=1, cleaner_enable=True,
                         cleaner_backoff_ms=1)


def _compacted_log(tmp_path: Path, waves: int, value_bytes: int = 2) -> PartitionLog:
    """`waves` segments (segment.ms), each writing every key once in batches of 5 keys, then
    one sentinel record in the active segment."""
    log = PartitionLog(tmp_path, "t", 0)
    log.retention = RetentionConfig(segment_ms=100, compact=True, delete=False)
    ts = NOW
    for wave in range(waves):
        value = (b"w%d" % wave).ljust(value_bytes, b".")
        for first in range(0, KEYS, 5):
            records = [Record(b"k%02d" % i, value, timestamp_ms=ts) for i in range(first, first + 5)]
            log.append_as_leader(encode_batch(0, 0, ts, records), 0)
        ts += 1000
    log.append_as_leader(encode_batch(0, 0, ts, [Record(b"sentinel", b"x")]), 0)
    return log


def _manager(tmp_path: Path, log: PartitionLog, dynamic: dict[str, str]) -> tuple[LogManager, Any]:
    """A LogManager over one compacted partition led here, with `dynamic` as the cluster's
    dynamic broker configs (what IncrementalAlterConfigs would have written)."""

    async def idle() -> None:
        return None

    hosted = SimpleNamespace(
        topic="t", partition=0, key=("t", 0), log=log,
        state=SimpleNamespace(role=Role.LEADER, high_watermark=log.log_end_offset),
        commit=SimpleNamespace(idle=idle), notify=lambda: None,
    )
    replicas = SimpleNamespace(
        partitions={hosted.key: hosted},
        settings=SimpleNamespace(log_dirs=[tmp_path], broker_id=0, static_configs={},
                                 node_defaults={}),
        image=SimpleNamespace(configs={(4, ""): dynamic}),
        topic_configs=lambda topic: {"min.cleanable.dirty.ratio": "0.01",
                                     "delete.retention.ms": "0"},
    )
    manager = LogManager(cast(Any, replicas), LogManagerSettings(cleaner_enable=False))
    manager.start()
    return manager, hosted


def _records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    rows = []
    for segment in log.segments():
        for _p, batch, _s in iter_segment_batches(segment.path.read_bytes()):
            rows.extend((batch.offset_of(i), r.key, r.value) for i, r in enumerate(batch.records))
    return rows


async def _clean_until_done(manager: LogManager, limit: int = 50) -> list[int]:
    """Cleaner rounds until none is needed; the checkpoint after each."""
    checkpoints = []
    for _ in range(limit):
        if not await manager.clean_filthiest():
            return checkpoints
        checkpoints.append(manager._checkpoint_of(next(iter(manager.replicas.partitions.values()))))
    raise AssertionError(f"still cleaning after {limit} rounds: {checkpoints}")


def test_a_small_dedupe_buffer_cleans_in_more_rounds_and_still_ends_one_record_per_key(
    tmp_path: Path,
) -> None:
    async def run(dedupe_bytes: str, directory: Path) -> tuple[list[int], list[Any]]:
        log = _compacted_log(directory, waves=4)
        manager, _hosted = _manager(directory, log, {"log.cleaner.dedupe.buffer.size": dedupe_bytes})
        try:
            checkpoints = await _clean_until_done(manager)
            rows = _records(log)
            assert read_offset_checkpoint(directory / CLEANER_OFFSET_CHECKPOINT)[("t", 0)] == 160
        finally:
            await manager.close()
            log.close()
        return checkpoints, rows

    whole_dir, small_dir = tmp_path / "whole", tmp_path / "small"
    whole_dir.mkdir()
    small_dir.mkdir()
    whole, whole_rows = asyncio.run(run(str(128 * 1024 * 1024), whole_dir))
    # 24 * 12 bytes: 12 slots, 10 keys per round (Kafka's 0.9 load factor).
    small, small_rows = asyncio.run(run(str(24 * 12), small_dir))
    assert whole == [160]  # one round maps all 40 keys of the 160 dirty offsets
    # Each round maps two 5-key batches and stops at the third (Kafka checks the map before
    # every keyed put), so it cleans 10 offsets and leaves the rest to the next round.
    assert small == list(range(10, 161, 10)), small
    expected = [(120 + i, b"k%02d" % i, b"w3") for i in range(KEYS)] + [(160, b"sentinel", b"x")]
    assert whole_rows == expected
    assert small_rows == expected


def test_the_io_throttle_bounds_the_cleaners_rate(tmp_path: Path) -> None:
    rate = 2_000_000.0  # bytes/s

    async def run(dynamic: dict[str, str], directory: Path) -> tuple[float, float]:
        log = _compacted_log(directory, waves=40, value_bytes=1000)
        manager, _hosted = _manager(directory, log, dynamic)
        # Kafka checks every 300 ms: a round of a few MB, done in 20-200 ms unthrottled (20 ms
        # on a quiet machine), would end before the first check, so this test checks every 1 ms.
        manager.io.throttler.check_interval_ms = 1
        try:
            started = time.monotonic()
            assert await manager.clean_filthiest()
            elapsed = time.monotonic() - started
        finally:
            await manager.close()
            log.close()
        return manager.io.throttler.total_observed, elapsed

    fast_dir, slow_dir = tmp_path / "fast", tmp_path / "slow"
    fast_dir.mkdir()
    slow_dir.mkdir()
    io_bytes, fast = asyncio.run(run({}, fast_dir))
    throttled_bytes, slow = asyncio.run(
        run({"log.cleaner.io.max.bytes.per.second": str(rate)}, slow_dir)
    )
    assert throttled_bytes == io_bytes and io_bytes > 1.5 * rate, io_bytes
    # Every read and write is counted and each checked period is brought down to the rate;
    # only the last one (under 1 ms of unthrottled I/O, as in Kafka) is not: the round's
    # average stays near 2 MB/s, where unthrottled it runs at 10-30 MB/s.
    assert io_bytes / slow <= 1.5 * rate, (io_bytes, slow, fast)
    assert fast < slow, (fast, slow)


def _manager_noting_looks(
    monkeypatch: pytest.MonkeyPatch, partitions: dict[Any, Any], note: Callable[[Any], None]
) -> LogManager:
    """A LogManager over `partitions` whose cleaner's search calls `note` for each log it
    looks at (LogManager._cleanable)."""
    manager = LogManager(
        cast(Any, SimpleNamespace(partitions=partitions, topic_configs=lambda _: {})),
        LogManagerSettings(cleaner_enable=False),
    )
    real = manager._cleanable

    def cleanable(hosted: Any, now: int) -> Any:
        note(hosted)
        return real(hosted, now)

    monkeypatch.setattr(manager, "_cleanable", cleanable)
    return manager


def test_retention_and_the_cleaners_search_give_the_loop_back_while_they_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 35: a retention pass and the cleaner's search for the filthiest log walk every
    hosted partition (66,000 on a broker at 100,000); each gives the loop back every
    WALK_BUDGET_S (0 here: after every partition it looks at), so others run in between."""
    from broker.runtime import log_manager

    monkeypatch.setattr(log_manager, "WALK_BUDGET_S", 0.0)
    seen: list[str] = []

    async def idle() -> None:
        return None

    def old_segments(_hwm: int, _now: int) -> tuple[None, list[Any]]:
        seen.append("retention")
        return None, []

    partitions = {
        ("t", p): SimpleNamespace(
            topic="t", partition=p, key=("t", p),
            log=SimpleNamespace(delete_old_segments=old_segments, segments=list,
                                retention=RetentionConfig(compact=True)),
            state=SimpleNamespace(role=Role.LEADER, high_watermark=0),
            commit=SimpleNamespace(idle=idle),
        )
        for p in range(10)
    }
    manager = _manager_noting_looks(monkeypatch, partitions, lambda _h: seen.append("cleaner"))

    async def run() -> None:
        async with LoopTurns(seen):
            assert await manager.run_retention() == 0
            assert await manager.clean_filthiest() is False

    asyncio.run(run())
    for kind in ("retention", "cleaner"):
        assert turns_between(seen, kind, len(partitions)), seen


def test_the_cleaners_search_passes_over_logs_that_do_not_compact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 35: at 100,000 partitions of delete topics the search looked at each log (its
    hosted entry again, its role, its policy) and took a turn of its budget's coroutine for
    each, every log.cleaner.backoff.ms: 2-4% of a broker's CPU after a create. Kafka's
    grabFilthiestCompactedLog considers the logs whose config compacts; the others are passed
    over first, and only a compacted log is looked at."""
    looked: list[int] = []
    partitions = {
        ("t", p): SimpleNamespace(
            topic="t", partition=p, key=("t", p),
            log=SimpleNamespace(segments=list, retention=RetentionConfig(compact=p == 7)),
            state=SimpleNamespace(role=Role.LEADER, high_watermark=0),
        )
        for p in range(1000)
    }
    manager = _manager_noting_looks(monkeypatch, partitions, lambda h: looked.append(h.partition))
    assert asyncio.run(manager.clean_filthiest()) is False
    assert looked == [7]
