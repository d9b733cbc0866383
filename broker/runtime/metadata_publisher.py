"""BrokerMetadataPublisher: the broker's MetadataPublisher (Kafka's BrokerMetadataPublisher).
The loader (metadata/loader.py) hands it each committed change; it passes the change to the
ReplicaManager, which acts on the partitions the change names only, and restarts the replica
fetcher of every partition whose leadership moved."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from broker.runtime.replica_delta import APPLY_SLICE_PARTITIONS
from broker.runtime.replica_manager import HostedPartition, ReplicaManager
from metadata.loader import LoaderManifest, Provenance, SlicedPublisher
from metadata.metadata_image import MetadataDelta, MetadataImage

log = logging.getLogger("minikraft.broker")

# Leadership changes handed to the fetchers between two yields (issue 35).
LEADERSHIP_SLICE_PARTITIONS = 50
# Partitions applied between two freezes of the heap during a change (`freeze`): a create of
# 5,000 builds some 150,000 objects a broker keeps, and CPython's full collection walked all
# those built since the last freeze, 67-72 ms in one stretch about once a create at 100,000
# partitions (a micro: 10 creates, 10 full collections of 93 ms on average; frozen every 500,
# none, and 13% less CPU). Issue 35.
FREEZE_EVERY_PARTITIONS = 500


class BrokerMetadataPublisher(SlicedPublisher):
    name = "BrokerMetadataPublisher"

    def __init__(
        self,
        replicas: ReplicaManager,
        on_leadership_change: Callable[[HostedPartition], None],
        freeze: Callable[[], None] | None = None,
    ) -> None:
        self._replicas = replicas
        self._on_leadership_change = on_leadership_change
        # kafkawire.gc_tuning.GcFreezer.freeze on a node; None in tests of the applier alone.
        self._freeze = freeze

    def publish_steps(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> Iterator[None]:
        """The change in slices (the loader's runtime yields its loop between them): a
        10,000-partition topic opens its logs a few hundred at a time (issue 35)."""
        started = time.monotonic()
        before = len(self._replicas.partitions)
        changed: list[HostedPartition] = []
        handed = 0
        every = max(1, FREEZE_EVERY_PARTITIONS // APPLY_SLICE_PARTITIONS)
        # A loaded image (a restarted broker's first publish, a snapshot) hands its leadership
        # changes to the fetchers once it is applied, as Kafka's applyLocalFollowersDelta adds
        # its followers after making them: handed a slice at a time, the fetchers of a
        # restarted broker woke at each of its 20,000 slices to look at three new partitions,
        # before it was even registered, 10-30% of the CPU of its first publish (issue 35).
        per_slice = manifest.provenance is not Provenance.SNAPSHOT
        for count, _ in enumerate(self._replicas.apply_delta_steps(delta, image, changed), 1):
            # Each slice's leadership changes go to the fetchers as the slice is applied, not
            # once the whole change is: a fencing at 100,000 partitions took the other
            # brokers 30 s and more to apply, and a new leader that became one early in its
            # slices shrank a follower that had not fetched within replica.lag.time.max.ms
            # (17,000-66,000 shrinks and expansions again while a broker came back; Kafka
            # hands them after its delta, applied in milliseconds) (issue 35).
            while per_slice and handed < len(changed):
                self._on_leadership_change(changed[handed])
                handed += 1
            if self._freeze is not None and count % every == 0:
                self._freeze()
            yield
        for count, hosted in enumerate(changed[handed:], 1):
            self._on_leadership_change(hosted)
            if count % LEADERSHIP_SLICE_PARTITIONS == 0:
                yield  # a 5,000-partition create moves 5,000 fetcher entries (issue 35)
        if len(delta.partitions) >= 1000 or manifest.provenance is Provenance.SNAPSHOT:
            # One INFO line per big change; the per-partition lines are at DEBUG.
            log.info(
                "Applied metadata %s to offset %s: %s partition changes, %s new local "
                "partitions, %s leadership changes, in %.0f ms",
                manifest.provenance.value,
                manifest.end_offset,
                len(delta.partitions),
                len(self._replicas.partitions) - before,
                len(changed),
                (time.monotonic() - started) * 1000,
            )
