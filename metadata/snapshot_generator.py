"""SnapshotGenerator: a MetadataPublisher that snapshots the applied image once enough records
were committed since the last snapshot (Kafka's SnapshotGenerator,
metadata.log.snapshot.interval.records). Every replica snapshots its own committed state,
standbys and brokers too; the voter set goes in each snapshot (rule 7): Raft's core writes it
(RaftReplica.create_snapshot), handed in here as `emit` so this stays pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from controller.core.image_records import image_records
from controller.core.metadata_image import MetadataImage
from controller.core.records import encode_record
from metadata.changes import MetadataChanges
from metadata.loader import LoaderManifest, Provenance

# emit(end_offset, encoded records) -> whether a snapshot was written (False: one already
# covers end_offset, e.g. fetched from the leader).
SnapshotEmitter = Callable[[int, Sequence[bytes]], bool]


class SnapshotGenerator:
    name = "SnapshotGenerator"

    def __init__(self, interval_records: int, emit: SnapshotEmitter) -> None:
        self.interval_records = interval_records
        self.records_since_snapshot = 0
        self._emit = emit

    def on_metadata_update(
        self, changes: MetadataChanges, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        if manifest.provenance is Provenance.SNAPSHOT:
            self.records_since_snapshot = 0
            return
        self.records_since_snapshot += manifest.records
        self.maybe_snapshot(image, manifest.end_offset)

    def maybe_snapshot(self, image: MetadataImage, end_offset: int) -> bool:
        if self.records_since_snapshot < self.interval_records:
            return False
        if not self._emit(end_offset, [encode_record(r) for r in image_records(image)]):
            return False
        self.records_since_snapshot = 0
        return True
