"""The audit's checks as one single-process Python pass: the yardstick for `bench audit`.

It is the straightforward pass: every record of every replica decoded (iter_file_rows) and
compared record by record for rule 2, where the Spark audit decodes the replay source only and
compares the other replicas batch by batch (base offset, epoch, CRC). Damage is classified by
the same analytics.read.log_scan, so both reach the same verdict (`corrupt` included).

Same files, same rows (analytics.read.datasource.iter_file_rows), same rule definitions: every
family's pure form (analytics.rules.<family>.pure: rules 1, 2, 5 as loops over the rows, rules
8-19 through the partition replay, rules 20-25 and the group checks over the broker files), same
counts; no Spark. `python -m analytics.baseline --dir D` prints the audit.json-shaped document.
"""

from __future__ import annotations

import argparse
import json
import time
from array import array
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analytics.read.broker_inputs import (
    ACK_JOURNALS,
    BROKER_JOURNALS,
    CONSUMER_JOURNALS,
    LOG_BOUND_COLUMNS,
    PARTITION_LOGS,
    JournalFile,
    discover_broker_files,
    names,
    read_log_bounds,
)
from analytics.read.datasource import (
    BATCH_COLUMNS,
    COL,
    KIND_SEGMENT,
    KIND_SNAPSHOT,
    PARTITION_VALUE_COLUMNS,
    FileSpec,
    discover_files,
    iter_file_batches,
    iter_file_rows,
)
from analytics.read.log_scan import CORRUPT
from analytics.rules.cleanup import pure as cl
from analytics.rules.groups import pure as gr
from analytics.rules.partitions.pure import (
    MARKER_ITEM,
    PARTITION_ITEM,
    PARTITION_RECORD_TYPES,
    SIDE_FIELDS,
    SIDE_ITEM,
    SIDE_RECORD_TYPES,
    replay_in_log_order,
)
from analytics.rules.partitions.source import ReplaySource, pick_replay_source
from analytics.rules.quorum.pure import (
    NodeColumns,
    rule_1_one_leader_per_epoch,
    rule_2_committed_prefix,
    rule_5_voter_changes,
)
from analytics.rules.replication import pure as dr
from analytics.rules.result import MAX_EVIDENCE, RuleResult, rule_order, rule_result
from kafkawire.constants import ACKS_ALL
from metadata.transactions import MARKER_NAMES, TransactionHold

_SIDE = tuple(COL[c] for c in SIDE_FIELDS)


@dataclass
class BaselineResult:
    rules: list[RuleResult]
    inputs: dict[str, Any]
    elapsed_s: float
    corrupt_regions: int = 0  # CRC/framing errors with valid data after them

    @property
    def verdict(self) -> str:
        if self.corrupt_regions:
            return "corrupt"
        return "violations" if any(r.violation_count for r in self.rules) else "clean"

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "rules": [r.to_json() for r in self.rules],
                "inputs": self.inputs, "elapsed_s": round(self.elapsed_s, 3)}


def _scan_replay_source(specs: Sequence[FileSpec]) -> tuple[ReplaySource | None, int]:
    """The replay log chosen from batch rows alone, as the Spark audit chooses it, and how
    many damaged regions are bit rot (verdict `corrupt`)."""
    logs: dict[tuple[int, str], list[int]] = {}
    snapshots: list[tuple[int, str, int, bool]] = []
    bit_rot = 0
    names = [name for name, _t in BATCH_COLUMNS]
    for spec in specs:
        first = last = None
        damaged = False
        for raw in iter_file_batches(spec):
            row = dict(zip(names, raw, strict=True))
            if row["damage"] is not None:
                damaged = True
                bit_rot += row["damage"] == CORRUPT
                continue
            first = row["base_offset"] if first is None else first
            last = row["last_offset"]
        if spec.kind == KIND_SNAPSHOT:
            snapshots.append((spec.node, spec.file, spec.snapshot_end_offset or 0, damaged))
        elif first is not None and last is not None:
            bounds = logs.setdefault((spec.node, spec.role), [first, last])
            bounds[0], bounds[1] = min(bounds[0], first), max(bounds[1], last)
    source = pick_replay_source([(n, r, b[0], b[1]) for (n, r), b in logs.items()], snapshots)
    return source, bit_rot




