"""A MetadataImage written back as the records that rebuild it: a snapshot's content.

Replaying `image_records(image)` into an empty MetadataDelta gives the same image (a test pins
this), so a controller failing over from snapshot + log has exactly what the old one had.
"""

from __future__ import annotations

from collections.abc import Iterator

from metadata.metadata_image import MetadataImage
from metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
)


def image_records(image: MetadataImage) -> Iterator[MetadataRecord]:
    for name, level in sorted(image.features.items()):
        yield FeatureLevelRecord(name=name, feature_level=level)
    for broker in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        yield RegisterBrokerRecord(
            broker_id=broker.broker_id,
            incarnation_id=broker.incarnation_id,
            broker_epoch=broker.epoch,
            endpoints=broker.endpoints,
            rack=broker.rack,
            fenced=broker.fenced,
            in_controlled_shutdown=broker.in_controlled_shutdown,
            log_dirs=broker.log_dirs,
        )
    for (resource_type, resource_name), entries in sorted(image.configs.items()):
        for key, value in sorted(entries.items()):
            yield ConfigRecord(
                resource_type=resource_type, resource_name=resource_name, name=key, value=value
            )
    for topic in sorted(image.topics.values(), key=lambda t: t.name):
        yield TopicRecord(name=topic.name, topic_id=topic.topic_id)
        for partition_id, registration in sorted(topic.partitions.items()):
            yield registration.to_record(topic.topic_id, partition_id)
    if image.next_producer_id > 0:
        # The block owner is not kept in the image: only the next free id matters.
        yield ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id)
