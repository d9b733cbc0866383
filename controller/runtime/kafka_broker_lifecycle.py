"""The controller's side of the broker lifecycle (BrokerRegistration v4, BrokerHeartbeat v1,
AlterPartition v3) on its listener: the kio request goes to QuorumController as it is (its one
shape, kafkawire/broker_lifecycle.py) and the kio response it decides comes back.

Kafka's responses carry no error message: the controller logs why, the broker logs the name.
"""

from __future__ import annotations

import logging
from typing import Any

from controller.runtime.quorum_controller import QuorumController
from kafkawire.api_keys import ApiKey
from kafkawire.broker_lifecycle import error_response
from kafkawire.connection import KafkaRequestContext
from kafkawire.errors import Errors, KafkaError
from kafkawire.router import Handler, KafkaRouter

log = logging.getLogger("minikraft.controller")

LIFECYCLE_API_KEYS = (ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION)


def route_broker_lifecycle(router: KafkaRouter, controller: QuorumController) -> None:
    """Route the three APIs on the controller listener. A KafkaError (NOT_CONTROLLER on a
    standby, REQUEST_TIMED_OUT when the quorum cannot commit) becomes the top-level error code:
    a node-to-node handler never raises out of the router, which would close the connection."""
    for api_key in LIFECYCLE_API_KEYS:
        router.route(api_key, _handler(controller, api_key))


def _handler(controller: QuorumController, api_key: ApiKey) -> Handler:
    async def handle(body: Any, _version: int, ctx: KafkaRequestContext) -> Any:
        try:
            return await controller.handle(api_key, body, ctx.source_node_id)
        except KafkaError as exc:
            log.info(
                "%s from broker %s: %s %s",
                api_key.name,
                int(body.broker_id),
                exc.error.name,
                exc.message,
            )
            return error_response(api_key, exc.error)
        except Exception:  # a bug must not close the broker's connection
            log.exception("%s from broker %s failed", api_key.name, int(body.broker_id))
            return error_response(api_key, Errors.UNKNOWN_SERVER_ERROR)

    return handle
