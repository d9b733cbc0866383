"""SnapshotGenerator: a MetadataPublisher that snapshots the applied image once enough records
were committed since the last snapshot (Kafka's SnapshotGenerator,
metadata.log.snapshot.interval.records). Every replica snapshots its own committed state,
standbys and brokers too; the voter set goes in each snapshot (rule 7): Raft's core writes it
(RaftReplica.create_snapshot), handed in here as `emit` so this stays pure."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence

from metadata.image_records import image_records
from metadata.loader import LoaderManifest, Provenance
from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.records import encode_record

# emit(end_offset, encoded records): steps that write the snapshot in slices (the caller gives
# its loop back at every yield), returning whether one was written (False: one already covers
# end_offset, e.g. fetched from the leader).
SnapshotEmitter = Callable[[int, Sequence[bytes]], Generator[None, None, bool]]
# Records encoded between two yields of publish_steps (issue 35: a snapshot of 100,000
# partitions is 100,000 records; the image is immutable, so encoding it in slices is safe).
ENCODE_SLICE_RECORDS = 500


class SnapshotGenerator:
    name = "SnapshotGenerator"

    def __init__(self, interval_records: int, emit: SnapshotEmitter) -> None:
        self.interval_records = interval_records
        self.records_since_snapshot = 0
        self._emit = emit

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        for _ in self.publish_steps(delta, image, manifest):
            pass

    def publish_steps(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> Iterator[None]:
        if manifest.provenance is Provenance.SNAPSHOT:
            self.records_since_snapshot = 0
            return
        self.records_since_snapshot += manifest.records
        yield from self._snapshot_steps(image, manifest.end_offset, [])

    def maybe_snapshot(self, image: MetadataImage, end_offset: int) -> bool:
        taken: list[bool] = []
        for _ in self._snapshot_steps(image, end_offset, taken):
            pass
        return bool(taken)

    def _snapshot_steps(
        self, image: MetadataImage, end_offset: int, taken: list[bool]
    ) -> Iterator[None]:
        if self.records_since_snapshot < self.interval_records:
            return
        encoded: list[bytes] = []
        for record in image_records(image):
            encoded.append(encode_record(record))
            if len(encoded) % ENCODE_SLICE_RECORDS == 0:
                yield
        written = yield from self._emit(end_offset, encoded)
        if not written:
            return
        self.records_since_snapshot = 0
        taken.append(True)
