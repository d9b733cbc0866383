"""Rule 25's pure form (analytics.rules.cleanup.pure) and what it reads: an older value
outliving a newer one (not only the latest), the judged range (log start to the replica's
cleaner checkpoint), tombstones, the checkpoint against the HWM; record keys are read for the
partitions a cleaner has checkpointed and for no other (a topic without compaction pays
nothing). The Spark form is held equal to this one in tests/spark/test_broker_rules.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack

from analytics.read.broker_inputs import (
    ACK_COLUMNS,
    PARTITION_LOG_COLUMNS,
    JournalFile,
    discover_partition_logs,
    iter_ack_rows,
    iter_partition_log_rows,
    names,
)
from analytics.rules.cleanup import pure as cl
from storage.core.record_batch import Record, encode_batch


def test_an_older_value_never_outlives_a_newer_one() -> None:
    acked = [(b"a", 1), (b"a", 3), (b"a", 5)]
    assert cl.compaction_violations(acked, [(b"a", 5)]) == []  # what the cleaner leaves
    assert cl.compaction_violations(acked, [(b"a", 1), (b"a", 3), (b"a", 5)]) == []  # not yet
    # a@3 went while the older a@1 stayed, though the latest a@5 is there.
    assert cl.compaction_violations(acked, [(b"a", 1), (b"a", 5)]) == [(b"a", 3)]
    assert cl.judge_key([1, 3, 5], [1, 5], 0, None) == (cl.OUTLIVED, 3, 1)
    # The latest gone with nothing newer of the key: dropped, whatever older one is left.
    assert cl.judge_key([1, 3, 5], [1], 0, None) == (cl.DROPPED, 5, 1)
    assert cl.judge_key([1, 3, 5], [], 0, None) == (cl.DROPPED, 5, None)
    assert cl.judge_key([1, 3, 5], [7], 0, None) is None  # superseded by a later record


def test_only_the_cleaned_range_above_the_log_start_is_judged() -> None:
    acked = [(b"a", 1), (b"a", 3), (b"a", 5)]
    # Above the checkpoint the cleaner has not been: a gap there is rule 23's, not 25's.
    assert cl.compaction_violations(acked, [(b"a", 1), (b"a", 3)], cleaned_to=5) == []
    assert cl.compaction_violations(acked, [(b"a", 1)], cleaned_to=4) == [(b"a", 3)]
    assert cl.compaction_violations(acked, [], cleaned_to=6) == [(b"a", 5)]
    # Below the log start retention took them (rule 24).
    assert cl.compaction_violations(acked, [], log_start=6) == []
    # A tombstone may go altogether (delete.retention.ms), never back to an older value.
    assert cl.compaction_violations(acked, [], tombstones=[(b"a", 5)]) == []
    assert cl.compaction_violations(acked, [(b"a", 3)], tombstones=[(b"a", 5)]) == [(b"a", 5)]
    assert cl.cleaned_past_hwm(8, 7)
    assert not cl.cleaned_past_hwm(7, 7) and not cl.cleaned_past_hwm(8, None)


def _acked(offset: int, cleaned_to: int | None, tombstone: bool = False) -> dict[str, Any]:
    return {"topic": "t", "partition": 0, "node": 1, "record_key": b"a".hex(),
            "offset": offset, "tombstone": tombstone, "log_start": None,
            "cleaned_to": cleaned_to}


def test_one_partition_as_the_spark_audit_runs_it() -> None:
    acked = [_acked(o, 6) for o in (1, 3, 5)]
    out = list(cl.check_compacted_partition([{"record_key": b"a".hex(), "offset": 1}], acked))
    assert [(o["kind"], o["offset"], o["held_offset"], o["count"]) for o in out] == [
        (cl.DROPPED, 5, 1, 1), (cl.KEYS_CHECKED, None, None, 1)]
    assert "key 'a' in t-0 (offset 5)" in out[0]["message"]
    # The final leader never cleaned the partition: nothing of it is judged.
    never = list(cl.check_compacted_partition([], [_acked(1, None)]))
    assert [(o["kind"], o["count"]) for o in never] == [(cl.KEYS_CHECKED, 0)]
    assert cl.shown_key(b"\xff\x00".hex()) == "0xff00"


def test_record_keys_are_read_only_where_a_cleaner_has_checkpointed(tmp_path: Path) -> None:
    for topic in ("table", "events"):
        directory = tmp_path / "broker-101" / "data" / f"{topic}-0"
        directory.mkdir(parents=True)
        (directory / f"{0:020d}.log").write_bytes(
            encode_batch(0, 0, 1_000, [Record(b"k", b"p-0:v"), Record(b"\xff", None)]))
    (tmp_path / "broker-101" / "data" / "cleaner-offset-checkpoint").write_text(
        "0\n1\ntable 0 2\n")
    columns = names(PARTITION_LOG_COLUMNS)
    rows = {spec.topic: [dict(zip(columns, row, strict=True))
                         for row in iter_partition_log_rows(spec)]
            for spec in discover_partition_logs(tmp_path)}
    assert [(r["offset"], r["key"], r["record_key"]) for r in rows["table"]] == [
        (0, "p-0", b"k".hex()), (1, None, "ff")]
    assert [r["record_key"] for r in rows["events"]] == [None, None]
    # The ack journal's keyed entries: bytes or text keys, the tombstone flag; absent: null.
    journal = tmp_path / "keyed.journal"
    journal.write_bytes(b"".join(msgpack.packb(e, use_bin_type=True) for e in (
        {"event": "ack", "record_key": b"k", "tombstone": False, "offset": 0},
        {"event": "ack", "record_key": "k", "tombstone": True, "offset": 1},
        {"event": "ack", "offset": 2})))
    acks = [dict(zip(names(ACK_COLUMNS), row, strict=True))
            for row in iter_ack_rows(JournalFile(str(journal), None))]
    assert [(a["record_key"], a["tombstone"]) for a in acks] == [
        (b"k".hex(), False), (b"k".hex(), True), (None, None)]
