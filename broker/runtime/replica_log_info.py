"""GetReplicaLogInfo (seed 004): what each hosted replica's log holds (last written leader
epoch, log end offset) beside the partition's leader epoch in this broker's image, for the
unclean-recovery tool and the controller's recovery manager. It takes and answers the wire's
own entities (kafkawire.get_replica_log_info): no broker-side copy of the message."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from kio.static.primitive import i32, i64

from broker.core.messages import TopicIdPartition
from broker.runtime.hosted_partition import HostedPartition
from kafkawire import get_replica_log_info as grli
from kafkawire.constants import ZERO_UUID
from kafkawire.entities import NO_THROTTLE
from kafkawire.errors import Errors
from kafkawire.messages import error_code
from metadata.metadata_image import MetadataImage


def replica_log_info(
    partitions: Mapping[TopicIdPartition, HostedPartition],
    image: MetadataImage,
    broker_epoch: int,
    request: grli.GetReplicaLogInfoRequest,
) -> grli.GetReplicaLogInfoResponse:
    """The partitions asked for (every hosted one when none are named), at most
    MAX_PARTITIONS of them, then Truncated (upstream's HasMoreData)."""
    wanted: list[tuple[uuid.UUID, int]] = []
    if request.topic_partitions is None:
        wanted.extend(partitions)
    else:
        for tp in request.topic_partitions:
            wanted.extend((tp.topic_id or ZERO_UUID, int(p)) for p in tp.partitions)
    limit = grli.MAX_PARTITIONS
    by_topic: dict[uuid.UUID, list[grli.PartitionLogInfo]] = {}
    for topic_id, partition in wanted[:limit]:
        by_topic.setdefault(topic_id, []).append(_log_info(partitions, image, topic_id, partition))
    return grli.GetReplicaLogInfoResponse(
        throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
        broker_epoch=i64(broker_epoch),
        truncated=len(wanted) > limit,
        topic_partition_log_info_list=tuple(
            grli.TopicPartitionLogInfo(topic_id=topic_id, partition_log_info=tuple(infos))
            for topic_id, infos in by_topic.items()
        ),
    )


def _log_info(
    partitions: Mapping[TopicIdPartition, HostedPartition],
    image: MetadataImage,
    topic_id: uuid.UUID,
    partition: int,
) -> grli.PartitionLogInfo:
    topic = image.topics.get(topic_id)
    registration = None if topic is None else topic.partitions.get(partition)
    leader_epoch = -1 if registration is None else registration.leader_epoch
    hosted = partitions.get(TopicIdPartition(topic_id, partition))
    last_epoch, log_end, error = -1, -1, Errors.NONE
    if registration is None:
        error = Errors.UNKNOWN_TOPIC_OR_PARTITION
    elif hosted is None:
        error = Errors.NOT_LEADER_OR_FOLLOWER
    else:
        last_epoch, log_end = hosted.log.latest_epoch(), hosted.log.log_end_offset
    return grli.PartitionLogInfo(
        partition=i32(partition),
        last_written_leader_epoch=i32(last_epoch),
        current_leader_epoch=i32(leader_epoch),
        log_end_offset=i64(log_end),
        error_code=error_code(error),
    )
