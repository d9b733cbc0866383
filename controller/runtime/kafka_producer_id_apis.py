"""AllocateProducerIds (api key 67) on the controller's Kafka listener: brokers fetch blocks of
producer ids for InitProducerId. Only the active controller answers (NOT_CONTROLLER else); the
block is committed as a ProducerIdsRecord before the answer (controller/core/producer_id_control).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from controller.core.producer_id_control import allocate_producer_ids
from kafkawire.api_keys import ApiKey
from kafkawire.connection import KafkaRequestContext
from kafkawire.entities import NO_THROTTLE, build
from kafkawire.errors import Errors, KafkaError
from kafkawire.messages import error_code, response_schema

if TYPE_CHECKING:
    from controller.runtime.quorum_controller import QuorumController
    from kafkawire.router import KafkaRouter

log = logging.getLogger("minikraft.controller")


def route_producer_id_apis(router: KafkaRouter, controller: QuorumController) -> None:
    async def allocate(body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.ALLOCATE_PRODUCER_IDS), version)
        broker_id, broker_epoch = int(body.broker_id), int(body.broker_epoch)
        try:
            block = await controller.write(
                lambda image: allocate_producer_ids(image, broker_id, broker_epoch),
                f"AllocateProducerIds for broker {broker_id}",
            )
        except KafkaError as exc:  # never out of the router: the error goes in the answer
            return build(
                schema,
                throttle_time=NO_THROTTLE,
                error_code=error_code(exc.error),
                producer_id_start=-1,
                producer_id_len=0,
            )
        log.info(
            "Producer ids %d..%d go to broker %d",
            block.first_id, block.first_id + block.size - 1, broker_id,
        )
        return build(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=error_code(Errors.NONE),
            producer_id_start=block.first_id,
            producer_id_len=block.size,
        )

    router.route(ApiKey.ALLOCATE_PRODUCER_IDS, allocate)
