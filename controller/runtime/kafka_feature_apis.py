"""Finalized features on the controller's Kafka listener: UpdateFeatures (api key 57, what
`kafka-features upgrade|downgrade|disable` sends; brokers forward it here unchanged) and the
features ApiVersions lists (`kafka-features describe`). controller/core/feature_control decides.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from controller.core import feature_control
from kafkawire import admin_messages as am
from kafkawire.api_keys import ApiKey
from kafkawire.connection import KafkaRequestContext
from kafkawire.entities import NO_THROTTLE, build, has_field, item_type
from kafkawire.errors import Errors, KafkaError
from kafkawire.messages import error_code, response_schema

if TYPE_CHECKING:
    from controller.runtime.quorum_controller import QuorumController
    from kafkawire.router import KafkaRouter

log = logging.getLogger("minikraft.controller")


def update_features_response(
    body: Any, version: int, error: Errors | int, message: str | None
) -> Any:
    """UpdateFeaturesResponse: one top-level error; v0-v1 also list it for every feature asked
    (Kafka's UpdateFeaturesResponse.createWithErrors)."""
    schema = response_schema(int(ApiKey.UPDATE_FEATURES), version)
    fields: dict[str, Any] = {}
    if has_field(schema, "results"):
        result_cls = item_type(schema, "results")
        fields["results"] = tuple(
            build(result_cls, feature=u.feature, error_code=error_code(error),
                  error_message=message)
            for u in body.feature_updates
        )
    return build(schema, throttle_time=NO_THROTTLE, error_code=error_code(error),
                 error_message=message, **fields)


def route_feature_apis(router: KafkaRouter, controller: QuorumController) -> None:
    async def update_features(body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        request = am.lift(ApiKey.UPDATE_FEATURES, body)
        try:
            response = await controller.write(
                lambda image: feature_control.update_features(
                    image, request, controller.config.node_id, controller.static_min_isr),
                "UpdateFeatures",
            )
        except KafkaError as exc:  # NOT_CONTROLLER and timeouts go in the answer
            return update_features_response(body, version, exc.error, exc.message)
        if response.error_code == ErrorCode.none and not request.validate_only:
            log.info("Finalized features updated: %s", ", ".join(
                f"{u.feature}={u.max_version_level}" for u in request.feature_updates))
        return update_features_response(
            body, version, response.error_code, response.error_message)

    router.route(ApiKey.UPDATE_FEATURES, update_features)
