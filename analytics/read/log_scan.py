"""Walking one log file batch by batch, telling bit rot from a torn tail (CLI.md: audit).

A batch that fails its CRC or framing with a valid batch somewhere after it (in the same file,
or in a later segment of the same log) is corruption: bytes changed after they were written,
and the log holds data past them, so no crash explains it. A damaged batch at the very end of a
node's log (the last segment, nothing valid after it) is the torn write a crash leaves: log
recovery truncates it (raft/runtime), so it is reported but is not a finding. A damaged snapshot
is always corruption: snapshots are written to a temporary file and renamed (never torn).
Zeros from a batch boundary to the end of a file are free space a preallocating broker
(`log.preallocate`) had not written yet: neither damage nor data.

Only storage.core.record_batch reads the bytes (verify_batch, read_header); this module decides
what a failure means and where reading resumes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from storage.core.record_batch import (
    BatchHeader,
    CorruptBatchError,
    is_free_tail,
    read_header,
    verify_batch,
)

CORRUPT = "corrupt"
TORN = "torn"
# How far past a framing error (a length that points nowhere) to look for the next valid batch.
RESYNC_SCAN_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Damage:
    """A damaged region of a file: where it starts, why, and what it is."""

    position: int
    reason: str
    kind: str  # CORRUPT or TORN
    claimed_base_offset: int | None  # what the damaged header says (not CRC-covered)
    claimed_last_offset: int | None
    after_offset: int | None  # last good offset before it in this file
    resumed_position: int | None  # byte position of the next valid batch in this file
    resumed_offset: int | None  # base offset of that batch


def _claimed(data: bytes, position: int) -> tuple[int | None, int | None, int | None]:
    """(base offset, last offset, size) the damaged batch's header claims, if it frames."""
    try:
        header = read_header(data, position)
    except CorruptBatchError:
        return None, None, None
    return header.base_offset, header.last_offset, header.size


def _valid_at(data: bytes, position: int, after_offset: int | None) -> BatchHeader | None:
    try:
        header = verify_batch(data, position)
    except CorruptBatchError:
        return None
    if after_offset is not None and header.base_offset <= after_offset:
        return None
    return header


def _next_valid(data: bytes, position: int, size: int | None,
                after_offset: int | None) -> BatchHeader | None:
    """The first valid batch after a damaged one: right after its claimed extent, else the
    first position (within RESYNC_SCAN_BYTES) where a whole batch checks out."""
    if size is not None and position + size < len(data):
        found = _valid_at(data, position + size, after_offset)
        if found is not None:
            return found
    # No batch starts in free space (zeros to the end of the file): stop where they begin.
    end = min(len(data.rstrip(b"\0")), position + RESYNC_SCAN_BYTES)
    for candidate in range(position + 1, end):
        found = _valid_at(data, candidate, after_offset)
        if found is not None:
            return found
    return None


def walk_batches(data: bytes, log_end: bool) -> Iterator[tuple[BatchHeader, int] | Damage]:
    """(header, crc) per valid batch and a Damage per damaged region, in file order. log_end:
    this file is the last segment of its log (a torn tail is possible only there). Reading
    resumes at the next valid batch after a damaged one."""
    position = 0
    after: int | None = None
    while position < len(data):
        try:
            header = verify_batch(data, position)
            crc = header.crc
            if after is not None and header.base_offset != after + 1:
                raise CorruptBatchError(
                    position, f"base offset {header.base_offset} does not follow {after}")
        except CorruptBatchError as exc:
            if is_free_tail(data, position):
                return  # preallocated space past the last batch (log.preallocate)
            base, last, size = _claimed(data, position)
            resumed = _next_valid(data, position, size, after)
            kind = CORRUPT if resumed is not None or not log_end else TORN
            yield Damage(position, exc.reason, kind, base, last, after,
                         None if resumed is None else resumed.position,
                         None if resumed is None else resumed.base_offset)
            if resumed is None:
                return
            position, after = resumed.position, resumed.base_offset - 1
            continue
        yield header, crc
        after = header.last_offset
        position += header.size
