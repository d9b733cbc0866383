"""The authorized-operations bit fields Kafka answers when a client asks for them (KIP-430:
Metadata, DescribeCluster, DescribeTopicPartitions, DescribeGroups).

minikraft has no authorizer, and Kafka without an authorizer allows every operation a resource
type supports (AuthHelper.authorizedOperations with `authorizer = None`): the set of
AclEntry.supportedOperations(type), each AclOperation code as one bit (Utils.to32BitField).
"""

from __future__ import annotations

import enum

# The schemas' default: "not asked for" (Int.MinValue).
NOT_REQUESTED = -(2**31)


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes (org.apache.kafka.common.acl.AclOperation)."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


def _bits(*operations: AclOperation) -> int:
    return sum(1 << op for op in set(operations))


_O = AclOperation
# AclEntry.supportedOperations(TOPIC / GROUP / CLUSTER).
TOPIC_OPERATIONS = _bits(
    _O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS,
    _O.ALTER_CONFIGS,
)
GROUP_OPERATIONS = _bits(_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS)
CLUSTER_OPERATIONS = _bits(
    _O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
    _O.ALTER, _O.DESCRIBE,
)
