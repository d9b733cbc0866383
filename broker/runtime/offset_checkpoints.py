"""The offset checkpoints of a broker's log dirs, written from its hosted partitions: recovery
points and log start offsets (Kafka's LogManager checkpoints) and high watermarks (Kafka's
ReplicaManager HWM checkpoint, replica.high.watermark.checkpoint.interval.ms). Each partition's
leader-epoch-checkpoint is its log's own (PartitionLog.assign_leader_epoch), as in Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from broker.runtime.hosted_partition import HostedPartition
from broker.runtime.partition_log import LogDirCheckpoints

Offsets = dict[tuple[str, int], int]

# Hosted partitions the periodic checkpoint looks at between two yields of the loop (issue 35).
WALK_SLICE_PARTITIONS = 5000


class OffsetCheckpoints:
    def __init__(self, log_dirs: Iterable[Path]) -> None:
        self._dirs = [LogDirCheckpoints(d) for d in log_dirs]
        self._write_in_flight: asyncio.Future[None] | None = None
        self._written_log_starts: dict[Path, Offsets] = {}

    def read(self) -> Iterator[tuple[Path, Offsets, Offsets, Offsets]]:
        """Per log dir, at start-up: (dir, recovery points, HWMs, log start offsets)."""
        for checkpoints in self._dirs:
            yield (
                checkpoints.log_dir,
                checkpoints.read_recovery_points(),
                checkpoints.read_high_watermarks(),
                checkpoints.read_log_start_offsets(),
            )

    def write_all(self, partitions: Iterable[HostedPartition]) -> None:
        """Every checkpoint now, on the caller's thread (shutdown: after idle())."""
        hosted = [h for h in partitions if h.log.has_directory]
        self._offsets_writer(hosted)()
        for checkpoints in self._dirs:
            self._write_log_starts(checkpoints, _in_dir(hosted, checkpoints.log_dir))

    async def write_off_loop(self, partitions: Iterable[HostedPartition]) -> None:
        """The periodic checkpoint: the offsets are read here, on the loop, and the files (two
        fsyncs and a directory fsync each) are written in a worker thread, so produce and fetch
        keep being served (issue 17). Log start offsets are written on the loop, and only when
        they moved: they change on DeleteRecords, which writes them itself (write_log_starts),
        so no thread races that write."""
        await self.idle()
        hosted = await _on_disk(partitions)
        write = self._offsets_writer(hosted)
        self._write_in_flight = asyncio.get_running_loop().run_in_executor(None, write)
        await asyncio.shield(self._write_in_flight)
        for checkpoints in self._dirs:
            mine = hosted if len(self._dirs) == 1 else _in_dir(hosted, checkpoints.log_dir)
            if _log_starts(mine) != self._written_log_starts.get(checkpoints.log_dir):
                self._write_log_starts(checkpoints, mine)

    async def idle(self) -> None:
        """Wait for a checkpoint write in a worker thread, if one runs (its errors were logged
        by the tick that started it)."""
        pending = self._write_in_flight
        if pending is not None and not pending.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(pending)

    def write_log_starts(self, log_dir: Path, partitions: Iterable[HostedPartition]) -> None:
        """The log start offsets of one log dir now (DeleteRecords answers after)."""
        for checkpoints in self._dirs:
            if checkpoints.log_dir == log_dir:
                self._write_log_starts(checkpoints, _in_dir(partitions, log_dir))

    def _offsets_writer(self, hosted: list[HostedPartition]) -> Callable[[], None]:
        """The recovery points and HWMs as of now, and the function that writes them."""
        snapshot = []
        for checkpoints in self._dirs:
            # One log dir (the common case) holds every hosted partition.
            mine = hosted if len(self._dirs) == 1 else _in_dir(hosted, checkpoints.log_dir)
            recovery = {(h.topic, h.partition): h.log.flushed_offset for h in mine}
            watermarks = {(h.topic, h.partition): h.state.high_watermark for h in mine}
            snapshot.append((checkpoints, recovery, watermarks))

        def write() -> None:
            for checkpoints, recovery, watermarks in snapshot:
                checkpoints.write_recovery_points(recovery)
                checkpoints.write_high_watermarks(watermarks)

        return write

    def _write_log_starts(self, checkpoints: LogDirCheckpoints, hosted: list[HostedPartition]) -> None:
        starts = _log_starts(hosted)
        checkpoints.write_log_start_offsets(starts)
        self._written_log_starts[checkpoints.log_dir] = starts


async def _on_disk(partitions: Iterable[HostedPartition]) -> list[HostedPartition]:
    """The partitions with a log on disk, the loop given back every WALK_SLICE_PARTITIONS. A
    new partition's log is lazy: until its first append it has no directory, and its offsets
    are all 0, which is what a restart that finds no directory starts from, so it has nothing
    to checkpoint (Kafka checkpoints every log it has; here an empty replica has none). A
    broker of 100,000 empty partitions walked and wrote all of them every 5 s: 9.6% of its
    samples, in a worker thread holding the GIL against the loop (issue 35)."""
    found: list[HostedPartition] = []
    snapshot = list(partitions)
    for start in range(0, len(snapshot), WALK_SLICE_PARTITIONS):
        if start:
            await asyncio.sleep(0)
        found.extend(h for h in snapshot[start:start + WALK_SLICE_PARTITIONS] if h.log.has_directory)
    return found


def _in_dir(partitions: Iterable[HostedPartition], log_dir: Path) -> list[HostedPartition]:
    # PartitionLog.log_dir, not directory.parent: a parent path built per partition cost a
    # broker of 100,000 partitions seconds of its loop at every checkpoint (issue 35).
    return [h for h in partitions if h.log.log_dir == log_dir]


def _log_starts(hosted: Iterable[HostedPartition]) -> Offsets:
    return {(h.topic, h.partition): h.log.log_start_offset for h in hosted}