def run_baseline(directory: str | Path) -> BaselineResult:
    started = time.monotonic()
    specs = discover_files(directory)
    source, bit_rot = _scan_replay_source(specs)
    records = corrupt = 0
    leaders: dict[int, set[int]] = defaultdict(set)
    first_change: dict[int, tuple[int, str, int]] = {}
    logs: dict[int, NodeColumns] = {}
    voters: dict[int, list[tuple[int, int, int, str, list[str]]]] = defaultdict(list)
    replay_items: list[tuple[int, int, int, tuple[Any, ...]]] = []
    names_by_id: dict[str, str] = {}
    recovering_ids: set[tuple[str, int]] = set()
    # Topic names and partitions that went RECOVERING, as each node's loader applied its log:
    # a transaction's records at its End, never an aborted or unfinished one's
    # (metadata.transactions; the Spark audit filters its record table the same way).
    holds: dict[int, TransactionHold[tuple[bool, str, Any]]] = defaultdict(TransactionHold)

    def note_state(is_name: bool, topic_id: str, value: Any) -> None:
        if is_name:
            names_by_id[topic_id] = value
        else:
            recovering_ids.add((topic_id, value))

    lrs_i = COL["leader_recovery_state"]
    kind, offset_i, rtype_i, corrupt_i = COL["kind"], COL["offset"], COL["record_type"], \
        COL["corrupt"]
    for spec in specs:
        in_replay = source is not None and spec.node == source.node and (
            spec.file == source.snapshot_file
            or (spec.kind == KIND_SEGMENT))
        if spec.kind == KIND_SEGMENT and spec.node not in logs:
            logs[spec.node] = (array("q"), array("q"), array("q"), spec.file)
        for row in iter_file_rows(spec):
            if row[corrupt_i]:
                corrupt += 1
                continue
            records += 1
            offset, record_type = row[offset_i], row[rtype_i]
            if row[kind] == KIND_SEGMENT:
                offsets, epochs, hashes, _file = logs[spec.node]
                offsets.append(offset)
                epochs.append(row[COL["epoch"]])
                hashes.append(row[COL["record_hash"]])
            if record_type == "LeaderChangeRecord":
                epoch = row[COL["epoch"]]
                leaders[epoch].add(row[COL["leader_id"]])
                first_change.setdefault(epoch, (spec.node, spec.file, offset))
            elif record_type in MARKER_NAMES and row[kind] == KIND_SEGMENT:
                for item in holds[spec.node].marker(record_type, offset):
                    note_state(*item)
            elif record_type == "TopicRecord" or (record_type in PARTITION_RECORD_TYPES
                                                  and row[lrs_i] == dr.RECOVERING):
                is_name = record_type == "TopicRecord"
                item = (is_name, row[COL["topic_id"]],
                        row[COL["topic_name"] if is_name else COL["partition_id"]])
                if not (row[kind] == KIND_SEGMENT and holds[spec.node].hold(item)):
                    note_state(*item)
            if record_type == "VotersRecord":
                snapshot = row[kind] == KIND_SNAPSHOT
                position = (spec.snapshot_end_offset or 0) - 1 if snapshot else offset
                keys = sorted(f"{v['id']}:{v['directory_id']}" for v in row[COL["voters"]])
                voters[spec.node].append((position, 0 if snapshot else 1, offset, spec.file,
                                          keys))
            if not in_replay or source is None:
                continue
            if row[kind] == KIND_SEGMENT and offset < source.from_offset:
                continue
            if record_type in PARTITION_RECORD_TYPES or record_type in SIDE_RECORD_TYPES:
                snapshot = row[kind] == KIND_SNAPSHOT
                major, minor = (-1, offset) if snapshot else (offset, 0)  # log order
                if record_type in PARTITION_RECORD_TYPES:
                    replay_items.append((major, minor, PARTITION_ITEM, (
                        tuple(row[i] for i in PARTITION_VALUE_COLUMNS), spec.file, offset,
                        row[COL["batch_timestamp_ms"]], snapshot)))
                else:
                    replay_items.append((major, minor, SIDE_ITEM, tuple(row[i] for i in _SIDE)))
            elif record_type in MARKER_NAMES and row[kind] == KIND_SEGMENT:
                replay_items.append((offset, 0, MARKER_ITEM, (record_type, offset)))
    rules = [rule_1_one_leader_per_epoch(leaders, first_change), rule_2_committed_prefix(logs),
             rule_5_voter_changes(voters)]
    rules += replay_in_log_order(source.node if source else 0, replay_items)
    recovering = {(names_by_id[t], p) for t, p in recovering_ids if t in names_by_id}
    broker_rules, broker_files = _broker_rules(directory, recovering)
    rules += broker_rules
    rules.sort(key=rule_order)
    inputs = {"files": len(specs), "records": records, "corrupt": corrupt,
              "nodes": len({s.node for s in specs}), **broker_files}
    return BaselineResult(rules, inputs, time.monotonic() - started, bit_rot)










