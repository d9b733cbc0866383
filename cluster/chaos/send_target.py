"""Where a real client's one-at-a-time producer sends (cluster.chaos.librdkafka_producer,
cluster.chaos.aiokafka_producer): one partition, acks=all, the run's timeout and idempotence."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SendTarget:
    bootstrap: str
    topic: str
    partition: int
    client_id: str
    request_timeout_ms: int
    idempotent: bool = True
