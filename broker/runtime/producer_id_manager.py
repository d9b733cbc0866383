"""Producer ids for InitProducerId (Kafka's RPCProducerIdManager, KIP-730).

The broker holds a block of ids obtained from the active controller with AllocateProducerIds
on Kafka's protocol, and hands them out one by one; when the block is used up it asks for the
next one. While no block can be had (no active controller, broker not registered yet) the
answer is COORDINATOR_LOAD_IN_PROGRESS, which producers retry (as Kafka's broker does).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kio.schema.allocate_producer_ids.v0.request import AllocateProducerIdsRequest

from kafkawire.client import KafkaClient, client_id_for_node
from kafkawire.errors import Errors, KafkaError
from kafkawire.faults import FaultInjector

log = logging.getLogger("minikraft.broker")

ALLOCATE_TIMEOUT_MS = 5000

# (address, node id or None): the known active controller first, then the bootstrap servers.
ControllerCandidates = Callable[[], list[tuple[str, int | None]]]


class ProducerIdManager:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        controllers: ControllerCandidates,
        faults: FaultInjector | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._controllers = controllers
        self._client = KafkaClient(client_id_for_node(broker_id), faults=faults)
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
        why = "no controller reachable"
        for address, node_id in self._controllers():
            try:
                response = await self._client.request(
                    address, request, timeout_ms=ALLOCATE_TIMEOUT_MS, dest_node_id=node_id
                )
            except KafkaError as exc:
                why = f"{address}: {exc.error.name}"
                continue
            error = Errors.of(int(response.error_code))
            if error is Errors.NONE:
                self._next = int(response.producer_id_start)
                self._end = self._next + int(response.producer_id_len)
                log.info("Broker %d holds producer ids %d..%d", self.broker_id, self._next, self._end - 1)
                return
            why = f"{address}: {error.name}"
            if error is not Errors.NOT_CONTROLLER:
                break
        raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS, f"no producer id block: {why}")

    async def close(self) -> None:
        await self._client.close()
