"""A follower's fetch loop for one leader broker (Kafka's ReplicaFetcherThread over
AbstractFetcherThread, with num.replica.fetchers=1): every partition this broker follows from that
leader travels in ONE Fetch. Truncation happens on fetch (rule 22, as Kafka's fetcher does since
IBP 2.7, KAFKA-10554): a new follower whose log has a leader epoch starts fetching at its log end
with that epoch as its last fetched epoch, and the leader's DivergingEpoch answer says where to
truncate; one whose log has no epoch (a new, empty log) truncates to its high watermark locally
(AbstractFetcherThread.truncateToHighWatermark). No OffsetsForLeaderEpoch is sent: Kafka 4's
fetcher sends one only for a log with an epoch on a metadata version before 2.7, which KRaft
does not have. A partition's answer is handled as Kafka's processFetchRequest does: records
appended, the leader's HWM followed (rule 20), a DivergingEpoch truncates, and a partition
error (OFFSET_OUT_OF_RANGE, FENCED/UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER...) delays only
that partition by replica.fetch.backoff.ms (delayPartitions), while an error of the whole
request backs the fetcher off.

Fetch travels on Kafka's protocol to the leader's Kafka listener (broker/runtime/kafka_replication:
Fetch v17 with ReplicaState and topic ids) over the fetcher's own connection: the leader
answers one request per connection at a time, and a long-polling replica Fetch must not hold
back a client's requests.

Partitions come and go as leadership moves (ReplicaFetcherManager.addFetcherForPartitions /
removeFetcherForPartitions): a partition's fetch state remembers the leader epoch it was added
with, and an answer for a partition removed or re-added meanwhile is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from broker.core import messages as bm
from broker.core.fetch_session import FetchSessionHandler, PartitionKey, SentPartition
from broker.core.messages import TopicIdPartition
from broker.core.partition_state import Role
from broker.runtime.kafka_replication import (
    PartitionData,
    fetch_answers,
    fetch_error,
    replica_fetch_to_kio,
)
from broker.runtime.replica_manager import HostedPartition, ReplicaManager
from kafkawire.client import KafkaClient
from kafkawire.clock import now_ms
from kafkawire.errors import Errors, KafkaError
from kafkawire.loop import WALK_BUDGET_S, LoopBudget
from storage.core.leader_epoch_cache import UNDEFINED_EPOCH, EpochEndOffset, follower_truncation

log = logging.getLogger("minikraft.broker")

# How long a fetcher works through a round's partitions before it yields the loop: a create
# of 5,000 partitions hands it thousands at once, to start fetching and then in one answer
# (issue 35).
ROUND_BUDGET_S = WALK_BUDGET_S
# A Fetch naming this many partitions has its answer decoded off the loop: the answer names
# every one of them (a session's full Fetch, a create's new partitions), 5,000 took 100 ms of
# kio decoding in one stretch (issue 35). Answers to a few partitions, records or not, stay on
# the loop: no thread hop on the replication path.
DECODE_IN_THREAD_PARTITIONS = 1000


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """Kafka's replica fetcher configs (ReplicaFetcherThread / KafkaConfig)."""

    max_bytes: int = 1 << 20  # replica.fetch.max.bytes: per partition
    response_max_bytes: int = 10 << 20  # replica.fetch.response.max.bytes: per request
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    # Kafka's fetcher waits request.timeout.ms (30 s) for an answer (BrokerBlockingSender's
    # NetworkClient). It was replica.fetch.wait.max.ms + 5 s here: a restarted broker's first
    # (full) Fetch of 100,000 partitions took the leader longer than that to read, the follower
    # gave up and sent another full one, queued behind the first, again and again (issue 35).
    request_timeout_ms: int = 30000


class PartitionFetchState:
    """One followed partition in a fetcher (Kafka's PartitionFetchState)."""

    __slots__ = ("_position", "delayed_until_ms", "hosted", "leader_epoch")

    def __init__(self, hosted: HostedPartition) -> None:
        self.hosted = hosted
        self.leader_epoch = hosted.state.leader_epoch
        self.delayed_until_ms = 0
        self._position: SentPartition | None = None

    def position(self, max_bytes: int) -> SentPartition:
        """Where the next Fetch starts: the same object while it does not move, so a round
        over 33,000 idle partitions builds nothing new (issue 35)."""
        plog = self.hosted.log
        end, last = plog.log_end_offset, plog.latest_epoch()
        sent = self._position
        if sent is None or sent.fetch_offset != end or sent.last_fetched_epoch != last:
            sent = self._position = SentPartition(end, self.leader_epoch, last, max_bytes)
        return sent

    def ready(self, now: int) -> bool:
        return self.delayed_until_ms <= now