def _broker_rules(directory: str | Path, recovering: set[tuple[str, int]]
                  ) -> tuple[list[RuleResult], dict[str, int]]:
    """Rules 20-25 with analytics.rules.replication.pure and cleanup.pure, as their spark.py
    forms run them."""
    files = discover_broker_files(directory)
    checked20, bad20 = 0, []
    highest_hwm: dict[tuple[str, int], int] = {}
    roles: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    # Rule 21: each broker journal's rows of a partition, in journal order.
    recovery_rows: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    bounds = [dict(zip(names(LOG_BOUND_COLUMNS), row, strict=True))
              for row in read_log_bounds(directory)]
    bounds_of: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for bound in bounds:
        bounds_of[(bound["topic"], bound["partition"])].append(bound)
    for journal in files.journals:
        for row in BROKER_JOURNALS.dicts(journal):
            if row["corrupt"]:
                continue
            key = (row["topic"], row["partition"])
            if row["event"] in ("RoleChanged", "RecoveryStateChanged", "HwmAdvanced",
                                "ProduceAcked"):
                recovery_rows[(row["file"], *key)].append(row)
            if row["event"] == "HwmAdvanced":
                checked20 += 1
                if row["new"] is not None:
                    highest_hwm[key] = max(row["new"], highest_hwm.get(key, row["new"]))
                if dr.hwm_violation(row["event"], row["old"], row["new"], row["isr_size"],
                                    row["min_isr"]):
                    bad20.append({**row, "message": dr.hwm_message(row), "node": row["broker_id"],
                                  "partition": f"{row['topic']}-{row['partition']}",
                                  "offset": row["new"]})
            elif row["event"] == "RoleChanged":
                roles[key].append(row)
            elif row["event"] == "RecoveryStateChanged" and row["new_state"] == dr.RECOVERING:
                recovering.add(key)
    checked21, bad21 = 0, []
    for rows in recovery_rows.values():
        for row, bad in dr.recovering_serves(rows):
            checked21 += 1
            if bad:
                bad21.append({**row, "message": dr.recovering_message(row),
                              "node": row["broker_id"],
                              "partition": f"{row['topic']}-{row['partition']}",
                              "offset": row["new"]})
    bad21.sort(key=lambda v: (v["ts"] or 0, v["broker_id"], v["position"]))
    entries: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for log_file in files.logs:
        for row in PARTITION_LOGS.dicts(log_file):
            entries[(row["topic"], row["partition"])].append(row)
    # Rules 24/25: below any replica's log start or cleaner checkpoint replicas differ by design.
    compared: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for key, rows in entries.items():
        floor = cl.removal_floor(bounds_of.get(key, []))
        compared[key] = [r for r in rows if r["corrupt"] or r["offset"] >= floor]
    checked22, bad22, unchecked = 0, [], 0
    reference: dict[tuple[str, int], int] = {}
    for key in sorted(set(entries) | set(roles), key=str):
        for out in dr.check_partition_replicas(compared.get(key, []), roles.get(key, [])):
            if out["kind"] == dr.REFERENCE:
                reference[key] = out["node"]
            elif out["kind"] == dr.CHECKED:
                checked22 += out["count"]
            elif out["kind"] == dr.UNCHECKED:
                unchecked += 1
            elif out["kind"] == dr.VIOLATION:
                bad22.append({**out, "partition": f"{out['topic']}-{out['partition']}"})
    in_leader_log: dict[tuple[str, int, str | None], int] = defaultdict(int)
    for key, rows in entries.items():
        for row in rows:
            if not row["corrupt"] and row["offset"] >= 0 and reference.get(key) == row["node"]:
                in_leader_log[(key[0], key[1], row["key"])] += 1
    acked: dict[tuple[str, int, str], dict[str, Any]] = {}
    keyed: list[dict[str, Any]] = []  # rule 25: acked writes with their record keys
    for ack_journal in files.acks:
        for row in ACK_JOURNALS.dicts(ack_journal):
            if (not row["corrupt"] and row["event"] == "ack" and row["acks"] == ACKS_ALL
                    and row["error"] == dr.ACK_OK):
                if row["key"] is not None:
                    acked.setdefault((row["topic"], row["partition"], row["key"]), row)
                if row["record_key"] is not None:
                    keyed.append(row)
    bad23: list[dict[str, Any]] = []
    attributed: list[dict[str, Any]] = []
    duplicates_counted = 0
    removed_count = 0
    for (topic, partition, write_key), row in acked.items():
        count = in_leader_log.get((topic, partition, write_key), 0)
        ref = next((b for b in bounds_of.get((topic, partition), [])
                    if b["node"] == reference.get((topic, partition))), {})
        removed = cl.removed_below(row["offset"], ref.get("log_start"), ref.get("cleaned_to"))
        outcome = dr.classify_acked(count, (topic, partition) in recovering, row["idempotent"],
                                    removed)
        if outcome == dr.DUPLICATED_COUNTED:
            duplicates_counted += 1
        removed_count += outcome == dr.REMOVED
        if outcome in (dr.PRESENT, dr.DUPLICATED_COUNTED, dr.REMOVED):
            continue
        item = {"topic": topic, "partition": f"{topic}-{partition}", "partition_id": partition,
                "key": write_key, "offset": row["offset"], "leader_epoch": row["leader_epoch"],
                "file": row["file"], "count": count, "outcome": outcome}
        item["message"] = dr.acked_message(outcome, {**item, "partition": partition})
        (attributed if outcome == dr.ATTRIBUTED else bad23).append(item)
    def order(v):
        return ((v["topic"], v["partition_id"], v["offset"] or 0, v["key"]))
    bad23.sort(key=order)
    attributed.sort(key=order)
    bad20.sort(key=lambda v: (v["ts"] or 0, v["broker_id"]))
    rule22 = rule_result(22, checked22, bad22)
    rule22.notes = {"unchecked_replicas": unchecked, "partitions": len(reference)}
    rule23 = rule_result(23, len(acked), bad23)
    rule23.attributed, rule23.attributed_count = attributed[:MAX_EVIDENCE], len(attributed)
    rule23.notes = {"duplicates_counted": duplicates_counted,
                    "removed_by_retention_or_compaction": removed_count}
    checked24, bad24 = 0, []
    for bound in bounds:
        highest = highest_hwm.get((bound["topic"], bound["partition"]))
        if bound["log_start"] is None or highest is None:
            continue
        checked24 += 1
        if cl.log_start_violation(bound["log_start"], highest):
            item = {**bound, "highest_hwm": highest, "offset": bound["log_start"],
                    "partition_id": bound["partition"]}
            item["message"] = cl.log_start_message(item)
            item["partition"] = f"{bound['topic']}-{bound['partition']}"
            bad24.append(item)
    rule25 = cl.rule_25_compaction(bounds, highest_hwm, reference, entries, keyed, recovering)
    return [rule_result(20, checked20, bad20), rule_result(21, checked21, bad21), rule22, rule23,
            rule_result(24, checked24, bad24),
            rule25, *_group_rules(files.consumers, entries, reference)], files.counts()




