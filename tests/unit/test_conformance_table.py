"""docs/CONFORMANCE.md is the table the conformance scenarios assert (tests/conformance/
table.py), rendered; and the table checks a run the way the scenarios rely on."""

from __future__ import annotations

from tests.conformance import table


def test_the_doc_is_the_rendered_table() -> None:
    assert table.DOC.read_text() == table.render(), (
        "regenerate: python -m tests.conformance.table > docs/CONFORMANCE.md")


def test_every_scenario_row_is_checked_both_ways() -> None:
    row = table.ROWS[0]
    same = {"kafka": {row.observable: row.kafka}, "minikraft": {row.observable: row.minikraft}}
    scenario_rows = table.rows_of(row.scenario)
    full = {e: {r.observable: (r.kafka if e == "kafka" else r.minikraft) for r in scenario_rows}
            for e in ("kafka", "minikraft")}
    assert table.check(row.scenario, full, record=False) == []
    changed = {e: dict(v) for e, v in full.items()}
    changed["minikraft"][row.observable] = "something new"
    assert any("this run" in p for p in table.check(row.scenario, changed, record=False))
    extra = {e: {**v, "an observable nobody wrote down": "x"} for e, v in full.items()}
    assert any("not in the table" in p for p in table.check(row.scenario, extra, record=False))
    if len(scenario_rows) > 1:
        assert any("not observed" in p for p in table.check(row.scenario, same, record=False))
