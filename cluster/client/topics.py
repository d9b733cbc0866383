"""Topics on Kafka's protocol: CreateTopics requests, every topic's partitions through
DescribeTopicPartitions (seed 001's paging) and their rows; brokers forward the writes to the
active controller, controllers (KIP-919) answer them themselves (`minikraft topics`, health,
chaos, unclean recovery)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from typing import Any

from kio.schema.create_topics.v7.request import (
    CreateTopicsRequest,
)
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta

from cluster.client.bootstrap import ADMIN_TIMEOUT_MS, request_admin
from cluster.output import EXIT_USAGE, fail
from kafkawire.create_topics import NewTopic
from kafkawire.create_topics import create_topics_request as build_create_topics
from kafkawire.errors import Errors, KafkaError
from metadata.kafka_describe import DESCRIBE_PARTITIONS_DEFAULT_LIMIT
from raft.core.replica_key import uuid_to_str

_RETRY_SLEEP_S = 0.1


def kafka_timeout(timeout_ms: int = ADMIN_TIMEOUT_MS) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms))


def run_admin(bootstrap: str, body: Any) -> Any:
    """Run one admin request on Kafka's protocol; the kio response, error codes and all. An
    unreachable cluster exits 2, another failure 1, as CLI.md says."""
    try:
        return asyncio.run(request_admin(bootstrap, body))
    except KafkaError as exc:
        code = (
            EXIT_USAGE if exc.error in (Errors.NETWORK_EXCEPTION, Errors.REQUEST_TIMED_OUT) else 1
        )
        fail(f"{exc.error.name}: {exc.message}", code)


def error_name(code: int) -> str | None:
    return None if int(code) == 0 else Errors.of(int(code)).name


def parse_configs(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in items:
        for part in item.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                fail(f"config {part!r} is not key=value", EXIT_USAGE)
            configs[key.strip()] = value.strip()
    return configs


def create_topics_request(
    topic: str, partitions: int, replication_factor: int, configs: dict[str, str]
) -> CreateTopicsRequest:
    return build_create_topics(
        [NewTopic(topic, partitions, replication_factor, configs)], ADMIN_TIMEOUT_MS
    )


# -- describe --------------------------------------------------------------------------------


async def describe_all(
    bootstrap: str, topics: list[str], limit: int = DESCRIBE_PARTITIONS_DEFAULT_LIMIT
) -> list[Any]:
    """Every page of DescribeTopicPartitions (seed 001's cursor), topics merged across pages:
    kio topic entities with minikraft's tagged additions (kafkawire.describe_topic_partitions).
    Any broker or controller answers from its committed image. KafkaError if none answers."""
    merged: dict[str, Any] = {}
    cursor: Cursor | None = None
    for _ in range(1_000_000):
        response = await request_admin(
            bootstrap,
            DescribeTopicPartitionsRequest(
                topics=tuple(TopicRequest(name=TopicName(t)) for t in topics),
                response_partition_limit=i32(limit),
                cursor=cursor,
            ),
        )
        for topic in response.topics:
            seen = merged.get(topic.name)
            merged[topic.name] = (
                topic
                if seen is None
                else dataclasses.replace(topic, partitions=seen.partitions + topic.partitions)
            )
        next_cursor = response.next_cursor
        if next_cursor is None:
            break
        cursor = Cursor(topic_name=next_cursor.topic_name, partition_index=next_cursor.partition_index)
    return list(merged.values())


def partition_rows(topics: list[Any]) -> list[dict[str, Any]]:
    """CLI.md's `topics describe --output json` rows."""
    rows = []
    for topic in topics:
        for p in topic.partitions:
            rows.append(
                {
                    "topic": topic.name,
                    "topic_id": uuid_to_str(topic.topic_id),
                    "partition": int(p.partition_index),
                    "leader": int(p.leader_id),
                    "leader_epoch": int(p.leader_epoch),
                    "partition_epoch": int(p.partition_epoch),
                    "replicas": [int(b) for b in p.replica_nodes],
                    "isr": [int(b) for b in p.isr_nodes],
                    "elr": [int(b) for b in p.eligible_leader_replicas or ()],
                    "last_known_elr": [int(b) for b in p.last_known_elr or ()],
                    "last_known_leader": int(p.last_known_leader),
                    "offline_replicas": [int(b) for b in p.offline_replicas],
                    "leader_recovery_state": "RECOVERING"
                    if p.leader_recovery_state == 1
                    else "RECOVERED",
                }
            )
    return rows


def under_min_isr_row(topic: Any, row: dict[str, Any]) -> bool:
    min_isr = topic.min_insync_replicas if topic.min_insync_replicas > 0 else 1
    return len(row["isr"]) < min(min_isr, len(row["replicas"]))  # rule 9


def unavailable(row: dict[str, Any]) -> bool:
    return row["leader"] < 0 or row["leader"] in row["offline_replicas"]
