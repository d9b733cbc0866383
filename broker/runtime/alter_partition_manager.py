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
_Key = tuple[uuid.UUID, int]


class AlterPartitionManager:
    def __init__(
        self, broker_id: int, broker_epoch: Callable[[], int], send: AlterPartitionSender
    ) -> None:
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._send = send
        # Kafka's unsentIsrUpdates: submitted, not yet in a request, by partition.
        self._unsent: dict[_Key, tuple[AlterPartitionPartition, asyncio.Future[AlterPartitionOutcome]]] = {}
        self._inflight: asyncio.Task[None] | None = None
        self.requests_sent = 0

    def submit(
        self, topic_id: uuid.UUID, partition_index: int, proposal: IsrProposal
    ) -> asyncio.Future[AlterPartitionOutcome]:
        """Queue one partition's proposal; the future resolves with its outcome. A proposal
        still queued for the same partition is superseded (OPERATION_NOT_ATTEMPTED, as
        Kafka), its answer no longer wanted by the partition state."""
        future: asyncio.Future[AlterPartitionOutcome] = asyncio.get_running_loop().create_future()
        key = (topic_id, partition_index)
        superseded = self._unsent.pop(key, None)
        if superseded is not None and not superseded[1].done():
            superseded[1].set_result((Errors.OPERATION_NOT_ATTEMPTED, None))
        self._unsent[key] = (_partition_data(partition_index, proposal), future)
        self._maybe_send()
        return future

    async def close(self) -> None:
        inflight = self._inflight
        if inflight is not None:
            inflight.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await inflight
        for _, future in self._unsent.values():
            future.cancel()
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
            for key, (_, future) in batch.items():
                if not future.done():
                    future.set_result(outcomes(key))
        finally:
            self._inflight = None
        self._maybe_send()

    async def _exchange(
        self,
        batch: dict[_Key, tuple[AlterPartitionPartition, asyncio.Future[AlterPartitionOutcome]]],
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


def _partition_data(partition_index: int, proposal: IsrProposal) -> AlterPartitionPartition:
    return alter_partition_partition(
        partition_index,
        proposal.leader_epoch,
        proposal.new_isr_with_epochs,
        int(proposal.leader_recovery_state),
        proposal.partition_epoch,
    )
