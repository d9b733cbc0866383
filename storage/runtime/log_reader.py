"""Read a log directory's segments without touching them (for tools and the audit).

Unlike DiskLog, which truncates a torn tail on open, this never writes: it is safe to point at a
running node's directory. It stops at the first torn or corrupt batch and says where; zeros
after a segment's last batch are preallocated free space, not damage.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from storage.core.record_batch import CorruptBatchError, RecordBatch, iter_segment_batches


@dataclass(frozen=True)
class SegmentProblem:
    file: Path
    position: int
    reason: str


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"), key=lambda p: int(p.stem))


def read_batches(
    directory: Path, problems: list[SegmentProblem] | None = None
) -> Iterator[tuple[Path, RecordBatch]]:
    for path in segment_files(directory):
        try:
            for _position, batch, _size in iter_segment_batches(path.read_bytes()):
                yield path, batch
        except CorruptBatchError as exc:
            if problems is not None:
                problems.append(SegmentProblem(path, exc.position, exc.reason))
            return
