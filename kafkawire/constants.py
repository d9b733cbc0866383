"""Apache Kafka's protocol constants that more than one package names: ids a message field
carries (ConfigResource.Type, AlterConfigOp.OpType, ElectionType), Kafka's "none" values, and
the request caps of seed 001. Declared once here, below every package (ARCHITECTURE.md)."""

from __future__ import annotations

import uuid

ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: "no topic id"
NO_BROKER_EPOCH = -1  # KIP-903: a sender that cannot report a member's epoch skips the check

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
