"""The one CreateTopics request builder (v7) for topics minikraft creates itself: the CLI's
`topics create`, the tools' topics, and a broker's own (Metadata auto-creation,
`__consumer_offsets`). Clients' own CreateTopics requests are forwarded as they come."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

DEFAULT_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)


def create_topics_request(
    topics: Sequence[NewTopic], timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(
                name=TopicName(t.name),
                num_partitions=i32(t.num_partitions),
                replication_factor=i16(t.replication_factor),
                assignments=(),
                configs=tuple(
                    CreatableTopicConfig(name=k, value=v) for k, v in sorted(t.configs.items())
                ),
            )
            for t in topics
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
        validate_only=False,
    )
