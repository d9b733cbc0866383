"""The ApiVersions tables: per listener, exactly the api keys and version ranges minikraft
implements and tests (ARCHITECTURE.md "Wire protocol"). Client-facing ranges are the ones Apache
Kafka 4.0 brokers accept (KIP-896's baseline), so clients back to the Kafka 2.1 era work.

An ApiVersions request of a version above ours is answered with v0, UNSUPPORTED_VERSION and the
table (KIP-511), so the client can retry with a version we speak.
"""

from __future__ import annotations

import datetime
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kio.static.primitive import i16, i32Timedelta, i64

from kafkawire.api_keys import ApiKey
from kafkawire.entities import has_field
from kafkawire.errors import Errors
from kafkawire.messages import error_code, response_schema


@dataclass(frozen=True, slots=True)
class VersionRange:
    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version

    def versions(self) -> range:
        return range(self.min_version, self.max_version + 1)


# Brokers: the data and admin APIs clients use (admin ones are forwarded to the controller).
BROKER_API_VERSIONS: Mapping[ApiKey, VersionRange] = MappingProxyType(
    {
        ApiKey.PRODUCE: VersionRange(3, 12),
        ApiKey.FETCH: VersionRange(4, 17),
        ApiKey.LIST_OFFSETS: VersionRange(1, 10),
        ApiKey.METADATA: VersionRange(0, 13),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: VersionRange(2, 4),
        ApiKey.API_VERSIONS: VersionRange(0, 4),
        ApiKey.CREATE_TOPICS: VersionRange(2, 7),
        ApiKey.DELETE_TOPICS: VersionRange(1, 6),
        ApiKey.DESCRIBE_CONFIGS: VersionRange(1, 4),
        ApiKey.ALTER_CONFIGS: VersionRange(0, 2),
        ApiKey.ELECT_LEADERS: VersionRange(0, 3),  # v3: DesignatedLeaders (seed 004)
        ApiKey.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
        ApiKey.DESCRIBE_CLUSTER: VersionRange(0, 2),
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: VersionRange(0, 0),
        ApiKey.GET_REPLICA_LOG_INFO: VersionRange(0, 0),
        # The group coordinator (classic protocol), Kafka 4.0's ranges.
        ApiKey.FIND_COORDINATOR: VersionRange(0, 6),
        ApiKey.JOIN_GROUP: VersionRange(2, 9),
        ApiKey.SYNC_GROUP: VersionRange(0, 5),
        ApiKey.HEARTBEAT: VersionRange(0, 4),
        ApiKey.LEAVE_GROUP: VersionRange(0, 5),
        ApiKey.OFFSET_COMMIT: VersionRange(2, 9),
        ApiKey.OFFSET_FETCH: VersionRange(1, 9),
        ApiKey.LIST_GROUPS: VersionRange(0, 5),
        ApiKey.DESCRIBE_GROUPS: VersionRange(0, 6),
        ApiKey.DELETE_GROUPS: VersionRange(0, 2),
        ApiKey.OFFSET_DELETE: VersionRange(0, 0),
        ApiKey.DELETE_RECORDS: VersionRange(0, 2),
        ApiKey.DESCRIBE_LOG_DIRS: VersionRange(1, 4),  # kafka-log-dirs
        ApiKey.CREATE_PARTITIONS: VersionRange(0, 3),
        # Forwarded to the controllers unchanged (the Raft leader answers).
        ApiKey.DESCRIBE_QUORUM: VersionRange(2, 2),
        ApiKey.ADD_RAFT_VOTER: VersionRange(0, 1),
        ApiKey.REMOVE_RAFT_VOTER: VersionRange(0, 0),
        ApiKey.UPDATE_FEATURES: VersionRange(0, 2),  # kafka-features upgrade|downgrade
        # The idempotent producer; no transactional APIs (transactions are out of scope).
        ApiKey.INIT_PRODUCER_ID: VersionRange(0, 5),
    }
)

