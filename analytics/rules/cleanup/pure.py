"""Rules 24 and 25 (INVARIANTS.md: retention and compaction, cleanup.policy delete and compact)
as plain Python over reader rows (analytics.read.broker_inputs): the baseline calls these
functions, the Spark audit (analytics.rules.cleanup.spark) runs the same predicates as columns.

A replica's log start offset (retention, DeleteRecords) never passes the partition's high
watermark (checked against the highest HWM any leader journaled). Entries a replica no longer
has below its log start offset or below its cleaner checkpoint are not entries the leader lacks
(rule 22: replicas are compared above every replica's floor) nor lost acked writes (rule 23:
counted as removed, not as a violation). What compaction keeps (the latest record of every key)
is `compaction_violations`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def removal_floor(bounds: Iterable[dict[str, Any]]) -> int:
    """Rule 22's floor for one partition: below the highest log start offset or cleaner
    checkpoint of any replica, replicas legitimately differ (retention and the cleaner run on
    each replica on its own schedule), so entries there are not compared."""
    floor = 0
    for row in bounds:
        for name in ("log_start", "cleaned_to"):
            value = row.get(name)
            if value is not None:
                floor = max(floor, int(value))
    return floor


def removed_below(offset: int | None, log_start: int | None, cleaned_to: int | None) -> bool:
    """Rules 24/25: an offset retention or the cleaner may have taken from this replica."""
    if offset is None:
        return False
    return (log_start is not None and offset < log_start) or (
        cleaned_to is not None and offset < cleaned_to
    )


def log_start_violation(log_start: int | None, highest_hwm: int | None) -> bool:
    """Rule 24: a replica's log start offset past the partition's highest journaled HWM
    (None on either side: not checked)."""
    return log_start is not None and highest_hwm is not None and log_start > highest_hwm


def log_start_message(row: dict[str, Any]) -> str:
    return (f"rule 24: broker {row['node']} moved the log start offset of {row['topic']}-"
            f"{row['partition']} to {row['log_start']}, past its highest high watermark "
            f"{row['highest_hwm']}")


def compaction_violations(
    acked: Iterable[tuple[bytes, int]],
    log: Iterable[tuple[bytes, int]],
    log_start: int = 0,
    tombstones: Iterable[tuple[bytes, int]] = (),
) -> list[tuple[bytes, int]]:
    """Rule 25 for one compacted replica: (key, offset) of each acked key whose latest acked
    write (the highest offset) is neither in the log nor superseded there by a later record of
    the same key, unless it lies below the log start offset (retention, rule 24). A key whose
    latest acked write is a tombstone (`tombstones`, acked too) may be gone altogether
    (delete.retention.ms), but no older value of it may be left."""
    latest: dict[bytes, int] = {}
    for key, offset in acked:
        latest[key] = max(offset, latest.get(key, offset))
    deleted = {key: offset for key, offset in tombstones if latest.get(key) == offset}
    held: dict[bytes, int] = {}
    for key, offset in log:
        held[key] = max(offset, held.get(key, offset))
    return sorted(
        (key, offset) for key, offset in latest.items()
        if offset >= log_start and held.get(key, -1) < offset
        and not (key in deleted and key not in held)
    )

