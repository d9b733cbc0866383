"""Broker-to-broker replication on Kafka's wire protocol: a follower's Fetch (v17) to the
partition leader's Kafka listener, the pieces of the leader's answer, and the leader's
OffsetForLeaderEpoch (v4) answer (clients validate their positions with it; a follower
truncates on fetch and sends none, as Kafka's) (ARCHITECTURE.md "Wire protocol").

One Fetch implementation serves consumers and followers (broker/runtime/kafka_apis.py); what
Kafka distinguishes is the replica: ReplicaState.ReplicaId >= 0 (v15+, top-level ReplicaId
before) with ReplicaEpoch = the follower's broker epoch (KIP-903, rule 17), LastFetchedEpoch for
the diverging-epoch check (rule 22, answered in DivergingEpoch), and a read up to the log end
rather than the HWM (rule 20). The ClusterId tag names the follower's cluster: a fetch from
another cluster is INCONSISTENT_CLUSTER_ID. Records are the stored batch bytes both ways.

One shape per message: a partition fetch is bm.FetchRequest at both ends (the follower sends
it, the leader's ReplicaManager takes it from any Fetch version); the leader's answer,
bm.FetchResponse, is lowered once into the version asked, and a follower reads v17's
PartitionData as it came. OffsetForLeaderEpoch is v4's entities end to end.
"""

from __future__ import annotations

import datetime
import functools
import uuid
from collections.abc import Sequence
from typing import Any, cast

from kio.schema.fetch.v17 import request as fetch_req
from kio.schema.fetch.v17 import response as fetch_resp
from kio.schema.offset_for_leader_epoch.v4 import request as ofle_req
from kio.schema.offset_for_leader_epoch.v4 import response as ofle_resp
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from broker.core import messages as bm
from broker.core.fetch_session import FINAL_EPOCH
from kafkawire.admin_messages import NO_THROTTLE_I32
from kafkawire.entities import build, has_field, item_type
from kafkawire.errors import Errors
from kafkawire.messages import error_code
from kafkawire.slots import slot_constructor

FETCH_VERSION = 17
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
# A follower reads the leader's Fetch answer as v17's entities (no copy into another shape);
# the leader's ReplicaManager answers bm.FetchResponse, lowered once into the version asked.
PartitionData = fetch_resp.PartitionData
# OffsetForLeaderEpoch has one shape, v4's entities, on both ends: v2-v4 differ only by the
# request's ReplicaId, so an older request lifts with kafkawire.entities.convert.
OffsetForLeaderPartition = ofle_req.OffsetForLeaderPartition
EpochEndOffset = ofle_resp.EpochEndOffset
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


def fetch_error(body: Any) -> Errors:
    """A Fetch answer's top-level error, which counts for every partition of the request."""
    return Errors.of(int(body.error_code))


def fetch_answers(body: Any) -> dict[tuple[uuid.UUID, int], PartitionData]:
    """Every partition of a follower's Fetch v17 answer, by (topic id, partition): kio's
    entities as they came, the one shape the fetcher reads."""
    return {
        (topic.topic_id, int(data.partition_index)): data
        for topic in body.responses
        for data in topic.partitions
    }


def epoch_end_offset(
    partition: int, error: Errors = Errors.NONE, leader_epoch: int = -1, end_offset: int = -1
) -> EpochEndOffset:
    return EpochEndOffset(
        error_code=error_code(error),
        partition=i32(partition),
        leader_epoch=i32(leader_epoch),
        end_offset=i64(end_offset),
    )


def offset_for_leader_epoch_response(
    topics: Sequence[tuple[str, Sequence[EpochEndOffset]]],
) -> ofle_resp.OffsetForLeaderEpochResponse:
    return ofle_resp.OffsetForLeaderEpochResponse(
        throttle_time=NO_THROTTLE_I32,
        topics=tuple(
            ofle_resp.OffsetForLeaderTopicResult(
                topic=cast(TopicName, topic), partitions=tuple(partitions)
            )
            for topic, partitions in topics
        ),
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
    """One partition of any Fetch version as the broker's FetchRequest: its fields in order,
    through its slots (kafkawire.slots), once for each partition of each Fetch read (issue 35);
    the long-poll wait is the request's (0 here)."""
    return _new_fetch_request(
        topic,
        int(partition.partition),
        int(partition.fetch_offset),
        replica_id,
        replica_epoch,
        int(getattr(partition, "current_leader_epoch", bm.NO_EPOCH)),
        int(getattr(partition, "last_fetched_epoch", bm.NO_EPOCH)),
        0,
        max_bytes,
        min_one_message,
    )


_new_fetch_request = slot_constructor(bm.FetchRequest)


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
