"""MetadataLoader: the one state machine over `__cluster_metadata` on every node, after Kafka's
MetadataLoader. Raft hands it committed batches and loaded snapshots (it is the RaftListener);
it replays them into the MetadataImage through MetadataDelta (STYLE.md: replay is the only way
state changes; the delta also notes what moved), and hands `(delta, image, manifest)` to each
registered MetadataPublisher in order: the snapshot generator on every node, the broker's
publisher on brokers. Controllers read `image` when they build a write; brokers act on the
delta. Pure: the runtime that owns Raft calls it on the event loop.

A loader given a `high_watermark` (the broker's) publishes nothing until it has caught up, as
Kafka's MetadataLoader (`stillNeedToCatchUp`): it replays what Raft delivers into an image of
its own, and only once that image reaches the high watermark it learned from the leader do the
publishers get it, in one change against what they last saw. A restarted broker thus applies
the cluster's current state once, not its stale local snapshot first and then everything
that changed while it was down (issue 35). Controllers keep no such rule: a controller's image
must be current the moment it wins an election."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    MetadataRecord,
    decode_record,
)
from storage.core.record_batch import RecordBatch

log = logging.getLogger("minikraft.metadata")

# Records replayed between two yields of the *_steps generators: the runtime gives its event loop
# back there, so Raft's fetches, votes and heartbeats never wait behind a 10,000-record batch
# (issue 35). About 0.5 ms of replay on an idle core: the runtime looks at its clock only here,
# and a broker's budget is 3 ms (kafkawire.loop.WALK_BUDGET_S).
REPLAY_SLICE_RECORDS = 25
# Records the active controller wrote, kept decoded until they commit (MetadataLoader.written);
# more than this and the memo starts over (a write that never committed leaves its records).
WRITTEN_MEMO_LIMIT = 250_000


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
    # Log bytes of the batches this update completes (Kafka's LogDeltaManifest.numBytes: every
    # committed batch's sizeInBytes, control batches too, counted in the update that ends it).
    bytes: int = 0
    # Everything below end_offset is whole batches (Kafka's isOffsetBatchAligned): False for
    # what came before a BeginTransactionRecord in the middle of a batch; no snapshot ends there.
    aligned: bool = True


@dataclass(frozen=True, slots=True)
class PreparedWrite:
    """What the active controller replayed when it wrote records, before they were appended
    (Kafka's QuorumController replays its records into its in-memory state as it generates
    them): the records at `first_offset` up to `next_offset`, appended in leader epoch
    `epoch` as `records` records (transaction markers included), turn `base` into `image`,
    and `delta` notes what they moved."""

    first_offset: int
    next_offset: int
    epoch: int
    records: int
    base: MetadataImage
    delta: MetadataDelta
    image: MetadataImage


class MetadataPublisher(Protocol):
    """Kafka's MetadataPublisher: told of every change after the image took it."""

    @property
    def name(self) -> str: ...

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None: ...


