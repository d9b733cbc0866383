"""Reading the partitions of one Fetch, consumers' and followers' alike (Kafka's
ReplicaManager.fetchMessages and readFromLog, with the DelayedFetch of broker.runtime.purgatory):
each partition in request order up to its own and the request's max bytes, read again while the
fetch waits for fetch.min.bytes, at most max_wait_ms; then the answer (fetch_response).

A follower's KIP-227 session reads only the partitions it does not skip (issue 35): a read that
finds nothing new for the follower, whose position the leader has nothing to do with (caught up,
in the ISR: PartitionState.follower_idle), and whose answer is what the session last said, skips
the partition (FetchSession.skip) until it changes on the leader (HostedPartition.changed, which
first counts the fetches skipped meanwhile and wakes the waiting fetch) or the follower sends it
again. Kafka reads every partition of a session at every Fetch and leaves the unchanged ones out
of the answer: the answers are the same, but a follower's session of 33,000 idle partitions cost
a Python leader about a second of CPU per Fetch, several Fetches a second.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from broker.core import messages as bm
from broker.core.fetch_session import (
    CachedPartition,
    FetchContext,
    FetchSession,
    answer_changed,
    cached_key,
)
from broker.runtime.hosted_partition import HostedPartition
from broker.runtime.kafka_replication import fetch_partition_from_request, fetch_partition_to_kio
from broker.runtime.purgatory import delayed_fetch
from broker.runtime.replica_manager import ReplicaManager
from kafkawire.clock import now_ms
from kafkawire.entities import NO_THROTTLE, build, has_field, item_type
from kafkawire.errors import Errors
from kafkawire.loop import WALK_BUDGET_S, LoopBudget
from kafkawire.messages import error_code
from raft.runtime.parked_fetches import ParkedFetches

READ_BUDGET_S = WALK_BUDGET_S  # how long a Fetch reads partitions before it yields the loop

Read = list[tuple[CachedPartition, str | None, bm.FetchResponse]]


class FetchReads:
    def __init__(self, replicas: ReplicaManager, topic_name: Callable[[Any], str | None]) -> None:
        self._replicas = replicas
        self._topic_name = topic_name  # a request's topic entry (id or name) -> its name

    async def read(
        self,
        context: FetchContext,
        *,
        replica_id: int,
        replica_epoch: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        min_one_message: bool,
    ) -> Read:
        """The partitions read (each with its topic's name, None if unknown) and what each
        read answered, from the fetch's last read. `min_one_message`: Kafka's minOneMessage
        (the first batch of the first partition with data may exceed max_bytes; Fetch v0-v2
        had a hard limit)."""
        # A follower's session reads only the partitions it does not skip; any other fetch
        # reads every partition it names.
        session = context.session if replica_id >= 0 else None
        if session is not None:
            session.replica_id = replica_id
            if session.parked is None:
                session.parked = ParkedFetches()
        last: Read = []
        # A follower session's full Fetch answers every partition: one its reads skip from
        # the first on is answered with what that read found (`kept`), not read again when
        # the fetch waits out max_wait_ms (issue 35: a follower back to 66,000 partitions had
        # each read twice in its first Fetch; Kafka's DelayedFetch reads every partition
        # again as it completes). A skipped partition that changes is read again (wake).
        kept: dict[int, tuple[CachedPartition, str | None, bm.FetchResponse]] | None = (
            {} if session is not None and not context.incremental else None
        )

        async def read(first: bool) -> tuple[Read, bool]:
            nonlocal last
            replay_ms = 0
            if session is not None:
                partitions = list(session.busy.values())
                if first:
                    replay_ms, session.fetch_ms = session.fetch_ms, now_ms()
            else:
                partitions = context.partitions
            last = await self._read_once(
                partitions, session, replay_ms, replica_id, replica_epoch, max_bytes,
                min_one_message, record_progress=first, kept=kept,
            )
            total = sum(len(result.records) for _, _, result in last)
            done = any(
                result.error_code != 0 or result.diverging_epoch != bm.NO_EPOCH
                for _, _, result in last
            )
            # A fetch of no partition answers at once (Kafka: fetchInfos empty); a session
            # whose partitions are all skipped waits like one whose reads found nothing.
            empty = not (session.partitions if session is not None else last)
            return last, total >= max(1, min_bytes) or done or empty

        read_last = await delayed_fetch(
            read, lambda: self._hosted(last), max_wait_ms, follower=replica_id >= 0,
            also=None if session is None else session.parked,
        )
        if not kept:
            return read_last
        # Skipped partitions carry no records: the answer's bytes are the last read's. Kept
        # by the session's CachedPartition (one object per partition for the session's life).
        fresh = {id(cached) for cached, _, _ in read_last}
        return read_last + [entry for key, entry in kept.items() if key not in fresh]

    async def _read_once(
        self,
        partitions: Sequence[CachedPartition],
        session: FetchSession | None,
        replay_ms: int,
        replica_id: int,
        replica_epoch: int,
        max_bytes: int,
        min_one_message: bool,
        *,
        record_progress: bool,
        kept: dict[int, tuple[CachedPartition, str | None, bm.FetchResponse]] | None = None,
    ) -> Read:
        """Kafka's readFromLog: partitions in request order, each read up to min(its partition
        max, what is left of max_bytes), only the first batch of the first partition with
        data past that (minOneMessage), so a consumer always progresses."""
        out: Read = []
        total = 0
        # A follower's session holds a third of 100,000 partitions: the read lets the loop
        # serve others between slices (issue 35). A slice's journal events (a returning
        # follower's expansions: an IsrProposed each) go out in one write as it ends, before
        # the loop runs anything that acts on them (the AlterPartition goes on a later turn).
        budget = LoopBudget(READ_BUDGET_S)
        with contextlib.ExitStack() as journaled:
            self._buffer_journal(journaled)
            for cached in partitions:
                if budget.spent():
                    journaled.close()  # the slice's events written: then the loop is given back
                    await budget.spend()
                    self._buffer_journal(journaled)
                partition = cached.request
                name = self._topic_name(cached.topic)
                if name is None:
                    out.append((
                        cached, None,
                        bm.FetchResponse(int(Errors.UNKNOWN_TOPIC_ID), "unknown topic id"),
                    ))
                    continue
                if cached.replay:
                    cached.replay = False
                    self._replay_skipped(session, name, partition, replay_ms)
                limit = min(int(partition.partition_max_bytes), max(0, max_bytes - total))
                hosted, result = self._replicas.fetch_now(
                    fetch_partition_from_request(
                        name, partition, replica_id, replica_epoch, limit, min_one_message
                    ),
                    # A follower's fetch position counts once per request, as in Kafka.
                    record_progress=record_progress,
                )
                if session is not None and self._skip_if_idle(
                    session, cached, hosted, result, answered_whole=kept is not None
                ) and kept is not None:
                    kept[id(cached)] = (cached, name, result)
                if result.records:
                    min_one_message = False
                total += len(result.records)
                out.append((cached, name, result))
        return out

    def _buffer_journal(self, stack: contextlib.ExitStack) -> None:
        """The journal's events go out together when `stack` closes (EventJournal.buffered)."""
        journal = self._replicas.journal
        if journal is not None:
            stack.enter_context(journal.buffered())

    def _skip_if_idle(
        self, session: FetchSession, cached: CachedPartition, hosted: HostedPartition | None,
        result: bm.FetchResponse, *, answered_whole: bool = False,
    ) -> bool:
        """The session skips the partition from its next read on if this read found nothing
        new for the follower (no records, no error, the answer what the session last said)
        and the leader nothing to change (PartitionState.follower_idle); True if it does.
        `answered_whole`: a full Fetch, whose answer carries this read's result for a skipped
        partition and so tells the session what it says, whatever it said before."""
        if (
            result.records
            or result.error_code
            or result.diverging_epoch != bm.NO_EPOCH
            or (not answered_whole and (
                result.high_watermark != cached.high_watermark
                or result.log_start_offset != cached.log_start_offset
            ))
        ):
            return False
        partition = cached.request
        key = cached_key(cached)
        if (
            hosted is None  # the partition read (fetch_now), if hosted
            or hosted.key != key  # a session by topic name (before v13): not woken by id
            or not hosted.state.follower_idle(session.replica_id, int(partition.fetch_offset))
        ):
            return False
        session.skip(key, cached)
        hosted.skipped_by(session)
        return True

    def _replay_skipped(
        self, session: FetchSession | None, name: str, partition: Any, fetch_ms: int
    ) -> None:
        """The follower sent a partition its session skipped: count the last fetch skipped
        (PartitionState.on_follower_idle) before this one is read."""
        hosted = self._replicas.hosted_by_name(name, int(partition.partition))
        if session is not None and hosted is not None:
            hosted.state.on_follower_idle(session.replica_id, fetch_ms)

    def _hosted(self, read: Read) -> list[HostedPartition]:
        """The hosted partitions a fetch waits on (its DelayedFetch's watch keys)."""
        replicas = self._replicas
        return [
            found
            for cached, name, _ in read
            if name
            and (found := replicas.hosted_by_name(name, int(cached.request.partition))) is not None
        ]


