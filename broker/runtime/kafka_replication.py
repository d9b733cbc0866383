"""Broker-to-broker replication on Kafka's wire protocol: a follower's Fetch (v17) and
OffsetForLeaderEpoch (v4) to the partition leader's Kafka listener, and the pieces of the
leader's answer (ARCHITECTURE.md "Wire protocol").

One Fetch implementation serves consumers and followers (broker/runtime/kafka_apis.py); what
Kafka distinguishes is the replica: ReplicaState.ReplicaId >= 0 (v15+, top-level ReplicaId
before) with ReplicaEpoch = the follower's broker epoch (KIP-903, rule 17), LastFetchedEpoch for
the diverging-epoch check (rule 22, answered in DivergingEpoch), and a read up to the log end
rather than the HWM (rule 20). The ClusterId tag names the follower's cluster: a fetch from
another cluster is INCONSISTENT_CLUSTER_ID. Records are the stored batch bytes both ways.

The follower side builds its request from the broker's own dataclass (bm.FetchRequest,
bm.OffsetForLeaderEpochRequest) and reads the answer back into bm.FetchResponse /
bm.OffsetForLeaderEpochResponse, so the fetcher's logic works on the core's values.
"""

from __future__ import annotations

import datetime
import functools
import uuid
from collections.abc import Sequence
from typing import Any, cast

from kio.schema.fetch.v17 import request as fetch_req
from kio.schema.offset_for_leader_epoch.v4 import request as ofle_req
from kio.schema.types import BrokerId
from kio.static.primitive import i8, i32, i32Timedelta, i64

from broker.core import messages as bm
from broker.core.fetch_session import FINAL_EPOCH
from kafkawire.entities import build, has_field, item_type
from kafkawire.errors import Errors
from kafkawire.messages import error_code

FETCH_VERSION = 17
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
MIN_BYTES = 1  # answer as soon as anything is there: a follower's fetch is the ack path


# -- the follower's side ---------------------------------------------------------------------


def fetch_request_to_kio(
    request: bm.FetchRequest, topic_id: uuid.UUID, cluster_id: str | None
) -> fetch_req.FetchRequest:
    """A follower's Fetch v17 for one partition (its max bytes the whole request's too)."""
    return replica_fetch_to_kio(
        request.replica_id,
        request.replica_epoch,
        cluster_id,
        max_wait_ms=request.max_wait_ms,
        min_bytes=MIN_BYTES,
        max_bytes=request.max_bytes,
        partitions=((topic_id, request),),
    )


def replica_fetch_to_kio(
    replica_id: int,
    replica_epoch: int,
    cluster_id: str | None,
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partitions: Sequence[tuple[uuid.UUID, bm.FetchRequest]],
    session_id: int = 0,
    session_epoch: int = FINAL_EPOCH,  # a full fetch outside any session (KIP-227)
    forgotten: Sequence[tuple[uuid.UUID, int]] = (),
) -> fetch_req.FetchRequest:
    """A follower's Fetch v17 for every partition it follows from one leader (Kafka's
    ReplicaFetcherThread.buildFetch): topics in first-seen order, each partition with its own
    partition_max_bytes (replica.fetch.max.bytes), the request's max_bytes
    (replica.fetch.response.max.bytes), max_wait and min_bytes (replica.fetch.wait.max.ms,
    replica.fetch.min.bytes).

    Built on the acks=all path, so the ints go in as they are: kio's i32()/i64() return the same
    int after a range check, which the codec's writer makes again on encoding."""
    by_topic: dict[uuid.UUID, list[fetch_req.FetchPartition]] = {}
    for topic_id, request in partitions:
        by_topic.setdefault(topic_id, []).append(
            fetch_req.FetchPartition(
                partition=cast(i32, request.partition),
                current_leader_epoch=cast(i32, request.current_leader_epoch),
                fetch_offset=cast(i64, request.fetch_offset),
                last_fetched_epoch=cast(i32, request.last_fetched_epoch),
                log_start_offset=cast(i64, -1),
                partition_max_bytes=cast(i32, request.max_bytes),
            )
        )
    forgotten_by_topic: dict[uuid.UUID, list[i32]] = {}
    for topic_id, index in forgotten:
        forgotten_by_topic.setdefault(topic_id, []).append(cast(i32, index))
    return fetch_req.FetchRequest(
        cluster_id=cluster_id,
        replica_state=fetch_req.ReplicaState(
            replica_id=cast(BrokerId, replica_id),
            replica_epoch=cast(i64, replica_epoch),
        ),
        max_wait=_max_wait(max_wait_ms),
        min_bytes=cast(i32, min_bytes),
        max_bytes=cast(i32, max_bytes),
        isolation_level=cast(i8, 0),
        session_id=cast(i32, session_id),
        session_epoch=cast(i32, session_epoch),
        topics=tuple(
            fetch_req.FetchTopic(topic_id=topic_id, partitions=tuple(parts))
            for topic_id, parts in by_topic.items()
        ),
        forgotten_topics_data=tuple(
            fetch_req.ForgottenTopic(topic_id=topic_id, partitions=tuple(parts))
            for topic_id, parts in forgotten_by_topic.items()
        ),
        rack_id="",
    )


