"""The conformance table: what a user observes on Apache Kafka and on minikraft, scenario by
scenario, and whether the two are the same, a deliberate difference, an open one, or a minikraft
extension Kafka lacks. The rows are data, in table.txt; docs/CONFORMANCE.md is rendered from them
(`python -m tests.conformance.table > docs/CONFORMANCE.md`; test_table_doc.py keeps the two
equal), and every scenario run asserts its observations against ROWS, so a difference nobody
recorded fails, and so does one that went away (update the row, and the doc with it).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from cluster.apache_kafka import deps

SAME = "same"
DELIBERATE = "deliberate"
OPEN = "open"
EXTENSION = "extension"
STATUSES = (SAME, DELIBERATE, OPEN, EXTENSION)

DOC = Path(__file__).resolve().parents[2] / "docs" / "CONFORMANCE.md"
OBSERVED_DIR = Path(__file__).resolve().parents[2] / "build" / "conformance"


@dataclass(frozen=True)
class Row:
    scenario: str
    observable: str
    kafka: str
    minikraft: str
    status: str = SAME
    why: str = ""

    def __post_init__(self) -> None:
        assert self.status in STATUSES, self.status
        if self.status == SAME:
            assert self.kafka == self.minikraft, f"{self.observable}: 'same' with two values"
        else:
            assert self.why, f"{self.observable}: a {self.status} row says why"


TABLE = Path(__file__).with_name("table.txt")


def parse(text: str) -> list[Row]:
    """table.txt's rows (its header says the format): a same row gives one value for both."""
    lines: list[str] = []
    for raw in text.splitlines():
        if raw.startswith(" ") and raw.strip():
            assert lines, f"a continuation line with no row above: {raw!r}"
            lines[-1] += " " + raw.strip()
        elif raw.strip() and not raw.startswith("#"):
            lines.append(raw)
    named: dict[str, str] = {}
    rows: list[Row] = []
    scenario = ""
    for line in lines:
        if line.startswith("@"):
            name, text_of = line.split(" = ", 1)
            named[name] = text_of
        elif line.startswith("== "):
            scenario = line[3:]
        else:
            assert scenario, f"a row before any `== scenario`: {line!r}"
            fields = line.split(" | ")
            if len(fields) == 2:
                rows.append(Row(scenario, fields[0], fields[1], fields[1]))
            else:
                observable, kafka, minikraft, status, why = fields
                rows.append(Row(scenario, observable, kafka, minikraft, status,
                                named.get(why, why)))
    return rows


ROWS: list[Row] = parse(TABLE.read_text())


def rows_of(scenario: str) -> list[Row]:
    return [r for r in ROWS if r.scenario == scenario]


def check(scenario: str, observed: dict[str, dict[str, str]], record: bool = True) -> list[str]:
    """Differences between this run and the table (empty when it matches): every observable
    of the scenario has its row, with the values each cluster showed, and no row is left
    unobserved. With record, prints this run's lines and writes them to
    build/conformance/<scenario>.md, whatever the outcome."""
    kafka, mk = observed["kafka"], observed["minikraft"]
    rows = {r.observable: r for r in rows_of(scenario)}
    problems = []
    for name in sorted(set(kafka) | set(mk), key=lambda n: list(kafka).index(n)
                       if n in kafka else len(kafka)):
        row = rows.get(name)
        k, m = kafka.get(name, "(not observed)"), mk.get(name, "(not observed)")
        if row is None:
            problems.append(f"{scenario} / {name}: not in the table (kafka {k!r}, minikraft {m!r})")
        elif (row.kafka, row.minikraft) != (k, m):
            problems.append(
                f"{scenario} / {name}: table says kafka {row.kafka!r} minikraft {row.minikraft!r}"
                f" ({row.status}); this run kafka {k!r} minikraft {m!r}"
            )
    for name in rows:
        if name not in kafka and name not in mk:
            problems.append(f"{scenario} / {name}: in the table, not observed by this run")
    if record:
        _write_observed(scenario, kafka, mk)
    return problems


def assert_table(observed: dict[str, dict[str, dict[str, str]]]) -> None:
    """observed: engine -> scenario -> observations; every scenario checked against ROWS."""
    problems = []
    for scenario in observed["kafka"]:
        problems += check(
            scenario, {e: observed[e].get(scenario, {}) for e in ("kafka", "minikraft")})
    assert not problems, "\n".join(problems)


def _write_observed(scenario: str, kafka: dict[str, str], mk: dict[str, str]) -> None:
    OBSERVED_DIR.mkdir(parents=True, exist_ok=True)
    lines = [f"| {scenario} | {n} | {kafka.get(n, '')} | {mk.get(n, '')} |"
             for n in dict.fromkeys([*kafka, *mk])]
    (OBSERVED_DIR / f"{scenario}.md").write_text("\n".join(lines) + "\n")
    print(f"\nconformance {scenario} (Apache Kafka {deps.kafka_version()} | minikraft):")
    print("\n".join(lines))


def counts() -> dict[str, int]:
    """Scenarios by their worst row: same < extension < deliberate < open."""
    order = [SAME, EXTENSION, DELIBERATE, OPEN]
    worst: dict[str, str] = {}
    for r in ROWS:
        now = worst.get(r.scenario, SAME)
        worst[r.scenario] = max(now, r.status, key=order.index)
    return {s: sum(1 for w in worst.values() if w == s) for s in order}


def render() -> str:
    version = deps.kafka_version()
    n = counts()
    rows = {s: sum(1 for r in ROWS if r.status == s) for s in STATUSES}
    out = [
        "# minikraft beside Apache Kafka: the conformance table",
        "",
        f"Generated from `tests/conformance/table.txt` (`python -m tests.conformance.table >"
        f" docs/CONFORMANCE.md`); the scenarios in `tests/conformance/` run each line on a real"
        f" Apache Kafka {version} cluster and on a minikraft cluster planned alike"
        f" (`cluster/apache_kafka/`, `make kafka-deps`) and fail on any value not written here."
        f" Broker ids are 101-103, controller ids 1-3, on both.",
        "",
        f"Scenarios: {n[SAME]} equal, {n[EXTENSION]} equal apart from minikraft extensions,"
        f" {n[DELIBERATE]} with a deliberate difference, {n[OPEN]} with an open one"
        f" (rows: {rows[SAME]} same, {rows[EXTENSION]} extension, {rows[DELIBERATE]} deliberate,"
        f" {rows[OPEN]} open).",
        "",
        f"| scenario | observable | Apache Kafka {version} | minikraft | status | why |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in ROWS:
        out.append(f"| {r.scenario} | {r.observable} | {r.kafka} | {r.minikraft} | {r.status} |"
                   f" {r.why} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
