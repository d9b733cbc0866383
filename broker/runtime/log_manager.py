"""Retention and the log cleaner on a broker (Kafka's LogManager.cleanupLogs and LogCleaner).

Retention: every `log.retention.check.interval.ms`, every partition this broker hosts, leader or
follower, deletes the old segments Kafka's rules allow (storage/core/log_retention.py, rule 24):
the log start offset moves first, then the segments are renamed `.deleted` and unlinked
`file.delete.delay.ms` later (a fetch that already holds one still reads it). A follower also
follows its leader's log start offset (Fetch's LogStartOffset, replica_fetcher), so segments
retention removed on the leader go on the follower at its next check, as in Kafka.

The cleaner (`log.cleaner.enable`, on by default as in Kafka): every `log.cleaner.backoff.ms` it
picks the compacted partition with the highest dirty ratio over min.cleanable.dirty.ratio (or
one past max.compaction.lag.ms) and cleans it (storage/core/log_cleaner.py, rule 25). Reading the
segments, building the offset map, filtering the batches and writing and fsyncing the
`.cleaned` files run in a worker thread, so produce and fetch keep being served; only the swap
(renames and a directory fsync) runs on the event loop, after checking that the segments are
still the ones cleaned (a truncation or retention meanwhile abandons the round). The first dirty
offset of each partition is kept in `cleaner-offset-checkpoint` per log directory (Kafka's
file and format).

As in Kafka's LogCleaner, the offset map holds at most what `log.cleaner.dedupe.buffer.size`
gives (storage/core/log_cleaner.offset_map_capacity): a round whose map fills cleans up to there
and moves the checkpoint there, and the next round goes on. Every read and write of the cleaner
goes through one Throttler (`log.cleaner.io.max.bytes.per.second`, storage/core/throttler): the
worker thread sleeps, never the event loop. Both are dynamic broker configs, as in Kafka (read at
the start of each round: the broker's own, the cluster default, the config file, the default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from broker.core.partition_state import Role
from broker.runtime.partition_log import read_offset_checkpoint, write_offset_checkpoint
from broker.runtime.replica_manager import HostedPartition, ReplicaManager
from kafkawire.clock import now_ms
from kafkawire.config import ConfigError
from kafkawire.loop import WALK_BUDGET_S, LoopBudget, cancel_and_wait
from metadata.config_defs import BROKER_CONFIGS, BrokerLevels
from metadata.metadata_image import CLUSTER_DEFAULT_RESOURCE
from metadata.records import CONFIG_RESOURCE_BROKER
from storage.core.log_cleaner import (
    DEFAULT_DEDUPE_BUFFER_SIZE,
    CleanableRange,
    CleanerConfig,
    build_offset_map,
    clean_batch,
    cleanable_range,
    group_segments,
    offset_map_capacity,
)
from storage.core.log_retention import SegmentView
from storage.core.record_batch import RecordBatch, decode_batch
from storage.core.throttler import UNLIMITED, Throttler
from storage.runtime.fsutil import fsync_dir, storage_errors
from storage.runtime.segment import CLEANED_SUFFIX, Segment, segment_file_name

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DEFAULT_RETENTION_CHECK_INTERVAL_MS = 300_000
DEFAULT_CLEANER_BACKOFF_MS = 15_000
DEDUPE_BUFFER_SIZE = "log.cleaner.dedupe.buffer.size"
IO_MAX_BYTES_PER_SECOND = "log.cleaner.io.max.bytes.per.second"

log = logging.getLogger("minikraft.broker")

TopicConfigs = Callable[[str], Mapping[str, str | None]]


@dataclass(frozen=True, slots=True)
class LogManagerSettings:
    retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS
    cleaner_enable: bool = True
    cleaner_backoff_ms: int = DEFAULT_CLEANER_BACKOFF_MS
    # static (config file) values; a dynamic broker config overrides them per round
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE
    io_max_bytes_per_second: float = UNLIMITED


def cleaner_settings(
    get: Callable[[str], str | None], *, retention_check_interval_ms: int, cleaner_enable: bool,
    cleaner_backoff_ms: int,
) -> LogManagerSettings:
    """The settings from a node's config file, the cleaner's two limits checked against the
    config table as a dynamic change would be (a bad value stops the node with the reason)."""
    values: dict[str, str] = {}
    for name in (DEDUPE_BUFFER_SIZE, IO_MAX_BYTES_PER_SECOND):
        text = get(name)
        if text is None:
            continue
        reason = BROKER_CONFIGS[name].value_error(text)
        if reason is not None:
            raise ConfigError(reason)
        values[name] = text.strip()
    return LogManagerSettings(
        retention_check_interval_ms=retention_check_interval_ms,
        cleaner_enable=cleaner_enable,
        cleaner_backoff_ms=cleaner_backoff_ms,
        dedupe_buffer_size=int(values.get(DEDUPE_BUFFER_SIZE, DEFAULT_DEDUPE_BUFFER_SIZE)),
        io_max_bytes_per_second=float(values.get(IO_MAX_BYTES_PER_SECOND, UNLIMITED)),
    )


class CleanerAborted(Exception):
    """The broker is closing: a throttled worker thread stops instead of sleeping on."""


class CleanerIo:
    """The cleaner's one Throttler, called from the worker thread (Kafka's throttler is shared
    by its cleaner threads too, hence the lock); sleeps on an event that close() sets."""

    def __init__(self, rate: float) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.throttler = Throttler(rate, time.monotonic_ns())

    def set_rate(self, rate: float) -> None:
        self.throttler.desired_rate_per_s = rate

    def done(self, nbytes: int) -> None:
        """`nbytes` read or written: sleep as long as the rate asks (Kafka's maybeThrottle)."""
        with self._lock:
            sleep_ms = self.throttler.observe(nbytes, time.monotonic_ns())
            if sleep_ms > 0:
                if self._stopping.wait(sleep_ms / 1000):
                    raise CleanerAborted
                self.throttler.period_restarted(time.monotonic_ns())
        if self._stopping.is_set():
            raise CleanerAborted

    def stop(self) -> None:
        self._stopping.set()


@dataclass(slots=True)
class _CleanJob:
    """What the worker thread needs, captured on the loop: the closed segments and their
    entries as they were, the range, the configs, the producers' last offsets."""

    hosted: HostedPartition
    segments: list[Segment]
    entries: list[list[tuple[int, int, int]]]  # per segment: (position, size, last_offset)
    views: list[SegmentView]
    range: CleanableRange
    config: CleanerConfig
    now_ms: int
    producer_last_offsets: dict[int, int]
    io: CleanerIo
    map_capacity: int | None = None  # keys the offset map may hold; None: no cap
    # filled in by the thread: (indexes of the segments replaced, cleaned file, segment)
    results: list[tuple[list[int], Segment]] = field(default_factory=list)
    end_offset: int = 0
    records_read: int = 0
    records_kept: int = 0


class LogManager:
    def __init__(
        self,
        replicas: ReplicaManager,
        settings: LogManagerSettings,
        topic_configs: TopicConfigs | None = None,
    ) -> None:
        self.replicas = replicas
        self.settings = settings
        self._topic_configs = topic_configs or replicas.topic_configs
        self._tasks: list[asyncio.Task[None]] = []
        self._pending_deletes: dict[int, tuple[asyncio.TimerHandle, list[Segment]]] = {}
        self._next_delete_id = 0
        self._cleaner_checkpoints: dict[Path, dict[tuple[str, int], int]] = {}
        self.segments_deleted = 0  # metrics and tests
        self.cleanings = 0
        self.io = CleanerIo(settings.io_max_bytes_per_second)

    # ---- lifecycle ----

    def start(self) -> None:
        for log_dir in self.replicas.settings.log_dirs:
            path = log_dir / CLEANER_OFFSET_CHECKPOINT
            try:
                self._cleaner_checkpoints[log_dir] = read_offset_checkpoint(path)
            except ValueError as exc:
                log.warning("Ignoring corrupt cleaner checkpoint: %s", exc)
                self._cleaner_checkpoints[log_dir] = {}
        self._tasks.append(asyncio.ensure_future(self._retention_loop()))
        if self.settings.cleaner_enable:
            self._tasks.append(asyncio.ensure_future(self._cleaner_loop()))

    async def close(self) -> None:
        self.io.stop()  # a throttled worker thread stops sleeping and gives the round up
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        for timer, segments in self._pending_deletes.values():
            timer.cancel()
            self._delete_now(segments)
        self._pending_deletes.clear()

    # ---- retention ----

    async def _retention_loop(self) -> None:
        interval_s = self.settings.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.run_retention()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Retention check failed")

    async def run_retention(self) -> int:
        """One pass over every hosted partition (Kafka's cleanupLogs); segments deleted. It
        gives the loop back every WALK_BUDGET_S: one pass over the 66,000 partitions a broker
        hosts at 100,000 held its loop for seconds (issue 35)."""
        total = 0
        budget = LoopBudget(WALK_BUDGET_S)
        for hosted in list(self.replicas.partitions.values()):
            await budget.spend()
            if hosted.state.role is Role.NONE:
                continue  # the topic is gone: its data stays as it is
            await hosted.commit.idle()  # no flush round in a thread holds the segments
            if self.replicas.partitions.get(hosted.key) is not hosted:
                continue  # deleted meanwhile: its directory is renamed `-delete`
            try:
                deletion, removed = hosted.log.delete_old_segments(
                    hosted.state.high_watermark, now_ms()
                )
            except (OSError, ValueError) as exc:
                log.warning("Partition %s: retention failed: %s", hosted.log.name, exc)
                continue
            if not removed:
                continue
            total += len(removed)
            self.segments_deleted += len(removed)
            self.replicas.checkpoint_log_start(hosted)
            hosted.notify()
            self._schedule_delete(removed, hosted.log.retention.file_delete_delay_ms)
            del deletion
        return total

    def _schedule_delete(self, segments: list[Segment], delay_ms: int) -> None:
        """Kafka's asyncDelete: the `.deleted` files go after file.delete.delay.ms."""
        key = self._next_delete_id
        self._next_delete_id += 1

        def fire() -> None:
            _timer, doomed = self._pending_deletes.pop(key, (None, []))
            self._delete_now(doomed)

        timer = asyncio.get_running_loop().call_later(max(0, delay_ms) / 1000, fire)
        self._pending_deletes[key] = (timer, segments)

    @staticmethod
    def _delete_now(segments: Sequence[Segment]) -> None:
        for segment in segments:
            try:
                segment.delete()
            except OSError as exc:
                log.warning("Could not delete %s: %s", segment.path, exc)

    # ---- the cleaner ----

    async def _cleaner_loop(self) -> None:
        backoff_s = self.settings.cleaner_backoff_ms / 1000
        while True:
            try:
                cleaned = await self.clean_filthiest()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Log cleaner round failed")
                cleaned = False
            if not cleaned:
                await asyncio.sleep(backoff_s)

    def _broker_config(self, name: str) -> str | None:
        """A broker config's value now: this broker's dynamic one, the cluster default, the
        config file, the default (metadata.config_defs.BrokerLevels)."""
        image = self.replicas.image
        settings = self.replicas.settings
        levels = BrokerLevels(
            per_broker=image.configs.get((CONFIG_RESOURCE_BROKER, str(settings.broker_id)), {}),
            cluster=image.configs.get((CONFIG_RESOURCE_BROKER, CLUSTER_DEFAULT_RESOURCE), {}),
            static=settings.static_configs,
            node_defaults=settings.node_defaults,
        )
        found = levels.synonyms_of([name])
        return found[0][1] if found else None

    def _round_limits(self) -> int:
        """The offset map's capacity for this round; sets the throttle's rate too (Kafka's
        LogCleaner.reconfigure: both are dynamic)."""
        size_text = self._broker_config(DEDUPE_BUFFER_SIZE)
        rate_text = self._broker_config(IO_MAX_BYTES_PER_SECOND)
        size = int(size_text) if size_text else self.settings.dedupe_buffer_size
        self.io.set_rate(float(rate_text) if rate_text else self.settings.io_max_bytes_per_second)
        return offset_map_capacity(size)

    def _checkpoint_of(self, hosted: HostedPartition) -> int | None:
        log_dir = hosted.log.directory.parent
        return self._cleaner_checkpoints.get(log_dir, {}).get((hosted.topic, hosted.partition))

    def _write_cleaner_checkpoint(self, hosted: HostedPartition, offset: int) -> None:
        log_dir = hosted.log.directory.parent
        offsets = self._cleaner_checkpoints.setdefault(log_dir, {})
        offsets[(hosted.topic, hosted.partition)] = offset
        write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, offsets)

    def _cleanable(self, hosted: HostedPartition, now: int) -> tuple[CleanableRange, CleanerConfig] | None:
        plog = hosted.log
        if hosted.state.role is Role.NONE or not plog.retention.compact:
            return None
        segments = plog.segments()
        if len(segments) < 2:
            return None
        configs = self._topic_configs(hosted.topic)
        config = CleanerConfig.from_configs(configs, plog.segment_bytes)
        views = plog.segment_views()
        firsts = [s.first_batch_timestamp_ms() for s in segments]
        found = cleanable_range(
            views,
            firsts,
            checkpoint=self._checkpoint_of(hosted),
            log_start_offset=plog.log_start_offset,
            log_end_offset=plog.log_end_offset,
            high_watermark=hosted.state.high_watermark,
            config=config,
            now_ms=now,
        )
        return (found, config) if found.should_clean(config) else None

    async def clean_filthiest(self) -> bool:
        """One cleaner round: the dirtiest cleanable compacted partition, if any; whether one
        was cleaned. The search gives the loop back every WALK_BUDGET_S, as retention does
        (issue 35: every log.cleaner.backoff.ms, a walk of 66,000 partitions in one stretch)."""
        now = now_ms()
        best: tuple[float, HostedPartition, CleanableRange, CleanerConfig] | None = None
        budget = LoopBudget(WALK_BUDGET_S)
        for hosted in list(self.replicas.partitions.values()):
            # A log that does not compact is passed over before anything else, without a
            # turn of the budget's coroutine: at 100,000 partitions of delete topics the
            # search was 2-4% of a broker's CPU after a create (issue 35).
            if not hosted.log.retention.compact:
                continue
            if budget.spent():
                await budget.spend()
            if self.replicas.partitions.get(hosted.key) is not hosted:
                continue  # removed meanwhile
            found = self._cleanable(hosted, now)
            if found is None:
                continue
            rng, config = found
            score = rng.dirty_ratio + (1.0 if rng.compaction_delay_ms > 0 else 0.0)
            if best is None or score > best[0]:
                best = (score, hosted, rng, config)
        if best is None:
            return False
        _score, hosted, rng, config = best
        if self.replicas.partitions.get(hosted.key) is not hosted:
            return False  # removed while the search yielded
        return await self.clean(hosted, rng, config, now)

    async def clean(
        self, hosted: HostedPartition, rng: CleanableRange, config: CleanerConfig, now: int
    ) -> bool:
        """One round over `rng` of the partition; whether it moved the first dirty offset."""
        plog = hosted.log
        segments = plog.segments()[:-1]
        job = _CleanJob(
            hosted=hosted,
            segments=segments,
            entries=[[(e.position, e.size, e.last_offset) for e in s.entries] for s in segments],
            views=plog.segment_views()[:-1],
            range=rng,
            config=config,
            now_ms=now,
            producer_last_offsets=plog.producer_state.last_data_offsets(),
            io=self.io,
            map_capacity=self._round_limits(),
        )
        log.info(
            "Partition %s: cleaning offsets %d..%d (dirty ratio %.2f)",
            plog.name, rng.first_dirty_offset, rng.first_uncleanable_offset, rng.dirty_ratio,
        )
        try:
            await asyncio.to_thread(_run_clean_job, job)
        except CleanerAborted:
            _discard(job)
            return False
        except (OSError, ValueError) as exc:
            log.warning("Partition %s: cleaning abandoned: %s", plog.name, exc)
            _discard(job)
            return False
        if job.end_offset <= rng.first_dirty_offset:
            # Kafka's cleaner would map nothing again and again; here the round says why and
            # the cleaner backs off.
            log.warning(
                "Partition %s: the offset map (%s keys, log.cleaner.dedupe.buffer.size) fills"
                " before the batch at offset %d is mapped: nothing cleaned",
                plog.name, job.map_capacity, rng.first_dirty_offset,
            )
            _discard(job)
            return False
        await hosted.commit.idle()
        if self.replicas.partitions.get(hosted.key) is not hosted:
            log.info("Partition %s: deleted while cleaning: round abandoned", plog.name)
            _discard(job)
            return False
        current = plog.segments()
        for indexes, _cleaned in job.results:
            old = [job.segments[i] for i in indexes]
            unchanged = all(
                any(s is c for c in current[:-1]) and len(s.entries) == len(job.entries[i])
                for s, i in zip(old, indexes, strict=True)
            )
            if not unchanged:
                log.info("Partition %s: segments changed while cleaning: round abandoned", plog.name)
                _discard(job)
                return False
        removed: list[Segment] = []
        for indexes, cleaned in job.results:
            old = [job.segments[i] for i in indexes]
            removed.extend(plog.replace_segments(cleaned, old))
        self._write_cleaner_checkpoint(hosted, job.end_offset)
        self.cleanings += 1
        self._schedule_delete(removed, plog.retention.file_delete_delay_ms)
        log.info(
            "Partition %s: cleaned %d segment(s) into %d, kept %d of %d records; first dirty"
            " offset now %d", plog.name, len(removed), len(job.results), job.records_kept,
            job.records_read, job.end_offset,
        )
        return True


