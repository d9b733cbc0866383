"""Admin requests from the CLI and the launcher: find the node that can answer (the Raft leader for
DescribeQuorum) among the bootstrap addresses, and turn its answer into CLI.md's shapes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from cluster.net.client import RpcClient
from cluster.protocol.errors import Errors, KafkaError
from cluster.protocol.raft_messages import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    ReplicaState,
)
from raft.core.replica_key import uuid_to_str


def split_bootstrap(text: str) -> list[str]:
    addresses = [a.strip() for a in text.split(",") if a.strip()]
    if not addresses:
        raise KafkaError(Errors.INVALID_REQUEST, "no bootstrap address given")
    return addresses


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

    def status_json(self, cluster_id: str | None) -> dict[str, Any]:
        """CLI.md `describe --status --output json`."""
        r = self.response
        endpoints = self.endpoints()
        leader_end = next(
            (v.log_end_offset for v in r.current_voters if v.replica_id == r.leader_id), -1
        )
        lags = [
            max(0, leader_end - v.log_end_offset) for v in r.current_voters if v.log_end_offset >= 0
        ]
        voter_ids = {v.replica_id for v in r.current_voters}
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
                    "endpoints": endpoints.get(v.replica_id, {}),
                }
                for v in r.current_voters
            ],
            "current_observers": [
                {"id": o.replica_id, "directory_id": uuid_to_str(o.replica_directory_id)}
                for o in r.observers
            ],
            "could_be_voters": [
                {"id": o.replica_id, "directory_id": uuid_to_str(o.replica_directory_id)}
                for o in r.observers
                if o.replica_directory_id.int != 0 and o.replica_id not in voter_ids
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


async def describe_quorum(bootstrap: str, *, timeout_ms: int = 5000) -> QuorumStatus:
    """Ask each bootstrap controller until the leader answers (only the leader knows the
    followers' progress, as in Kafka)."""
    deadline = time.monotonic() + timeout_ms / 1000
    client = RpcClient("minikraft-admin", cluster_id=None, request_timeout_ms=timeout_ms)
    last: KafkaError = KafkaError(
        Errors.NETWORK_EXCEPTION, f"no controller answered at {bootstrap}"
    )
    try:
        addresses = split_bootstrap(bootstrap)
        while time.monotonic() < deadline:
            for address in addresses:
                remaining_ms = max(100, int((deadline - time.monotonic()) * 1000))
                try:
                    response = await client.request(
                        address, DescribeQuorumRequest(), timeout_ms=min(remaining_ms, 2000)
                    )
                except KafkaError as exc:
                    last = exc
                    continue
                if response.error_code == 0:
                    return QuorumStatus(response, address)
                last = KafkaError(Errors.of(response.error_code), response.error_message)
                leader_address = _leader_address(response)
                if leader_address and leader_address not in addresses:
                    addresses.append(leader_address)
            if time.monotonic() + 0.1 >= deadline:
                break
            import asyncio

            await asyncio.sleep(0.1)
        raise last
    finally:
        await client.close()


def _leader_address(response: DescribeQuorumResponse) -> str | None:
    for endpoint in response.voter_endpoints:
        if endpoint.voter_id == response.leader_id and endpoint.endpoints:
            return next(iter(endpoint.endpoints.values()))
    return None
