"""The controller's admin messages, one shape each: kio's frozen entities of the newest version
minikraft speaks (CreatePartitions v3, ...). Clients send these APIs in several versions; the
controller's runtime lifts an older request into the newest with `lift` and lowers the core's
response into the version the client spoke with `lower` (kafkawire.entities.convert), so the
cores take and answer one shape and no per-message translator exists.

The few builders wrap kio's integer types once so the cores and tests pass plain ints.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from kio.schema.alter_configs.v2 import request as alter_configs_req
from kio.schema.create_partitions.v3 import request as create_partitions_req
from kio.schema.create_partitions.v3 import response as create_partitions_resp
from kio.schema.delete_topics.v6 import request as delete_topics_req
from kio.schema.delete_topics.v6 import response as delete_topics_resp
from kio.schema.incremental_alter_configs.v1 import request as incremental_alter_configs_req
from kio.schema.incremental_alter_configs.v1 import response as incremental_alter_configs_resp
from kio.schema.types import BrokerId, TopicName
from kio.schema.update_features.v2 import request as update_features_req
from kio.schema.update_features.v2 import response as update_features_resp
from kio.static.primitive import i8, i16, i32, i32Timedelta

from kafkawire.api_keys import ApiKey
from kafkawire.constants import OP_SET, ZERO_UUID
from kafkawire.entities import NO_THROTTLE, convert, has_field
from kafkawire.errors import Errors
from kafkawire.messages import error_code, request_schema, response_schema

NO_THROTTLE_I32 = i32Timedelta.parse(NO_THROTTLE)
# The version the controller's cores speak, per API (kafkawire/api_versions.py's newest).
NEWEST = {
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DELETE_TOPICS: 6,
    ApiKey.UPDATE_FEATURES: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.ALTER_CONFIGS: 2,  # answered with IncrementalAlterConfigs' response, the same shape
}
# FeatureUpdateKey.UpgradeType (Kafka's FeatureUpdate.UpgradeType ids).
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3

CreatePartitionsRequest = create_partitions_req.CreatePartitionsRequest
CreatePartitionsTopic = create_partitions_req.CreatePartitionsTopic
CreatePartitionsAssignment = create_partitions_req.CreatePartitionsAssignment
CreatePartitionsResponse = create_partitions_resp.CreatePartitionsResponse
CreatePartitionsTopicResult = create_partitions_resp.CreatePartitionsTopicResult
DeleteTopicsRequest = delete_topics_req.DeleteTopicsRequest
DeleteTopicState = delete_topics_req.DeleteTopicState
DeleteTopicsResponse = delete_topics_resp.DeleteTopicsResponse
DeletableTopicResult = delete_topics_resp.DeletableTopicResult
UpdateFeaturesRequest = update_features_req.UpdateFeaturesRequest
FeatureUpdate = update_features_req.FeatureUpdateKey
UpdateFeaturesResponse = update_features_resp.UpdateFeaturesResponse
IncrementalAlterConfigsRequest = incremental_alter_configs_req.IncrementalAlterConfigsRequest
AlterConfigsResource = incremental_alter_configs_req.AlterConfigsResource
AlterableConfig = incremental_alter_configs_req.AlterableConfig
IncrementalAlterConfigsResponse = incremental_alter_configs_resp.IncrementalAlterConfigsResponse
AlterConfigsResourceResponse = incremental_alter_configs_resp.AlterConfigsResourceResponse
# AlterConfigs (33), the legacy API: each resource's configs replaced by these (no operation).
AlterConfigsRequest = alter_configs_req.AlterConfigsRequest
LegacyAlterConfigsResource = alter_configs_req.AlterConfigsResource
LegacyAlterableConfig = alter_configs_req.AlterableConfig


def lift(api_key: ApiKey, body: Any, **values: Any) -> Any:
    """A request of any version as the newest version's entity (`values`: renamed fields)."""
    if api_key == ApiKey.DELETE_TOPICS and has_field(type(body), "topic_names"):
        # v0-v5 name the topics; v6 (KIP-516) gives each a name or a topic id.
        values.setdefault("topics", tuple(delete_topic(n) for n in body.topic_names))
    if api_key == ApiKey.UPDATE_FEATURES and not has_field(type(body), "validate_only"):
        # v0 has AllowDowngrade where v1+ have UpgradeType.
        values.setdefault("feature_updates", tuple(
            feature_update(u.feature, u.max_version_level,
                           SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE)
            for u in body.feature_updates
        ))
    return convert(body, request_schema(int(api_key), NEWEST[api_key]), **values)


def lower(api_key: ApiKey, response: Any, version: int) -> Any:
    """The newest version's response as the entity of `version`."""
    return convert(response, response_schema(int(api_key), version))


# -- CreatePartitions (37) ---------------------------------------------------------------------


