"""API keys: Kafka's numbers for Kafka's APIs, and minikraft's own extensions in a block of
their own (ARCHITECTURE.md "Wire protocol": an extension never takes a key Kafka uses).

Apache Kafka 4.4 uses keys 0-94 (93 StreamsGroupTopologyDescriptionUpdate, KIP-1331; 94
UnregisterController) and adds a few a year, so extensions start at EXTENSION_BLOCK_START =
10000: a hundred times Kafka's range away (the same 10000 minikraft's tagged fields start at,
elect_leaders_v3.LEADER_ID_TAG), still an int16. Kafka's own trunk once gave GetReplicaLogInfo
key 93 and reverted it in 2025: a request for 93 or 94 is now refused as any API minikraft does
not serve (the connection closes, kafkawire.connection), as Kafka's SocketServer does."""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    FETCH_SNAPSHOT = 59
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    ALLOCATE_PRODUCER_IDS = 67
    DESCRIBE_TOPIC_PARTITIONS = 75
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    # -- minikraft's extensions (EXTENSION_BLOCK_START and up; never a key Kafka uses) --
    GET_REPLICA_LOG_INFO = 10_000  # seed 004's message, upstream's schema; extension keys start at 10000


EXTENSION_BLOCK_START = 10_000
