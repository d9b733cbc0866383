"""Rules 24 and 25 (INVARIANTS.md: retention and compaction, cleanup.policy delete and compact)
as plain Python over reader rows (analytics.read.broker_inputs): the baseline calls these
functions, the Spark audit (analytics.rules.cleanup.spark) runs the same predicates as columns.

A replica's log start offset (retention, DeleteRecords) never passes the partition's high
watermark (checked against the highest HWM any leader journaled). Entries a replica no longer
has below its log start offset or below its cleaner checkpoint are not entries the leader lacks
(rule 22: replicas are compared above every replica's floor) nor lost acked writes (rule 23:
counted as removed, not as a violation).

Rule 25, made precise for files: on a compacted partition, the cleaner's checkpoint (where its
last pass ended) never passes the partition's highest journaled high watermark (the cleaner
never touches offsets at or above it). Below the final leader's checkpoint (rule 22's reference
replica: replicas clean on their own schedules, so each is judged only where its own cleaner has
been) and at or above its log start, for every key with acked writes (acks=all, the ack
journal's `record_key`): its latest acked record is still in the log at its offset, or a later
record of the key is (a tombstone may be gone altogether: delete.retention.ms), and no acked
record of a key is gone while an older record of the same key is still there. A finding on a
partition that went RECOVERING is attributed to its unclean or designated election, as rule
23's losses are. Records missing above the checkpoint are not the cleaner's doing: rule 23.
`check_compacted_partition` is the rule for one partition (the Spark audit runs it per
partition); `compaction_violations` the same judgement on (key, offset) pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from analytics.rules.result import RuleResult, rule_result


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


DROPPED = "dropped"  # a key's latest acked record is gone and nothing newer of the key is there
OUTLIVED = "outlived"  # an acked record is gone while an older record of its key is still there
KEYS_CHECKED = "keys"
_KINDS = (DROPPED, OUTLIVED)


def judge_key(acked: Iterable[int], held: Iterable[int], log_start: int,
              cleaned_to: int | None, tombstones: Iterable[int] = ()
              ) -> tuple[str, int, int | None] | None:
    """Rule 25 for one key of one replica: acked, the offsets of its acked writes; held, the
    offsets of its records in the log; tombstones, which acked offsets were tombstones. Only
    acked offsets at or above log_start and below cleaned_to (None: no bound) are judged.
    (DROPPED, its latest acked offset, the newest held offset or None), or (OUTLIVED, the
    newest acked offset gone, the older held offset that outlived it), or None."""
    acked_offsets = sorted(set(acked))
    if not acked_offsets:
        return None
    judged = [o for o in acked_offsets if o >= log_start and (cleaned_to is None or o < cleaned_to)]
    if not judged:
        return None
    held_offsets = sorted(set(held))
    held_set = set(held_offsets)
    latest = acked_offsets[-1]
    newest_held = held_offsets[-1] if held_offsets else None
    if (latest == judged[-1] and latest not in held_set and latest not in set(tombstones)
            and (newest_held is None or newest_held < latest)):
        return DROPPED, latest, newest_held
    if held_offsets:
        gone = [o for o in judged if o not in held_set and held_offsets[0] < o]
        if gone:
            offset = gone[-1]
            return OUTLIVED, offset, max(h for h in held_offsets if h < offset)
    return None


def is_judged(acked: Iterable[int], log_start: int, cleaned_to: int | None) -> bool:
    """Whether judge_key judges the key at all (it counts as checked)."""
    return any(o >= log_start and (cleaned_to is None or o < cleaned_to) for o in acked)


def compaction_violations(
    acked: Iterable[tuple[Any, int]],
    log: Iterable[tuple[Any, int]],
    log_start: int = 0,
    tombstones: Iterable[tuple[Any, int]] = (),
    cleaned_to: int | None = None,
) -> list[tuple[Any, int]]:
    """Rule 25 for one compacted replica over (key, offset) pairs: (key, offset) of each key
    whose latest acked write (the highest offset) is neither in the log nor superseded there by
    a later record of the same key, or one of whose acked writes is gone while an older record
    of the key is left, judged at or above log_start (retention, rule 24) and below cleaned_to
    (None: the whole log). A key whose latest acked write is a tombstone (`tombstones`, acked
    too) may be gone altogether (delete.retention.ms), but no older value of it may be left."""
    acked_by_key: dict[Any, list[int]] = {}
    for key, offset in acked:
        acked_by_key.setdefault(key, []).append(offset)
    held: dict[Any, list[int]] = {}
    for key, offset in log:
        held.setdefault(key, []).append(offset)
    deleted: dict[Any, list[int]] = {}
    for key, offset in tombstones:
        deleted.setdefault(key, []).append(offset)
    found = []
    for key, offsets in acked_by_key.items():
        verdict = judge_key(offsets, held.get(key, ()), log_start, cleaned_to,
                            deleted.get(key, ()))
        if verdict is not None:
            found.append((key, verdict[1]))
    return sorted(found)


def shown_key(key_hex: str | None) -> str:
    """A record key (hex, as the readers carry it) for a message: its text when it is UTF-8."""
    if key_hex is None:
        return "null"
    raw = bytes.fromhex(key_hex)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"0x{key_hex}"
    return repr(text) if text.isprintable() else f"0x{key_hex}"


def check_compacted_partition(log: Iterable[dict[str, Any]], acked: Iterable[dict[str, Any]]
                              ) -> Iterator[dict[str, Any]]:
    """Rule 25 for one compacted partition. log: the final leader's records (record_key,
    offset); acked: the partition's acked keyed writes (topic, partition, record_key, offset,
    tombstone), each with the final leader's node, log_start and cleaned_to. Yields one
    KEYS_CHECKED row (count: keys judged) and one DROPPED or OUTLIVED row per key found."""
    rows = list(acked)
    if not rows:
        return
    first = rows[0]
    topic, partition, node = first["topic"], first["partition"], first["node"]
    log_start = first["log_start"] or 0
    cleaned_to = first["cleaned_to"] or 0  # a replica never cleaned: nothing is judged
    by_key: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_key.setdefault(row["record_key"], []).append(row)
    held: dict[str, list[int]] = {}
    for entry in log:
        held.setdefault(entry["record_key"], []).append(entry["offset"])
    base = {"topic": topic, "partition": partition, "node": node}
    checked = 0
    for key in sorted(by_key):
        offsets = [r["offset"] for r in by_key[key] if r["offset"] is not None]
        if not is_judged(offsets, log_start, cleaned_to):
            continue
        checked += 1
        verdict = judge_key(offsets, held.get(key, ()), log_start, cleaned_to,
                            [r["offset"] for r in by_key[key] if r["tombstone"]])
        if verdict is None:
            continue
        kind, offset, held_offset = verdict
        yield {**base, "kind": kind, "record_key": key, "offset": offset,
               "held_offset": held_offset, "count": 1,
               "message": compaction_message(kind, topic, partition, node, key, offset,
                                             held_offset, cleaned_to)}
    yield {**base, "kind": KEYS_CHECKED, "record_key": None, "offset": None,
           "held_offset": None, "count": checked, "message": None}


def compaction_message(kind: str, topic: str, partition: int, node: int, key: str,
                       offset: int, held_offset: int | None, cleaned_to: int) -> str:
    where = f"{topic}-{partition}"
    if kind == DROPPED:
        newest = "none" if held_offset is None else f"offset {held_offset}"
        return (f"rule 25: the latest acked record of key {shown_key(key)} in {where} (offset "
                f"{offset}) is gone from the final leader's (broker {node}) log below its cleaner "
                f"checkpoint {cleaned_to}, and no later record of the key is there (newest held: "
                f"{newest})")
    return (f"rule 25: key {shown_key(key)} in {where}: the acked record at offset {offset} is "
            f"gone from broker {node}'s log while an older one, at offset {held_offset}, is "
            f"still there")


def cleaned_past_hwm(cleaned_to: int | None, highest_hwm: int | None) -> bool:
    """Rule 25: a replica's cleaner checkpoint past the partition's highest journaled HWM (the
    cleaner touched offsets at or above it); None on either side: not checked."""
    return cleaned_to is not None and highest_hwm is not None and cleaned_to > highest_hwm


def cleaned_past_hwm_message(row: dict[str, Any]) -> str:
    return (f"rule 25: broker {row['node']} cleaned {row['topic']}-{row['partition']} up to "
            f"offset {row['cleaned_to']}, past its highest high watermark {row['highest_hwm']}")


def rule_25_compaction(
    bounds: Iterable[dict[str, Any]],
    highest_hwm: dict[tuple[str, int], int],
    reference: dict[tuple[str, int], int],
    entries: dict[tuple[str, int], list[dict[str, Any]]],
    acked: Iterable[dict[str, Any]],
    recovering: set[tuple[str, int]],
) -> RuleResult:
    """Rule 25 over a whole directory, as analytics.rules.cleanup.spark runs it: bounds, the
    replicas' LOG_BOUND_COLUMNS rows; highest_hwm and reference (the final leader's node) per
    partition; entries, the partition-log rows per partition; acked, the ack rows of acked
    acks=all writes (with record_key); recovering, the partitions that went RECOVERING."""
    cleaned = [b for b in bounds if b["cleaned_to"] is not None]
    past: list[dict[str, Any]] = []
    checkpoints = 0
    for bound in cleaned:
        highest = highest_hwm.get((bound["topic"], bound["partition"]))
        if highest is None:
            continue
        checkpoints += 1
        if cleaned_past_hwm(bound["cleaned_to"], highest):
            item = {**bound, "highest_hwm": highest, "kind": "cleaned past the high watermark",
                    "offset": bound["cleaned_to"]}
            item["message"] = cleaned_past_hwm_message(item)
            past.append(item)
    past.sort(key=lambda v: (v["topic"], v["partition"], v["node"]))
    judged = {(b["topic"], b["partition"]): b for b in cleaned
              if reference.get((b["topic"], b["partition"])) == b["node"]}
    by_partition: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in acked:
        key = (row["topic"], row["partition"])
        if key in judged and row["record_key"] is not None:
            bound = judged[key]
            by_partition.setdefault(key, []).append(
                {**row, "node": bound["node"], "log_start": bound["log_start"],
                 "cleaned_to": bound["cleaned_to"]})
    keys = attributed = 0
    found: list[dict[str, Any]] = []
    for key, rows in by_partition.items():
        log = [e for e in entries.get(key, []) if not e["corrupt"] and e["offset"] >= 0
               and e["record_key"] is not None and e["node"] == reference[key]]
        for out in check_compacted_partition(log, rows):
            if out["kind"] == KEYS_CHECKED:
                keys += out["count"]
            elif key in recovering:
                attributed += out["count"]
            else:
                found.append(out)
    found.sort(key=lambda v: (v["topic"], v["partition"], v["offset"], v["record_key"]))
    violations = past + found
    for v in violations:
        v["partition_id"] = v["partition"]
        v["partition"] = f"{v['topic']}-{v['partition']}"
    result = rule_result(25, keys + checkpoints, violations)
    result.notes = {"keys": keys, "cleaner_checkpoints": checkpoints, "attributed": attributed}
    return result
