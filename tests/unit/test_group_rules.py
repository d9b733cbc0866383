"""The audit's consumer-group checks (analytics.rules.groups.pure) and rule 23's idempotence verdict
(analytics.rules.replication.pure.classify_acked) on hand-made rows: each passes on a clean history and
flags a planted violation with its evidence."""

from __future__ import annotations

from typing import Any

from analytics.rules.cleanup import pure as cl
from analytics.rules.groups import pure as gr
from analytics.rules.replication import pure as dr

TOPIC = "t"
FILE = "journal/chaos-consumers.journal"


class Journal:
    """Consumer-journal rows (CONSUMER_COLUMNS) in write order."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, event: str, offset: int, group: str = "g", member: str | None = "m0") -> None:
        self.rows.append({"file": FILE, "position": 10 * len(self.rows), "event": event,
                          "group_id": group, "member": member, "topic": TOPIC, "partition": 0,
                          "offset": offset, "key": None, "ts": len(self.rows),
                          "corrupt": False, "corrupt_reason": None})

    def read(self, *offsets: int, group: str = "g") -> None:
        for offset in offsets:
            self.add(gr.READ, offset, group)

    def commit(self, offset: int, group: str = "g") -> None:
        self.add(gr.COMMIT, offset, group, member=None)


def results(log: range, journal: Journal) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in gr.check_group_partition(list(log), reversed(journal.rows)):  # order: by position
        out.setdefault((row["group_id"], row["rule"], row["kind"]), []).append(row)
    return out


def test_a_clean_group_history_passes_both_checks() -> None:
    journal = Journal()
    journal.read(0, 1, 2)
    journal.commit(3)
    journal.read(3, 4, 3, 4)  # read again after a rebalance: at-least-once, not a violation
    journal.commit(5)
    found = results(range(6), journal)
    assert found[("g", gr.COMMITS_MONOTONIC, gr.CHECKED)][0]["count"] == 2
    assert found[("g", gr.NO_SKIPPED, gr.CHECKED)][0]["count"] == 5
    assert not any(kind == gr.VIOLATION for _g, _r, kind in found)


def test_a_committed_offset_moving_back_is_a_violation_unless_reset() -> None:
    journal = Journal()
    journal.read(0, 1, 2, 3, 4)
    journal.commit(5)
    journal.commit(2)  # backwards: planted
    found = results(range(5), journal)
    bad = found[("g", gr.COMMITS_MONOTONIC, gr.VIOLATION)]
    assert len(bad) == 1 and bad[0]["offset"] == 2 and bad[0]["file"] == FILE
    assert "moved back from 5 to 2" in bad[0]["message"]

    reset = Journal()
    reset.read(0, 1, 2, 3, 4)
    reset.commit(5)
    reset.add(gr.RESET, 2)  # kafka-consumer-groups --reset-offsets: allowed
    reset.commit(2)
    assert ("g", gr.COMMITS_MONOTONIC, gr.VIOLATION) not in results(range(5), reset)


def test_a_record_below_the_committed_offset_nobody_read_is_skipped() -> None:
    journal = Journal()
    journal.read(0, 1, 3, 4)  # offset 2 never read: planted
    journal.commit(5)
    journal.read(0, 1, 2, 3, 4, 5, group="other")  # another group's reads do not count for g
    journal.commit(6, group="other")
    found = results(range(7), journal)
    bad = found[("g", gr.NO_SKIPPED, gr.VIOLATION)]
    assert len(bad) == 1 and (bad[0]["offset"], bad[0]["count"]) == (2, 1)
    assert ("other", gr.NO_SKIPPED, gr.VIOLATION) not in found
    assert found[("other", gr.NO_SKIPPED, gr.CHECKED)][0]["count"] == 6


def test_records_below_the_log_start_are_not_required() -> None:
    journal = Journal()
    journal.read(3, 4)  # offsets 0-2 were deleted (DeleteRecords): not in the final log
    journal.commit(5)
    found = results(range(3, 7), journal)
    assert ("g", gr.NO_SKIPPED, gr.VIOLATION) not in found
    assert found[("g", gr.NO_SKIPPED, gr.CHECKED)][0]["count"] == 2


def test_corrupt_rows_and_a_group_without_commits_are_not_judged() -> None:
    journal = Journal()
    journal.read(0)
    journal.rows.append({**journal.rows[0], "position": 99, "corrupt": True, "event": None,
                         "offset": None})
    found = results(range(3), journal)
    assert found[("g", gr.COMMITS_MONOTONIC, gr.CHECKED)][0]["count"] == 0
    assert ("g", gr.NO_SKIPPED, gr.CHECKED) not in found


def test_a_duplicate_is_a_violation_for_idempotent_producers_and_counted_for_others() -> None:
    assert dr.classify_acked(2, False, True) == dr.DUPLICATED
    assert dr.classify_acked(2, False, None) == dr.DUPLICATED  # older journals: as before
    assert dr.classify_acked(2, False, False) == dr.DUPLICATED_COUNTED
    assert dr.classify_acked(1, False, False) == dr.PRESENT
    assert dr.classify_acked(0, False, False) == dr.LOST  # a loss is a loss either way
    assert dr.classify_acked(0, True, True) == dr.ATTRIBUTED


def test_retention_and_compaction_rules_24_and_25() -> None:
    # Rule 23: an acked write missing below the final leader's log start offset or cleaner
    # checkpoint was removed by retention or compaction, not lost; above them it is lost.
    assert cl.removed_below(5, log_start=10, cleaned_to=None)
    assert cl.removed_below(15, log_start=10, cleaned_to=20)
    assert not cl.removed_below(25, log_start=10, cleaned_to=20)
    assert dr.classify_acked(0, False, True, removed=True) == dr.REMOVED
    assert dr.classify_acked(0, False, True, removed=False) == dr.LOST
    assert dr.classify_acked(1, False, True, removed=True) == dr.PRESENT
    # Rule 22 compares replicas only above every replica's log start and cleaner checkpoint.
    assert cl.removal_floor([{"log_start": 40, "cleaned_to": None},
                             {"log_start": 20, "cleaned_to": 55}]) == 55
    assert cl.removal_floor([]) == 0
    # Rule 24: a log start past the partition's highest HWM is a violation.
    assert cl.log_start_violation(101, 100)
    assert not cl.log_start_violation(100, 100)
    assert not cl.log_start_violation(50, None)
    # Rule 25: each acked key's latest write is held, or superseded by a later record of its key.
    acked = [(b"a", 1), (b"a", 5), (b"b", 2), (b"c", 3)]
    log = [(b"a", 5), (b"b", 9)]
    assert cl.compaction_violations(acked, log) == [(b"c", 3)]
    assert cl.compaction_violations(acked, log, log_start=4) == []  # c went with retention
    assert cl.compaction_violations(acked, [(b"a", 4), (b"b", 2), (b"c", 3)]) == [(b"a", 5)]
    # A deleted key (its latest acked write a tombstone) may be gone, never back to a value.
    deleted = [(b"c", 3)]
    assert cl.compaction_violations(acked, log, tombstones=deleted) == []
    assert cl.compaction_violations(acked, [*log, (b"c", 1)], tombstones=deleted) == [(b"c", 3)]
