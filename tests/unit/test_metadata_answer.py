"""A broker's Metadata answer keeps each topic's entry while its image is the same (issue 35):
an answer for all topics rebuilds only what a delta touched, and says what a fresh build of the
same image says (Kafka builds every answer from its current image); the same answer of every
topic is encoded from each topic's bytes, kept while its entry is the same."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker.runtime.kafka_apis import EveryTopicAnswers
from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import BROKER_API_VERSIONS
from kafkawire.authorized_operations import NOT_REQUESTED
from kafkawire.entities import build, item_type
from kafkawire.framing import PREFIX_BYTES
from kafkawire.messages import decode_response, encode_response, response_schema
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


def _every_topic(image: MetadataImage, cache: DescribedTopics, version: int = 12) -> Any:
    schema = response_schema(int(ApiKey.METADATA), version)
    topic_cls = item_type(schema, "topics")
    unfenced = unfenced_broker_ids(image)
    return build(
        schema,
        brokers=(),
        cluster_id="c",
        controller_id=1,
        topics=tuple(
            cache.topic(topic_cls, image, image.topics_by_name[name], NOT_REQUESTED, unfenced, False)
            for name in sorted(image.topics_by_name)
        ),
    )


@pytest.mark.parametrize("version", BROKER_API_VERSIONS[ApiKey.METADATA].versions())
def test_an_answer_of_every_topic_is_the_codecs_bytes_from_each_topics_kept_bytes(
    version: int,
) -> None:
    answers, cache, image = EveryTopicAnswers(), DescribedTopics(), _image()
    body = _every_topic(image, cache, version)
    first = answers.encoded(body)
    assert encode_response(first, 5) == encode_response(body, 5)
    kept = [b for _, b in answers._topics.values()]
    # A's partition 1 shrinks: b's bytes are kept, a's written again, the whole the codec's.
    shrunk = _replayed(image, PartitionChangeRecord(1, A, isr=(1, 2)))
    body = _every_topic(shrunk, cache, version)
    second = answers.encoded(body)
    assert encode_response(second, 6) == encode_response(body, 6)
    now = [b for _, b in answers._topics.values()]
    assert now[0] is not kept[0] and now[1] is kept[1]
    _, decoded = decode_response(
        encode_response(second, 6)[PREFIX_BYTES:], int(ApiKey.METADATA), version
    )
    assert tuple(decoded.topics[0].partitions[1].isr_nodes) == (1, 2)
