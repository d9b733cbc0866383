"""controller.core.producer_id_control: blocks of producer ids for registered brokers, never
handed out twice, across controller failover (replay) and snapshots (image_records)."""

from __future__ import annotations

import uuid

import pytest

from controller.core.producer_id_control import PRODUCER_ID_BLOCK_SIZE, allocate_producer_ids
from kafkawire.errors import Errors, KafkaError
from metadata.image_records import image_records
from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.records import ProducerIdsRecord, RegisterBrokerRecord


def with_broker(broker_id: int = 1, epoch: int = 10) -> MetadataImage:
    delta = MetadataDelta()
    delta.replay(RegisterBrokerRecord(broker_id, uuid.uuid4(), epoch), epoch)
    return delta.image()


def replay(image: MetadataImage, *records: ProducerIdsRecord) -> MetadataImage:
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record, image.offset + 1)
    return delta.image()


def test_consecutive_blocks_and_a_record_naming_the_next_free_id() -> None:
    image = with_broker()
    first = allocate_producer_ids(image, 1, 10)
    assert first.response.first_id == 0 and first.response.size == PRODUCER_ID_BLOCK_SIZE
    assert first.records == (ProducerIdsRecord(1, 10, PRODUCER_ID_BLOCK_SIZE),)
    image = replay(image, *first.records)  # type: ignore[arg-type]
    second = allocate_producer_ids(image, 1, 10)
    assert second.response.first_id == PRODUCER_ID_BLOCK_SIZE


def test_unknown_broker_or_stale_epoch_is_stale_broker_epoch() -> None:
    image = with_broker()
    for broker_id, epoch in ((1, 9), (2, 10)):
        with pytest.raises(KafkaError) as info:
            allocate_producer_ids(image, broker_id, epoch)
        assert info.value.error is Errors.STALE_BROKER_EPOCH


def test_a_snapshot_keeps_the_next_id_and_replay_never_moves_it_back() -> None:
    image = replay(with_broker(), ProducerIdsRecord(1, 10, 5000), ProducerIdsRecord(1, 10, 3000))
    assert image.next_producer_id == 5000
    rebuilt = MetadataDelta()
    for record in image_records(image):
        rebuilt.replay(record, 0)
    assert rebuilt.image().next_producer_id == 5000
    assert allocate_producer_ids(rebuilt.image(), 1, 10).response.first_id == 5000