class ReplicaFetcher:
    def __init__(
        self,
        manager: ReplicaManager,
        leader_id: int,
        client: KafkaClient,
        leader_address: Callable[[int], str | None],
        broker_epoch: Callable[[], int],
        settings: FetchSettings,
        cluster_id: str | None = None,
    ) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.client = client  # this fetcher's own; closed by stop()
        self.cluster_id = cluster_id
        self.leader_address = leader_address
        self.broker_epoch = broker_epoch
        self.settings = settings
        self.partitions: dict[TopicIdPartition, PartitionFetchState] = {}
        self._changed = asyncio.Event()
        self.session = FetchSessionHandler()  # KIP-227, with this leader
        self.task: asyncio.Task[None] | None = None
        self._stopped = False
        # A round costs what changed since the last, not the partitions followed (issue 35:
        # rebuilding 33,000 positions a round was a fifth of a core). `_touched`: partitions to
        # look at again (added, removed, appended to, truncated, delayed or due); `_delayed`:
        # those waiting out replica.fetch.backoff.ms; `_fetching` and `_wanted`: the ready ones
        # and their positions (what the session should hold); `_truncating`: those in Kafka's
        # Truncating state (new to this leader epoch), moved to fetching first (_start_fetching).
        self._touched: set[TopicIdPartition] = set()
        self._delayed: dict[TopicIdPartition, int] = {}
        self._fetching: dict[TopicIdPartition, PartitionFetchState] = {}
        self._wanted: dict[PartitionKey, SentPartition] = {}
        self._truncating: dict[TopicIdPartition, PartitionFetchState] = {}

    # ---- partitions (the manager's calls) ----

    def add(self, hosted: HostedPartition) -> None:
        self.partitions[hosted.key] = PartitionFetchState(hosted)
        self._touch(hosted.key)

    def remove(self, key: TopicIdPartition) -> None:
        if self.partitions.pop(key, None) is not None:
            self._delayed.pop(key, None)
            self._touch(key)

    def _touch(self, key: TopicIdPartition) -> None:
        self._touched.add(key)
        self._changed.set()

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        # The flag as well as the cancel: Python 3.11's wait_for can swallow a cancel that
        # lands as its inner request completes, and the loop then went on fetching while
        # stop() waited for it (a whole cluster's stop stalled here, then was SIGKILLed).
        self._stopped = True
        self._changed.set()
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.client.close()

    # ---- the loop ----

    def _current(self, state: PartitionFetchState) -> bool:
        """Still ours: not removed or re-added meanwhile, and still following this leader in
        the epoch it was added with."""
        hosted = state.hosted
        return (
            self.partitions.get(hosted.key) is state
            and hosted.state.role is Role.FOLLOWER
            and hosted.state.leader_id == self.leader_id
            and hosted.state.leader_epoch == state.leader_epoch
        )

    async def _run(self) -> None:
        changed: set[TopicIdPartition] = set()  # since the session's last answered request
        while not self._stopped:
            self._changed.clear()
            now = now_ms()
            # One budget for the round's walks, so one that starts where another stopped
            # does not start a budget of its own (issue 35).
            budget = LoopBudget(ROUND_BUDGET_S)
            changed |= await self._refresh(now, budget)
            address = self.leader_address(self.leader_id)
            if (
                not (self._fetching or self._truncating)
                or address is None
                or self.broker_epoch() < 0
            ):
                await self._idle(now)
                continue
            try:
                if self._truncating:
                    await self._start_fetching(list(self._truncating.values()), budget)
                    changed |= await self._refresh_touched(now_ms(), budget)
                if self._fetching:
                    await self._fetch(address, changed, budget)
            except KafkaError as exc:
                log.debug("Fetcher from broker %s: %s", self.leader_id, exc)
                await self._backoff()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Fetcher from broker %s failed; retrying", self.leader_id)
                await self._backoff()

    async def _refresh(self, now: int, budget: LoopBudget) -> set[TopicIdPartition]:
        """Look again at the partitions touched since the last round and at the delayed ones
        now due; returns them."""
        due = [key for key, until in self._delayed.items() if until <= now]
        for key in due:
            del self._delayed[key]
        self._touched.update(due)
        return await self._refresh_touched(now, budget)

    async def _refresh_touched(self, now: int, budget: LoopBudget) -> set[TopicIdPartition]:
        """Giving the loop back as it goes: a create touches its 5,000 new partitions twice,
        as they come and once they are out of truncation (issue 35). One touched meanwhile is
        looked at in the next round."""
        touched, self._touched = self._touched, set()
        for key in touched:
            await budget.spend()
            self._refresh_one(key, now)
        return touched

    def _refresh_one(self, key: TopicIdPartition, now: int) -> None:
        self._fetching.pop(key, None)
        self._wanted.pop(key, None)
        self._truncating.pop(key, None)
        state = self.partitions.get(key)
        if state is None or not state.ready(now) or not self._current(state):
            return
        if state.hosted.state.truncation_pending:
            self._truncating[key] = state
        else:
            self._fetching[key] = state
            self._wanted[key] = state.position(self.settings.max_bytes)

    async def _idle(self, now: int) -> None:
        """Nothing to fetch now: wait for a partition to be added, or the first delayed one to
        be due, or the backoff (no leader address or broker epoch yet)."""
        due = [until - now for until in self._delayed.values()]
        timeout_ms = min(due) if due else self.settings.backoff_ms
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), max(1, timeout_ms) / 1000)

    async def _backoff(self) -> None:
        await asyncio.sleep(self.settings.backoff_ms / 1000)

    def _delay(self, state: PartitionFetchState, why: object) -> None:
        """Kafka's delayPartitions: a partition error retries that partition only, later
        (until then it leaves the session, as Kafka's fetch request leaves out a delayed
        partition)."""
        log.debug(
            "Fetcher from broker %s: %s-%s: %s",
            self.leader_id, state.hosted.topic, state.hosted.partition, why,
        )
        state.delayed_until_ms = now_ms() + self.settings.backoff_ms
        key = state.hosted.key
        if self.partitions.get(key) is state:
            self._delayed[key] = state.delayed_until_ms
            self._touch(key)

    # ---- truncation (rule 22) ----

    async def _start_fetching(
        self, states: Sequence[PartitionFetchState], budget: LoopBudget
    ) -> None:
        """Kafka's Truncating state of a partition new to this leader epoch, ended with no
        request (truncation on fetch, AbstractFetcherThread.partitionFetchState and
        truncateToHighWatermark): a log with a leader epoch fetches from its end with that
        epoch as its last fetched epoch, and the leader's DivergingEpoch answer truncates it
        (_process_partition); a log without one is cut to its high watermark here (a new,
        empty log: nothing to cut). 5,000 new partitions a create asked the leader one
        OffsetsForLeaderEpoch round each, which Kafka never sends (issue 35)."""
        for state in states:
            await budget.spend()
            # Looked at again after this: fetching, or no longer ours.
            self._touch(state.hosted.key)
            if not self._current(state):
                continue
            hosted = state.hosted
            plog = hosted.log
            offset = plog.log_end_offset
            if plog.latest_epoch() == UNDEFINED_EPOCH and hosted.state.high_watermark < offset:
                # A leader's fsync may still run from before this replica became a follower:
                # truncation must not cut segments under it.
                await hosted.commit.idle()
                if not self._current(state):
                    continue
                offset = hosted.state.high_watermark
            self._cut(hosted, offset, "no leader epoch in the log: cut to its high watermark")

    def _truncate_to(self, hosted: HostedPartition, answer: EpochEndOffset, why: str) -> None:
        plog = hosted.log
        decision = follower_truncation(
            answer, plog.epoch_cache, plog.log_end_offset, hosted.state.high_watermark
        )
        # An incomplete decision needs no other round: the next Fetch carries the epoch left
        # as its last fetched epoch and the leader answers again (Kafka's fetcher stays in
        # Fetching with truncation on fetch).
        self._cut(hosted, decision.offset, f"{why}: {decision.reason}")

    def _cut(self, hosted: HostedPartition, offset: int, reason: str) -> None:
        self._touch(hosted.key)  # a new position, and no truncation pending any more
        plog = hosted.log
        old_end = plog.log_end_offset
        # Always through truncate_to, even at the log end: it drops epochs starting there, as
        # Kafka's UnifiedLog.truncateTo does (an epoch this broker led without appending to it
        # would otherwise stay its last fetched epoch, and the leader answer the same
        # DivergingEpoch forever).
        new_end = plog.truncate_to(offset)
        ready = hosted.state.on_truncated(old_end, new_end, plog.flushed_offset, reason, now_ms())
        self.manager.apply_ready(hosted, ready)

    # ---- fetch ----

    async def _fetch(
        self, address: str, changed: set[TopicIdPartition], budget: LoopBudget
    ) -> None:
        """One Fetch of the ready partitions, in the fetcher's session (KIP-227): only the
        partitions whose position changed travel (`changed` names every one that may have),
        and only those with news come back. Nothing is built before the connection to the
        leader is up (Kafka's BrokerBlockingSender awaits it first): a leader that is down
        refused every round, and each round built a full Fetch of every partition followed
        from it (the session starts again after an error), 33,000 a round on each of its
        followers until the fencing moved them, about a third of a core (issue 35)."""
        settings = self.settings
        await self.client.ready(address, timeout_ms=settings.request_timeout_ms)
        epoch = self.broker_epoch()
        positions = self._wanted
        plan = self.session.build_changes(positions, cast(set[PartitionKey], changed))
        requests: dict[PartitionKey, bm.FetchRequest] = {}
        for key in plan.send:
            await budget.spend()
            requests[key] = self._request(key, positions[key], epoch)
        build = functools.partial(
            replica_fetch_to_kio,
            self.manager.broker_id,
            epoch,
            self.cluster_id,
            max_wait_ms=settings.max_wait_ms,
            min_bytes=settings.min_bytes,
            max_bytes=settings.response_max_bytes,
            partitions=[(cast(uuid.UUID, key[0]), r) for key, r in requests.items()],
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            forgotten=[(cast(uuid.UUID, t), p) for t, p in plan.forget],
        )
        # A Fetch naming thousands of partitions is built and encoded in a worker thread too:
        # kio's entities and encoding for 5,000 were 20-35 ms in one stretch (issue 35).
        big = len(requests) >= DECODE_IN_THREAD_PARTITIONS
        try:
            answer = await self.client.request(
                address,
                await asyncio.to_thread(build) if big else build(),
                timeout_ms=max(settings.request_timeout_ms, settings.max_wait_ms + 5000),
                dest_node_id=self.leader_id,
                decode_in_thread=big,
                encode_in_thread=big,
            )
        except BaseException:
            self.session.handle_error()
            raise
        top = fetch_error(answer)
        self.session.handle_response(top, int(answer.session_id), plan)
        changed.clear()  # the session holds them now (or starts again in full)
        if top is not Errors.NONE:
            raise KafkaError(top, f"Fetch answered {top.name}")
        budget = LoopBudget(ROUND_BUDGET_S)
        for key, response in fetch_answers(answer).items():
            await budget.spend()
            state = self._fetching.get(cast(TopicIdPartition, key))
            if state is None or not self._current(state):
                if state is not None:
                    self._touch(state.hosted.key)  # no longer ours: out at the next round
                continue  # nothing we fetch now, or no longer ours
            sent = positions.get(key)
            if sent is None or sent.fetch_offset != state.hosted.log.log_end_offset:
                continue  # truncated meanwhile: this answer is for the old position
            await self._process_partition(state, response)

    def _request(self, key: PartitionKey, at: SentPartition, epoch: int) -> bm.FetchRequest:
        # From the partitions this round fetches: one removed while the round yielded is
        # still in the plan the session was told.
        hosted = self._fetching[cast(TopicIdPartition, key)].hosted
        return bm.FetchRequest(
            hosted.topic,
            hosted.partition,
            fetch_offset=at.fetch_offset,
            replica_id=self.manager.broker_id,
            replica_epoch=epoch,
            current_leader_epoch=at.current_leader_epoch,
            last_fetched_epoch=at.last_fetched_epoch,
            max_bytes=at.max_bytes,
        )

    async def _process_partition(self, state: PartitionFetchState, response: PartitionData) -> None:
        hosted = state.hosted
        plog = hosted.log
        error = Errors.of(response.error_code)
        if error is not Errors.NONE:
            self._delay(state, error.name)
            return
        diverging = response.diverging_epoch
        if diverging.epoch != bm.NO_EPOCH:
            # A leader's fsync may still run from before this replica became a follower:
            # truncation must not cut segments under it.
            await hosted.commit.idle()
            if not self._current(state):
                return
            self._truncate_to(
                hosted,
                EpochEndOffset(int(diverging.epoch), int(diverging.end_offset)),
                "diverging epoch in Fetch",
            )
            return
        if response.records:
            self._touch(hosted.key)  # its position moves
            plog.append_as_follower(bytes(response.records))
            if plog.flush_due(None):
                # Before the next Fetch reports the new end (rule 20); group_commit says where.
                await hosted.commit.sync()
                if not self._current(state):
                    return
            hosted.notify()
        ready = hosted.state.on_fetch_response(
            int(response.high_watermark), plog.log_end_offset, plog.flushed_offset, now_ms()
        )
        self.manager.apply_ready(hosted, ready)
        # DeleteRecords
        self.manager.follow_log_start_offset(hosted, int(response.log_start_offset))
