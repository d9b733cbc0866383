"""SnapshotGenerator: a MetadataPublisher that snapshots the applied image once enough records
were committed since the last snapshot (Kafka's SnapshotGenerator,
metadata.log.snapshot.interval.records). Every replica snapshots its own committed state,
standbys and brokers too; the voter set goes in each snapshot (rule 7): Raft's core writes it
(RaftReplica.create_snapshot), handed in here as `emit` so this stays pure."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence

from metadata.image_records import image_records
from metadata.loader import LoaderManifest, Provenance, SlicedPublisher
from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.records import encode_record

# emit(end_offset, encoded records): steps that write the snapshot in slices (the caller gives
# its loop back at every yield), returning whether one was written (False: one already covers
# end_offset, e.g. fetched from the leader).
SnapshotEmitter = Callable[[int, Sequence[bytes]], Generator[None, None, bool]]
# Records encoded between two yields of publish_steps (issue 35: a snapshot of 100,000
# partitions is 100,000 records; the image is immutable, so encoding it in slices is safe).
ENCODE_SLICE_RECORDS = 100


class SnapshotGenerator(SlicedPublisher):
    name = "SnapshotGenerator"

    def __init__(self, interval_records: int, emit: SnapshotEmitter) -> None:
        self.interval_records = interval_records
        self.records_since_snapshot = 0
        self._emit = emit
        # The snapshot to take, (image, end offset): the latest image once the interval is
        # reached; taken by background_steps, off the publishing path, so commits go on being
        # applied meanwhile (Kafka's SnapshotGenerator emits on an event queue of its own).
        self._pending: tuple[MetadataImage, int] | None = None
        # A snapshot is being written: none is scheduled meanwhile (Kafka's "not scheduling
        # ... because event queue is not empty yet").
        self._writing = False

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        """Called directly (not by the loader's runtime): the snapshot is taken at once too."""
        super().on_metadata_update(delta, image, manifest)
        for _ in self.background_steps():
            pass

    def publish_steps(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> Iterator[None]:
        if manifest.provenance is Provenance.SNAPSHOT:
            self.records_since_snapshot = 0
            self._pending = None
            return
        self.records_since_snapshot += manifest.records
        if self.records_since_snapshot >= self.interval_records and not self._writing:
            self._pending = (image, manifest.end_offset)
        yield from ()

    def background_steps(self) -> Iterator[None]:
        """Take the pending snapshot, in slices: the image is immutable, so the runtime runs
        this beside the applier (issue 35: a 100,000-partition snapshot on the publishing
        path held every write waiting for its replay, AlterPartition timed out)."""
        if self._pending is None:
            return
        image, end_offset = self._pending
        self._pending = None
        # The count starts again as the snapshot starts (Kafka's resetSnapshotCounters at the
        # start of the emit): what is committed while it is written counts toward the next
        # one, and nothing is scheduled until it is written. Before, every commit applied
        # during the write found the count still past the interval and scheduled another
        # snapshot of 100,000 partitions, taken right after (a restarted broker took two 19 s
        # apart, 7,000 records apart, at 100,000 partitions: issue 35).
        counted, self.records_since_snapshot = self.records_since_snapshot, 0
        self._writing = True
        try:
            encoded: list[bytes] = []
            for record in image_records(image):
                encoded.append(encode_record(record))
                if len(encoded) % ENCODE_SLICE_RECORDS == 0:
                    yield
            written = yield from self._emit(end_offset, encoded)
        finally:
            self._writing = False
        if not written:
            self.records_since_snapshot += counted  # refused: one covers it already; count on
