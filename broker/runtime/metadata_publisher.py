"""BrokerMetadataPublisher: the broker's MetadataPublisher (Kafka's BrokerMetadataPublisher).
The loader (metadata/loader.py) hands it each committed change; it passes the change to the
ReplicaManager, which acts on the partitions the change names only, and restarts the replica
fetcher of every partition whose leadership moved."""

from __future__ import annotations

from collections.abc import Callable

from broker.runtime.replica_manager import HostedPartition, ReplicaManager
from controller.core.metadata_image import MetadataImage
from metadata.changes import MetadataChanges
from metadata.loader import LoaderManifest


class BrokerMetadataPublisher:
    name = "BrokerMetadataPublisher"

    def __init__(
        self, replicas: ReplicaManager, on_leadership_change: Callable[[HostedPartition], None]
    ) -> None:
        self._replicas = replicas
        self._on_leadership_change = on_leadership_change

    def on_metadata_update(
        self, changes: MetadataChanges, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        for hosted in self._replicas.apply_delta(changes, image):
            self._on_leadership_change(hosted)
