"""The one log rules 8, 10, 11, 13 and 19 are replayed from (the longest controller log, from
its earliest intact snapshot covering the log start), chosen from batch headers alone: by the
audit from its staged batch summary before Spark is up, by the baseline from its own scan.
Pure Python."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReplaySource:
    """The one log each partition is replayed from: the longest controller log, starting at its
    earliest snapshot that covers the log start (or at the log start)."""

    node: int
    snapshot_file: str | None
    from_offset: int


def pick_replay_source(
    logs: Iterable[tuple[int, str, int, int]], snapshots: Iterable[tuple[int, str, int, bool]]
) -> ReplaySource | None:
    """From (node, role, log_start, log_end) and (node, file, end_offset, corrupt): the longest
    controller log (lowest node id on a tie), from its earliest intact snapshot at or past the
    log start, else from the log start; with no segments, the latest snapshot alone."""
    log_list, snapshot_list = list(logs), list(snapshots)
    if not log_list and not snapshot_list:
        return None
    if log_list:
        node, _role, log_start, _end = min(
            log_list, key=lambda r: (r[1] != "controller", -r[3], r[0]))
    else:
        node = min(s[0] for s in snapshot_list)
    usable = sorted((s[2], s[1]) for s in snapshot_list if s[0] == node and not s[3])
    if not log_list:
        if not usable:
            return None
        return ReplaySource(node, usable[-1][1], usable[-1][0])
    covering = [u for u in usable if u[0] >= log_start]
    if covering:
        return ReplaySource(node, covering[0][1], covering[0][0])
    return ReplaySource(node, None, log_start)


def choose_replay_source(summary: list[dict[str, Any]]) -> ReplaySource | None:
    logs: dict[tuple[int, str], list[int]] = {}
    for r in summary:
        if r["kind"] == "segment" and r["first_offset"] is not None:
            bounds = logs.setdefault((r["node"], r["role"]), [r["first_offset"], r["last_offset"]])
            bounds[0] = min(bounds[0], r["first_offset"])
            bounds[1] = max(bounds[1], r["last_offset"])
    return pick_replay_source(
        [(node, role, b[0], b[1]) for (node, role), b in logs.items()],
        [(r["node"], r["file"], r["snapshot_end_offset"], bool(r["corrupt"]))
         for r in summary if r["kind"] == "snapshot"])

