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
from typing import Any, cast

from kio.schema.fetch.v17 import request as fetch_req
from kio.schema.offset_for_leader_epoch.v4 import request as ofle_req
from kio.schema.types import BrokerId
from kio.static.primitive import i8, i32, i32Timedelta, i64

from broker.core import messages as bm
from kafkawire.entities import build, has_field, item_type
from kafkawire.errors import Errors
from kafkawire.messages import error_code

FETCH_VERSION = 17
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
MIN_BYTES = 1  # answer as soon as anything is there: a follower's fetch is the ack path
NO_FETCH_SESSION_EPOCH = -1  # Kafka's FINAL_EPOCH: a full fetch outside any session (KIP-227)


# -- the follower's side ---------------------------------------------------------------------


def fetch_request_to_kio(
    request: bm.FetchRequest, topic_id: uuid.UUID, cluster_id: str | None
) -> fetch_req.FetchRequest:
    """A follower's Fetch v17 for one partition.

    Built once per fetch on the acks=all path, so the ints go in as they are: kio's i32()/i64()
    return the same int after a range check, which the codec's writer makes again on encoding."""
    return fetch_req.FetchRequest(
        cluster_id=cluster_id,
        replica_state=fetch_req.ReplicaState(
            replica_id=cast(BrokerId, request.replica_id),
            replica_epoch=cast(i64, request.replica_epoch),
        ),
        max_wait=_max_wait(request.max_wait_ms),
        min_bytes=cast(i32, MIN_BYTES),
        max_bytes=cast(i32, request.max_bytes),
        isolation_level=cast(i8, 0),
        session_id=cast(i32, 0),
        session_epoch=cast(i32, NO_FETCH_SESSION_EPOCH),
        topics=(
            fetch_req.FetchTopic(
                topic_id=topic_id,
                partitions=(
                    fetch_req.FetchPartition(
                        partition=cast(i32, request.partition),
                        current_leader_epoch=cast(i32, request.current_leader_epoch),
                        fetch_offset=cast(i64, request.fetch_offset),
                        last_fetched_epoch=cast(i32, request.last_fetched_epoch),
                        log_start_offset=cast(i64, -1),
                        partition_max_bytes=cast(i32, request.max_bytes),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


@functools.lru_cache(maxsize=8)
def _max_wait(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def fetch_response_from_kio(body: Any, topic_id: uuid.UUID, partition: int) -> bm.FetchResponse:
    """The answer for one partition of a follower's Fetch (a top-level error counts for it)."""
    top = Errors.of(int(body.error_code))
    if top is not Errors.NONE:
        return bm.FetchResponse(int(top), f"Fetch answered {top.name}")
    for topic in body.responses:
        if topic.topic_id != topic_id:
            continue
        for data in topic.partitions:
            if int(data.partition_index) == partition:
                return fetch_partition_from_kio(data)
    return bm.FetchResponse(
        int(Errors.UNKNOWN_SERVER_ERROR), f"Fetch answer lacks partition {partition}"
    )


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
    return ofle_req.OffsetForLeaderEpochRequest(
        replica_id=i32(request.replica_id),  # type: ignore[arg-type]
        topics=(
            ofle_req.OffsetForLeaderTopic(
                topic=request.topic,  # type: ignore[arg-type]
                partitions=(
                    ofle_req.OffsetForLeaderPartition(
                        partition=i32(request.partition),
                        current_leader_epoch=i32(request.current_leader_epoch),
                        leader_epoch=i32(request.leader_epoch),
                    ),
                ),
            ),
        ),
    )


def offset_for_leader_epoch_response_from_kio(
    body: Any, topic: str, partition: int
) -> bm.OffsetForLeaderEpochResponse:
    for result in body.topics:
        if result.topic != topic:
            continue
        for data in result.partitions:
            if int(data.partition) == partition:
                return bm.OffsetForLeaderEpochResponse(
                    error_code=int(data.error_code),
                    leader_epoch=int(data.leader_epoch),
                    end_offset=int(data.end_offset),
                )
    return bm.OffsetForLeaderEpochResponse(
        int(Errors.UNKNOWN_SERVER_ERROR), f"OffsetForLeaderEpoch answer lacks {topic}-{partition}"
    )


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
