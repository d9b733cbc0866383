"""Producer id blocks for brokers (Kafka's ProducerIdControlManager, KIP-730).

A broker serving InitProducerId asks the active controller for a block of ids
(AllocateProducerIds); the controller answers with the next PRODUCER_ID_BLOCK_SIZE ids and
commits a ProducerIdsRecord naming the first id after them. The record is in the metadata log
and snapshots (MetadataImage.next_producer_id), so a controller failover never hands out an id
twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.controller_result import ControllerResult
from kafkawire.errors import Errors, KafkaError
from metadata.metadata_image import MetadataImage
from metadata.records import ProducerIdsRecord

PRODUCER_ID_BLOCK_SIZE = 1000
MAX_PRODUCER_ID = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    broker_id: int
    first_id: int
    size: int = PRODUCER_ID_BLOCK_SIZE


def allocate_producer_ids(
    image: MetadataImage, broker_id: int, broker_epoch: int
) -> ControllerResult[ProducerIdsBlock]:
    """The next block for a registered broker of this epoch (Kafka: STALE_BROKER_EPOCH else)."""
    registration = image.brokers.get(broker_id)
    if registration is None or registration.epoch != broker_epoch:
        raise KafkaError(
            Errors.STALE_BROKER_EPOCH,
            f"broker {broker_id} epoch {broker_epoch} is not the registered one"
            f" ({None if registration is None else registration.epoch})",
        )
    first = image.next_producer_id
    if first > MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
        raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, "exhausted all producer ids")
    return ControllerResult(
        (ProducerIdsRecord(broker_id, broker_epoch, first + PRODUCER_ID_BLOCK_SIZE),),
        ProducerIdsBlock(broker_id, first),
    )
