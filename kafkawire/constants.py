"""Apache Kafka's protocol constants that more than one package names: ids a message field
carries (ConfigResource.Type, AlterConfigOp.OpType, ElectionType), Kafka's "none" values, and
the request caps of seed 001. Declared once here, below every package (ARCHITECTURE.md)."""

from __future__ import annotations

import uuid

# Uuid.ZERO_UUID: no topic id, no directory id (an old replica or voter that sent none).
ZERO_UUID = uuid.UUID(int=0)
# Uuid.METADATA_TOPIC_ID: the metadata partition's topic id where a message names topics by id.
METADATA_TOPIC_ID = uuid.UUID(int=1)
# KIP-903's default broker epoch (AlterPartitionRequest, BrokerRegistrationRequest's
# PreviousBrokerEpoch): a sender that cannot report one, whose epoch check is skipped.
NO_BROKER_EPOCH = -1
# RecordBatch.NO_PARTITION_LEADER_EPOCH: a request or offset that names no leader epoch.
NO_LEADER_EPOCH = -1
# RecordBatch.NO_PRODUCER_ID: a batch or producer without an idempotent producer id.
NO_PRODUCER_ID = -1

# ProduceRequest.acks (the producer's `acks`): 0 no answer, 1 the leader's append, -1 the ISR.
ACKS_NONE = 0
ACKS_ALL = -1

# ConfigResource.Type ids (ConfigRecord.resource_type, DescribeConfigs, IncrementalAlterConfigs).
CONFIG_RESOURCE_TOPIC = 2
CONFIG_RESOURCE_BROKER = 4

# IncrementalAlterConfigs: AlterConfigOp.OpType ids.
OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3

# ElectLeaders election types (Kafka's PREFERRED=0, UNCLEAN=1; seed 004 adds DESIGNATED=2).
ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1
ELECTION_DESIGNATED = 2

ELECT_LEADERS_MAX_PARTITIONS = 1000  # seed 001: the rest are answered REQUEST_LIMIT_REACHED
