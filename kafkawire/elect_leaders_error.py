"""ElectLeaders refused as a whole, in the shape of the version asked: shared by the controller
(NOT_CONTROLLER on a standby, INVALID_REQUEST) and by brokers that forward it (no controller
reached), so neither node runtime imports the other for it (issue 18)."""

from __future__ import annotations

from typing import Any

from kafkawire.api_keys import ApiKey
from kafkawire.entities import NO_THROTTLE, build, has_field, item_type
from kafkawire.errors import Errors
from kafkawire.messages import error_code, error_message, response_schema


def elect_leaders_error(body: Any, version: int, error: Errors, message: str) -> Any:
    """ElectLeaders refused as a whole (NOT_CONTROLLER on a standby, INVALID_REQUEST, no
    controller reached): Kafka's top-level error code from v1; v0 has none, so each named
    partition carries it."""
    schema = response_schema(int(ApiKey.ELECT_LEADERS), version)
    if has_field(schema, "error_code"):
        return build(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=error_code(error),
            replica_election_results=(),
        )
    topic_cls = item_type(schema, "replica_election_results")
    partition_cls = item_type(topic_cls, "partition_result")
    return build(
        schema,
        throttle_time=NO_THROTTLE,
        replica_election_results=tuple(
            topic_cls(
                topic=tp.topic,
                partition_result=tuple(
                    build(
                        partition_cls,
                        partition_id=p,
                        error_code=error_code(error),
                        error_message=error_message(error, message),
                    )
                    for p in tp.partitions
                ),
            )
            for tp in body.topic_partitions or ()
        ),
    )
