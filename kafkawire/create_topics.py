"""The one CreateTopics request builder (v7) for topics minikraft creates itself: the CLI's
`topics create`, the tools' topics, and a broker's own (Metadata auto-creation,
`__consumer_offsets`). Clients' own CreateTopics requests are forwarded as they come."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkawire import admin_messages as am

DEFAULT_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)


def create_topics_request(
    topics: Sequence[NewTopic], timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> am.CreateTopicsRequest:
    return am.create_topics_request(
        (
            am.creatable_topic(t.name, t.num_partitions, t.replication_factor, t.configs)
            for t in topics
        ),
        timeout_ms=timeout_ms,
    )
