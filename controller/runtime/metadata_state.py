"""The controller's state machine over `__cluster_metadata`: replays committed records into the
MetadataImage and takes snapshots as the log grows (rule 7: the voter set goes in each one)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from controller.core.image_records import image_records
from controller.core.metadata_image import MetadataDelta, MetadataImage
from controller.core.records import decode_record, encode_record
from raft.core.record_batch import RecordBatch

if TYPE_CHECKING:
    from raft.runtime.raft_manager import RaftManager

log = logging.getLogger("minikraft.controller")


def replay_batches(image: MetadataImage, batches: Sequence[RecordBatch]) -> MetadataImage:
    """Replay the data records of committed batches (control records are Raft's own)."""
    delta = MetadataDelta(image)
    for batch in batches:
        if batch.is_control:
            continue
        for index, record in enumerate(batch.records):
            delta.replay(decode_record(record.value or b""), batch.offset_of(index))
    return delta.image()


class MetadataState:
    def __init__(self, snapshot_interval_records: int) -> None:
        self.image = MetadataImage()
        self.snapshot_interval_records = snapshot_interval_records
        self.committed_offset = 0  # everything below is applied
        self.committed_epoch = 0
        self.records_since_snapshot = 0
        self.leader_id: int | None = None
        self.epoch = -1
        self.is_active = False
        self._raft: RaftManager | None = None

    def bind(self, raft: RaftManager) -> None:
        self._raft = raft

    # RaftListener -------------------------------------------------------------------------

    def handle_commit(self, batches: Sequence[RecordBatch]) -> None:
        self.image = replay_batches(self.image, batches)
        for batch in batches:
            if not batch.is_control:
                self.records_since_snapshot += len(batch.records)
            self.committed_offset = batch.next_offset
            self.committed_epoch = batch.leader_epoch
        # Every replica snapshots its own committed state, standbys too (rule 7).
        self.maybe_snapshot()

    def handle_load_snapshot(
        self, snapshot_end_offset: int, batches: Sequence[RecordBatch]
    ) -> None:
        self.image = replay_batches(MetadataImage(), batches)
        self.committed_offset = snapshot_end_offset
        self.records_since_snapshot = 0
        log.info("Loaded metadata snapshot ending at offset %s", snapshot_end_offset)

    def handle_leader_change(
        self, leader_id: int | None, epoch: int, is_local_leader: bool
    ) -> None:
        self.leader_id = leader_id
        self.epoch = epoch
        self.is_active = is_local_leader

    # Snapshots -----------------------------------------------------------------------------

    def maybe_snapshot(self) -> bool:
        """Snapshot the applied image once enough records were committed since the last one."""
        if self._raft is None or self.records_since_snapshot < self.snapshot_interval_records:
            return False
        end_offset = self.committed_offset
        latest = self._raft.log.latest_snapshot_id()
        if latest is not None and latest.end_offset >= end_offset:
            return False
        records = [encode_record(r) for r in image_records(self.image)]
        self._raft.driver.create_snapshot(end_offset, self.committed_epoch, records)
        self.records_since_snapshot = 0
        return True
