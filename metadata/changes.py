"""MetadataChanges: what one commit (a run of committed batches) touched, by key, noted while
the loader replays it. After Kafka's MetadataDelta (topicsDelta, clusterDelta, configsDelta):
the image says what is, this says what moved, so a publisher's work per commit is proportional
to the change rather than to the cluster (issue 18).

It only classifies records; the replay itself stays MetadataDelta's (STYLE.md: one replay)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from controller.core.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)

_BROKER_RECORDS = (
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    FenceBrokerRecord,
    UnfenceBrokerRecord,
    BrokerRegistrationChangeRecord,
)


@dataclass(slots=True)
class MetadataChanges:
    # The whole image was replaced (a snapshot loaded): a publisher rescans everything.
    full: bool = False
    # (topic id, partition) of every PartitionRecord / PartitionChangeRecord.
    partitions: set[tuple[uuid.UUID, int]] = field(default_factory=set)
    created_topics: set[uuid.UUID] = field(default_factory=set)
    removed_topics: set[uuid.UUID] = field(default_factory=set)
    # Registration, fencing, controlled shutdown or log dirs of these brokers.
    brokers: set[int] = field(default_factory=set)
    configs: set[tuple[int, str]] = field(default_factory=set)
    features: set[str] = field(default_factory=set)
    producer_ids: bool = False
    records: int = 0  # data records replayed

    @classmethod
    def whole_image(cls, records: int) -> MetadataChanges:
        return cls(full=True, records=records)

    def note(self, record: MetadataRecord) -> None:
        """Record what `record` touches (before or after its replay: only its keys are read)."""
        self.records += 1
        if isinstance(record, PartitionRecord | PartitionChangeRecord):
            self.partitions.add((record.topic_id, record.partition_id))
        elif isinstance(record, _BROKER_RECORDS):
            self.brokers.add(_broker_id(record))
        elif isinstance(record, TopicRecord):
            self.created_topics.add(record.topic_id)
        elif isinstance(record, RemoveTopicRecord):
            self.removed_topics.add(record.topic_id)
        elif isinstance(record, ConfigRecord):
            self.configs.add((record.resource_type, record.resource_name))
        elif isinstance(record, FeatureLevelRecord):
            self.features.add(record.name)
        elif isinstance(record, ProducerIdsRecord):
            self.producer_ids = True

    @property
    def empty(self) -> bool:
        return not (
            self.full
            or self.partitions
            or self.created_topics
            or self.removed_topics
            or self.brokers
            or self.configs
            or self.features
            or self.producer_ids
        )


def _broker_id(
    record: RegisterBrokerRecord
    | UnregisterBrokerRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | BrokerRegistrationChangeRecord,
) -> int:
    # Fence/Unfence name the broker `id` (Kafka's FenceBrokerRecord field); the others broker_id.
    if isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord):
        return record.id
    return record.broker_id