def _discard(job: _CleanJob) -> None:
    for _indexes, cleaned in job.results:
        with contextlib.suppress(OSError):
            cleaned.delete()
    job.results = []


def _batches_of(
    segment: Segment, entries: list[tuple[int, int, int]], io: CleanerIo
) -> Iterator[tuple[bytes, int]]:
    """(raw batch, last offset) of the segment's batches as they were when the job started,
    each read counted by the throttle (Kafka's maybeThrottle after each read)."""
    for position, size, last in entries:
        raw = segment.read(position, size)
        io.done(len(raw))
        yield raw, last


def _run_clean_job(job: _CleanJob) -> None:
    """The worker thread's part: offset map, then each group of segments into a `.cleaned`
    file, fsynced and indexed (Kafka's Cleaner.doClean)."""
    rng = job.range
    first_dirty, upper = rng.first_dirty_offset, rng.first_uncleanable_offset
    closed = [s for s in job.segments if s.base_offset < upper]

    def dirty_segments() -> Iterator[tuple[int, Iterator[RecordBatch]]]:
        for index, segment in enumerate(closed):
            next_start = closed[index + 1].base_offset if index + 1 < len(closed) else upper
            # Kafka starts a segment's read at the first dirty offset's position.
            dirty = [e for e in job.entries[index] if e[2] >= first_dirty]
            batches = _batches_of(segment, dirty, job.io)
            yield next_start, (decode_batch(raw)[0] for raw, _last in batches)

    # Batches are read (and throttled) only as far as the map holds.
    offset_map = build_offset_map(dirty_segments(), first_dirty, upper, job.map_capacity)
    # Cleaned up to the last batch mapped whole; a round whose map filled leaves the rest dirty.
    job.end_offset = max(first_dirty, offset_map.latest_offset + 1)
    groups = group_segments(job.views, job.end_offset, job.config.segment_bytes)
    directory = job.hosted.log.directory
    for indexes in groups:
        base = job.segments[indexes[0]].base_offset
        path = directory / (segment_file_name(base) + CLEANED_SUFFIX)
        chunks: list[bytes] = []
        for index in indexes:
            for raw, _last in _batches_of(job.segments[index], job.entries[index], job.io):
                batch, _size = decode_batch(raw)
                job.records_read += len(batch.records)
                kept, count = clean_batch(
                    batch,
                    raw,
                    offset_map,
                    now_ms=job.now_ms,
                    delete_retention_ms=job.config.delete_retention_ms,
                    upper_bound_offset=upper,
                    last_offsets_of_active_producers=job.producer_last_offsets,
                )
                job.records_kept += count
                if kept is not None:
                    chunks.append(kept)
        with storage_errors(f"write cleaned segment {path}"):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                data = b"".join(chunks)
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    job.io.done(written)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(directory)
        cleaned, problem = Segment.open(path, base, -1, allow_offset_gaps=True)
        if problem is not None:
            cleaned.delete()
            raise ValueError(f"cleaned segment {path} does not read back: {problem}")
        job.results.append((indexes, cleaned))
