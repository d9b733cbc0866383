"""What one rule found: RuleResult (how many things it checked, the violations with evidence,
notes), the rules' names, and the order the report lists them in. Shared by every family's pure
and Spark form (analytics.rules.<family>), the baseline and the report. Pure Python."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analytics.rules.groups.pure import GROUP_RULE_NAMES

MAX_EVIDENCE = 1000  # violations listed per rule; the count is always complete


RULE_NAMES: dict[int, str] = {
    1: "at most one leader per epoch",
    2: "committed entries agree across replicas (log matching)",
    5: "one voter change at a time; voters carry directory ids",
    8: "partition epoch +1 per change; leader epoch bumps exactly on leader change",
    10: "ISR and ELR disjoint; ELR empty while ISR >= min ISR",
    11: "LastKnownELR / LastKnownLeader cleared when they must be",
    13: "the leader is in the ISR unless RECOVERING",
    19: "RECOVERING implies ISR == [leader]",
    20: "HWM advances only while the committed ISR >= min ISR (journals)",
    21: "a RECOVERING leader neither advances its HWM nor acks a produce (journals)",
    22: "no follower keeps entries the final leader does not have",
    23: "every acked acks=all write is in the final log exactly once, or attributed",
    24: "no replica's log start offset passes the partition's high watermark",
    25: "a compacted log keeps every key's latest acked record; no older value outlives a newer "
        "one; the cleaner stays below the high watermark",
}


@dataclass
class RuleResult:
    rule: int | str  # an INVARIANTS.md number, or a named check (analytics.rules.groups.pure)
    name: str
    checked: int
    violations: list[dict[str, Any]] = field(default_factory=list)
    violation_count: int = 0
    # rule 23: losses an unclean or designated election explains (reported, not violations)
    attributed: list[dict[str, Any]] = field(default_factory=list)
    attributed_count: int = 0
    notes: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "name": self.name, "checked": self.checked,
               "violation_count": self.violation_count, "violations": self.violations}
        if self.rule == 23:
            out["attributed_count"] = self.attributed_count
            out["attributed"] = self.attributed
        if self.notes:
            out["notes"] = self.notes
        return out


def rule_result(rule: int | str, checked: int, violations: list[dict[str, Any]],
                violation_count: int | None = None) -> RuleResult:
    count = len(violations) if violation_count is None else violation_count
    name = RULE_NAMES[rule] if isinstance(rule, int) else GROUP_RULE_NAMES[rule]
    return RuleResult(rule, name, checked, violations[:MAX_EVIDENCE], count)


def rule_order(result: RuleResult) -> tuple[int, int, str]:
    """Numbered rules first, by number; then the named checks, by name."""
    if isinstance(result.rule, int):
        return 0, result.rule, ""
    return 1, 0, result.rule

