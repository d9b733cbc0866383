"""MetadataImage: the cluster metadata as of one offset, built only by replaying records.

`MetadataDelta(image)` replays committed records (`replay(record, offset)`) and `image()` returns
a new immutable image; the old image is never mutated, so readers may keep it. Controller,
broker and the audit all use this one replay (STYLE.md: replay is the only way state changes).

The delta also says what it moved, by key (Kafka's MetadataDelta: topicsDelta, clusterDelta,
configsDelta): the loader hands it to the publishers with the new image, so a publisher's work
per commit is proportional to the change rather than to the cluster (issue 18).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypeVar

from metadata.partition_registration import PartitionRegistration
from metadata.records import (
    BROKER_FLAG_UNCHANGED,
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    TRANSACTION_MARKERS,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    Endpoint,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)

MIN_INSYNC_REPLICAS = "min.insync.replicas"
DEFAULT_MIN_INSYNC_REPLICAS = 1
CLUSTER_DEFAULT_RESOURCE = ""
K = TypeVar("K")
V = TypeVar("V")  # ConfigRecord resource_name of the cluster-wide broker default


class MetadataReplayError(ValueError):
    """A record that does not apply to the image (names an unknown broker/topic or stale epoch)."""


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    fenced: bool
    in_controlled_shutdown: bool
    endpoints: tuple[Endpoint, ...] = ()
    rack: str | None = None
    log_dirs: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration] = field(
        default_factory=lambda: MappingProxyType({})
    )


def _frozen(mapping: dict) -> Mapping:  # type: ignore[type-arg]
    return MappingProxyType(mapping)


def _copy(mapping: Mapping[K, V]) -> dict[K, V]:
    """A dict copy of an image's mapping. `dict(proxy)` walks a MappingProxyType key by key
    (4.3 ms for a topic of 10,000 partitions); its `copy()` is the dict's own copy (0.2 ms):
    each AlterPartition commit copies its topics' partition maps on every node (issue 35)."""
    copy = getattr(mapping, "copy", None)
    return copy() if copy is not None else dict(mapping)  # type: ignore[no-any-return]


class _BrokerLookups:
    """What a partition asks of its brokers (PartitionChangeBuilder, AlterPartition validation,
    a broker's partition states), read from `brokers`."""

    __slots__ = ()
    brokers: Mapping[int, BrokerRegistration]

    def is_fenced(self, broker_id: int) -> bool:
        """An unregistered broker counts as fenced: it cannot lead or be in the ISR."""
        reg = self.brokers.get(broker_id)
        return reg is None or reg.fenced

    def is_in_controlled_shutdown(self, broker_id: int) -> bool:
        reg = self.brokers.get(broker_id)
        return reg is not None and reg.in_controlled_shutdown

    def broker_epoch(self, broker_id: int) -> int | None:
        reg = self.brokers.get(broker_id)
        return None if reg is None else reg.epoch


@dataclass(frozen=True, slots=True)
class BrokersView(_BrokerLookups):
    """An image's brokers alone, for what must not keep the whole image alive: each of a
    broker's partition states held the image of its last change, and an AlterPartition storm
    at 100,000 partitions kept hundreds of images, each with its copied topic maps, alive
    (about a gigabyte a broker; issue 35)."""

    brokers: Mapping[int, BrokerRegistration]


@dataclass(frozen=True, slots=True)
class MetadataImage(_BrokerLookups):
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _frozen({}))
    topics: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: _frozen({}))
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: _frozen({}))
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(
        default_factory=lambda: _frozen({})
    )
    features: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    next_producer_id: int = 0  # ProducerIdsRecord: the first id not yet handed out
    offset: int = -1  # the last offset replayed; -1 for the empty image

    def partition(self, topic_id: uuid.UUID, partition_id: int) -> PartitionRegistration | None:
        topic = self.topics.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def config(self, resource_type: int, resource_name: str, key: str) -> str | None:
        return self.configs.get((resource_type, resource_name), {}).get(key)

    def topic_min_insync_replicas(self, topic_name: str) -> int:
        """Topic config, else the cluster default broker config, else Kafka's default of 1."""
        for resource in (
            (CONFIG_RESOURCE_TOPIC, topic_name),
            (CONFIG_RESOURCE_BROKER, CLUSTER_DEFAULT_RESOURCE),
        ):
            value = self.configs.get(resource, {}).get(MIN_INSYNC_REPLICAS)
            if value is not None:
                return int(value)
        return DEFAULT_MIN_INSYNC_REPLICAS

    def effective_min_isr(self, topic_id: uuid.UUID, partition_id: int) -> int:
        """Rule 9: min(min.insync.replicas, replication factor)."""
        topic = self.topics[topic_id]
        reg = topic.partitions[partition_id]
        return min(self.topic_min_insync_replicas(topic.name), len(reg.replicas))


_BROKER_RECORDS = (
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    FenceBrokerRecord,
    UnfenceBrokerRecord,
    BrokerRegistrationChangeRecord,
)


