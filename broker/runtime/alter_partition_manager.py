"""AlterPartitionManager: a broker's ISR changes to the active controller, batched, after
Kafka's AlterPartitionManager. Partitions submit their proposal (the core's IsrProposal, one in
flight per partition) and await its outcome; the manager sends every queued proposal in one
AlterPartition request, at most one request in flight per broker, and the proposals submitted
meanwhile go together in the next. So a tick that shrinks the ISR of many partitions, or a
controller failover that leaves many waiting, costs one round trip, not one per partition.

The broker epoch is read when the request goes (rule 17: a restarted broker sends its new one).
A request-level error (NOT_CONTROLLER, STALE_BROKER_EPOCH, a timeout) is every partition's;
the partition state decides what to retry (rule 18)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable

from broker.core.partition_state import IsrProposal
from kafkawire.broker_lifecycle import (
    AlterPartitionPartition,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    alter_partition_partition,
    alter_partition_request,
)
from kafkawire.errors import Errors, KafkaError

log = logging.getLogger("minikraft.broker")

AlterPartitionSender = Callable[[AlterPartitionRequest], Awaitable[AlterPartitionResponse]]
# A request-level error (result None) or the partition's own result.
AlterPartitionOutcome = tuple[Errors, AlterPartitionPartitionResult | None]
# Who learns an outcome: a future, or a callback called with it as the answer is handled.
_Waiter = asyncio.Future[AlterPartitionOutcome] | Callable[[AlterPartitionOutcome], None]
_Key = tuple[uuid.UUID, int]


class AlterPartitionManager:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        send: AlterPartitionSender,
        delivering: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
    ) -> None:
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._send = send
        # Around the callbacks of one answer's outcomes (the broker's: its journal's events
        # written together, EventJournal.buffered).
        self._delivering = delivering
        # Kafka's unsentIsrUpdates: submitted, not yet in a request, by partition.
        self._unsent: dict[_Key, tuple[AlterPartitionPartition, _Waiter]] = {}
        self._inflight: asyncio.Task[None] | None = None
        self.requests_sent = 0

    def submit(
        self, topic_id: uuid.UUID, partition_index: int, proposal: IsrProposal
    ) -> asyncio.Future[AlterPartitionOutcome]:
        """Queue one partition's proposal; the future resolves with its outcome. A proposal
        still queued for the same partition is superseded (OPERATION_NOT_ATTEMPTED, as
        Kafka), its answer no longer wanted by the partition state."""
        future: asyncio.Future[AlterPartitionOutcome] = asyncio.get_running_loop().create_future()
        self._queue(topic_id, partition_index, proposal, future)
        return future

    def submit_with(
        self,
        topic_id: uuid.UUID,
        partition_index: int,
        proposal: IsrProposal,
        on_outcome: Callable[[AlterPartitionOutcome], None],
    ) -> None:
        """submit, the outcome handed to `on_outcome` as the answer is handled: every outcome
        of one answer in one go, inside `delivering` (a returning broker's 66,000 expansions
        on one leader came back as 66,000 callbacks of their futures, each on a loop turn of
        its own with its journal write, issue 35). Nothing once the manager closed."""
        self._queue(topic_id, partition_index, proposal, on_outcome)

    def _queue(
        self, topic_id: uuid.UUID, partition_index: int, proposal: IsrProposal, waiter: _Waiter
    ) -> None:
        key = (topic_id, partition_index)
        superseded = self._unsent.pop(key, None)
        if superseded is not None:
            _deliver_later(superseded[1], (Errors.OPERATION_NOT_ATTEMPTED, None))
        self._unsent[key] = (_partition_data(partition_index, proposal), waiter)
        self._maybe_send()

    async def close(self) -> None:
        inflight = self._inflight
        if inflight is not None:
            inflight.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await inflight
        for _, waiter in self._unsent.values():
            if isinstance(waiter, asyncio.Future):
                waiter.cancel()
        self._unsent.clear()

    def _maybe_send(self) -> None:
        if self._inflight is None and self._unsent:
            # Started on the next loop turn: proposals submitted in this turn join the request.
            self._inflight = asyncio.ensure_future(self._send_batch())

    async def _send_batch(self) -> None:
        try:
            await asyncio.sleep(0)
            batch, self._unsent = self._unsent, {}
            outcomes = await self._exchange(batch)
            with self._delivering():
                for key, (_, waiter) in batch.items():
                    _deliver(waiter, outcomes(key))
        finally:
            self._inflight = None
        self._maybe_send()

    async def _exchange(
        self, batch: dict[_Key, tuple[AlterPartitionPartition, _Waiter]]
    ) -> Callable[[_Key], AlterPartitionOutcome]:
        by_topic: dict[uuid.UUID, list[AlterPartitionPartition]] = {}
        for (topic_id, _), (data, _) in batch.items():
            by_topic.setdefault(topic_id, []).append(data)
        request = alter_partition_request(
            self._broker_id, self._broker_epoch(), by_topic.items()
        )
        self.requests_sent += 1
        try:
            response = await self._send(request)
        except KafkaError as exc:
            failed = exc.error
            return lambda _key: (failed, None)
        except Exception:  # a bug must not leave the partitions waiting for ever
            log.exception("AlterPartition for %d partitions failed", len(batch))
            return lambda _key: (Errors.UNKNOWN_SERVER_ERROR, None)
        error = Errors.of(response.error_code)
        if error is not Errors.NONE:
            log.info("AlterPartition for %d partitions: %s", len(batch), error.name)
            return lambda _key: (error, None)
        results = {
            (topic.topic_id, int(part.partition_index)): part
            for topic in response.topics
            for part in topic.partitions
        }
        if len(batch) > 1:
            # One line per request; each partition's own line is at DEBUG (issue 35).
            errors: dict[str, int] = {}
            for result in results.values():
                name = Errors.of(result.error_code).name
                errors[name] = errors.get(name, 0) + 1
            log.info(
                "AlterPartition for %d partitions: %s",
                len(batch),
                ", ".join(f"{count} {name}" for name, count in sorted(errors.items())),
            )

        def outcome(key: _Key) -> AlterPartitionOutcome:
            result = results.get(key)
            # The controller answers every partition asked; a missing one is a server bug.
            return (Errors.NONE, result) if result is not None else (Errors.UNKNOWN_SERVER_ERROR, None)

        return outcome


def _deliver(waiter: _Waiter, outcome: AlterPartitionOutcome) -> None:
    if isinstance(waiter, asyncio.Future):
        if not waiter.done():
            waiter.set_result(outcome)
        return
    try:
        waiter(outcome)
    except Exception:  # one partition's bug must not keep the batch's others waiting
        log.exception("Handling an AlterPartition outcome failed")


def _deliver_later(waiter: _Waiter, outcome: AlterPartitionOutcome) -> None:
    """A superseded proposal's answer, on a later loop turn (as its future's callback was):
    not inside the submit that superseded it."""
    if isinstance(waiter, asyncio.Future):
        if not waiter.done():
            waiter.set_result(outcome)
        return
    asyncio.get_running_loop().call_soon(_deliver, waiter, outcome)


def _partition_data(partition_index: int, proposal: IsrProposal) -> AlterPartitionPartition:
    return alter_partition_partition(
        partition_index,
        proposal.leader_epoch,
        proposal.new_isr_with_epochs,
        int(proposal.leader_recovery_state),
        proposal.partition_epoch,
    )
