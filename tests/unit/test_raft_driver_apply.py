"""RaftDriver's applier on a real DiskLog: a snapshot installed while an older one is still being
loaded (the load yields to the event loop between slices) is loaded too, before the applier reads
the log, which then starts past the older snapshot (issue 35's 100K run lost a controller's
applier for good to "offset 420495 is below the log start offset 484724")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from raft.core.replica_base import RaftResult
from raft.runtime.quorum_state_file import ElectionStateFile
from raft.runtime.raft_driver import RaftDriver, run_steps
from storage.core.offset_and_epoch import SnapshotId
from storage.core.record_batch import RecordBatch, encode_batch
from storage.runtime.disk_log import DiskLog
from tests.loop_turns import LoopTurns, turns_between


class _Listener:
    """Records what the driver hands it; the first snapshot load lets a newer snapshot be
    installed mid-way, as a FetchSnapshot answer handled between two slices would."""

    def __init__(self, log: DiskLog, replica: SimpleNamespace) -> None:
        self.log, self.replica = log, replica
        self.loaded: list[int] = []
        self.committed: list[tuple[int, int]] = []

    def load_snapshot_steps(
        self, end_offset: int, batches: Sequence[RecordBatch]
    ) -> Iterator[None]:
        yield
        if not self.loaded:
            self.log.install_snapshot(SnapshotId(40, 2), encode_batch(0, 2, 1, [b"newer"]))
            self.log.append_as_follower(encode_batch(40, 2, 1, [b"a", b"b", b"c"]))
            self.replica.high_watermark = 43
        self.loaded.append(end_offset)

    def handle_commit(self, batches: Sequence[RecordBatch]) -> None:
        self.committed += [(b.base_offset, b.last_offset) for b in batches]


def test_a_snapshot_installed_during_a_load_is_loaded_before_the_log_is_read(
    tmp_path: Path,
) -> None:
    log = DiskLog(tmp_path / "__cluster_metadata-0")
    for i in range(10):
        log.append_as_leader([b"x", b"y", b"z"], 1, 1_000 + i)
    log.create_snapshot(SnapshotId(15, 1), encode_batch(0, 1, 1, [b"older"]))
    replica = SimpleNamespace(high_watermark=30)
    listener = _Listener(log, replica)
    driver = RaftDriver(
        cast(Any, replica), log, ElectionStateFile(tmp_path / "quorum-state"),
        cast(Any, None), listener=cast(Any, listener),
    )

    asyncio.run(driver._apply_committed())

    assert listener.loaded == [15, 40]
    assert listener.committed == [(40, 42)]
    assert driver.applied_offset == 43
    log.close()


async def test_the_applier_gives_the_loop_back_once_its_budget_is_spent() -> None:
    """Issue 35: one slice a loop turn starved the applier behind a broker's fetch handling
    (10,000 new partitions took a minute to apply at load 25); it runs slices for its budget,
    then yields, so 50 slices of 1 ms make a handful of loop turns, not 50."""

    def slices() -> Iterator[None]:
        for _ in range(50):
            time.sleep(0.001)
            yield

    async with LoopTurns() as turns:
        await asyncio.sleep(0)
        before = turns.count
        await run_steps(slices(), budget_s=0.02)
    assert 1 <= turns.count - before < 25, turns.count - before


class _CatchingUpListener:
    """A listener that publishes nothing before it has caught up (the broker's loader)."""

    def __init__(self) -> None:
        self.catching_up = True
        self.loaded: list[int] = []
        self.committed: list[tuple[int, int]] = []
        self.asked = 0

    def handle_load_snapshot(self, end_offset: int, batches: Sequence[RecordBatch]) -> None:
        self.loaded.append(end_offset)

    def handle_commit(self, batches: Sequence[RecordBatch]) -> None:
        self.committed += [(b.base_offset, b.last_offset) for b in batches]

    def catch_up_steps(self) -> Iterator[None]:
        self.asked += 1
        yield


async def test_a_catching_up_listener_gets_nothing_until_the_high_watermark_is_known(
    tmp_path: Path,
) -> None:
    """Kafka's KafkaRaftClient.pollListeners: no snapshot and no commit reaches a listener
    before the high watermark is known. Issue 35: a restarted broker loaded its own stale
    100,000-partition snapshot at start, then the newer one it fetched from the leader; it now
    loads only the snapshot that is latest once the leader answered (the one it fetched)."""
    log = DiskLog(tmp_path / "__cluster_metadata-0")
    for i in range(10):
        log.append_as_leader([b"x", b"y", b"z"], 1, 1_000 + i)
    log.create_snapshot(SnapshotId(15, 1), encode_batch(0, 1, 1, [b"stale"]))
    replica = SimpleNamespace(high_watermark=0, high_watermark_known=False)
    listener = _CatchingUpListener()
    driver = RaftDriver(
        cast(Any, replica), log, ElectionStateFile(tmp_path / "quorum-state"),
        cast(Any, None), listener=cast(Any, listener),
    )
    driver._load_state_machine()  # at start
    await driver._apply_committed()
    assert listener.loaded == [] and listener.committed == [] and listener.asked == 0
    # The leader sent a newer snapshot (FetchSnapshot) and then the high watermark.
    log.install_snapshot(SnapshotId(40, 2), encode_batch(0, 2, 1, [b"newer"]))
    log.append_as_follower(encode_batch(40, 2, 1, [b"a", b"b", b"c"]))
    replica.high_watermark, replica.high_watermark_known = 43, True
    await driver._apply_committed()
    assert listener.loaded == [40] and listener.committed == [(40, 42)]
    assert listener.asked == 1  # asked to publish once caught up
    log.close()


async def test_the_applier_decodes_committed_batches_one_at_a_time_within_its_budget(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Issue 35: a commit that moved the high watermark over several batches of 1,000 records
    decoded them all in one stretch of the loop (about 8 ms each on an idle core). They are
    decoded as the applier takes them, within its budget (0 here: the loop turns between
    any two)."""
    from storage.runtime import disk_log

    marks: list[str] = []
    decode = disk_log.decode_batch

    def decode_marked(data: Any) -> Any:
        marks.append("decode")
        return decode(data)

    monkeypatch.setattr(disk_log, "decode_batch", decode_marked)
    log = DiskLog(tmp_path / "__cluster_metadata-0")
    for i in range(5):
        log.append_as_leader([b"x", b"y", b"z"], 1, 1_000 + i)
    replica = SimpleNamespace(high_watermark=15)
    listener = _Listener(log, replica)
    driver = RaftDriver(
        cast(Any, replica), log, ElectionStateFile(tmp_path / "quorum-state"),
        cast(Any, None), listener=cast(Any, listener), step_budget_s=0.0,
    )
    async with LoopTurns(marks):
        await driver._apply_committed()
    assert listener.committed == [(0, 2), (3, 5), (6, 8), (9, 11), (12, 14)]
    assert turns_between(marks, "decode", 5), marks
    log.close()


class _LeaderCore:
    """A leader's core as the appender sees it: each append is one batch in the log, answered
    with a result asking for a flush; each flush it hears of is noted."""

    role, node_id, leader_id, epoch = "Leader", 1, 1, 1
    high_watermark, high_watermark_known = 0, True

    def __init__(self, log: DiskLog) -> None:
        self.log = log
        self.flushed: list[int] = []

    def append(self, records: Sequence[bytes], now_ms: int) -> tuple[RaftResult, int]:
        return RaftResult(flush=True), self.log.append_as_leader(list(records), 1, now_ms).offset

    def handle_flushed(self, now_ms: int) -> RaftResult:
        self.flushed.append(self.log.flushed_offset())
        return RaftResult()


async def test_a_non_atomic_append_is_one_drain_of_its_batches_under_one_fsync(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Issue 35: the slices of a non-atomic write (a KIP-868 transaction of 1,000-record
    batches: a 5,000-partition create, a fencing of 100,000) were appended and fsync'd one
    after the other on the active controller's loop; they go in one drain now, each its own
    batch, under one fsync, as Kafka's KafkaRaftClient flushes once per drain."""
    log = DiskLog(tmp_path / "__cluster_metadata-0")
    fsyncs: list[int] = []
    flush = log.flush

    def counted(*, sync: bool = True) -> None:
        fsyncs.append(log.end_offset())
        flush(sync=sync)

    monkeypatch.setattr(log, "flush", counted)
    core = _LeaderCore(log)
    driver = RaftDriver(
        cast(Any, core), log, ElectionStateFile(tmp_path / "quorum-state"), cast(Any, None)
    )
    driver._running = True
    appender = asyncio.ensure_future(driver._append_loop())
    try:
        records = [b"r%d" % i for i in range(25)]
        last = await asyncio.wait_for(driver.append(records, atomic=False, batch_records=10), 10)
        small = await asyncio.wait_for(driver.append([b"s"]), 10)
    finally:
        driver._running = False
        appender.cancel()
    assert (last, small) == (24, 25)
    assert [(b.base_offset, b.last_offset) for b in log.read_committed(0, 26)] == [
        (0, 9), (10, 19), (20, 24), (25, 25)
    ]
    assert fsyncs == [25, 26] and core.flushed == [25, 26]
    log.close()


def test_a_drain_merges_small_appends_and_keeps_a_slice_a_batch_of_its_own() -> None:
    from raft.runtime.raft_driver import _batches_of, _PendingAppend

    def pending(records: int, alone: bool = False) -> _PendingAppend:
        return _PendingAppend([b"x"] * records, cast(Any, None), alone)

    a, b, c = pending(2), pending(1), pending(1)
    s1, s2 = pending(10, alone=True), pending(10, alone=True)
    assert _batches_of([a, s1, s2, b, c]) == [[a], [s1], [s2], [b, c]]
    big = pending(4096)
    assert _batches_of([a, big, b]) == [[a], [big], [b]]
