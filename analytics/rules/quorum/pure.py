"""Rules 1, 2 and 5 (INVARIANTS.md, the Raft metadata quorum) as plain Python over what the
baseline (analytics.baseline) gathers from every node's metadata log rows: the LeaderChange
records per epoch, each node's (offset, epoch, record hash) columns, each node's VotersRecords.
Their Spark form is analytics.rules.quorum.spark; tests/spark/test_audit_rules.py holds the two
to the same results.
"""

from __future__ import annotations

from array import array
from typing import Any

from analytics.rules.result import RuleResult, rule_result
from kafkawire.constants import ZERO_UUID
from raft.core.replica_key import uuid_to_str

METADATA_PARTITION = "__cluster_metadata-0"
ZERO_DIRECTORY_ID = uuid_to_str(ZERO_UUID)

# One node's metadata log for rule 2: offsets, epochs and record hashes (sorted by offset), and
# the file named in evidence.
NodeColumns = tuple[array, array, array, str]  # type: ignore[type-arg]


def compare_logs(
    logs: dict[int, NodeColumns],
) -> tuple[int, list[dict[str, Any]], int]:
    """Rule 2 between every pair of nodes: a merge walk over their (sorted) offsets."""
    checked, violations, count = 0, [], 0
    nodes = sorted(logs)
    for i, node in enumerate(nodes):
        for other in nodes[i + 1:]:
            offsets_a, epochs_a, hashes_a, file_a = logs[node]
            offsets_b, epochs_b, hashes_b, file_b = logs[other]
            common: list[tuple[int, int, int, bool]] = []  # (offset, epoch a, epoch b, match)
            ia = ib = 0
            while ia < len(offsets_a) and ib < len(offsets_b):
                if offsets_a[ia] < offsets_b[ib]:
                    ia += 1
                elif offsets_a[ia] > offsets_b[ib]:
                    ib += 1
                else:
                    match = epochs_a[ia] == epochs_b[ib] and hashes_a[ia] == hashes_b[ib]
                    common.append((offsets_a[ia], epochs_a[ia], epochs_b[ib], match))
                    ia += 1
                    ib += 1
            checked += len(common)
            last_agreeing = max((o for o, _a, _b, m in common if m), default=None)
            for offset, epoch_a, epoch_b, match in common:
                below = last_agreeing is not None and offset < last_agreeing
                if not match and (epoch_a == epoch_b or below):
                    count += 1
                    violations.append({
                        "offset": offset, "node": node, "other_node": other, "file": file_a,
                        "other_file": file_b, "epoch": epoch_a, "other_epoch": epoch_b,
                        "last_agreeing_offset": last_agreeing, "partition": METADATA_PARTITION,
                        "message": f"rule 2: offset {offset} differs between node {node} "
                                   f"(epoch {epoch_a}) and node {other} (epoch {epoch_b}) "
                                   f"below their agreeing offset {last_agreeing}"})
    violations.sort(key=lambda v: (v["offset"], v["node"], v["other_node"]))
    return checked, violations, count


def rule_1_one_leader_per_epoch(leaders: dict[int, set[int]],
            first_change: dict[int, tuple[int, str, int]]) -> RuleResult:
    violations = []
    for epoch in sorted(leaders):
        if len(leaders[epoch]) > 1:
            node, file, offset = first_change[epoch]
            violations.append({"epoch": epoch, "leaders": sorted(leaders[epoch]), "node": node,
                               "file": file, "offset": offset, "partition": METADATA_PARTITION,
                               "message": f"rule 1: epoch {epoch} has leaders "
                                          f"{sorted(leaders[epoch])}"})
    return rule_result(1, len(leaders), violations)


def rule_2_committed_prefix(logs: dict[int, NodeColumns]) -> RuleResult:
    checked, violations, count = compare_logs(logs)
    return rule_result(2, checked, violations, count)


def rule_5_voter_changes(voters: dict[int, list[tuple[int, int, int, str, list[str]]]]) -> RuleResult:
    checked = 0
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for node in sorted(voters):
        previous: list[str] | None = None
        for position, kind_order, offset, file, keys in sorted(voters[node]):
            checked += 1
            for key in keys:
                if key.split(":", 1)[1] in ("", ZERO_DIRECTORY_ID):
                    entry = found.setdefault(("zero", position, kind_order, key), {
                        "node": node, "nodes": [], "file": file, "offset": offset,
                        "message": f"rule 5: voter {key.split(':', 1)[0]} has no directory id"})
                    entry["nodes"].append(node)
            if previous is not None:
                changed = len(set(keys) ^ set(previous))
                if changed > 1:
                    entry = found.setdefault(("change", position, tuple(keys), tuple(previous)), {
                        "node": node, "nodes": [], "file": file, "offset": offset,
                        "message": f"rule 5: voter set changed by {changed} keys at once"})
                    entry["nodes"].append(node)
            previous = keys
    violations = sorted(found.values(), key=lambda v: (v["offset"], v["node"], v["message"]))
    for v in violations:
        v["partition"] = METADATA_PARTITION
    return rule_result(5, checked, violations)

