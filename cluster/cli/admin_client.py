"""Quorum requests from the CLI and the launcher on Kafka's protocol (KIP-853/856): find the node
that can answer (the Raft leader for DescribeQuorum, AddRaftVoter, RemoveRaftVoter) among the
bootstrap controllers, and turn its answer into CLI.md's shapes. The kio messages are translated
to the raft core's dataclasses by raft/runtime/kafka_raft_apis.py, the same code the nodes use.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.static.primitive import i8

from cluster.cli.bootstrap import new_client
from cluster.cli.bootstrap import split_bootstrap as split_bootstrap  # re-exported for callers
from kafkawire.api_keys import ApiKey
from kafkawire.client import KafkaClient
from kafkawire.errors import Errors, KafkaError
from raft.core.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    ReplicaState,
)
from raft.core.replica_key import ReplicaKey, uuid_to_str
from raft.runtime.kafka_raft_apis import request_to_kafka, response_from_kafka

ADMIN_CLIENT_ID = "minikraft-admin"
# KIP-919: DescribeCluster with EndpointType CONTROLLER names the controllers' cluster.
_CONTROLLER_ENDPOINT_TYPE = 2


@dataclass(frozen=True)
class QuorumStatus:
    response: DescribeQuorumResponse
    answered_by: str

    @property
    def leader_id(self) -> int | None:
        return None if self.response.leader_id < 0 else self.response.leader_id

    @property
    def leader_epoch(self) -> int:
        return self.response.leader_epoch

    @property
    def voters(self) -> list[ReplicaState]:
        return self.response.current_voters

    def endpoints(self) -> dict[int, dict[str, str]]:
        return {e.voter_id: dict(e.endpoints) for e in self.response.voter_endpoints}

    def endpoints_by_key(self) -> dict[ReplicaKey, dict[str, str]]:
        """Voters and observers (two keys may share an id during a disk replacement)."""
        r = self.response
        return {
            ReplicaKey(e.voter_id, e.voter_directory_id): dict(e.endpoints)
            for e in [*r.voter_endpoints, *r.observer_endpoints]
        }

    def voter_keys(self) -> list[ReplicaKey]:
        return [ReplicaKey(v.replica_id, v.replica_directory_id) for v in self.voters]

    def observer_keys(self) -> list[ReplicaKey]:
        return [ReplicaKey(o.replica_id, o.replica_directory_id) for o in self.response.observers]

    def status_json(self, cluster_id: str | None) -> dict[str, Any]:
        """CLI.md `describe --status --output json`."""
        r = self.response
        endpoints = self.endpoints_by_key()
        leader_end = next(
            (v.log_end_offset for v in r.current_voters if v.replica_id == r.leader_id), -1
        )
        lags = [
            max(0, leader_end - v.log_end_offset) for v in r.current_voters if v.log_end_offset >= 0
        ]
        voter_keys = set(self.voter_keys())

        def key_of(v: ReplicaState) -> ReplicaKey:
            return ReplicaKey(v.replica_id, v.replica_directory_id)

        return {
            "cluster_id": cluster_id,
            "leader_id": r.leader_id,
            "leader_epoch": r.leader_epoch,
            "high_watermark": r.high_watermark,
            "max_follower_lag": max(lags, default=0),
            "current_voters": [
                {
                    "id": v.replica_id,
                    "directory_id": uuid_to_str(v.replica_directory_id),
                    "endpoints": endpoints.get(key_of(v), {}),
                }
                for v in r.current_voters
            ],
            "current_observers": [
                {
                    "id": o.replica_id,
                    "directory_id": uuid_to_str(o.replica_directory_id),
                    "endpoints": endpoints.get(key_of(o), {}),
                }
                for o in r.observers
            ],
            # Seed 003: an observer with an id, a directory id and an endpoint can be added
            # (AddVoter needs the endpoint: controllers fetch with one, brokers do not); rule 5:
            # the full key decides, so a replaced disk of a voter id is listed too.
            "could_be_voters": [
                {"id": o.replica_id, "directory_id": uuid_to_str(o.replica_directory_id)}
                for o in r.observers
                if o.replica_id >= 0
                and o.replica_directory_id.int != 0
                and key_of(o) not in voter_keys
                and endpoints.get(key_of(o))
            ],
        }

    def replication_json(self) -> list[dict[str, Any]]:
        """CLI.md `describe --replication --output json`."""
        r = self.response
        leader_end = next(
            (v.log_end_offset for v in r.current_voters if v.replica_id == r.leader_id), -1
        )
        rows = []
        for status, replicas in (("Voter", r.current_voters), ("Observer", r.observers)):
            for v in replicas:
                if status == "Voter":
                    role = "Leader" if v.replica_id == r.leader_id else "Follower"
                else:
                    role = "Observer"
                rows.append(
                    {
                        "node_id": v.replica_id,
                        "directory_id": uuid_to_str(v.replica_directory_id),
                        "log_end_offset": v.log_end_offset,
                        "lag": max(0, leader_end - v.log_end_offset)
                        if v.log_end_offset >= 0
                        else None,
                        "last_fetch_timestamp_ms": v.last_fetch_timestamp_ms,
                        "last_caught_up_timestamp_ms": v.last_caught_up_timestamp_ms,
                        "status": role,
                    }
                )
        return rows


async def _ask(client: KafkaClient, address: str, request: Any, timeout_ms: int) -> Any:
    """One raft admin request on Kafka's protocol; the core's response dataclass."""
    answer = await client.request(address, request_to_kafka(request), timeout_ms=timeout_ms)
    return response_from_kafka(request, answer)


async def describe_quorum(
    bootstrap: str, *, timeout_ms: int = 5000, with_cluster_id: bool = False
) -> QuorumStatus:
    """Ask each bootstrap controller until the leader answers (only the leader knows the
    followers' progress, as in Kafka). with_cluster_id: also ask the answering controller's
    DescribeCluster for the cluster id, as Kafka's `metadata-quorum describe --status` does."""
    deadline = time.monotonic() + timeout_ms / 1000
    client = new_client(ADMIN_CLIENT_ID, request_timeout_ms=timeout_ms)
    last: KafkaError = KafkaError(
        Errors.NETWORK_EXCEPTION, f"no controller answered at {bootstrap}"
    )
    try:
        addresses = split_bootstrap(bootstrap)
        while time.monotonic() < deadline:
            for address in list(addresses):
                remaining_ms = max(100, int((deadline - time.monotonic()) * 1000))
                try:
                    response = await _ask(
                        client, address, DescribeQuorumRequest(), min(remaining_ms, 2000)
                    )
                except KafkaError as exc:
                    last = exc
                    continue
                if response.error_code == 0:
                    if with_cluster_id:
                        cluster_id = await _cluster_id(client, address, min(remaining_ms, 2000))
                        response = replace(response, cluster_id=cluster_id)
                    return QuorumStatus(response, address)
                last = KafkaError(Errors.of(response.error_code), response.error_message)
                leader_address = _leader_address(response)
                if leader_address and leader_address not in addresses:
                    addresses.append(leader_address)
            if time.monotonic() + 0.1 >= deadline:
                break
            await asyncio.sleep(0.1)
        raise last
    finally:
        await client.close()


async def _cluster_id(client: KafkaClient, address: str, timeout_ms: int) -> str:
    """The cluster id by DescribeCluster (KIP-919), if this controller serves it; else ""."""
    try:
        versions = await client.request(
            address,
            ApiVersionsRequest(client_software_name="minikraft", client_software_version="1"),
            timeout_ms=timeout_ms,
        )
        if not any(int(k.api_key) == ApiKey.DESCRIBE_CLUSTER and int(k.max_version) >= 1
                   for k in versions.api_keys):
            return ""
        answer = await client.request(
            address,
            DescribeClusterRequest(
                include_cluster_authorized_operations=False,
                endpoint_type=i8(_CONTROLLER_ENDPOINT_TYPE),
            ),
            timeout_ms=timeout_ms,
        )
    except KafkaError:
        return ""
    return str(answer.cluster_id) if int(answer.error_code) == 0 else ""


def _leader_address(response: DescribeQuorumResponse) -> str | None:
    for endpoint in response.voter_endpoints:
        if endpoint.voter_id == response.leader_id and endpoint.endpoints:
            return next(iter(endpoint.endpoints.values()))
    return None


VoterChangeResponse = AddRaftVoterResponse | RemoveRaftVoterResponse


async def change_voters(
    bootstrap: str,
    request: AddRaftVoterRequest | RemoveRaftVoterRequest,
    *,
    connect_timeout_ms: int = 5000,
) -> VoterChangeResponse:
    """Send AddRaftVoter/RemoveRaftVoter to the quorum leader: try the bootstrap controllers;
    Kafka's answers name no leader, so on NOT_LEADER_OR_FOLLOWER ask that controller's
    DescribeQuorum who leads and go there. Raises KafkaError with the leader's error
    (DUPLICATE_VOTER, VOTER_NOT_FOUND, REQUEST_TIMED_OUT, ...)."""
    # The leader may wait up to request.timeout_ms (rule 5) before it answers.
    rpc_timeout_ms = request.timeout_ms + connect_timeout_ms
    deadline = time.monotonic() + rpc_timeout_ms / 1000
    client = new_client(ADMIN_CLIENT_ID, request_timeout_ms=rpc_timeout_ms)
    last = KafkaError(Errors.NETWORK_EXCEPTION, f"no controller answered at {bootstrap}")
    try:
        addresses = split_bootstrap(bootstrap)
        while True:
            queue, seen = list(addresses), set()
            while queue:
                address = queue.pop(0)
                if address in seen:
                    continue
                seen.add(address)
                remaining_ms = max(100, int((deadline - time.monotonic()) * 1000))
                try:
                    response = await _ask(client, address, request, remaining_ms)
                except KafkaError as exc:
                    last = exc
                    continue
                if response.error_code == 0:
                    return response  # type: ignore[no-any-return]
                last = KafkaError(Errors.of(response.error_code), response.error_message)
                if response.error_code != Errors.NOT_LEADER_OR_FOLLOWER:
                    raise last
                leader = await _leader_known_to(client, address, min(remaining_ms, 2000))
                if leader:
                    queue.insert(0, leader)  # follow the leader
            if time.monotonic() + 0.2 >= deadline:
                break
            await asyncio.sleep(0.2)
        raise last
    finally:
        await client.close()


async def _leader_known_to(client: KafkaClient, address: str, timeout_ms: int) -> str | None:
    try:
        response = await _ask(client, address, DescribeQuorumRequest(), timeout_ms)
    except KafkaError:
        return None
    return _leader_address(response)


async def add_voter(
    bootstrap: str,
    voter_id: int,
    directory_id: uuid.UUID,
    listeners: dict[str, str] | None = None,
    *,
    timeout_ms: int = 30_000,
) -> AddRaftVoterResponse:
    if not listeners:
        listeners = await observer_listeners(bootstrap, voter_id, directory_id)
    response = await change_voters(
        bootstrap,
        AddRaftVoterRequest(voter_id, directory_id, dict(listeners), timeout_ms),
    )
    assert isinstance(response, AddRaftVoterResponse)
    return response


async def observer_listeners(
    bootstrap: str, voter_id: int, directory_id: uuid.UUID
) -> dict[str, str]:
    """Seed 003's AddVoter of a replica already fetching: the listeners the leader's
    DescribeQuorum lists for that observer (its Nodes entry), since AddRaftVoter must name the
    quorum's listener (Kafka's KafkaRaftClient). Empty when the leader knows none: the leader
    then answers INVALID_REQUEST."""
    try:
        status = await describe_quorum(bootstrap)
    except KafkaError:
        return {}
    for endpoint in status.response.observer_endpoints:
        if (endpoint.voter_id, endpoint.voter_directory_id) == (voter_id, directory_id):
            return dict(endpoint.endpoints)
    return {}


async def remove_voter(
    bootstrap: str, voter_id: int, directory_id: uuid.UUID, *, timeout_ms: int = 30_000
) -> RemoveRaftVoterResponse:
    response = await change_voters(
        bootstrap, RemoveRaftVoterRequest(voter_id, directory_id, timeout_ms)
    )
    assert isinstance(response, RemoveRaftVoterResponse)
    return response
