"""A broker's Metadata answer keeps each topic's entry while its image is the same (issue 35):
an answer for all topics rebuilds only what a delta touched, and says what a fresh build of the
same image says (Kafka builds every answer from its current image)."""

from __future__ import annotations

import uuid
from typing import Any

from kafkawire.api_keys import ApiKey
from kafkawire.authorized_operations import NOT_REQUESTED
from kafkawire.entities import item_type
from kafkawire.messages import response_schema
from metadata.kafka_describe import DescribedTopics, unfenced_broker_ids
from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.records import (
    BROKER_FLAG_TRUE,
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

TOPIC_CLS = item_type(response_schema(int(ApiKey.METADATA), 12), "topics")
A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def _replayed(image: MetadataImage, *records: MetadataRecord) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(records, start=image.offset + 1):
        delta.replay(record, offset)
    return delta.image()


def _answer(cache: DescribedTopics, image: MetadataImage) -> list[Any]:
    unfenced = unfenced_broker_ids(image)
    return [
        cache.topic(TOPIC_CLS, image, image.topics_by_name[name], NOT_REQUESTED, unfenced, False)
        for name in sorted(image.topics_by_name)
    ]


def _image() -> MetadataImage:
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(b, uuid.UUID(int=100 + b), broker_epoch=10 * b, fenced=False)
        for b in (1, 2, 3)
    ]
    for name, topic_id in (("a", A), ("b", B)):
        records.append(TopicRecord(name, topic_id))
        records += [
            PartitionRecord(p, topic_id, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
            for p in range(3)
        ]
    return _replayed(MetadataImage(), *records)


def test_an_unchanged_topic_is_answered_from_its_kept_entry_and_a_changed_one_anew() -> None:
    cache = DescribedTopics()
    image = _image()
    first = _answer(cache, image)
    assert first == _answer(DescribedTopics(), image)
    assert all(a is b for a, b in zip(_answer(cache, image), first, strict=True))

    # A NoOpRecord makes a new image with the same topics: nothing is built again.
    idle = _replayed(image, NoOpRecord())
    assert idle is not image
    assert all(a is b for a, b in zip(_answer(cache, idle), first, strict=True))

    # An ISR shrink of b's partition 1: a is kept, b says the new ISR.
    shrunk = _replayed(idle, PartitionChangeRecord(1, B, isr=(1, 2)))
    second = _answer(cache, shrunk)
    assert second[0] is first[0]
    assert second[1] is not first[1]
    assert [tuple(p.isr_nodes) for p in second[1].partitions] == [(1, 2, 3), (1, 2), (1, 2, 3)]
    assert second == _answer(DescribedTopics(), shrunk)


def test_a_fenced_broker_is_answered_offline_in_every_topic_kept_before() -> None:
    cache = DescribedTopics()
    image = _image()
    before = _answer(cache, image)
    assert all(not p.offline_replicas for t in before for p in t.partitions)
    fenced = _replayed(image, BrokerRegistrationChangeRecord(3, 30, fenced=BROKER_FLAG_TRUE))
    after = _answer(cache, fenced)
    assert all(tuple(p.offline_replicas) == (3,) for t in after for p in t.partitions)
    assert after == _answer(DescribedTopics(), fenced)
