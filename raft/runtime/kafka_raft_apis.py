"""The metadata quorum's Raft RPCs on the controller listener (Kafka's KafkaRaftClient request
handling, KIP-595/853/996): each request, as kio decoded it, goes to the node's Raft driver and
the core's answer goes back as it is. The core speaks Kafka's messages (raft.core.messages), so
nothing is translated here; the one adaptation is AddRaftVoter's answer to a v0 request.

One version per API node to node (kafkawire's CONTROLLER_API_VERSIONS), the newest kio has with
every field the core uses: Vote v2 (PreVote, KIP-996), BeginQuorumEpoch v1, EndQuorumEpoch v1
(directory ids, endpoints), Fetch v17 (ReplicaState, ReplicaDirectoryId, topic id),
FetchSnapshot v1, DescribeQuorum v2 (directory ids, timestamps, Nodes), AddRaftVoter v0-v1,
RemoveRaftVoter v0, UpdateRaftVoter v0.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kafkawire.api_keys import ApiKey
from kafkawire.connection import KafkaRequestContext
from kafkawire.errors import Errors, KafkaError
from raft.core.messages import AddRaftVoterResponse, AddRaftVoterResponseV0, error_response

if TYPE_CHECKING:
    from kafkawire.router import KafkaRouter

# The driver's handle_request: a raft request from a node id in, the core's answer out.
RequestHandler = Callable[[int, Any], Awaitable[Any]]

log = logging.getLogger("minikraft.raft")

# The APIs routed here; their versions are kafkawire's CONTROLLER_API_VERSIONS.
RAFT_API_KEYS = (
    ApiKey.FETCH,
    ApiKey.VOTE,
    ApiKey.BEGIN_QUORUM_EPOCH,
    ApiKey.END_QUORUM_EPOCH,
    ApiKey.DESCRIBE_QUORUM,
    ApiKey.FETCH_SNAPSHOT,
    ApiKey.ADD_RAFT_VOTER,
    ApiKey.REMOVE_RAFT_VOTER,
    ApiKey.UPDATE_RAFT_VOTER,
)


def in_version(response: Any, version: int) -> Any:
    """The answer in the version asked: AddRaftVoter v0's answer has v1's fields."""
    if isinstance(response, AddRaftVoterResponse) and version == 0:
        return AddRaftVoterResponseV0(throttle_time=response.throttle_time,
                                      error_code=response.error_code,
                                      error_message=response.error_message)
    return response


class KafkaRaftApis:
    """Routes RAFT_API_KEYS on a KafkaRouter to one node's Raft replica (through its driver).
    A handler never raises into the router (that would close the caller's connection): every
    failure is an error code in the response. Given the driver's handle_request, not the
    RaftManager that builds the driver (no import cycle, issue 18)."""

    def __init__(self, handle_request: RequestHandler) -> None:
        self._handle_request = handle_request

    def route(self, router: KafkaRouter) -> None:
        for api_key in RAFT_API_KEYS:
            router.route(api_key, self._handler(api_key))

    def _handler(self, api_key: ApiKey) -> Callable[[Any, int, KafkaRequestContext], Any]:
        async def handle(body: Any, version: int, ctx: KafkaRequestContext) -> Any:
            return await self.handle(api_key, body, version, ctx)

        return handle

    async def handle(self, api_key: ApiKey, body: Any, version: int,
                     ctx: KafkaRequestContext) -> Any:
        try:
            source = -1 if ctx.source_node_id is None else ctx.source_node_id
            response = await self._handle_request(source, body)
        except KafkaError as exc:
            response = error_response(body, exc.error, exc.message)
        except Exception as exc:  # never close the caller's connection over our own failure
            log.exception("%s failed", api_key.name)
            response = error_response(body, Errors.UNKNOWN_SERVER_ERROR, str(exc))
        return in_version(response, version)
