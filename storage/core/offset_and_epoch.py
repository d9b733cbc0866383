"""Positions in a log: an offset with the leader epoch of its entry, and a snapshot's id.

Kafka keeps OffsetAndEpoch below both its storage and raft modules (server-common); here it sits
in storage so that the segmented log (storage.runtime.disk_log) and Raft's view of a log
(raft.core.replicated_log) share it.
"""

from __future__ import annotations

from typing import NamedTuple


class OffsetAndEpoch(NamedTuple):
    offset: int
    epoch: int


class SnapshotId(NamedTuple):
    """A snapshot holds everything below end_offset; epoch is that of entry end_offset - 1."""

    end_offset: int
    epoch: int