@functools.lru_cache(maxsize=8)
def _max_wait(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def fetch_response_from_kio(body: Any, topic_id: uuid.UUID, partition: int) -> bm.FetchResponse:
    """The answer for one partition of a follower's Fetch (a top-level error counts for it)."""
    top = fetch_top_level_error(body)
    if top is not None:
        return top
    found = fetch_partitions_from_kio(body).get((topic_id, partition))
    if found is not None:
        return found
    return bm.FetchResponse(
        int(Errors.UNKNOWN_SERVER_ERROR), f"Fetch answer lacks partition {partition}"
    )


def fetch_top_level_error(body: Any) -> bm.FetchResponse | None:
    """A Fetch answer's top-level error, which counts for every partition of the request."""
    top = Errors.of(int(body.error_code))
    if top is Errors.NONE:
        return None
    return bm.FetchResponse(int(top), f"Fetch answered {top.name}")


def fetch_partitions_from_kio(body: Any) -> dict[tuple[uuid.UUID, int], bm.FetchResponse]:
    """Every partition of a follower's Fetch answer, by (topic id, partition)."""
    return {
        (topic.topic_id, int(data.partition_index)): fetch_partition_from_kio(data)
        for topic in body.responses
        for data in topic.partitions
    }


def fetch_partition_from_kio(data: Any) -> bm.FetchResponse:
    diverging = data.diverging_epoch
    leader = data.current_leader
    return bm.FetchResponse(
        error_code=int(data.error_code),
        high_watermark=int(data.high_watermark),
        log_start_offset=int(data.log_start_offset),
        records=bytes(data.records or b""),
        diverging_epoch=int(diverging.epoch),
        diverging_end_offset=int(diverging.end_offset),
        leader_id=int(leader.leader_id),
        leader_epoch=int(leader.leader_epoch),
    )


def offset_for_leader_epoch_request_to_kio(
    request: bm.OffsetForLeaderEpochRequest,
) -> ofle_req.OffsetForLeaderEpochRequest:
    return offset_for_leader_epochs_to_kio(request.replica_id, (request,))


def offset_for_leader_epochs_to_kio(
    replica_id: int, requests: Sequence[bm.OffsetForLeaderEpochRequest]
) -> ofle_req.OffsetForLeaderEpochRequest:
    """One OffsetForLeaderEpoch v4 for every partition a fetcher truncates (Kafka's
    ReplicaFetcherThread.fetchEpochEndOffsets: one request per leader broker)."""
    by_topic: dict[str, list[ofle_req.OffsetForLeaderPartition]] = {}
    for request in requests:
        by_topic.setdefault(request.topic, []).append(
            ofle_req.OffsetForLeaderPartition(
                partition=i32(request.partition),
                current_leader_epoch=i32(request.current_leader_epoch),
                leader_epoch=i32(request.leader_epoch),
            )
        )
    return ofle_req.OffsetForLeaderEpochRequest(
        replica_id=i32(replica_id),  # type: ignore[arg-type]
        topics=tuple(
            ofle_req.OffsetForLeaderTopic(
                topic=topic,  # type: ignore[arg-type]
                partitions=tuple(parts),
            )
            for topic, parts in by_topic.items()
        ),
    )


def offset_for_leader_epoch_response_from_kio(
    body: Any, topic: str, partition: int
) -> bm.OffsetForLeaderEpochResponse:
    found = offset_for_leader_epochs_from_kio(body).get((topic, partition))
    if found is not None:
        return found
    return bm.OffsetForLeaderEpochResponse(
        int(Errors.UNKNOWN_SERVER_ERROR), f"OffsetForLeaderEpoch answer lacks {topic}-{partition}"
    )


def offset_for_leader_epochs_from_kio(
    body: Any,
) -> dict[tuple[str, int], bm.OffsetForLeaderEpochResponse]:
    """Every partition of an OffsetForLeaderEpoch answer, by (topic, partition)."""
    return {
        (str(result.topic), int(data.partition)): bm.OffsetForLeaderEpochResponse(
            error_code=int(data.error_code),
            leader_epoch=int(data.leader_epoch),
            end_offset=int(data.end_offset),
        )
        for result in body.topics
        for data in result.partitions
    }


# -- the leader's side (any Fetch / OffsetForLeaderEpoch version) -----------------------------


def fetch_replica(body: Any) -> tuple[int, int]:
    """(replica id, replica epoch) of a Fetch: ReplicaState from v15, ReplicaId before; a
    consumer is -1."""
    state = getattr(body, "replica_state", None)
    if state is not None and int(state.replica_id) >= 0:
        return int(state.replica_id), int(state.replica_epoch)
    return int(getattr(body, "replica_id", bm.CONSUMER_REPLICA_ID)), bm.NO_EPOCH


def fetch_partition_from_request(
    topic: str,
    partition: Any,
    replica_id: int,
    replica_epoch: int,
    max_bytes: int,
    min_one_message: bool = True,
) -> bm.FetchRequest:
    """One partition of any Fetch version as the broker's FetchRequest."""
    return bm.FetchRequest(
        topic,
        int(partition.partition),
        int(partition.fetch_offset),
        replica_id=replica_id,
        replica_epoch=replica_epoch,
        current_leader_epoch=int(getattr(partition, "current_leader_epoch", bm.NO_EPOCH)),
        last_fetched_epoch=int(getattr(partition, "last_fetched_epoch", bm.NO_EPOCH)),
        max_bytes=max_bytes,
        min_one_message=min_one_message,
    )


def fetch_partition_to_kio(partition_cls: type, index: int, result: bm.FetchResponse) -> Any:
    """One partition of a Fetch response of any version (`partition_cls` names it)."""
    extra: dict[str, Any] = {}
    if has_field(partition_cls, "current_leader") and result.error_code:
        extra["current_leader"] = item_type(partition_cls, "current_leader")(
            leader_id=result.leader_id, leader_epoch=result.leader_epoch
        )
    if has_field(partition_cls, "diverging_epoch") and result.diverging_epoch != bm.NO_EPOCH:
        # Rule 22: the follower truncates to this epoch's end before fetching again.
        extra["diverging_epoch"] = item_type(partition_cls, "diverging_epoch")(
            epoch=i32(result.diverging_epoch), end_offset=i64(result.diverging_end_offset)
        )
    return build(
        partition_cls,
        partition_index=index,
        error_code=error_code(result.error_code),
        high_watermark=result.high_watermark,
        # No transactions yet: the last stable offset is the HWM (READ_COMMITTED).
        last_stable_offset=result.high_watermark,
        log_start_offset=result.log_start_offset,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=result.records,
        **extra,
    )


def offset_for_leader_epoch_partition_to_kio(
    partition_cls: type, partition: int, result: bm.OffsetForLeaderEpochResponse
) -> Any:
    return build(
        partition_cls,
        error_code=error_code(result.error_code),
        partition=partition,
        leader_epoch=result.leader_epoch,
        end_offset=result.end_offset,
    )
