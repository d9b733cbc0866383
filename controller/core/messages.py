"""The controller core's values for the admin writes: topics, configs and elections. On the
wire they are Kafka's messages (kio) in every version a client may send, translated in
controller/runtime/kafka_admin_apis.py; these are not a wire schema. (The broker lifecycle
messages have one shape, kio's: kafkawire/broker_lifecycle.py.)

Shapes follow Kafka's messages (ElectLeaders with designated leaders from seed 004).
minikraft's additions are marked.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkawire.constants import ZERO_UUID

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