def _group_rules(journals: list[JournalFile],
                 entries: dict[tuple[str, int], list[dict[str, Any]]],
                 reference: dict[tuple[str, int], int]) -> list[RuleResult]:
    """analytics.rules.groups.pure's checks, as analytics.rules.groups.spark runs them."""
    if not journals:
        return []
    events: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for journal in journals:
        for row in CONSUMER_JOURNALS.dicts(journal):
            if not row["corrupt"]:
                events[(row["topic"], row["partition"])].append(row)
    checked = dict.fromkeys((gr.COMMITS_MONOTONIC, gr.NO_SKIPPED), 0)
    bad: dict[str, list[dict[str, Any]]] = {rule: [] for rule in checked}
    skipped = 0
    for key, rows in sorted(events.items(), key=str):
        offsets = [e["offset"] for e in entries.get(key, [])
                   if not e["corrupt"] and reference.get(key) == e["node"]]
        for out in gr.check_group_partition(offsets, rows):
            if out["kind"] == gr.CHECKED:
                checked[out["rule"]] += out["count"]
                continue
            skipped += out["count"] if out["rule"] == gr.NO_SKIPPED else 0
            bad[out["rule"]].append({**out, "partition_id": out["partition"],
                                     "partition": f"{out['topic']}-{out['partition']}"})
    results = []
    for rule, found in bad.items():
        found.sort(key=lambda v: (v["topic"], v["partition_id"], v["group_id"], v["offset"]))
        results.append(rule_result(rule, checked[rule], found))
    results[-1].notes = {"skipped_records": skipped}
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="single-process audit baseline")
    parser.add_argument("--dir", required=True, type=Path)
    args = parser.parse_args(argv)
    result = run_baseline(args.dir)
    print(json.dumps(result.to_json(), default=str))
    return 0 if result.verdict == "clean" else 1


if __name__ == "__main__":
    raise SystemExit(main())