def create_partitions_topic(
    name: str, count: int, assignments: Sequence[Sequence[int]] | None = None
) -> CreatePartitionsTopic:
    """`assignments`: the replicas of each NEW partition (None: placed by the controller)."""
    return CreatePartitionsTopic(
        name=TopicName(name),
        count=i32(count),
        assignments=None
        if assignments is None
        else tuple(
            CreatePartitionsAssignment(broker_ids=tuple(BrokerId(b) for b in a))
            for a in assignments
        ),
    )


def create_partitions_request(
    topics: Iterable[CreatePartitionsTopic], validate_only: bool = False, timeout_ms: int = 30000
) -> CreatePartitionsRequest:
    return CreatePartitionsRequest(
        topics=tuple(topics),
        timeout=_timeout(timeout_ms),
        validate_only=validate_only,
    )


def create_partitions_result(
    name: str, error: Errors = Errors.NONE, message: str = ""
) -> CreatePartitionsTopicResult:
    return CreatePartitionsTopicResult(
        name=TopicName(name), error_code=error_code(error), error_message=message or None
    )


def create_partitions_response(
    results: Iterable[CreatePartitionsTopicResult],
) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(throttle_time=NO_THROTTLE_I32, results=tuple(results))


def _timeout(timeout_ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms))


# -- DeleteTopics (20) -------------------------------------------------------------------------


def delete_topic(name: str | None = None, topic_id: uuid.UUID = ZERO_UUID) -> DeleteTopicState:
    return DeleteTopicState(name=None if name is None else TopicName(name), topic_id=topic_id)


def delete_topics_request(names: Iterable[str], timeout_ms: int = 30000) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(
        topics=tuple(delete_topic(n) for n in names), timeout=_timeout(timeout_ms)
    )


def deletable_topic_result(
    name: str, topic_id: uuid.UUID = ZERO_UUID, error: Errors = Errors.NONE, message: str = ""
) -> DeletableTopicResult:
    return DeletableTopicResult(
        name=TopicName(name),
        topic_id=topic_id,
        error_code=error_code(error),
        error_message=message or None,
    )


def delete_topics_response(results: Iterable[DeletableTopicResult]) -> DeleteTopicsResponse:
    return DeleteTopicsResponse(throttle_time=NO_THROTTLE_I32, responses=tuple(results))


# -- UpdateFeatures (57) -----------------------------------------------------------------------


def feature_update(feature: str, max_version_level: int, upgrade_type: int = UPGRADE) -> FeatureUpdate:
    return FeatureUpdate(
        feature=feature, max_version_level=i16(max_version_level), upgrade_type=i8(upgrade_type)
    )


def update_features_request(
    updates: Iterable[FeatureUpdate], validate_only: bool = False, timeout_ms: int = 60000
) -> UpdateFeaturesRequest:
    return UpdateFeaturesRequest(
        timeout=_timeout(timeout_ms), feature_updates=tuple(updates), validate_only=validate_only
    )


def update_features_response(
    error: Errors = Errors.NONE, message: str | None = None
) -> UpdateFeaturesResponse:
    """One error for the whole request (Kafka's ControllerResult<ApiError>)."""
    return UpdateFeaturesResponse(
        throttle_time=NO_THROTTLE_I32, error_code=error_code(error), error_message=message
    )


# -- IncrementalAlterConfigs (44) and AlterConfigs (33) ----------------------------------------


def alterable_config(
    name: str, config_operation: int = OP_SET, value: str | None = None
) -> AlterableConfig:
    return AlterableConfig(name=name, config_operation=i8(config_operation), value=value)


def config_resource(
    resource_type: int, resource_name: str, configs: Iterable[AlterableConfig] = ()
) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=i8(resource_type), resource_name=resource_name, configs=tuple(configs)
    )


def incremental_alter_configs_request(
    resources: Iterable[AlterConfigsResource], validate_only: bool = False
) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=tuple(resources), validate_only=validate_only)


def alter_configs_request(
    resources: Iterable[tuple[int, str, dict[str, str | None]]], validate_only: bool = False
) -> AlterConfigsRequest:
    """`resources`: (resource type, name, every config it should have)."""
    return AlterConfigsRequest(
        resources=tuple(
            LegacyAlterConfigsResource(
                resource_type=i8(resource_type),
                resource_name=name,
                configs=tuple(LegacyAlterableConfig(name=k, value=v) for k, v in configs.items()),
            )
            for resource_type, name, configs in resources
        ),
        validate_only=validate_only,
    )


def config_resource_result(
    resource_type: int, resource_name: str, error: Errors | int = Errors.NONE, message: str = ""
) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(
        error_code=error_code(error),
        error_message=message or None,
        resource_type=i8(resource_type),
        resource_name=resource_name,
    )


def incremental_alter_configs_response(
    results: Iterable[AlterConfigsResourceResponse],
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(throttle_time=NO_THROTTLE_I32, responses=tuple(results))
