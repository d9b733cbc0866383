"""MetadataLoader: the one state machine over `__cluster_metadata` on every node, after Kafka's
MetadataLoader. Raft hands it committed batches and loaded snapshots (it is the RaftListener);
it replays them into the MetadataImage through MetadataDelta (STYLE.md: replay is the only way
state changes), notes what moved (MetadataChanges), and hands `(changes, image, manifest)` to
each registered MetadataPublisher in order: the snapshot generator on every node, the broker's
publisher on brokers. Controllers read `image` when they build a write; brokers act on the
delta. Pure: the runtime that owns Raft calls it on the event loop."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from controller.core.metadata_image import MetadataDelta, MetadataImage
from controller.core.records import decode_record
from metadata.changes import MetadataChanges
from storage.core.record_batch import RecordBatch

log = logging.getLogger("minikraft.metadata")

# Records replayed between two yields of the *_steps generators: the runtime gives its event loop
# back there, so Raft's fetches, votes and heartbeats never wait behind a 10,000-record batch
# (issue 35). About 2 ms of replay on an idle core.
REPLAY_SLICE_RECORDS = 100


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


class SlicedPublisher(Protocol):
    """A publisher whose work on a big change comes in slices: `publish_steps` does what
    on_metadata_update would, yielding between slices so the runtime can serve in between."""

    def publish_steps(
        self, changes: MetadataChanges, image: MetadataImage, manifest: LoaderManifest
    ) -> Iterator[None]: ...


def replay_steps(
    image: MetadataImage,
    batches: Sequence[RecordBatch],
    changes: MetadataChanges,
    out: list[MetadataImage],
) -> Iterator[None]:
    """Replay the data records of committed batches (control records are Raft's own), noting
    what each touches in `changes`; yields every REPLAY_SLICE_RECORDS records and appends the
    new image to `out` at the end. Nothing sees a partly replayed commit: the delta is private
    until the end (a commit is applied atomically, as Kafka's loader publishes whole batches)."""
    delta = MetadataDelta(image)
    count = 0
    for batch in batches:
        if batch.is_control:
            continue
        for index, raw in enumerate(batch.records):
            record = decode_record(raw.value or b"")
            changes.note(record)
            delta.replay(record, batch.offset_of(index))
            count += 1
            if count % REPLAY_SLICE_RECORDS == 0:
                yield
    out.append(delta.image())


def replay_batches(
    image: MetadataImage, batches: Sequence[RecordBatch], changes: MetadataChanges
) -> MetadataImage:
    """replay_steps in one go."""
    out: list[MetadataImage] = []
    for _ in replay_steps(image, batches, changes, out):
        pass
    return out[0]


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
        for _ in self.commit_steps(batches):
            pass

    def commit_steps(self, batches: Sequence[RecordBatch]) -> Iterator[None]:
        """handle_commit in slices (the RaftDriver's applier runs it, yielding its loop)."""
        changes = MetadataChanges()
        out: list[MetadataImage] = []
        yield from replay_steps(self.image, batches, changes, out)
        self.image = out[0]
        for batch in batches:
            self.committed_offset = batch.next_offset
            self.committed_epoch = batch.leader_epoch
        manifest = LoaderManifest(
            Provenance.LOG, self.committed_offset, self.committed_epoch, changes.records
        )
        if changes.records >= 1000:
            log.info(
                "Replayed %s metadata records up to offset %s (%s partitions, %s new topics)",
                changes.records,
                self.committed_offset,
                len(changes.partitions),
                len(changes.created_topics),
            )
        yield from self._publish_steps(changes, manifest)

    def handle_load_snapshot(
        self, snapshot_end_offset: int, batches: Sequence[RecordBatch]
    ) -> None:
        for _ in self.load_snapshot_steps(snapshot_end_offset, batches):
            pass

    def load_snapshot_steps(
        self, snapshot_end_offset: int, batches: Sequence[RecordBatch]
    ) -> Iterator[None]:
        """handle_load_snapshot in slices."""
        counted = MetadataChanges()
        out: list[MetadataImage] = []
        yield from replay_steps(MetadataImage(), batches, counted, out)
        self.image = out[0]
        self.committed_offset = snapshot_end_offset
        epoch = batches[-1].leader_epoch if batches else self.committed_epoch
        self.committed_epoch = epoch
        log.info(
            "Loaded metadata snapshot ending at offset %s (%s records, %s topics)",
            snapshot_end_offset,
            counted.records,
            len(self.image.topics),
        )
        manifest = LoaderManifest(
            Provenance.SNAPSHOT, snapshot_end_offset, epoch, counted.records
        )
        yield from self._publish_steps(MetadataChanges.whole_image(counted.records), manifest)

    def handle_leader_change(
        self, leader_id: int | None, epoch: int, is_local_leader: bool
    ) -> None:
        self.leader_id = leader_id
        self.epoch = epoch
        self.is_active = is_local_leader

    def _publish_steps(
        self, changes: MetadataChanges, manifest: LoaderManifest
    ) -> Iterator[None]:
        image = self.image
        for publisher in self._publishers:
            steps = getattr(publisher, "publish_steps", None)
            if steps is not None:
                yield from steps(changes, image, manifest)
            else:
                publisher.on_metadata_update(changes, image, manifest)
