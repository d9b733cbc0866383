"""DescribeLogDirs (api key 35) on the broker, as Kafka's ReplicaManager.describeLogDirs answers
it (`kafka-log-dirs --describe`): per log directory, the partitions it holds with their size (the
batches' bytes, not preallocated free space), the offset lag max(HWM - LEO, 0) (0 on a leader),
and the volume's total and usable bytes (v4+).

minikraft has no AlterReplicaLogDirs, so no log is ever a future log (IsFutureKey false).
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from broker.runtime.replica_manager import ReplicaManager
from kafkawire.api_keys import ApiKey
from kafkawire.entities import NO_THROTTLE, build, item_type
from kafkawire.errors import Errors
from kafkawire.messages import error_code, response_schema


def describe_log_dirs(replicas: ReplicaManager, body: Any, version: int) -> Any:
    schema = response_schema(int(ApiKey.DESCRIBE_LOG_DIRS), version)
    result_cls = item_type(schema, "results")
    topic_cls = item_type(result_cls, "topics")
    partition_cls = item_type(topic_cls, "partitions")
    # A null topic list asks for every partition (Kafka's describeLogDirs).
    wanted: set[tuple[str, int]] | None = None
    if body.topics is not None:
        wanted = {(str(t.topic), int(p)) for t in body.topics for p in t.partitions}
    by_dir: dict[Path, dict[str, list[Any]]] = {
        Path(d).absolute(): defaultdict(list) for d in replicas.settings.log_dirs
    }
    for hosted in sorted(replicas.partitions.values(), key=lambda h: (h.topic, h.partition)):
        topic, partition = hosted.topic, hosted.partition
        topics = by_dir.setdefault(hosted.log.directory.parent.absolute(), defaultdict(list))
        # Kafka lists every topic of the directory, with only the partitions asked for.
        rows = topics[topic]
        if wanted is not None and (topic, partition) not in wanted:
            continue
        rows.append(build(
            partition_cls,
            partition_index=partition,
            partition_size=hosted.log.size_bytes(),
            offset_lag=max(hosted.state.high_watermark - hosted.log.log_end_offset, 0),
            is_future_key=False,
        ))
    results = []
    for directory, topics in by_dir.items():
        try:
            usage = shutil.disk_usage(directory)
            total, usable, error = usage.total, usage.free, Errors.NONE
        except OSError:  # Kafka: an offline directory answers KAFKA_STORAGE_ERROR
            total, usable, error = -1, -1, Errors.KAFKA_STORAGE_ERROR
        results.append(build(
            result_cls,
            error_code=error_code(error),
            log_dir=str(directory),
            topics=tuple(
                build(topic_cls, name=name, partitions=tuple(rows))
                for name, rows in sorted(topics.items())
            ),
            total_bytes=total,
            usable_bytes=usable,
        ))
    return build(schema, throttle_time=NO_THROTTLE, error_code=error_code(Errors.NONE),
                 results=tuple(results))