# Controllers: each family adds the APIs it serves on the controller listener.
CONTROLLER_API_VERSIONS: Mapping[ApiKey, VersionRange] = MappingProxyType(
    {
        ApiKey.API_VERSIONS: VersionRange(0, 4),
        # Admin APIs (KIP-919 --bootstrap-controller; what brokers forward), same ranges as brokers.
        ApiKey.CREATE_TOPICS: VersionRange(2, 7),
        ApiKey.DELETE_TOPICS: VersionRange(1, 6),
        ApiKey.CREATE_PARTITIONS: VersionRange(0, 3),
        ApiKey.DESCRIBE_CONFIGS: VersionRange(1, 4),
        ApiKey.ALTER_CONFIGS: VersionRange(0, 2),
        ApiKey.ELECT_LEADERS: VersionRange(0, 3),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
        ApiKey.DESCRIBE_CLUSTER: VersionRange(0, 2),
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: VersionRange(0, 0),
        ApiKey.UPDATE_FEATURES: VersionRange(0, 2),
        # The metadata quorum's Raft RPCs (raft/runtime/kafka_raft_apis.py): one version node
        # to node, the newest kio has with directory ids, PreVote and endpoints.
        ApiKey.FETCH: VersionRange(17, 17),
        ApiKey.VOTE: VersionRange(2, 2),
        ApiKey.BEGIN_QUORUM_EPOCH: VersionRange(1, 1),
        ApiKey.END_QUORUM_EPOCH: VersionRange(1, 1),
        ApiKey.DESCRIBE_QUORUM: VersionRange(2, 2),
        ApiKey.FETCH_SNAPSHOT: VersionRange(1, 1),
        ApiKey.ADD_RAFT_VOTER: VersionRange(0, 1),
        ApiKey.REMOVE_RAFT_VOTER: VersionRange(0, 0),
        ApiKey.UPDATE_RAFT_VOTER: VersionRange(0, 0),
        ApiKey.ALLOCATE_PRODUCER_IDS: VersionRange(0, 0),
        # Broker lifecycle (kafkawire/broker_lifecycle.py): one version each.
        ApiKey.ALTER_PARTITION: VersionRange(3, 3),
        ApiKey.BROKER_REGISTRATION: VersionRange(4, 4),
        ApiKey.BROKER_HEARTBEAT: VersionRange(1, 1),
    }
)


@dataclass(frozen=True, slots=True)
class ApiFeatures:
    """ApiVersions' feature fields (KIP-584, tagged, v3+): the levels this node's software
    supports, the cluster's finalized levels, and their epoch (the metadata offset they are
    read at; -1 unknown)."""

    supported: Mapping[str, tuple[int, int]]
    finalized: Mapping[str, int]
    epoch: int


def api_versions_response(
    table: Mapping[ApiKey, VersionRange],
    version: int,
    error: Errors = Errors.NONE,
    features: ApiFeatures | None = None,
) -> Any:
    """ApiVersionsResponse of `version` listing `table` (v0 with UNSUPPORTED_VERSION above ours),
    with `features` where the version has them."""
    schema = response_schema(int(ApiKey.API_VERSIONS), version)
    api_version_cls = importlib.import_module(schema.__module__).ApiVersion
    entries = tuple(
        api_version_cls(
            api_key=i16(int(key)), min_version=i16(r.min_version), max_version=i16(r.max_version)
        )
        for key, r in sorted(table.items())
    )
    fields: dict[str, Any] = {"error_code": error_code(error), "api_keys": entries}
    if has_field(schema, "throttle_time"):
        fields["throttle_time"] = i32Timedelta.parse(datetime.timedelta(0))
    if features is not None and has_field(schema, "supported_features"):
        fields.update(_feature_fields(schema, version, features))
    return schema(**fields)


def _feature_fields(schema: type, version: int, features: ApiFeatures) -> dict[str, Any]:
    module = importlib.import_module(schema.__module__)
    return {
        # Kafka: "in v0-v3, features with MinSupportedVersion = 0 are omitted" (old clients
        # refuse a 0 minimum).
        "supported_features": tuple(
            module.SupportedFeatureKey(name=name, min_version=i16(low), max_version=i16(high))
            for name, (low, high) in sorted(features.supported.items())
            if version >= 4 or low > 0
        ),
        "finalized_features_epoch": i64(features.epoch),
        "finalized_features": tuple(
            module.FinalizedFeatureKey(
                name=name, max_version_level=i16(level), min_version_level=i16(level)
            )
            for name, level in sorted(features.finalized.items())
        ),
    }
