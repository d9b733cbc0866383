"""AuditResult: what one audit found (verdict, rules, inputs, timelines, damage), the value
analytics.audit builds and analytics.report.render renders. Its own module so the report does not
import the audit that imports the report (issue 18: no import cycles)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analytics.rules.result import RuleResult

CLEAN, VIOLATIONS, CORRUPT_VERDICT = "clean", "violations", "corrupt"


@dataclass
class AuditResult:
    directory: str
    rules: list[RuleResult]
    inputs: dict[str, Any]
    timelines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    hwm_timelines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    elapsed_s: float = 0.0
    report_dir: Path | None = None
    corruption: list[dict[str, Any]] = field(default_factory=list)  # bit rot: findings
    torn_tails: list[dict[str, Any]] = field(default_factory=list)  # crash tails: notes
    topic_names: dict[str, str] = field(default_factory=dict)  # topic id -> name
    elections: list[dict[str, Any]] = field(default_factory=list)  # LeaderChange per epoch
    partitions: list[dict[str, Any]] = field(default_factory=list)  # per-partition tallies
    faults: list[dict[str, Any]] = field(default_factory=list)  # chaos journal events

    @property
    def verdict(self) -> str:
        if self.corruption:
            return CORRUPT_VERDICT
        return VIOLATIONS if any(r.violation_count for r in self.rules) else CLEAN

    @property
    def clean(self) -> bool:
        return self.verdict == CLEAN

    def rule(self, number: int | str) -> RuleResult:
        return next(r for r in self.rules if r.rule == number)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "directory": self.directory,
                "corruption": self.corruption, "torn_tails": self.torn_tails,
                "rules": [r.to_json() for r in self.rules], "inputs": self.inputs,
                "partitions": self.partitions, "faults": self.faults,
                "elections": self.elections, "topic_names": self.topic_names,
                "elapsed_s": round(self.elapsed_s, 3)}
