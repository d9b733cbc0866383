"""Quorum requests from the CLI and the launcher on Kafka's protocol (KIP-853/856): find the node
that can answer (the Raft leader for DescribeQuorum, AddRaftVoter, RemoveRaftVoter) among the
bootstrap controllers, and turn its answer into CLI.md's shapes. The messages are Kafka's, built
and read with raft.core.messages, the same code the nodes use.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.static.primitive import i8

from cluster.client.bootstrap import new_client
from cluster.client.bootstrap import split_bootstrap as split_bootstrap  # re-exported for callers
from kafkawire.api_keys import ApiKey
from kafkawire.client import KafkaClient
from kafkawire.errors import Errors, KafkaError
from raft.core.messages import (
    DEFAULT_VOTER_CHANGE_TIMEOUT_MS,
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    DescribeQuorumResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    ReplicaState,
    add_raft_voter_request,
    answered_partition,
    describe_quorum_request,
    directory_id,
    endpoint,
    error_of,
    leader_of,
    remove_raft_voter_request,
    to_ms,
)
from raft.core.replica_key import ReplicaKey, uuid_to_str

ADMIN_CLIENT_ID = "minikraft-admin"
# KIP-919: DescribeCluster with EndpointType CONTROLLER names the controllers' cluster.
_CONTROLLER_ENDPOINT_TYPE = 2


@dataclass(frozen=True)
class QuorumStatus:
    """The leader's DescribeQuorum answer (Kafka's message) and CLI.md's views of it."""

    response: DescribeQuorumResponse
    answered_by: str
    cluster_id: str = ""  # from DescribeCluster, when asked for (`describe --status`)

    @property
    def _partition(self) -> Any:
        return answered_partition(self.response)

    @property
    def leader_id(self) -> int | None:
        leader = int(self._partition.leader_id)
        return None if leader < 0 else leader

    @property
    def leader_epoch(self) -> int:
        return int(self._partition.leader_epoch)

    @property
    def high_watermark(self) -> int:
        return int(self._partition.high_watermark)

    @property
    def voters(self) -> list[ReplicaState]:
        return list(self._partition.current_voters)

    @property
    def observers(self) -> list[ReplicaState]:
        return list(self._partition.observers)

    def listeners_by_node(self) -> dict[int, dict[str, str]]:
        """Kafka's Nodes: listener name -> "host:port", per node id (not per directory id)."""
        return {int(n.node_id): {lst.name: endpoint(lst.host, int(lst.port))
                                 for lst in n.listeners} for n in self.response.nodes}

    def endpoints(self) -> dict[int, dict[str, str]]:
        """The voters' listeners by id."""
        nodes = self.listeners_by_node()
        return {int(v.replica_id): dict(nodes[int(v.replica_id)])
                for v in self.voters if int(v.replica_id) in nodes}

    def endpoints_by_key(self) -> dict[ReplicaKey, dict[str, str]]:
        """Voters and observers (two keys may share an id during a disk replacement): Nodes
        are per node id, so the listeners of an id attach to every key of that id."""
        nodes = self.listeners_by_node()
        return {_key_of(r): dict(nodes[int(r.replica_id)])
                for r in [*self.voters, *self.observers] if int(r.replica_id) in nodes}

    def voter_keys(self) -> list[ReplicaKey]:
        return [_key_of(v) for v in self.voters]

    def observer_keys(self) -> list[ReplicaKey]:
        return [_key_of(o) for o in self.observers]

    def status_json(self, cluster_id: str | None) -> dict[str, Any]:
        """CLI.md `describe --status --output json`."""
        endpoints = self.endpoints_by_key()
        leader_id = -1 if self.leader_id is None else self.leader_id
        voters, observers = self.voters, self.observers
        leader_end = next((v.log_end_offset for v in voters if v.replica_id == leader_id), -1)
        lags = [max(0, leader_end - v.log_end_offset) for v in voters if v.log_end_offset >= 0]
        voter_keys = set(self.voter_keys())
        key_of = _key_of

        return {
            "cluster_id": cluster_id,
            "leader_id": leader_id,
            "leader_epoch": self.leader_epoch,
            "high_watermark": self.high_watermark,
            "max_follower_lag": max(lags, default=0),
            "current_voters": [
                {
                    "id": v.replica_id,
                    "directory_id": uuid_to_str(key_of(v).directory_id),
                    "endpoints": endpoints.get(key_of(v), {}),
                }
                for v in voters
            ],
            "current_observers": [
                {
                    "id": o.replica_id,
                    "directory_id": uuid_to_str(key_of(o).directory_id),
                    "endpoints": endpoints.get(key_of(o), {}),
                }
                for o in observers
            ],
            # Seed 003: an observer with an id, a directory id and an endpoint can be added
            # (AddVoter needs the endpoint: controllers fetch with one, brokers do not); rule 5:
            # the full key decides, so a replaced disk of a voter id is listed too.
            "could_be_voters": [
                {"id": o.replica_id, "directory_id": uuid_to_str(key_of(o).directory_id)}
                for o in observers
                if o.replica_id >= 0
                and key_of(o).directory_id.int != 0
                and key_of(o) not in voter_keys
                and endpoints.get(key_of(o))
            ],
        }

    def replication_json(self) -> list[dict[str, Any]]:
        """CLI.md `describe --replication --output json`."""
        leader_id = -1 if self.leader_id is None else self.leader_id
        leader_end = next(
            (v.log_end_offset for v in self.voters if v.replica_id == leader_id), -1
        )
        rows = []
        for status, replicas in (("Voter", self.voters), ("Observer", self.observers)):
            for v in replicas:
                if status == "Voter":
                    role = "Leader" if v.replica_id == leader_id else "Follower"
                else:
                    role = "Observer"
                rows.append(
                    {
                        "node_id": v.replica_id,
                        "directory_id": uuid_to_str(_key_of(v).directory_id),
                        "log_end_offset": v.log_end_offset,
                        "lag": max(0, leader_end - v.log_end_offset)
                        if v.log_end_offset >= 0
                        else None,
                        "last_fetch_timestamp_ms": v.last_fetch_timestamp,
                        "last_caught_up_timestamp_ms": v.last_caught_up_timestamp,
                        "status": role,
                    }
                )
        return rows