async def fetch_response(schema: type, read: Read, context: FetchContext) -> Any:
    """The Fetch answer (of `schema`, the version asked) to the reads: every partition, or in
    a session only those with something new (KIP-227: records, an error, a diverging epoch, a
    moved HWM or log start offset). Built in slices of READ_BUDGET_S, as the reads are: the
    first answer to a follower after a create names its 5,000 new partitions (issue 35)."""
    topic_cls = item_type(schema, "responses")
    partition_cls = item_type(topic_cls, "partitions")
    by_topic: dict[Any, list[Any]] = {}
    budget = LoopBudget(READ_BUDGET_S)
    for cached, _name, result in read:
        await budget.spend()
        topic, partition = cached.topic, cached.request
        if context.session is not None:
            changed = answer_changed(
                cached,
                result.error_code,
                bool(result.records) or result.diverging_epoch != bm.NO_EPOCH,
                result.high_watermark,
                result.log_start_offset,
            )
            if context.incremental and not changed:
                continue
        key = getattr(topic, "topic", None) or topic.topic_id
        by_topic.setdefault(key, []).append(
            fetch_partition_to_kio(partition_cls, int(partition.partition), result)
        )
    key_field = "topic" if has_field(topic_cls, "topic") else "topic_id"
    return build(
        schema,
        throttle_time=NO_THROTTLE,
        error_code=error_code(Errors.NONE),
        session_id=context.session_id,
        responses=tuple(
            topic_cls(**{key_field: key, "partitions": tuple(parts)})
            for key, parts in by_topic.items()
        ),
    )
