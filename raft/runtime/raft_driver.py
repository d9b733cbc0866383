"""The asyncio shell around raft.core.RaftReplica: timers, sockets, fsync, in a fixed order.

For every result the core returns, the driver does exactly (STYLE.md, INVARIANTS rules 1-2):
persist the election state (atomic, fsync'd), fsync the log if the core appended or truncated,
tell the core it was flushed, and only then send messages and the response. Everything runs on
one event loop, and no core call is separated from the application of its result by an await,
so the core never sees interleaved inputs.

Appends from the state machine are queued and drained together into one batch, so one fsync
covers every append that arrived while the previous fsync ran (group commit). A leader holds a
Fetch that has nothing new for up to its max wait, so followers learn of appends at once.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkawire.client import KafkaClient
from kafkawire.clock import now_ms
from kafkawire.errors import Errors, KafkaError
from kafkawire.loop import WALK_BUDGET_S, cancel_and_wait
from raft.core.messages import (
    DEFAULT_VOTER_CHANGE_TIMEOUT_MS,
    AddRaftVoterRequest,
    AddRaftVoterRequestV0,
    FetchRequest,
    FetchResponse,
    RemoveRaftVoterRequest,
    answered_partition,
    error_of,
    error_response,
    to_ms,
)
from raft.core.raft_replica import NotLeaderError, Outbound, RaftReplica, RaftResult
from raft.runtime.parked_fetches import ParkedFetches, park
from raft.runtime.quorum_state_file import ElectionStateFile
from storage.core.record_batch import RecordBatch, iter_batches
from storage.runtime.disk_log import DiskLog

log = logging.getLogger("minikraft.raft")
_NO_WAIT = datetime.timedelta(0)

MAX_APPEND_BATCH_RECORDS = 4096
# Loop iterations a woken parked fetch needs to re-read the log and write its response.
_FETCH_WAKE_ITERATIONS = 4
# How often a waiting AddRaftVoter/RemoveRaftVoter asks the core again (catch-up is not an event).
_VOTER_CHANGE_POLL_S = 0.05


# How long the applier (and the snapshot beside it) runs slices before it gives the loop back.
# One slice a turn starved it: a broker's other tasks (a follower's fetch of thousands of
# partitions) each ran tens of ms a turn, so applying 10,000 new partitions took a minute at
# load 25 and the broker fell behind the controllers' log start (issue 35). Kafka publishes
# metadata on a thread of its own. A node's other walks' budget (kafkawire.loop): on the active
# controller the applier runs beside a create's decision and encoding and the answers to five
# fetchers, and with 10 ms its loop-lag p99 was 50-52 ms at 100,000 partitions (issue 35).
STEP_BUDGET_S = WALK_BUDGET_S


async def run_steps(steps: Iterator[None], budget_s: float = STEP_BUDGET_S) -> None:
    """Drive a *_steps generator, yielding the loop once `budget_s` of slices ran."""
    until = time.monotonic() + budget_s
    for _ in steps:
        if time.monotonic() >= until:
            await asyncio.sleep(0)
            until = time.monotonic() + budget_s


class RaftListener(Protocol):
    """What the state machine on top (the controller, a broker's image) hears from Raft.

    A listener may also offer `commit_steps(batches)` and `load_snapshot_steps(end_offset,
    batches)`, generators doing the same work in slices: the driver then gives the event loop
    back between slices (issue 35)."""

    def handle_commit(self, batches: Sequence[RecordBatch]) -> None: ...

    def handle_load_snapshot(
        self, snapshot_end_offset: int, batches: Sequence[RecordBatch]
    ) -> None: ...

    def handle_leader_change(
        self, leader_id: int | None, epoch: int, is_local_leader: bool
    ) -> None: ...


@dataclass
class _PendingAppend:
    records: list[bytes]
    future: asyncio.Future[int]
    # A batch of its own (a slice of a non-atomic append): never merged with its neighbours.
    alone: bool = False


@dataclass
class _CommitWaiter:
    offset: int
    epoch: int
    future: asyncio.Future[int] = field(repr=False)


class RaftDriver:
    def __init__(
        self,
        replica: RaftReplica,
        log_: DiskLog,
        state_file: ElectionStateFile,
        client: KafkaClient,
        *,
        listener: RaftListener | None = None,
        request_timeout_ms: int = 2000,
        on_error: Callable[[BaseException], Awaitable[None]] | None = None,
        fsync: bool = True,
        step_budget_s: float = STEP_BUDGET_S,
    ) -> None:
        self.replica = replica
        # How long the applier runs slices before it gives the loop back: a broker's is
        # shorter, it runs beside the fetchers' walks (kafkawire.loop.WALK_BUDGET_S).
        self.step_budget_s = step_budget_s
        # minikraft.raft.fsync: false only to pair with peers that do not fsync (BENCHMARKS.md).
        self.fsync = fsync
        self.log = log_
        self.state_file = state_file
        self.client = client
        self.listener = listener
        self.request_timeout_ms = request_timeout_ms
        self._appends: list[_PendingAppend] = []
        self._append_wakeup = asyncio.Event()
        # Woken on news (parked_fetches: a wake is never lost to a fetch parking after it).
        self._parked = ParkedFetches()
        self._commit_waiters: list[_CommitWaiter] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running = False
        self._applied_offset = 0
        # Committed records reach the listener from one applier task, never from inside the
        # handling of a Raft request or response: a 10,000-record batch replays in slices while
        # fetches, votes and heartbeats are served between them (issue 35).
        self._apply_wakeup = asyncio.Event()
        self._background_wakeup = asyncio.Event()
        self._last_leader: tuple[int | None, int] = (None, -1)
        self._last_progress: tuple[int, int, int] = (-1, -1, -1)
        # The high watermark last answered to each observer (the brokers): an observer's empty
        # fetch parks only when its answer would tell it nothing new. Without it, a broker that
        # got the records before their commit, then asked again, waited the whole max wait for
        # the HWM that was already in the parked answer (KIP-1166's case): every broker learned
        # a new topic ~490 ms after CreateTopics returned. Voters keep parking: the commit does
        # not wait for them to learn it, and the extra round trip per commit cost the raft
        # bench about a third of its 64-appender throughput.
        self._hwm_answered: dict[int, int] = {}
        self._on_error = on_error
        self.last_commit_latency_ms = 0.0

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self._running = True
        self._load_state_machine()
        self._spawn(self._tick_loop())
        self._spawn(self._append_loop())
        self._spawn(self._apply_loop(), name="raft-apply")
        self._spawn(self._background_loop(), name="raft-background")
        self._apply(self.replica.tick(now_ms()))

    async def stop(self, resign: bool = True) -> None:
        """Stop; a leader resigns first (EndQuorumEpoch) so the others elect at once."""
        if resign and self._running and self.replica.role == "Leader":
            result = self.replica.resign(now_ms())
            self._apply(result)
            sends = [t for t in self._tasks if t.get_name() == "raft-send"]
            if sends:
                await asyncio.wait(sends, timeout=0.5)
        self._running = False
        await cancel_and_wait(*self._tasks)
        self._fail_waiters(Errors.NOT_LEADER_OR_FOLLOWER, "raft is shutting down")

    def _spawn(self, coro: Awaitable[Any], name: str = "raft") -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("raft task %s failed: %r", task.get_name(), exc, exc_info=exc)
            if self._on_error is not None:
                self._spawn(self._on_error(exc), name="raft-on-error")

    # -- inputs ---------------------------------------------------------------------------------

    async def handle_request(self, source_node_id: int, request: Any) -> Any:
        """A raft request (Kafka's message, as decoded) from a node id; the core's answer."""
        if isinstance(request, (AddRaftVoterRequest, AddRaftVoterRequestV0,
                                RemoveRaftVoterRequest)):
            return await self._handle_voter_change(source_node_id, request)
        result = self.replica.handle_request(source_node_id, request, now_ms())
        self._apply(result)
        response: Any = result.response
        observer = isinstance(request, FetchRequest) and not any(
            key.id == source_node_id for key in self.replica.voters
        )
        if (
            isinstance(request, FetchRequest)
            and self._is_empty_fetch(request, response)
            and not (
                observer and _high_watermark(response) > self._hwm_answered.get(source_node_id, -1)
            )
        ):
            # Long poll (Kafka's fetch max wait): answer as soon as there are new records or the
            # high watermark moved, so followers learn of appends and commits at once.
            parked_hwm = _high_watermark(response)
            deadline = time.monotonic() + min(to_ms(request.max_wait), 5000) / 1000
            while self._running and time.monotonic() < deadline:
                if not await park((self._parked,), deadline - time.monotonic()):
                    break
                result = self.replica.handle_request(source_node_id, request, now_ms())
                self._apply(result)
                response = result.response
                if (
                    not self._is_empty_fetch(request, response)
                    or _high_watermark(response) != parked_hwm
                ):
                    break
        if observer and isinstance(response, FetchResponse):
            self._hwm_answered[source_node_id] = _high_watermark(response)
        return response

    async def _handle_voter_change(
        self,
        source_node_id: int,
        request: AddRaftVoterRequest | AddRaftVoterRequestV0 | RemoveRaftVoterRequest,
    ) -> Any:
        """Rule 5: the core answers REQUEST_TIMED_OUT while it must wait (a pending change, no
        commit yet in the epoch, a new voter still catching up); ask again until the request's
        timeout, then wait for the VotersRecord to commit (unless AckWhenCommitted is false).
        Kafka's RemoveRaftVoter has no timeout: it waits up to DEFAULT_VOTER_CHANGE_TIMEOUT_MS."""
        asked_ms = (
            to_ms(request.timeout)
            if not isinstance(request, RemoveRaftVoterRequest)
            else DEFAULT_VOTER_CHANGE_TIMEOUT_MS
        )
        timeout_ms = asked_ms if asked_ms > 0 else self.request_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            result = self.replica.handle_request(source_node_id, request, now_ms())
            self._apply(result)
            response: Any = result.response
            remaining_s = deadline - time.monotonic()
            if int(response.error_code) != Errors.REQUEST_TIMED_OUT or remaining_s <= 0:
                break
            if not self._running:
                return error_response(
                    request, Errors.NOT_LEADER_OR_FOLLOWER, "raft is shutting down"
                )
            await asyncio.sleep(min(_VOTER_CHANGE_POLL_S, remaining_s))
        if int(response.error_code) != 0 or result.voters_record_offset < 0:
            return response
        if not getattr(request, "ack_when_committed", True):
            # AddRaftVoter v1 with AckWhenCommitted=false (KIP-1186): answered once the new
            # voter set is appended, in force at once (rule 5), not waiting for its commit.
            return response
        remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            await self.wait_for_commit(result.voters_record_offset, remaining_ms)
        except KafkaError as exc:
            error = (
                Errors.REQUEST_TIMED_OUT
                if exc.error == Errors.REQUEST_TIMED_OUT
                else Errors.NOT_LEADER_OR_FOLLOWER
            )
            return error_response(
                request, error, f"voters record at {result.voters_record_offset}: {exc.message}"
            )
        log.info(
            "Voter change committed at offset %s: voters are %s",
            result.voters_record_offset,
            ", ".join(str(k) for k in self.replica.voters),
        )
        return response

    def _is_empty_fetch(self, request: FetchRequest, response: Any) -> bool:
        if not (
            self.replica.role == "Leader"
            and request.max_wait > _NO_WAIT
            and isinstance(response, FetchResponse)
            and error_of(response) == 0
        ):
            return False
        answer = answered_partition(response)
        return (
            answer is not None
            and not answer.records
            and answer.diverging_epoch.epoch < 0
            and answer.snapshot_id.end_offset < 0
        )

    async def append(
        self,
        records: Sequence[bytes],
        *,
        atomic: bool = True,
        batch_records: int = MAX_APPEND_BATCH_RECORDS,
    ) -> int:
        """Queue records for the leader's next batch; returns the last offset once appended
        and flushed locally (not yet committed: see wait_for_commit). `atomic`: all in one
        batch; else split in batches of at most `batch_records` (Kafka's controller splits a
        non-atomic result at MAX_RECORDS_PER_BATCH)."""
        if self.replica.role != "Leader":
            raise KafkaError(Errors.NOT_CONTROLLER, self._leader_hint())
        batch_records = min(batch_records, MAX_APPEND_BATCH_RECORDS)
        loop = asyncio.get_running_loop()
        if not atomic and len(records) > batch_records:
            # Every batch queued at once: the appender takes them in one drain, each a batch
            # of its own, under one fsync (Kafka's KafkaRaftClient appends what its
            # accumulator drained and flushes once). One append and fsync after the other
            # made a 5,000-partition create six fsyncs on the active controller's loop, and a
            # fencing of 100,000 partitions 101 (issue 35).
            futures: list[asyncio.Future[int]] = []
            for start in range(0, len(records), batch_records):
                futures.append(loop.create_future())
                self._appends.append(
                    _PendingAppend(list(records[start : start + batch_records]), futures[-1], True)
                )
            self._append_wakeup.set()
            return (await asyncio.gather(*futures))[-1]
        future: asyncio.Future[int] = loop.create_future()
        self._appends.append(_PendingAppend(list(records), future))
        self._append_wakeup.set()
        return await future

    async def append_and_commit(
        self,
        records: Sequence[bytes],
        timeout_ms: int,
        *,
        atomic: bool = True,
        batch_records: int = MAX_APPEND_BATCH_RECORDS,
    ) -> int:
        start = time.monotonic()
        offset = await self.append(records, atomic=atomic, batch_records=batch_records)
        await self.wait_for_commit(offset, timeout_ms)
        self.last_commit_latency_ms = (time.monotonic() - start) * 1000
        return offset

    async def wait_for_commit(self, offset: int, timeout_ms: int) -> int:
        """Wait until the high watermark passes offset in this leader's epoch."""
        if self.replica.high_watermark > offset:
            return offset
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append(_CommitWaiter(offset, self.replica.epoch, future))
        try:
            return await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            raise KafkaError(Errors.REQUEST_TIMED_OUT, f"offset {offset} not committed") from None

    def _leader_hint(self) -> str:
        return f"leader is {self.replica.leader_id} in epoch {self.replica.epoch}"

    # -- loops ------------------------------------------------------------------------------

    async def _tick_loop(self) -> None:
        while self._running:
            now = now_ms()
            delay_ms = max(1, min(self.replica.next_deadline_ms() - now, 50))
            await asyncio.sleep(delay_ms / 1000)
            self._apply(self.replica.tick(now_ms()))

    async def _append_loop(self) -> None:
        while self._running:
            await self._append_wakeup.wait()
            self._append_wakeup.clear()
            # Let appends that arrive in this loop iteration join the batch.
            await asyncio.sleep(0)
            pending, self._appends = self._appends, []
            if pending:
                await self._append_batches(_batches_of(pending))

    async def _append_batches(self, batches: list[list[_PendingAppend]]) -> None:
        """Append a drain's batches one after the other, then fsync once for them all."""
        appended: list[tuple[list[_PendingAppend], int, int]] = []  # (chunk, records, last)
        results: list[RaftResult] = []
        try:
            for chunk in batches:
                records = [r for item in chunk for r in item.records]
                result, last_offset = self.replica.append(records, now_ms())
                appended.append((chunk, len(records), last_offset))
                results.append(result)
        except NotLeaderError as exc:
            # No await since the first append: the role is the same for all, none appended.
            error = KafkaError(
                Errors.NOT_CONTROLLER, f"leader is {exc.leader_id} in epoch {exc.epoch}"
            )
            for chunk in batches:
                for item in chunk:
                    if not item.future.done():
                        item.future.set_exception(error)
            return
        if all(r.flush and r.persist is None and not r.send for r in results):
            # Let parked follower fetches carry the records out before the local fsync, so the
            # followers' fsyncs overlap the leader's. Safe: the leader counts only its flushed
            # offset toward the high watermark (rule 3), so nothing commits early. The last
            # result's fsync covers every batch of the drain.
            self._after_state_change()
            for _ in range(_FETCH_WAKE_ITERATIONS):
                await asyncio.sleep(0)
            self._apply(results[-1])
        else:
            for result in results:
                self._apply(result)
        # Each caller learns the last offset of its own records within its batch.
        for chunk, count, last_offset in appended:
            offset = last_offset - count + 1
            for item in chunk:
                offset += len(item.records)
                if not item.future.done():
                    item.future.set_result(offset - 1)

    # -- applying results, in the fixed order -------------------------------------------------

    def _apply(self, result: RaftResult) -> None:
        if result.persist is not None:
            self.state_file.write(result.persist)
        if result.flush:
            self.log.flush(sync=self.fsync)
            self._apply(self.replica.handle_flushed(now_ms()))
        for outbound in result.send:
            self._spawn(self._send(outbound), name="raft-send")
        self._after_state_change()

    async def _send(self, outbound: Outbound) -> None:
        address = outbound.address or self._address_of(outbound.dest_node_id)
        response = None
        if address is not None:
            timeout_ms = self.request_timeout_ms
            if isinstance(outbound.request, FetchRequest):
                timeout_ms += to_ms(outbound.request.max_wait)
            try:
                # The core's request is Kafka's message: sent as it is, answered in kind.
                response = await self.client.request(
                    address,
                    outbound.request,
                    timeout_ms=timeout_ms,
                    dest_node_id=outbound.dest_node_id,
                )
            except KafkaError as exc:
                log.debug("request to node %s failed: %s", outbound.dest_node_id, exc)
                if (
                    exc.error == Errors.NETWORK_EXCEPTION
                    and outbound.dest_node_id >= 0
                    and self._running
                ):
                    # Reset, closed or refused (not a timeout): the peer's process is most
                    # likely gone. The core hears it as an input, so a follower of a dead
                    # leader stands at once instead of waiting out the fetch timeout.
                    self._apply(
                        self.replica.handle_connection_lost(outbound.dest_node_id, now_ms())
                    )
        if not self._running:
            return
        self._apply(
            self.replica.handle_response(
                outbound.dest_node_id, outbound.request, response, now_ms()
            )
        )

    def _address_of(self, node_id: int) -> str | None:
        return self.replica.endpoint_of(node_id)

    def _after_state_change(self) -> None:
        leader = (self.replica.leader_id, self.replica.epoch)
        if leader != self._last_leader:
            self._last_leader = leader
            is_local = self.replica.role == "Leader"
            log.info(
                "Raft node %s: leader is %s in epoch %s (%s)",
                self.replica.node_id,
                leader[0],
                leader[1],
                self.replica.role,
            )
            self._fail_stale_waiters()
            if self.listener is not None:
                self.listener.handle_leader_change(leader[0], leader[1], is_local)
        self._deliver_committed()
        # Wake parked fetches only on news: re-handling a parked fetch must not wake the others.
        progress = (self.log.end_offset(), self.replica.high_watermark, self.replica.epoch)
        if progress != self._last_progress:
            self._last_progress = progress
            self._parked.wake_all()

    def _deliver_committed(self) -> None:
        snapshot_id = self.log.latest_snapshot_id()
        high_watermark = self.replica.high_watermark
        if high_watermark > self._applied_offset or (
            snapshot_id is not None and snapshot_id.end_offset > self._applied_offset
        ) or (self._listener_catching_up() and self.replica.high_watermark_known):
            self._apply_wakeup.set()
        if self._commit_waiters:
            remaining = []
            for waiter in self._commit_waiters:
                if waiter.future.done():
                    continue
                if waiter.epoch != self.replica.epoch:
                    # Another epoch may have truncated and rewritten this offset (rule 2).
                    waiter.future.set_exception(
                        KafkaError(Errors.NOT_CONTROLLER, f"leadership lost: {self._leader_hint()}")
                    )
                elif high_watermark > waiter.offset:
                    waiter.future.set_result(waiter.offset)
                else:
                    remaining.append(waiter)
            self._commit_waiters = remaining

    def _fail_stale_waiters(self) -> None:
        if self.replica.role != "Leader":
            self._fail_waiters(Errors.NOT_CONTROLLER, self._leader_hint())

    def _fail_waiters(self, error: Errors, message: str) -> None:
        for waiter in self._commit_waiters:
            if not waiter.future.done():
                waiter.future.set_exception(KafkaError(error, message))
        self._commit_waiters = []
        for item in self._appends:
            if not item.future.done():
                item.future.set_exception(KafkaError(error, message))
        self._appends = []

    async def _background_loop(self) -> None:
        """The listener's `background_steps` (a snapshot of an image it kept), after each
        delivery, beside the applier: commits go on being applied while it runs (issue 35).
        A snapshot the log no longer takes (it moved past it meanwhile: ValueError) is logged
        and the loop goes on; a storage failure ends it like the applier's."""
        while self._running:
            await self._background_wakeup.wait()
            self._background_wakeup.clear()
            steps = getattr(self.listener, "background_steps", None)
            if steps is None:
                continue
            try:
                await self._run_steps(steps())
            except ValueError as exc:
                log.warning("Background metadata work failed: %r", exc)

    async def _apply_loop(self) -> None:
        while self._running:
            await self._apply_wakeup.wait()
            self._apply_wakeup.clear()
            await self._apply_committed()

    def _listener_catching_up(self) -> bool:
        """The listener publishes nothing until it has caught up with the high watermark (a
        broker's MetadataLoader, Kafka's stillNeedToCatchUp)."""
        return bool(getattr(self.listener, "catching_up", False))

    async def _apply_committed(self) -> None:
        """Hand the listener what committed since the last call, a slice at a time.

        A listener still catching up gets nothing, not even the local snapshot, until the
        high watermark is known (Kafka's KafkaRaftClient.pollListeners): a restarted broker
        whose log fell behind the leader's start then loads the snapshot it fetches, not its
        stale one first (issue 35)."""
        catching_up = self._listener_catching_up()
        if catching_up and not self.replica.high_watermark_known:
            return
        await self._deliver_to_listener()
        if catching_up:
            steps = getattr(self.listener, "catch_up_steps", None)
            if steps is not None:
                await self._run_steps(steps())

    async def _deliver_to_listener(self) -> None:
        snapshot_id = self.log.latest_snapshot_id()
        while snapshot_id is not None and snapshot_id.end_offset > self._applied_offset:
            # A snapshot fetched from the leader replaced the log below it (FetchSnapshot).
            # Loading yields to the loop between slices, and a newer snapshot may be installed
            # meanwhile (a follower far behind fetches one after another): the log then starts
            # past the one just loaded, so load again until the applied offset has reached the
            # latest snapshot. Reading the log from below its start would fail the applier for
            # good (issue 35's 100K run: "offset 420495 is below the log start offset 484724").
            await self._run_steps(self._load_snapshot_steps())
            snapshot_id = self.log.latest_snapshot_id()
        high_watermark = self.replica.high_watermark
        if high_watermark <= self._applied_offset:
            return
        batches = await self._read_committed(high_watermark)
        if not batches:
            return
        # Whole batches only: a batch the HWM cuts is delivered once it is all committed.
        next_offset = batches[-1].next_offset
        if self.listener is not None:
            steps = getattr(self.listener, "commit_steps", None)
            if steps is not None:
                await self._run_steps(steps(batches))
            else:
                self.listener.handle_commit(batches)
        self._applied_offset = max(self._applied_offset, next_offset)
        self._background_wakeup.set()
        if self.replica.high_watermark > self._applied_offset:
            self._apply_wakeup.set()

    async def _run_steps(self, steps: Iterator[None]) -> None:
        await run_steps(steps, self.step_budget_s)

    async def _read_committed(self, high_watermark: int) -> list[RecordBatch]:
        """The committed batches past the applied offset, decoded one at a time with the
        applier's budget: a 1,000-record batch is about 8 ms of decoding on an idle core, and
        a commit that moved the high watermark over several batches decoded them in one
        stretch of the loop (issue 35)."""
        batches: list[RecordBatch] = []

        def read() -> Iterator[None]:
            for batch in self.log.read_committed(self._applied_offset, high_watermark):
                batches.append(batch)
                yield

        await self._run_steps(read())
        return batches

    def _load_state_machine(self) -> None:
        """Feed the listener the latest snapshot at start, in one go; the committed log is then
        delivered as the HWM becomes known again (a restarted node learns it from the leader).
        A listener catching up gets its snapshot from the applier once the HWM is known."""
        if self._listener_catching_up():
            return
        for _ in self._load_snapshot_steps():
            pass

    def _load_snapshot_steps(self) -> Iterator[None]:
        snapshot_id = self.log.latest_snapshot_id()
        if snapshot_id is not None and self.listener is not None:
            data, _size = self.log.read_snapshot(snapshot_id, 0, 1 << 62)
            batches = []
            for batch, _ in iter_batches(data):
                # A batch at a time (a snapshot of 100,000 partitions is 50 batches): the
                # applier gives the loop back between them (issue 35).
                batches.append(batch)
                yield
            steps = getattr(self.listener, "load_snapshot_steps", None)
            if steps is not None:
                yield from steps(snapshot_id.end_offset, batches)
            else:
                self.listener.handle_load_snapshot(snapshot_id.end_offset, batches)
        self._applied_offset = snapshot_id.end_offset if snapshot_id is not None else 0

    @property
    def applied_offset(self) -> int:
        return self._applied_offset


def _batches_of(pending: list[_PendingAppend]) -> list[list[_PendingAppend]]:
    """Appends in order, grouped into batches: consecutive ones together up to
    MAX_APPEND_BATCH_RECORDS records (group commit), one `alone` in a batch of its own."""
    batches: list[list[_PendingAppend]] = []
    count = 0
    for item in pending:
        last = batches[-1] if batches else None
        if (
            last is None
            or item.alone
            or last[-1].alone
            or count + len(item.records) > MAX_APPEND_BATCH_RECORDS
        ):
            batches.append([item])
            count = len(item.records)
        else:
            last.append(item)
            count += len(item.records)
    return batches


def _high_watermark(response: FetchResponse) -> int:
    answer = answered_partition(response)
    return -1 if answer is None else int(answer.high_watermark)
