"""Sending a request to the one node that can answer it: the active controller (admin APIs) or
the Raft leader (DescribeQuorum, AddRaftVoter, RemoveRaftVoter).

A broker forwarding a client's admin request and the CLI with `--bootstrap-controller` do the
same thing: try the candidate addresses, and while an answer says "not me" (NOT_CONTROLLER; for
the Raft APIs NOT_LEADER_OR_FOLLOWER) or a node cannot be reached, try the next one, pausing
between rounds, until the request's timeout. So a controller move is invisible to the caller, as
Kafka's forwarding makes it. A request is sent whole and unchanged; the first real answer, error
codes and all, is the caller's.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from kafkawire.api_keys import ApiKey
from kafkawire.client import Address, KafkaClient
from kafkawire.errors import Errors, KafkaError

UNREACHABLE = frozenset({Errors.NETWORK_EXCEPTION, Errors.REQUEST_TIMED_OUT})
_RAFT_LEADER_APIS = frozenset(
    {int(ApiKey.DESCRIBE_QUORUM), int(ApiKey.ADD_RAFT_VOTER), int(ApiKey.REMOVE_RAFT_VOTER)}
)
RETRY_BACKOFF_S = 0.1

# (address, node id if known) in the order to try.
Candidate = tuple[Address | str, int | None]


def wrong_node_errors(api_key: int) -> frozenset[Errors]:
    if api_key in _RAFT_LEADER_APIS:
        return frozenset({Errors.NOT_CONTROLLER, Errors.NOT_LEADER_OR_FOLLOWER})
    return frozenset({Errors.NOT_CONTROLLER})


def _error_codes(entity: Any, depth: int = 0) -> list[int]:
    """Every error_code in a kio entity and its nested entities (a few levels deep)."""
    if depth > 3 or not dataclasses.is_dataclass(entity):
        return []
    codes: list[int] = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.name == "error_code":
            codes.append(int(value))
        elif isinstance(value, tuple):
            for item in value:
                codes.extend(_error_codes(item, depth + 1))
        elif dataclasses.is_dataclass(value):
            codes.extend(_error_codes(value, depth + 1))
    return codes


def wrong_node(response: Any) -> Errors | None:
    """The "not me" error a response answers with (the node is not the active controller or
    Raft leader), or None. A standby refuses a whole request, so any such code means all of it."""
    wrong = wrong_node_errors(int(response.__api_key__))
    for code in _error_codes(response):
        error = Errors.of(code)
        if error in wrong:
            return error
    return None


async def request_active(
    client: KafkaClient,
    candidates: Callable[[], Sequence[Candidate]],
    body: Any,
    *,
    timeout_ms: int,
    try_timeout_ms: int | None = None,
) -> Any:
    """The first answer from a node that is the one to ask. `candidates` is called every round,
    so a newly learned leader is tried first. Raises KafkaError REQUEST_TIMED_OUT (or the last
    "not me" / transport error) when the timeout passes with no such answer. `try_timeout_ms`
    caps one try (Kafka's request.timeout.ms under the API timeout), so a hung node does not
    use up the whole timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    last = KafkaError(Errors.REQUEST_TIMED_OUT, f"no node answered in {timeout_ms} ms")
    while True:
        for address, node_id in candidates():
            left_ms = int((deadline - loop.time()) * 1000)
            if left_ms <= 0:
                raise last
            try:
                response = await client.request(
                    address,
                    body,
                    timeout_ms=min(left_ms, try_timeout_ms or left_ms),
                    dest_node_id=node_id,
                )
            except KafkaError as exc:
                if exc.error not in UNREACHABLE:
                    raise
                last = exc
                continue
            error = wrong_node(response)
            if error is None:
                return response
            last = KafkaError(error, f"{address} is not the node to ask; retried until timeout")
        if loop.time() + RETRY_BACKOFF_S >= deadline:
            raise last
        await asyncio.sleep(RETRY_BACKOFF_S)
