"""Read a log directory's segments without touching them (for tools and the audit).

Unlike DiskLog, which truncates a torn tail on open, this never writes: it is safe to point at a
running node's directory. It stops at the first torn or corrupt batch and says where.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from raft.core.record_batch import CorruptBatchError, RecordBatch, decode_batch


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
        data = path.read_bytes()
        position = 0
        while position < len(data):
            try:
                batch, size = decode_batch(data, position)
            except CorruptBatchError as exc:
                if problems is not None:
                    problems.append(SegmentProblem(path, position, exc.reason))
                return
            yield path, batch
            position += size
