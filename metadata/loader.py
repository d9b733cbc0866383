"""MetadataLoader: the one state machine over `__cluster_metadata` on every node, after Kafka's
MetadataLoader. Raft hands it committed batches and loaded snapshots (it is the RaftListener);
it replays them into the MetadataImage through MetadataDelta (STYLE.md: replay is the only way
state changes), notes what moved (MetadataChanges), and hands `(changes, image, manifest)` to
each registered MetadataPublisher in order: the snapshot generator on every node, the broker's
publisher on brokers. Controllers read `image` when they build a write; brokers act on the
delta. Pure: the runtime that owns Raft calls it on the event loop."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from controller.core.metadata_image import MetadataDelta, MetadataImage
from controller.core.records import decode_record
from metadata.changes import MetadataChanges
from raft.core.record_batch import RecordBatch

log = logging.getLogger("minikraft.metadata")


class Provenance(Enum):
    LOG = "log"  # committed batches of the log
    SNAPSHOT = "snapshot"  # a snapshot replaced the image


@dataclass(frozen=True, slots=True)
class LoaderManifest:
    """Where an update came from (Kafka's LogDeltaManifest / SnapshotManifest)."""

    provenance: Provenance
    end_offset: int  # every offset below is in the image
    epoch: int  # leader epoch of the last batch (of the snapshot for SNAPSHOT)
    records: int  # data records replayed


class MetadataPublisher(Protocol):
    """Kafka's MetadataPublisher: told of every change after the image took it."""

    @property
    def name(self) -> str: ...

    def on_metadata_update(
        self, changes: MetadataChanges, image: MetadataImage, manifest: LoaderManifest
    ) -> None: ...


def replay_batches(
    image: MetadataImage, batches: Sequence[RecordBatch], changes: MetadataChanges
) -> MetadataImage:
    """Replay the data records of committed batches (control records are Raft's own), noting
    what each touches in `changes`."""
    delta = MetadataDelta(image)
    for batch in batches:
        if batch.is_control:
            continue
        for index, raw in enumerate(batch.records):
            record = decode_record(raw.value or b"")
            changes.note(record)
            delta.replay(record, batch.offset_of(index))
    return delta.image()


class MetadataLoader:
    def __init__(self) -> None:
        self.image = MetadataImage()
        self.committed_offset = 0  # everything below is applied
        self.committed_epoch = 0
        self.leader_id: int | None = None
        self.epoch = -1
        self.is_active = False
        self._publishers: list[MetadataPublisher] = []

    def install_publishers(self, publishers: Sequence[MetadataPublisher]) -> None:
        """Register publishers (before Raft starts delivering: none misses an update)."""
        self._publishers.extend(publishers)

    @property
    def publishers(self) -> tuple[MetadataPublisher, ...]:
        return tuple(self._publishers)

    # RaftListener -------------------------------------------------------------------------

    def handle_commit(self, batches: Sequence[RecordBatch]) -> None:
        changes = MetadataChanges()
        self.image = replay_batches(self.image, batches, changes)
        for batch in batches:
            self.committed_offset = batch.next_offset
            self.committed_epoch = batch.leader_epoch
        manifest = LoaderManifest(
            Provenance.LOG, self.committed_offset, self.committed_epoch, changes.records
        )
        self._publish(changes, manifest)

    def handle_load_snapshot(
        self, snapshot_end_offset: int, batches: Sequence[RecordBatch]
    ) -> None:
        counted = MetadataChanges()
        self.image = replay_batches(MetadataImage(), batches, counted)
        self.committed_offset = snapshot_end_offset
        epoch = batches[-1].leader_epoch if batches else self.committed_epoch
        self.committed_epoch = epoch
        log.info("Loaded metadata snapshot ending at offset %s", snapshot_end_offset)
        manifest = LoaderManifest(
            Provenance.SNAPSHOT, snapshot_end_offset, epoch, counted.records
        )
        self._publish(MetadataChanges.whole_image(counted.records), manifest)

    def handle_leader_change(
        self, leader_id: int | None, epoch: int, is_local_leader: bool
    ) -> None:
        self.leader_id = leader_id
        self.epoch = epoch
        self.is_active = is_local_leader

    def _publish(self, changes: MetadataChanges, manifest: LoaderManifest) -> None:
        for publisher in self._publishers:
            publisher.on_metadata_update(changes, self.image, manifest)
