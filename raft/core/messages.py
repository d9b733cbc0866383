"""The raft core's request and response values (KIP-595 with KIP-853's voter keys, seed 003):
what RaftReplica takes and returns. On the wire they are Kafka's messages (kio), translated in
raft/runtime/kafka_raft_apis.py; these are not a wire schema.

Requests name the cluster id; a replica answers INCONSISTENT_CLUSTER_ID to another cluster, an
empty id included: only None (Kafka's null) skips the check (KafkaRaftClient.hasValidClusterId).
Errors that name a leader carry its id, epoch and, where known, endpoint.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

# Kafka's Uuid.ZERO_UUID: "no directory id" (an old replica or an unknown key).
NO_DIRECTORY_ID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class VoteRequest:
    candidate_epoch: int
    candidate_id: int
    candidate_directory_id: uuid.UUID
    voter_id: int
    voter_directory_id: uuid.UUID  # the key the candidate believes the receiver has (rule 4)
    last_offset_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool = False  # rule 7: a pre-vote neither bumps nor persists any epoch
    cluster_id: str | None = None  # None: not checked


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int = 0
    error_message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    vote_granted: bool = False


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    leader_endpoint: str
    voter_id: int
    voter_directory_id: uuid.UUID
    cluster_id: str | None = None  # None: not checked


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int = 0
    error_message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    preferred_successors: list[int] = field(default_factory=list)
    cluster_id: str | None = None  # None: not checked
    voter_id: int = -1  # rule 4: the receiver's key as the leader knows it (-1: not checked)
    voter_directory_id: uuid.UUID = NO_DIRECTORY_ID


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int = 0
    error_message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A replica's pull from the metadata partition's leader (rule 3)."""

    replica_id: int
    replica_directory_id: uuid.UUID
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    max_wait_ms: int = 500
    max_bytes: int = 1024 * 1024
    cluster_id: str | None = None  # None: not checked
    replica_endpoint: str = ""  # where the replica listens: `add-voter` promotes it (seed 003)


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int = 0
    error_message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    leader_endpoint: str = ""
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    snapshot_end_offset: int = -1
    snapshot_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    replica_id: int
    current_leader_epoch: int
    snapshot_end_offset: int
    snapshot_epoch: int
    position: int
    max_bytes: int = 1024 * 1024
    replica_directory_id: uuid.UUID = NO_DIRECTORY_ID
    cluster_id: str | None = None  # None: not checked


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int = 0
    error_message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    leader_endpoint: str = ""
    snapshot_end_offset: int = -1
    snapshot_epoch: int = -1
    size: int = -1
    position: int = -1
    unaligned_records: bytes = b""


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    pass  # Kafka's DescribeQuorum names no cluster id


@dataclass(frozen=True, slots=True)
class ReplicaState:
    replica_id: int
    replica_directory_id: uuid.UUID
    log_end_offset: int  # -1 if unknown
    last_fetch_timestamp_ms: int = -1
    last_caught_up_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    voter_id: int
    voter_directory_id: uuid.UUID
    endpoints: dict[str, str] = field(default_factory=dict)  # listener name -> "host:port"


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    error_code: int = 0
    error_message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    high_watermark: int = -1
    current_voters: list[ReplicaState] = field(default_factory=list)
    observers: list[ReplicaState] = field(default_factory=list)
    voter_endpoints: list[VoterEndpoint] = field(default_factory=list)
    observer_endpoints: list[VoterEndpoint] = field(default_factory=list)
    cluster_id: str = ""  # minikraft's addition, for `describe --status` (CLI.md)


@dataclass(frozen=True, slots=True)
class AddRaftVoterRequest:
    """KIP-853 AddRaftVoter (rule 5). The listeners must name the quorum's listener (Kafka's
    KafkaRaftClient); seed 003's `add-voter` fills them in from DescribeQuorum."""

    voter_id: int
    voter_directory_id: uuid.UUID
    listeners: dict[str, str] = field(default_factory=dict)  # listener name -> "host:port"
    timeout_ms: int = 30_000
    cluster_id: str | None = None  # None: not checked
    # v1 (KIP-1186): False answers once the new voter set is appended, True once it commits.
    ack_when_committed: bool = True


@dataclass(frozen=True, slots=True)
class AddRaftVoterResponse:
    error_code: int = 0
    error_message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    leader_endpoint: str = ""


@dataclass(frozen=True, slots=True)
class RemoveRaftVoterRequest:
    """KIP-853 RemoveRaftVoter: the exact key (rule 5)."""

    voter_id: int
    voter_directory_id: uuid.UUID
    timeout_ms: int = 30_000
    cluster_id: str | None = None  # None: not checked


@dataclass(frozen=True, slots=True)
class RemoveRaftVoterResponse:
    error_code: int = 0
    error_message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    leader_endpoint: str = ""


@dataclass(frozen=True, slots=True)
class UpdateRaftVoterRequest:
    """KIP-853 UpdateRaftVoter: a voter tells the leader its listeners and the kraft.version
    range it supports; the leader rewrites its entry in the voter set (rule 5). Kafka's only:
    """

    current_leader_epoch: int
    voter_id: int
    voter_directory_id: uuid.UUID
    listeners: dict[str, str] = field(default_factory=dict)  # listener name -> "host:port"
    min_kraft_version: int = 0
    max_kraft_version: int = 1
    cluster_id: str | None = None  # None: not checked


@dataclass(frozen=True, slots=True)
class UpdateRaftVoterResponse:
    error_code: int = 0
    error_message: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    leader_endpoint: str = ""
