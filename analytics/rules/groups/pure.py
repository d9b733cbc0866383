"""The consumer-group checks (issue 16) as plain Python over reader rows
(analytics.read.broker_inputs.CONSUMER_COLUMNS and the final leader's log offsets): the Spark audit
runs `check_group_partition` per data partition (cogroup applyInArrow) and a test or a baseline
can call it directly, so both share one definition.

INVARIANTS.md has no rule about consumer groups, so these are named, not numbered:
- `committed_offsets_monotonic`: per (group, topic, partition), the committed offsets the consumer
  journal saw (OffsetFetch answers, in journal order) never move backwards, except right after an
  explicit `reset` entry (kafka-consumer-groups' --reset-offsets).
- `no_skipped_committed_record`: per (group, topic, partition), every record of the final
  leader's log below the group's last committed offset was read by some member of the group. A
  record below the log start (DeleteRecords, retention) is not in the log, so it is not required.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

COMMITS_MONOTONIC = "committed_offsets_monotonic"
NO_SKIPPED = "no_skipped_committed_record"
GROUP_RULE_NAMES: dict[str, str] = {
    COMMITS_MONOTONIC: "a group's committed offsets never move backwards except by a reset",
    NO_SKIPPED: "every record below a group's committed offset was read by a member",
}
READ, COMMIT, RESET = "read", "commit", "reset"
CHECKED, VIOLATION = "checked", "violation"


def check_group_partition(log_offsets: Iterable[int | None],
                          events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Both checks for one data partition. log_offsets: the offsets of its final leader's log
    (rule 22's reference replica); events: its consumer-journal rows, every group's. Yields per
    group and check a CHECKED row (count: commits seen / records below the committed offset)
    and a VIOLATION row per offset that moved backwards and one for the records skipped."""
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if not e["corrupt"] and e["group_id"] is not None and e["offset"] is not None:
            by_group[e["group_id"]].append(e)
    offsets = sorted({o for o in log_offsets if o is not None and o >= 0})
    for group, rows in sorted(by_group.items()):
        rows.sort(key=lambda r: (r["file"], r["position"]))
        where = f"{rows[0]['topic']}-{rows[0]['partition']}"
        base = {"group_id": group, "topic": rows[0]["topic"], "partition": rows[0]["partition"]}
        committed: dict[str, Any] | None = None
        commits = 0
        backwards: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for r in rows:
            if r["event"] == RESET:
                committed = None  # an explicit reset may move the offset anywhere
            elif r["event"] == COMMIT:
                commits += 1
                if committed is not None and r["offset"] < committed["offset"]:
                    backwards.append((committed, r))
                committed = r
        yield {**base, "rule": COMMITS_MONOTONIC, "kind": CHECKED, "count": commits,
               "offset": None, "file": None, "message": None}
        for before, after in backwards:
            yield {**base, "rule": COMMITS_MONOTONIC, "kind": VIOLATION, "count": 1,
                   "offset": after["offset"], "file": after["file"],
                   "message": f"{COMMITS_MONOTONIC}: group {group}'s committed offset of {where}"
                              f" moved back from {before['offset']} to {after['offset']} "
                              f"(journal byte {after['position']}) without a reset"}
        if committed is None:
            continue
        read = {r["offset"] for r in rows if r["event"] == READ}
        below = [o for o in offsets if o < committed["offset"]]
        skipped = [o for o in below if o not in read]
        yield {**base, "rule": NO_SKIPPED, "kind": CHECKED, "count": len(below),
               "offset": None, "file": None, "message": None}
        if skipped:
            yield {**base, "rule": NO_SKIPPED, "kind": VIOLATION, "count": len(skipped),
                   "offset": skipped[0], "file": committed["file"],
                   "message": f"{NO_SKIPPED}: group {group} committed {committed['offset']} on "
                              f"{where} but no member read {len(skipped)} record(s) below it, "
                              f"from offset {skipped[0]} (last {skipped[-1]})"}