def _key_of(replica: ReplicaState) -> ReplicaKey:
    return ReplicaKey(int(replica.replica_id), directory_id(replica.replica_directory_id))


async def _rounds(deadline: float, pause_s: float) -> AsyncIterator[None]:
    """Rounds of asking the controllers until `deadline` (time.monotonic()): one now, then one
    every `pause_s` while a whole pause still ends before the deadline."""
    while time.monotonic() < deadline:
        yield
        if time.monotonic() + pause_s >= deadline:
            return
        await asyncio.sleep(pause_s)


async def _ask(client: KafkaClient, address: str, request: Any, timeout_ms: int) -> Any:
    """One raft admin request on Kafka's protocol; Kafka's answer."""
    return await client.request(address, request, timeout_ms=timeout_ms)


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
        async for _ in _rounds(deadline, 0.1):
            for address in list(addresses):
                remaining_ms = max(100, int((deadline - time.monotonic()) * 1000))
                try:
                    response = await _ask(
                        client, address, describe_quorum_request(), min(remaining_ms, 2000)
                    )
                except KafkaError as exc:
                    last = exc
                    continue
                error = error_of(response)
                if error == 0 and answered_partition(response) is not None:
                    cluster_id = ""
                    if with_cluster_id:
                        cluster_id = await _cluster_id(client, address, min(remaining_ms, 2000))
                    return QuorumStatus(response, address, cluster_id)
                last = KafkaError(Errors.of(error), _error_message(response))
                leader_address = _leader_address(response)
                if leader_address and leader_address not in addresses:
                    addresses.append(leader_address)
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


def _error_message(response: DescribeQuorumResponse) -> str:
    p = answered_partition(response)
    if int(response.error_code) or p is None:
        return response.error_message or ""
    return p.error_message or ""


def _leader_address(response: DescribeQuorumResponse) -> str | None:
    leader_id = leader_of(response).id
    for node in response.nodes:
        if int(node.node_id) == leader_id and node.listeners:
            return endpoint(node.listeners[0].host, int(node.listeners[0].port))
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
    # The leader may wait up to the request's timeout (rule 5) before it answers.
    rpc_timeout_ms = connect_timeout_ms + (
        to_ms(request.timeout) if isinstance(request, AddRaftVoterRequest)
        else DEFAULT_VOTER_CHANGE_TIMEOUT_MS)
    deadline = time.monotonic() + rpc_timeout_ms / 1000
    client = new_client(ADMIN_CLIENT_ID, request_timeout_ms=rpc_timeout_ms)
    last = KafkaError(Errors.NETWORK_EXCEPTION, f"no controller answered at {bootstrap}")
    try:
        addresses = split_bootstrap(bootstrap)
        async for _ in _rounds(deadline, 0.2):
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
                if int(response.error_code) == 0:
                    return response  # type: ignore[no-any-return]
                last = KafkaError(Errors.of(int(response.error_code)), response.error_message or "")
                if int(response.error_code) != Errors.NOT_LEADER_OR_FOLLOWER:
                    raise last
                leader = await _leader_known_to(client, address, min(remaining_ms, 2000))
                if leader:
                    queue.insert(0, leader)  # follow the leader
        raise last
    finally:
        await client.close()


async def _leader_known_to(client: KafkaClient, address: str, timeout_ms: int) -> str | None:
    try:
        response = await _ask(client, address, describe_quorum_request(), timeout_ms)
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
        add_raft_voter_request(voter_id, directory_id, dict(listeners), timeout_ms),
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
    return status.endpoints_by_key().get(ReplicaKey(voter_id, directory_id), {}) if (
        ReplicaKey(voter_id, directory_id) in status.observer_keys()) else {}


async def remove_voter(
    bootstrap: str, voter_id: int, directory_id: uuid.UUID, *, timeout_ms: int = 30_000
) -> RemoveRaftVoterResponse:
    response = await change_voters(
        bootstrap, remove_raft_voter_request(voter_id, directory_id)
    )
    assert isinstance(response, RemoveRaftVoterResponse)
    return response
