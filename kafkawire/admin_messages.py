"""The controller's admin messages, one shape each: kio's frozen entities of the newest version
minikraft speaks (CreateTopics v7, CreatePartitions v3, ..., and ElectLeaders v3, which kio lacks:
kafkawire/elect_leaders_v3.py declares it in kio's style). Clients send these APIs in several versions; the
controller's runtime lifts an older request into the newest with `lift` and lowers the core's
response into the version the client spoke with `lower` (kafkawire.entities.convert), so the
cores take and answer one shape and no per-message translator exists.

The few builders wrap kio's integer types once so the cores and tests pass plain ints.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kio.schema.alter_configs.v2 import request as alter_configs_req
from kio.schema.create_partitions.v3 import request as create_partitions_req
from kio.schema.create_partitions.v3 import response as create_partitions_resp
from kio.schema.create_topics.v7 import request as create_topics_req
from kio.schema.create_topics.v7 import response as create_topics_resp
from kio.schema.delete_topics.v6 import request as delete_topics_req
from kio.schema.delete_topics.v6 import response as delete_topics_resp
from kio.schema.incremental_alter_configs.v1 import request as incremental_alter_configs_req
from kio.schema.incremental_alter_configs.v1 import response as incremental_alter_configs_resp
from kio.schema.types import BrokerId, TopicName
from kio.schema.update_features.v2 import request as update_features_req
from kio.schema.update_features.v2 import response as update_features_resp
from kio.static.primitive import i8, i16, i32, i32Timedelta

from kafkawire import constants
from kafkawire import elect_leaders_v3 as el3
from kafkawire.api_keys import ApiKey
from kafkawire.constants import OP_SET, ZERO_UUID
from kafkawire.entities import NO_THROTTLE, convert, has_field
from kafkawire.errors import Errors
from kafkawire.messages import error_code, error_message, request_schema, response_schema

NO_THROTTLE_I32 = i32Timedelta.parse(NO_THROTTLE)
# The version the controller's cores speak, per API (kafkawire/api_versions.py's newest).
NEWEST = {
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.ELECT_LEADERS: 3,  # minikraft's v3 (seed 004's DesignatedLeaders); kio has v0-v2
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

CreateTopicsRequest = create_topics_req.CreateTopicsRequest
CreatableTopic = create_topics_req.CreatableTopic
CreateTopicsResponse = create_topics_resp.CreateTopicsResponse
CreatableTopicResult = create_topics_resp.CreatableTopicResult
CreatableTopicConfigs = create_topics_resp.CreatableTopicConfigs
ElectLeadersRequest = el3.ElectLeadersRequest
ElectLeadersTopicPartitions = el3.TopicPartitions
ElectLeadersResponse = el3.ElectLeadersResponse
ElectLeadersTopicResult = el3.ReplicaElectionResult
ElectLeadersPartitionResult = el3.PartitionResult
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
    if api_key == ApiKey.ELECT_LEADERS and not has_field(type(body), "election_type"):
        values.setdefault("election_type", i8(constants.ELECTION_PREFERRED))  # v0: PREFERRED only
    return convert(body, request_schema(int(api_key), NEWEST[api_key]), **values)


def lower(api_key: ApiKey, response: Any, version: int) -> Any:
    """The newest version's response as the entity of `version`."""
    return convert(response, response_schema(int(api_key), version))


# -- CreateTopics (19) ------------------------------------------------------------------------


def creatable_topic(
    name: str,
    num_partitions: int = -1,
    replication_factor: int = -1,
    configs: Mapping[str, str | None] | None = None,
    assignments: Sequence[Sequence[int]] = (),
) -> CreatableTopic:
    """-1: the controller's num.partitions / default.replication.factor; `assignments`: the
    replicas of partition i at index i (Kafka's manual assignment)."""
    return CreatableTopic(
        name=TopicName(name),
        num_partitions=i32(num_partitions),
        replication_factor=i16(replication_factor),
        assignments=tuple(
            create_topics_req.CreatableReplicaAssignment(
                partition_index=i32(index), broker_ids=tuple(BrokerId(b) for b in replicas)
            )
            for index, replicas in enumerate(assignments)
        ),
        configs=tuple(
            create_topics_req.CreatableTopicConfig(name=k, value=v)
            for k, v in sorted((configs or {}).items())
        ),
    )


def create_topics_request(
    topics: Iterable[CreatableTopic], validate_only: bool = False, timeout_ms: int = 30000
) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=tuple(topics), timeout=_timeout(timeout_ms), validate_only=validate_only
    )


def creatable_topic_result(
    name: str,
    error: Errors = Errors.NONE,
    message: str = "",
    topic_id: uuid.UUID = ZERO_UUID,
    num_partitions: int = -1,
    replication_factor: int = -1,
    configs: tuple[CreatableTopicConfigs, ...] | None = None,
) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=TopicName(name),
        topic_id=topic_id,
        error_code=error_code(error),
        error_message=error_message(error, message),
        num_partitions=i32(num_partitions),
        replication_factor=i16(replication_factor),
        configs=configs,
    )


def create_topics_response(results: Iterable[CreatableTopicResult]) -> CreateTopicsResponse:
    return CreateTopicsResponse(throttle_time=NO_THROTTLE_I32, topics=tuple(results))


# -- ElectLeaders (43; seed 001, seed 004) -----------------------------------------------------


def election_topic(
    topic: str, partitions: Iterable[int], designated_leaders: Iterable[int] | None = None
) -> ElectLeadersTopicPartitions:
    """`designated_leaders`: by index with `partitions` (DESIGNATED elections only)."""
    return ElectLeadersTopicPartitions(
        topic=topic,
        partitions=tuple(i32(p) for p in partitions),
        designated_leaders=None
        if designated_leaders is None
        else tuple(i32(b) for b in designated_leaders),
    )


def elect_leaders_request(
    election_type: int,
    topic_partitions: Iterable[ElectLeadersTopicPartitions] | None = None,
    timeout_ms: int = 60000,
) -> ElectLeadersRequest:
    """`topic_partitions` None: every partition."""
    return ElectLeadersRequest(
        election_type=i8(election_type),
        topic_partitions=None if topic_partitions is None else tuple(topic_partitions),
        timeout=_timeout(timeout_ms),
    )


def election_result(
    partition_id: int, error: Errors = Errors.NONE, message: str = "", leader_id: int = -1
) -> ElectLeadersPartitionResult:
    """One partition's election; an error kio lacks (REQUEST_LIMIT_REACHED) travels as
    UNKNOWN_SERVER_ERROR with its name in the message (kafkawire.messages.wire_error reads it)."""
    return ElectLeadersPartitionResult(
        partition_id=i32(partition_id),
        error_code=error_code(error),
        error_message=error_message(error, message),
        leader_id=i32(leader_id),
    )


def elect_leaders_response(
    results: Iterable[ElectLeadersTopicResult] = (), error: Errors = Errors.NONE
) -> ElectLeadersResponse:
    """`error`: the request refused as a whole (no partition results)."""
    return ElectLeadersResponse(
        throttle_time=NO_THROTTLE_I32,
        error_code=error_code(error),
        replica_election_results=tuple(results),
    )


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