class SlicedPublisher(ABC):
    """A publisher whose work on a big change comes in slices: `publish_steps` does what
    on_metadata_update would, yielding between slices so the runtime can serve in between (the
    loader drives the steps; called directly, on_metadata_update runs them all at once)."""

    @abstractmethod
    def publish_steps(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> Iterator[None]: ...

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        for _ in self.publish_steps(delta, image, manifest):
            pass


def snapshot_delta_steps(
    delta: MetadataDelta, before: MetadataImage, after: MetadataImage
) -> Iterator[None]:
    """What a loaded snapshot changed against the image it replaces, noted in `delta` by key
    (Kafka's MetadataLoader loads a snapshot as a delta over the current image, and
    finishSnapshot marks what the snapshot no longer has as removed): the publishers then
    act on what moved, so a broker reloading a 100,000-partition snapshot after falling
    behind the log start pays for the partitions that changed, not for all of them
    (issue 35). Yields every REPLAY_SLICE_RECORDS * 10 partitions compared."""
    for key in before.brokers.keys() | after.brokers.keys():
        if before.brokers.get(key) != after.brokers.get(key):
            delta.brokers.add(key)
    for config in before.configs.keys() | after.configs.keys():
        if before.configs.get(config) != after.configs.get(config):
            delta.configs.add(config)
    for name in before.features.keys() | after.features.keys():
        if before.features.get(name) != after.features.get(name):
            delta.features.add(name)
    delta.producer_ids = before.next_producer_id != after.next_producer_id
    delta.removed_topics.update(before.topics.keys() - after.topics.keys())
    compared = 0
    for topic_id, topic in after.topics.items():
        old = before.topics.get(topic_id)
        if old is None:
            delta.created_topics.add(topic_id)
            delta.partitions.update((topic_id, p) for p in topic.partitions)
            continue
        if old.partitions is topic.partitions:
            continue
        old_partitions = old.partitions
        for partition_id, registration in topic.partitions.items():
            if old_partitions.get(partition_id) != registration:
                delta.partitions.add((topic_id, partition_id))
            compared += 1
            if compared % (REPLAY_SLICE_RECORDS * 10) == 0:
                yield


def replay_steps(delta: MetadataDelta, batches: Sequence[RecordBatch]) -> Iterator[None]:
    """Replay the data records of committed batches into `delta` (control records are Raft's
    own); yields every REPLAY_SLICE_RECORDS records. Nothing sees a partly replayed commit: the
    delta is private until the caller takes its image (a commit is applied atomically, as
    Kafka's loader publishes whole batches)."""
    count = 0
    for batch in batches:
        if batch.is_control:
            continue
        for index, raw in enumerate(batch.records):
            delta.replay(decode_record(raw.value or b""), batch.offset_of(index))
            count += 1
            if count % REPLAY_SLICE_RECORDS == 0:
                yield


class MetadataLoader:
    def __init__(self, high_watermark: Callable[[], int | None] | None = None) -> None:
        # What the publishers have seen (and what the node serves from).
        self.image = MetadataImage()
        # Everything replayed (equal to `image` unless the loader is still catching up).
        self._latest = self.image
        self.committed_offset = 0  # everything below is replayed
        self.committed_epoch = 0
        # Kafka's lastAppliedOffset: everything below has been through every publisher.
        self.published_offset = 0
        # Kafka's highWaterMarkAccessor (None while unknown); None: publish at once.
        self._high_watermark = high_watermark
        self.catching_up = high_watermark is not None
        self._catch_up_reason = ""
        self.leader_id: int | None = None
        self.epoch = -1
        self.is_active = False
        self._publishers: list[MetadataPublisher] = []
        # The delta of an open KIP-868 transaction, and the offset of its BeginTransactionRecord.
        self._open: MetadataDelta | None = None
        self._open_at = -1
        # Encoded record -> the record itself, for what this node wrote (see written()).
        self._written: dict[bytes, MetadataRecord] = {}
        # Log bytes of the batches replayed since the last publish (Kafka's
        # MetadataBatchLoader.numBytes): across a transaction, until it ends.
        self._bytes = 0
        # The active controller's writes, replayed when written, by their first offset (see
        # prepared()); the batches of the one being committed, held until its last one.
        self._prepared: dict[int, PreparedWrite] = {}
        self._held: tuple[PreparedWrite, list[RecordBatch]] | None = None
        # Prepared writes taken as they were replayed, and those replayed after all.
        self.adopted_writes = 0
        self.replayed_prepared_writes = 0
        self._replayed = 0  # records replayed, for the yields every REPLAY_SLICE_RECORDS

    def install_publishers(self, publishers: Sequence[MetadataPublisher]) -> None:
        """Register publishers (before Raft starts delivering: none misses an update)."""
        self._publishers.extend(publishers)

    @property
    def publishers(self) -> tuple[MetadataPublisher, ...]:
        return tuple(self._publishers)

    def written(self, pairs: Iterable[tuple[bytes, MetadataRecord]]) -> None:
        """The active controller's own records, as it encoded them: replayed from these objects
        when they commit instead of decoded again, as Kafka's active controller replays what
        it generates, never reading its own records back (issue 35: decoding was 14% of the
        active controller's loop at 20,000 partitions). Keyed by the bytes, so a record
        matches only its own encoding; records are immutable."""
        if len(self._written) > WRITTEN_MEMO_LIMIT:
            self._written.clear()
        self._written.update(pairs)

    def forget_written(self) -> None:
        """A write failed: what it left in the memo may never commit."""
        self._written.clear()
        self._prepared.clear()

    def prepared(self, write: PreparedWrite) -> None:
        """The active controller's write, replayed as it was written: once its batches are
        committed, the loader takes `write.image` for them instead of reading and replaying
        every record again, as Kafka's active controller never replays its own committed
        records (issue 35: a fencing of 100,000 partitions was 2.3-3.4 s of replay on the
        active controller after its commit, and the registration of the restarted broker
        waited for it). Taken only if its batches are exactly those records in that epoch
        and the image is still `write.base` when they start; else they are replayed."""
        self._prepared[write.first_offset] = write

    # RaftListener -------------------------------------------------------------------------

    def handle_commit(self, batches: Sequence[RecordBatch]) -> None:
        """commit_steps and then the background work, all at once (no runtime around)."""
        for _ in self.commit_steps(batches):
            pass
        for _ in self.background_steps():
            pass

    @property
    def in_transaction(self) -> bool:
        """A KIP-868 metadata transaction is open: replayed, not yet published."""
        return self._open is not None

    def commit_steps(self, batches: Sequence[RecordBatch]) -> Iterator[None]:
        """handle_commit in slices (the RaftDriver's applier runs it, yielding its loop).

        KIP-868 (Kafka's MetadataBatchLoader): what comes before a BeginTransactionRecord is
        published first; the records up to its EndTransactionRecord are replayed into a delta
        that nobody sees, across as many commits as they take, and published together at the
        end; an AbortTransactionRecord drops them. The committed offset stays below the
        transaction until then."""
        delta = self._open if self._open is not None else MetadataDelta(self._latest)
        published = False  # the last batch ended a prepared write, published with it
        for batch in batches:
            published = False
            if self._held is None and self._prepared:
                self._hold_if_prepared(batch, delta)
            if self._held is not None:
                write, held = self._held
                held.append(batch)
                if batch.next_offset < write.next_offset:
                    continue
                self._held = None
                if self._is_written(write, held):
                    self.adopted_writes += 1
                    self._bytes += sum(b.size_in_bytes for b in held)
                    yield from self._publish_steps(
                        write.delta, write.next_offset, write.epoch, write.image
                    )
                    delta = MetadataDelta(self._latest)
                    published = True
                    continue
                self.replayed_prepared_writes += 1
                log.info("The write at offsets %s-%s is replayed: its batches are not the "
                         "ones written (another leader's)", write.first_offset,
                         write.next_offset - 1)
                for replayed in held:
                    delta = yield from self._batch_steps(replayed, delta)
                continue
            delta = yield from self._batch_steps(batch, delta)
        if self._open is not None:
            self._open = delta  # published with its end
            return
        if batches and self._held is None and not published:
            yield from self._publish_steps(
                delta, batches[-1].next_offset, batches[-1].leader_epoch
            )

    def _hold_if_prepared(self, batch: RecordBatch, delta: MetadataDelta) -> None:
        """Hold `batch` and those after it if a prepared write begins there and the image is
        the one it was replayed onto (nothing replayed since, no transaction open)."""
        for first in [f for f in self._prepared if f < batch.base_offset]:
            del self._prepared[first]  # passed over: never committed as written
        write = self._prepared.pop(batch.base_offset, None)
        if write is None:
            return
        if self._open is None and not delta.records and self._latest is write.base:
            self._held = (write, [])
            return
        self.replayed_prepared_writes += 1
        log.info(
            "The write at offsets %s-%s is replayed: %s", write.first_offset,
            write.next_offset - 1,
            "a transaction is open" if self._open is not None
            else "records before it are not published yet" if delta.records
            else "the image is not the one it was decided on",
        )

    @staticmethod
    def _is_written(write: PreparedWrite, held: list[RecordBatch]) -> bool:
        """The held batches are the prepared write's: data batches of its epoch, back to back
        from its first offset to its end, with its number of records."""
        offset = write.first_offset
        records = 0
        for batch in held:
            if (
                batch.is_control
                or batch.leader_epoch != write.epoch
                or batch.base_offset != offset
            ):
                return False
            offset = batch.next_offset
            records += len(batch.records)
        return offset == write.next_offset and records == write.records

    def _batch_steps(
        self, batch: RecordBatch, delta: MetadataDelta
    ) -> Generator[None, None, MetadataDelta]:
        """Replay one committed batch into `delta`; the delta to go on with (a new one after a
        publish before a BeginTransactionRecord, or an abort)."""
        if batch.is_control:
            self._bytes += batch.size_in_bytes
            return delta
        for index, raw in enumerate(batch.records):
            offset = batch.offset_of(index)
            value = raw.value or b""
            memo = self._written.pop(value, None) if self._written else None
            record = memo if memo is not None else decode_record(value)
            if isinstance(record, BeginTransactionRecord):
                if self._open is not None:
                    log.error("BeginTransactionRecord at %s inside the transaction begun "
                              "at %s: ignored", offset, self._open_at)
                    continue
                if delta.records:
                    yield from self._publish_steps(
                        delta, offset, batch.leader_epoch, aligned=index == 0
                    )
                    delta = MetadataDelta(self._latest)
                self._open, self._open_at = delta, offset
            elif isinstance(record, EndTransactionRecord | AbortTransactionRecord):
                if self._open is None:
                    log.error("%s at %s outside a transaction: ignored",
                              type(record).__name__, offset)
                    continue
                if isinstance(record, AbortTransactionRecord):
                    log.info("Metadata transaction begun at %s aborted at %s (%s): its %s "
                             "records are dropped", self._open_at, offset, record.reason,
                             delta.records)
                    delta = MetadataDelta(self._latest)
                self._open = None
            else:
                delta.replay(record, offset)
            self._replayed += 1
            if self._replayed % REPLAY_SLICE_RECORDS == 0:
                yield
        # Counted once the whole batch is replayed: a delta published in its middle (a
        # BeginTransactionRecord) carries the batches before it (Kafka's loadBatch).
        self._bytes += batch.size_in_bytes
        return delta

    def _publish_steps(
        self,
        delta: MetadataDelta,
        end_offset: int,
        epoch: int,
        image: MetadataImage | None = None,
        aligned: bool = True,
    ) -> Iterator[None]:
        """Take the delta's image (`image`: taken already) as committed below `end_offset`
        and tell the publishers (once caught up: until then it is only replayed)."""
        self._latest = delta.image() if image is None else image
        self.committed_offset = end_offset
        self.committed_epoch = epoch
        replayed_bytes, self._bytes = self._bytes, 0
        if delta.records >= 1000:
            log.info(
                "Replayed %s metadata records up to offset %s (%s partitions, %s new topics)",
                delta.records,
                self.committed_offset,
                len(delta.partitions),
                len(delta.created_topics),
            )
        if self.catching_up:
            yield from self.catch_up_steps()
            return
        self.image = self._latest
        manifest = LoaderManifest(
            Provenance.LOG, self.committed_offset, self.committed_epoch, delta.records,
            replayed_bytes, aligned,
        )
        yield from self._publishers_steps(delta, manifest)
        self.published_offset = end_offset

    def _still_catching_up(self) -> bool:
        """Kafka's MetadataLoader.stillNeedToCatchUp: the high watermark is unknown, or above
        what was replayed, or nothing was replayed yet."""
        high_watermark = self._high_watermark() if self._high_watermark is not None else None
        if high_watermark is None:
            reason = "the high watermark is not known yet"
        elif high_watermark > self.committed_offset:
            reason = "the high watermark is above the loaded offset"
        elif self.committed_offset == 0:
            reason = "no metadata record was loaded yet"
        else:
            log.info("The metadata loader caught up to the high watermark %s: publishing the "
                     "image at offset %s", high_watermark, self.committed_offset)
            return False
        if reason != self._catch_up_reason:  # once per reason, not per fetch
            self._catch_up_reason = reason
            log.info("The metadata loader is still catching up (loaded up to offset %s, high "
                     "watermark %s): %s", self.committed_offset, high_watermark, reason)
        return True

    def catch_up_steps(self) -> Iterator[None]:
        """Once caught up, hand the publishers everything replayed so far, as one change against
        what they last saw (Kafka's initializeNewPublishers: a SnapshotManifest built from the
        image). The runtime calls it again whenever the high watermark may have moved (a
        node already at the leader's end gets no commit that would)."""
        if not self.catching_up or self._open is not None or self._still_catching_up():
            return
        self.catching_up = False
        latest = self._latest
        delta = MetadataDelta(latest)
        yield from snapshot_delta_steps(delta, self.image, latest)
        self.image = latest
        manifest = LoaderManifest(
            Provenance.SNAPSHOT, self.committed_offset, self.committed_epoch, delta.records
        )
        yield from self._publishers_steps(delta, manifest)
        self.published_offset = manifest.end_offset

    def handle_load_snapshot(
        self, snapshot_end_offset: int, batches: Sequence[RecordBatch]
    ) -> None:
        for _ in self.load_snapshot_steps(snapshot_end_offset, batches):
            pass

    def load_snapshot_steps(
        self, snapshot_end_offset: int, batches: Sequence[RecordBatch]
    ) -> Iterator[None]:
        """handle_load_snapshot in slices: the snapshot replayed into an image of its own,
        then handed to the publishers as a delta against the image it replaces."""
        replayed = MetadataDelta(MetadataImage())
        yield from replay_steps(replayed, batches)
        self._open = None  # a snapshot never holds part of a transaction (Kafka's resetToImage)
        self._bytes = 0  # and counts no bytes from the log it replaces (ditto)
        after = replayed.image()
        self._latest = after
        self.committed_offset = snapshot_end_offset
        epoch = batches[-1].leader_epoch if batches else self.committed_epoch
        self.committed_epoch = epoch
        if self.catching_up:
            log.info("Loaded metadata snapshot ending at offset %s (%s records, %s topics)",
                     snapshot_end_offset, replayed.records, len(after.topics))
            yield from self.catch_up_steps()
            return
        delta = MetadataDelta(after)
        delta.records = replayed.records
        yield from snapshot_delta_steps(delta, self.image, after)
        self.image = after
        log.info(
            "Loaded metadata snapshot ending at offset %s (%s records, %s topics): %s "
            "partitions changed, %s topics created, %s removed",
            snapshot_end_offset,
            delta.records,
            len(self.image.topics),
            len(delta.partitions),
            len(delta.created_topics),
            len(delta.removed_topics),
        )
        manifest = LoaderManifest(
            Provenance.SNAPSHOT, snapshot_end_offset, epoch, delta.records
        )
        yield from self._publishers_steps(delta, manifest)
        self.published_offset = snapshot_end_offset

    def handle_leader_change(
        self, leader_id: int | None, epoch: int, is_local_leader: bool
    ) -> None:
        self.leader_id = leader_id
        self.epoch = epoch
        self.is_active = is_local_leader

    def background_steps(self) -> Iterator[None]:
        """Work the publishers do off the publishing path, on an immutable image they kept
        (the snapshot generator's snapshot): the runtime runs it beside the commits."""
        for publisher in self._publishers:
            steps = getattr(publisher, "background_steps", None)
            if steps is not None:
                yield from steps()

    def _publishers_steps(
        self, delta: MetadataDelta, manifest: LoaderManifest
    ) -> Iterator[None]:
        image = self.image
        for publisher in self._publishers:
            if isinstance(publisher, SlicedPublisher):
                yield from publisher.publish_steps(delta, image, manifest)
            else:
                publisher.on_metadata_update(delta, image, manifest)