class MetadataDelta:
    """Copy-on-write builder over a base image: replay records, then take `image()`. The
    public sets name what the replayed records touched (read by publishers)."""

    def __init__(self, base: MetadataImage | None = None) -> None:
        base = base if base is not None else MetadataImage()
        # (topic id, partition) of every PartitionRecord / PartitionChangeRecord.
        self.partitions: set[tuple[uuid.UUID, int]] = set()
        self.created_topics: set[uuid.UUID] = set()
        self.removed_topics: set[uuid.UUID] = set()
        # Registration, fencing, controlled shutdown or log dirs of these brokers.
        self.brokers: set[int] = set()
        self.configs: set[tuple[int, str]] = set()
        self.features: set[str] = set()
        self.producer_ids = False
        self.records = 0  # data records replayed
        self._brokers = _copy(base.brokers)
        self._topics = _copy(base.topics)
        self._topics_by_name = _copy(base.topics_by_name)
        self._configs = _copy(base.configs)
        self._features = _copy(base.features)
        self._next_producer_id = base.next_producer_id
        self._offset = base.offset
        # Partitions of the topics this delta touched, copied once per topic on first write and
        # frozen in image(): copying a topic's whole partition map per record made replaying a
        # 10,000-partition CreateTopics quadratic (issue 35).
        self._partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = {}

    def image(self) -> MetadataImage:
        for topic_id, partitions in self._partitions.items():
            topic = self._topics.get(topic_id)
            if topic is None:
                continue
            updated = replace(topic, partitions=_frozen(partitions))
            self._topics[topic_id] = updated
            self._topics_by_name[topic.name] = updated
        # Frozen now: a later replay on this delta copies again rather than mutate the image.
        self._partitions = {}
        return MetadataImage(
            brokers=_frozen(self._brokers.copy()),
            topics=_frozen(self._topics.copy()),
            topics_by_name=_frozen(self._topics_by_name.copy()),
            configs=_frozen(self._configs.copy()),
            features=_frozen(self._features.copy()),
            next_producer_id=self._next_producer_id,
            offset=self._offset,
        )

    def _note(self, record: MetadataRecord) -> None:
        """What `record` touches (only its keys are read)."""
        self.records += 1
        if isinstance(record, PartitionRecord | PartitionChangeRecord):
            self.partitions.add((record.topic_id, record.partition_id))
        elif isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord):
            self.brokers.add(record.id)  # Kafka's FenceBrokerRecord names the broker `id`
        elif isinstance(record, _BROKER_RECORDS):
            self.brokers.add(record.broker_id)
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

    def replay(self, record: MetadataRecord, offset: int) -> None:
        self._note(record)
        if isinstance(record, RegisterBrokerRecord):
            self._replay_register(record, offset)
        elif isinstance(record, UnregisterBrokerRecord):
            current = self._brokers.get(record.broker_id)
            if current is not None and current.epoch == record.broker_epoch:
                del self._brokers[record.broker_id]
        elif isinstance(record, FenceBrokerRecord):
            self._set_broker_flags(record.id, record.epoch, fenced=True)
        elif isinstance(record, UnfenceBrokerRecord):
            self._set_broker_flags(record.id, record.epoch, fenced=False)
        elif isinstance(record, BrokerRegistrationChangeRecord):
            self._replay_registration_change(record)
        elif isinstance(record, TopicRecord):
            topic = TopicImage(record.name, record.topic_id)
            self._topics[record.topic_id] = topic
            self._topics_by_name[record.name] = topic
            self._partitions[record.topic_id] = {}
        elif isinstance(record, PartitionRecord):
            self._put_partition(
                record.topic_id, record.partition_id, PartitionRegistration.from_record(record)
            )
        elif isinstance(record, PartitionChangeRecord):
            current_partition = self._partition(record.topic_id, record.partition_id)
            self._put_partition(
                record.topic_id, record.partition_id, current_partition.merge(record)
            )
        elif isinstance(record, RemoveTopicRecord):
            removed = self._topics.pop(record.topic_id, None)
            if removed is None:
                raise MetadataReplayError(f"RemoveTopicRecord for unknown topic {record.topic_id}")
            self._partitions.pop(record.topic_id, None)
            self._topics_by_name.pop(removed.name, None)
            self._configs.pop((CONFIG_RESOURCE_TOPIC, removed.name), None)
        elif isinstance(record, ConfigRecord):
            self._replay_config(record)
        elif isinstance(record, FeatureLevelRecord):
            # Level 0 is kept (Kafka drops it): a feature turned off stays off, rather than
            # falling back to the node's default as a feature never written does (rule 10).
            self._features[record.name] = record.feature_level
        elif isinstance(record, ProducerIdsRecord):
            # Kafka's ProducerIdControlManager.replay: the next block only moves forward.
            self._next_producer_id = max(self._next_producer_id, record.next_producer_id)
        elif not isinstance(record, (NoOpRecord, *TRANSACTION_MARKERS)):
            # NoOp and KIP-868's transaction markers change nothing in the image (the loader
            # applies what is between the markers together).
            raise MetadataReplayError(f"no replay for {type(record).__name__}")
        self._offset = max(self._offset, offset)

    def replay_partition_changes(
        self, records: Sequence[PartitionChangeRecord], first_offset: int
    ) -> None:
        """`replay` of PartitionChangeRecords at consecutive offsets from `first_offset`, each
        topic's partitions looked up once per run of its records rather than per record (the
        active controller replays a fencing's 100,000 changes as it writes them, issue 35)."""
        topic_id: uuid.UUID | None = None
        partitions: dict[int, PartitionRegistration] = {}
        touched = self.partitions
        for record in records:
            if record.topic_id is not topic_id and record.topic_id != topic_id:
                topic_id = record.topic_id
                self._partition(topic_id, record.partition_id)  # names an unknown topic
                partitions = self._writable_partitions(topic_id)
            current = partitions.get(record.partition_id)
            if current is None:
                raise MetadataReplayError(
                    f"change for unknown partition {topic_id}-{record.partition_id}"
                )
            partitions[record.partition_id] = current.merge(record)
            touched.add((topic_id, record.partition_id))
        self.records += len(records)
        if records:
            self._offset = max(self._offset, first_offset + len(records) - 1)

    def _replay_register(self, record: RegisterBrokerRecord, offset: int) -> None:
        # The broker epoch is the offset of its RegisterBrokerRecord; -1 in the record means
        # "use the offset" for writers that do not know it in advance.
        epoch = record.broker_epoch if record.broker_epoch >= 0 else offset
        self._brokers[record.broker_id] = BrokerRegistration(
            broker_id=record.broker_id,
            epoch=epoch,
            incarnation_id=record.incarnation_id,
            fenced=record.fenced,
            in_controlled_shutdown=record.in_controlled_shutdown,
            endpoints=record.endpoints,
            rack=record.rack,
            log_dirs=record.log_dirs,
        )

    def _broker(self, broker_id: int, epoch: int) -> BrokerRegistration:
        current = self._brokers.get(broker_id)
        if current is None:
            raise MetadataReplayError(f"record for unregistered broker {broker_id}")
        if current.epoch != epoch:
            raise MetadataReplayError(
                f"record for broker {broker_id} epoch {epoch}, registered epoch {current.epoch}"
            )
        return current

    def _set_broker_flags(self, broker_id: int, epoch: int, fenced: bool) -> None:
        current = self._broker(broker_id, epoch)
        # Unfencing also ends a controlled shutdown (Kafka: a re-registered broker is active).
        self._brokers[broker_id] = replace(
            current,
            fenced=fenced,
            in_controlled_shutdown=current.in_controlled_shutdown and fenced,
        )

    def _replay_registration_change(self, record: BrokerRegistrationChangeRecord) -> None:
        current = self._broker(record.broker_id, record.broker_epoch)
        fenced = current.fenced
        if record.fenced != BROKER_FLAG_UNCHANGED:
            fenced = bool(record.fenced)
        shutdown = current.in_controlled_shutdown
        if record.in_controlled_shutdown != BROKER_FLAG_UNCHANGED:
            shutdown = bool(record.in_controlled_shutdown)
        self._brokers[record.broker_id] = replace(
            current,
            fenced=fenced,
            in_controlled_shutdown=shutdown,
            log_dirs=current.log_dirs if record.log_dirs is None else record.log_dirs,
        )

    def _replay_config(self, record: ConfigRecord) -> None:
        key = (record.resource_type, record.resource_name)
        values = _copy(self._configs.get(key, {}))
        if record.value is None:
            values.pop(record.name, None)
        else:
            values[record.name] = record.value
        if values:
            self._configs[key] = _frozen(values)
        else:
            self._configs.pop(key, None)

    def _partition(self, topic_id: uuid.UUID, partition_id: int) -> PartitionRegistration:
        topic = self._topics.get(topic_id)
        partitions: Mapping[int, PartitionRegistration] | None = self._partitions.get(topic_id)
        if partitions is None and topic is not None:
            partitions = topic.partitions
        if topic is None or partitions is None or partition_id not in partitions:
            raise MetadataReplayError(f"change for unknown partition {topic_id}-{partition_id}")
        return partitions[partition_id]

    def _put_partition(
        self, topic_id: uuid.UUID, partition_id: int, registration: PartitionRegistration
    ) -> None:
        self._writable_partitions(topic_id)[partition_id] = registration

    def _writable_partitions(self, topic_id: uuid.UUID) -> dict[int, PartitionRegistration]:
        """The topic's partitions this delta may change (copied at its first change)."""
        topic = self._topics.get(topic_id)
        if topic is None:
            raise MetadataReplayError(f"partition of unknown topic {topic_id}")
        partitions = self._partitions.get(topic_id)
        if partitions is None:
            partitions = self._partitions[topic_id] = _copy(topic.partitions)
        return partitions


def replay(image: MetadataImage, record: MetadataRecord, offset: int) -> MetadataImage:
    """One record onto an image; for many records use MetadataDelta (it copies once)."""
    delta = MetadataDelta(image)
    delta.replay(record, offset)
    return delta.image()
