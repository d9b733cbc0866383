"""Producer ids for InitProducerId (Kafka's RPCProducerIdManager, KIP-730).

The broker holds a block of ids obtained from the active controller with AllocateProducerIds
on Kafka's protocol (sent like a forwarded admin request: kafkawire.forwarding finds the active
controller), and hands them out one by one; when the block is used up it asks for the next
one. While no block can be had (no active controller, broker not registered yet) the answer is
COORDINATOR_LOAD_IN_PROGRESS, which producers retry (as Kafka's broker does).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.allocate_producer_ids.v0.request import AllocateProducerIdsRequest

from kafkawire.errors import Errors, KafkaError

log = logging.getLogger("minikraft.broker")

ALLOCATE_TIMEOUT_MS = 5000

# Sends a kio request to the active controller and returns its answer (KafkaError if none).
ToActiveController = Callable[[Any, int], Awaitable[Any]]


class ProducerIdManager:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        to_active_controller: ToActiveController,
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._send = to_active_controller
        self._next = 0
        self._end = 0  # exclusive: no block yet
        self._lock = asyncio.Lock()

    async def generate(self) -> int:
        """The next unused producer id; KafkaError COORDINATOR_LOAD_IN_PROGRESS if none."""
        async with self._lock:
            if self._next >= self._end:
                await self._allocate_block()
            producer_id = self._next
            self._next += 1
            return producer_id

    async def _allocate_block(self) -> None:
        request = AllocateProducerIdsRequest(
            broker_id=self.broker_id,  # type: ignore[arg-type]
            broker_epoch=self._broker_epoch(),  # type: ignore[arg-type]
        )
        try:
            response = await self._send(request, ALLOCATE_TIMEOUT_MS)
            error = Errors.of(int(response.error_code))
        except KafkaError as exc:
            error = exc.error
        if error is not Errors.NONE:
            raise KafkaError(
                Errors.COORDINATOR_LOAD_IN_PROGRESS, f"no producer id block: {error.name}"
            )
        self._next = int(response.producer_id_start)
        self._end = self._next + int(response.producer_id_len)
        log.info("Broker %d holds producer ids %d..%d", self.broker_id, self._next, self._end - 1)
