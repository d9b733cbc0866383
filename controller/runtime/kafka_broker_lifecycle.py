"""The controller's side of the broker lifecycle (BrokerRegistration v4, BrokerHeartbeat v1,
AlterPartition v3) on its listener: kio request -> controller.core.messages through the shared
translation (metadata/broker_lifecycle_wire.py), QuorumController, and the kio response back.

Kafka's responses carry no error message: the controller logs why, the broker logs the name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from controller.core import messages as cm
from controller.runtime.quorum_controller import QuorumController
from kafkawire.api_keys import ApiKey
from kafkawire.connection import KafkaRequestContext
from kafkawire.errors import Errors, KafkaError
from kafkawire.router import Handler, KafkaRouter
from metadata.broker_lifecycle_wire import (
    alter_partition_request_from_kio,
    alter_partition_response_to_kio,
    heartbeat_request_from_kio,
    heartbeat_response_to_kio,
    registration_request_from_kio,
    registration_response_to_kio,
)

log = logging.getLogger("minikraft.controller")


# -- server side: the controller's handlers ----------------------------------------------------


def route_broker_lifecycle(router: KafkaRouter, controller: QuorumController) -> None:
    """Route the three APIs on the controller listener. A KafkaError (NOT_CONTROLLER on a
    standby, REQUEST_TIMED_OUT when the quorum cannot commit) becomes the top-level error code:
    a node-to-node handler never raises out of the router, which would close the connection."""
    apis: tuple[tuple[ApiKey, Callable[[Any], Any], Callable[[Any], Any], type], ...] = (
        (
            ApiKey.BROKER_REGISTRATION,
            registration_request_from_kio,
            registration_response_to_kio,
            cm.BrokerRegistrationResponse,
        ),
        (
            ApiKey.BROKER_HEARTBEAT,
            heartbeat_request_from_kio,
            heartbeat_response_to_kio,
            cm.BrokerHeartbeatResponse,
        ),
        (
            ApiKey.ALTER_PARTITION,
            alter_partition_request_from_kio,
            alter_partition_response_to_kio,
            cm.AlterPartitionResponse,
        ),
    )
    for api_key, from_kio, to_kio, response_cls in apis:
        router.route(api_key, _handler(controller, api_key, from_kio, to_kio, response_cls))


def _handler(
    controller: QuorumController,
    api_key: ApiKey,
    from_kio: Callable[[Any], Any],
    to_kio: Callable[[Any], Any],
    response_cls: type,
) -> Handler:
    async def handle(body: Any, _version: int, ctx: KafkaRequestContext) -> Any:
        try:
            response = await controller.handle(api_key, from_kio(body), ctx.source_node_id)
        except KafkaError as exc:
            response = response_cls(int(exc.error), exc.message)
        except Exception:  # a bug must not close the broker's connection
            log.exception("%s from broker %s failed", api_key.name, int(body.broker_id))
            response = response_cls(int(Errors.UNKNOWN_SERVER_ERROR), "")
        if response.error_code:
            log.info(
                "%s from broker %s: %s %s",
                api_key.name,
                int(body.broker_id),
                Errors.of(response.error_code).name,
                response.error_message,
            )
        return to_kio(response)

    return handle
