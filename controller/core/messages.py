"""The controller core's request and response values: broker lifecycle, topics, configs,
partitions and elections. On the wire they are Kafka's messages (kio), translated in
metadata/broker_lifecycle_wire.py and controller/runtime/kafka_admin_apis.py; these are not a wire
schema.

Shapes follow Kafka's messages (BrokerRegistration with PreviousBrokerEpoch and DescribeTopic-
Partitions from seed 001 KIP-966, AlterPartition with NewIsrWithEpochs from seed 002 KIP-903,
ElectLeaders with designated leaders from seed 004). minikraft's additions are marked.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkawire.constants import NO_BROKER_EPOCH, OP_SET, ZERO_UUID

# -- BrokerRegistration (62) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerListener:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    listeners: list[BrokerListener] = field(default_factory=list)
    rack: str | None = None
    log_dirs: list[uuid.UUID] = field(default_factory=list)
    previous_broker_epoch: int = NO_BROKER_EPOCH  # seed 001: from the clean-shutdown file


@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponse:
    error_code: int = 0
    error_message: str = ""
    broker_epoch: int = NO_BROKER_EPOCH


# -- BrokerHeartbeat (63) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shut_down: bool = False


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    error_code: int = 0
    error_message: str = ""
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


# -- CreateTopics (19) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)
    # Kafka's manual replica assignment: replicas of partition i at index i (empty: placed).
    assignments: list[list[int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    topics: list[CreatableTopic]
    validate_only: bool = False
    timeout_ms: int = 30000


@dataclass(frozen=True, slots=True)
class CreatableTopicResult:
    name: str
    topic_id: uuid.UUID = ZERO_UUID
    error_code: int = 0
    error_message: str = ""
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    error_code: int = 0
    error_message: str = ""
    topics: list[CreatableTopicResult] = field(default_factory=list)


# -- DeleteTopics (20) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    topic_names: list[str]
    timeout_ms: int = 30000


@dataclass(frozen=True, slots=True)
class DeletableTopicResult:
    name: str
    topic_id: uuid.UUID = ZERO_UUID
    error_code: int = 0
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponse:
    error_code: int = 0
    error_message: str = ""
    responses: list[DeletableTopicResult] = field(default_factory=list)


# -- IncrementalAlterConfigs (44) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AlterableConfig:
    name: str
    config_operation: int = OP_SET
    value: str | None = None


@dataclass(frozen=True, slots=True)
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: list[AlterableConfig] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsRequest:
    resources: list[AlterConfigsResource]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class AlterConfigsRequest:
    """AlterConfigs (33): every resource's configs replaced by these (OP_SET each); answered
    with an IncrementalAlterConfigsResponse, the same shape."""

    resources: list[AlterConfigsResource]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class AlterConfigsResourceResponse:
    resource_type: int
    resource_name: str
    error_code: int = 0
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsResponse:
    error_code: int = 0
    error_message: str = ""
    responses: list[AlterConfigsResourceResponse] = field(default_factory=list)


# -- AlterPartition (56; seed 002 KIP-903, seed 000 KIP-704) ---------------------------------


@dataclass(frozen=True, slots=True)
class BrokerState:
    broker_id: int
    broker_epoch: int = NO_BROKER_EPOCH  # -1: an old sender, the epoch check is skipped


@dataclass(frozen=True, slots=True)
class AlterPartitionPartitionData:
    partition_index: int
    leader_epoch: int
    new_isr_with_epochs: list[BrokerState]
    leader_recovery_state: int = 0
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionTopicData:
    topic_id: uuid.UUID
    partitions: list[AlterPartitionPartitionData]


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    topics: list[AlterPartitionTopicData]


@dataclass(frozen=True, slots=True)
class AlterPartitionPartitionResult:
    partition_index: int
    error_code: int = 0
    leader_id: int = -1
    leader_epoch: int = -1
    isr: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AlterPartitionTopicResult:
    topic_id: uuid.UUID
    partitions: list[AlterPartitionPartitionResult] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    error_code: int = 0
    error_message: str = ""
    topics: list[AlterPartitionTopicResult] = field(default_factory=list)


# -- ElectLeaders (43; seed 001, seed 004) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class ElectLeadersTopicPartitions:
    topic: str
    partitions: list[int]
    designated_leaders: list[int] | None = None  # by index with partitions (DESIGNATED only)


@dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    election_type: int
    topic_partitions: list[ElectLeadersTopicPartitions] | None = None  # None: every partition
    timeout_ms: int = 60000


@dataclass(frozen=True, slots=True)
class ElectLeadersPartitionResult:
    partition_id: int
    error_code: int = 0
    error_message: str = ""
    leader_id: int = -1  # minikraft's: the leader after the election


@dataclass(frozen=True, slots=True)
class ElectLeadersTopicResult:
    topic: str
    partition_result: list[ElectLeadersPartitionResult] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ElectLeadersResponse:
    error_code: int = 0
    error_message: str = ""
    replica_election_results: list[ElectLeadersTopicResult] = field(default_factory=list)
