"""SnapshotGenerator: a MetadataPublisher that snapshots the applied image once enough was
committed since the last snapshot, as Kafka's SnapshotGenerator: after
metadata.log.max.record.bytes.between.snapshots bytes of committed batches (each batch's size
in the log, Kafka's LogDeltaManifest.numBytes), or, at the first commit after
metadata.log.max.snapshot.interval.ms (0: never), whatever was committed. Kafka's SharedServer
builds one for every node, controller or broker. minikraft adds one trigger of its own,
metadata.log.snapshot.interval.records (0, the default: off). Every replica snapshots its own
committed state, standbys and brokers too; the voter set goes in each snapshot (rule 7): Raft's
core writes it (RaftReplica.create_snapshot), handed in here as `emit` so this stays pure."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass

from metadata.image_records import encoded_image_records
from metadata.loader import LoaderManifest, Provenance, SlicedPublisher
from metadata.metadata_image import MetadataDelta, MetadataImage

log = logging.getLogger("minikraft.metadata")

# emit(end_offset, encoded records): steps that write the snapshot in slices (the caller gives
# its loop back at every yield), returning whether one was written (False: one already covers
# end_offset, e.g. fetched from the leader).
SnapshotEmitter = Callable[[int, Sequence[bytes]], Generator[None, None, bool]]
# Records encoded between two yields of publish_steps (issue 35: a snapshot of 100,000
# partitions is 100,000 records; the image is immutable, so encoding it in slices is safe).
ENCODE_SLICE_RECORDS = 100


# Kafka's defaults and lower limits (KRaftConfigs: atLeast(1) bytes, atLeast(0) ms).
MAX_BYTES_KEY = "metadata.log.max.record.bytes.between.snapshots"
MAX_INTERVAL_MS_KEY = "metadata.log.max.snapshot.interval.ms"
INTERVAL_RECORDS_KEY = "metadata.log.snapshot.interval.records"


@dataclass(frozen=True, slots=True)
class SnapshotTrigger:
    """When to snapshot: Kafka's two keys and minikraft's record count (0: off)."""

    max_bytes: int = 20 * 1024 * 1024
    max_interval_ms: int = 60 * 60 * 1000
    interval_records: int = 0

    @classmethod
    def from_config(cls, get_int: Callable[[str], int]) -> SnapshotTrigger:
        return cls(get_int(MAX_BYTES_KEY), get_int(MAX_INTERVAL_MS_KEY),
                   get_int(INTERVAL_RECORDS_KEY))

    def due(self, bytes_since: int, records_since: int, elapsed_ms: int) -> str | None:
        """Why a snapshot is due, or None (Kafka's publishLogDelta: bytes first, then time)."""
        if bytes_since >= self.max_bytes:
            return f"we have replayed at least {self.max_bytes} bytes"
        if self.max_interval_ms and elapsed_ms >= self.max_interval_ms:
            return f"we have waited at least {self.max_interval_ms} ms"
        if self.interval_records and records_since >= self.interval_records:
            return f"we have replayed at least {self.interval_records} records"
        return None


class SnapshotGenerator(SlicedPublisher):
    name = "SnapshotGenerator"

    def __init__(
        self, trigger: SnapshotTrigger, emit: SnapshotEmitter, clock: Callable[[], int]
    ) -> None:
        """clock: monotonic milliseconds (Kafka's Time.nanoseconds), read at each commit."""
        self.trigger = trigger
        self._clock = clock
        self.records_since_snapshot = 0
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = clock()  # Kafka's resetSnapshotCounters at construction
        self.snapshots_taken = 0
        self._emit = emit
        # The snapshot to take, (image, end offset): the latest image once the interval is
        # reached; taken by background_steps, off the publishing path, so commits go on being
        # applied meanwhile (Kafka's SnapshotGenerator emits on an event queue of its own).
        self._pending: tuple[MetadataImage, int] | None = None
        # A snapshot is being written: none is scheduled meanwhile (Kafka's "not scheduling
        # ... because event queue is not empty yet").
        self._writing = False

    def _reset(self) -> None:
        """Kafka's resetSnapshotCounters."""
        self.records_since_snapshot = 0
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = self._clock()

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
            self._reset()
            self._pending = None
            return
        self.records_since_snapshot += manifest.records
        self.bytes_since_snapshot += manifest.bytes
        if self._writing or self._pending is not None:
            return
        reason = self.trigger.due(
            self.bytes_since_snapshot,
            self.records_since_snapshot,
            self._clock() - self.last_snapshot_ms,
        )
        if reason is not None and not manifest.aligned:
            # Kafka's maybeScheduleEmit: "metadata image is not batch aligned"; the counts go
            # on, so the next (aligned) commit takes it.
            log.debug("Not creating a metadata snapshot at offset %s despite the fact that %s: "
                      "the image is not batch aligned", manifest.end_offset, reason)
        elif reason is not None:
            self._pending = (image, manifest.end_offset)
            log.info("Creating a metadata snapshot at offset %s because %s",
                     manifest.end_offset, reason)
        yield from ()

    def background_steps(self) -> Iterator[None]:
        """Take the pending snapshot, in slices: the image is immutable, so the runtime runs
        this beside the applier (issue 35: a 100,000-partition snapshot on the publishing
        path held every write waiting for its replay, AlterPartition timed out)."""
        if self._pending is None:
            return
        image, end_offset = self._pending
        self._pending = None
        # The counts start again as the snapshot starts (Kafka's resetSnapshotCounters at the
        # start of the emit): what is committed while it is written counts toward the next
        # one, and nothing is scheduled until it is written. Before, every commit applied
        # during the write found the count still past the interval and scheduled another
        # snapshot of 100,000 partitions, taken right after (a restarted broker took two 19 s
        # apart, 7,000 records apart, at 100,000 partitions: issue 35).
        self._reset()
        self._writing = True
        try:
            encoded: list[bytes] = []
            for record in encoded_image_records(image):
                encoded.append(record)
                if len(encoded) % ENCODE_SLICE_RECORDS == 0:
                    yield
            written = yield from self._emit(end_offset, encoded)
        finally:
            self._writing = False
        if written:
            self.snapshots_taken += 1
