"""The audit reads KIP-868 metadata transactions as the nodes' loader applies them (issue 35):
a generated log (analytics.generate: the controller's own builders and encoders, transactions
written as quorum_controller._commit writes them) with transactions aborted at a controller
failover and one left open at the log's end audits exactly as the same log with those
transactions' records replaced by NoOpRecords (same offsets, so the results compare whole),
while its committed transactions are applied. The Spark form: tests/spark/test_audit_rules.py."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from analytics.baseline import run_baseline
from analytics.generate import TRANSACTION_BATCH_RECORDS, LogBuilder, generate_cluster_dir
from controller.runtime import quorum_controller
from metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    NoOpRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from metadata.transactions import TransactionHold, marker_name
from storage.core.record_batch import decode_batch, encode_batch

BROKERS = (4, 5, 6)  # replication factor 3 on 3 brokers: a fencing changes every partition
BIG = 1500


def transaction_story(root: Path, as_noops: bool) -> list[tuple[int, int]]:
    """A small generated log, then: a topic of BIG partitions (a committed transaction); the
    leader fences a broker (a FenceBrokerRecord and BIG PartitionChangeRecords) and fails
    before the End, the next leader aborts it; the same for a topic of 1,001 partitions; the
    new leader fences the broker again (committed); a last fencing is left open at the log's
    end. as_noops: the aborted and open transactions' data records are NoOpRecords instead.
    The (first, last) offsets of those transactions."""
    dropped: list[tuple[int, int]] = []

    def then(log: LogBuilder) -> None:
        for broker in BROKERS:
            if log.brokers.is_fenced(broker):  # restarted in the generated part
                log.unfence(broker)
        log.create_topic("big", BIG, 3, BROKERS)
        for next_leader, change in ((2, lambda: log.fence(4)),
                                    (3, lambda: log.create_topic("ghost", 1001, 3, BROKERS)),
                                    (None, lambda: log.fence(5))):
            if next_leader is None:
                log.fence(4)  # the third leader fences it again, committed this time
            first = log.next_offset
            with log.leader_fails_mid_transaction(next_leader):
                change()
            dropped.append((first, log.next_offset - 1))
        if as_noops:
            _as_noops(log, dropped)

    generate_cluster_dir(root, 200, seed=3, brokers=BROKERS, topics=2, partitions_per_topic=3,
                         then=then)
    return dropped


@dataclass(frozen=True)
class Story:
    with_aborted: Path  # the cluster directory
    as_noops: Path
    dropped: list[tuple[int, int]]


@pytest.fixture(scope="session")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    """transaction_story both ways (the console and Spark tests import this fixture)."""
    return _story(tmp_path_factory.getbasetemp())


@functools.cache
def _story(basetemp: Path) -> Story:
    """Written once per process: each module importing the fixture has its own copy of it."""
    root = basetemp / "transactions"
    dropped = transaction_story(root / "with", as_noops=False)
    assert transaction_story(root / "noops", as_noops=True) == dropped
    return Story(root / "with", root / "noops", dropped)


def _as_noops(log: LogBuilder, ranges: list[tuple[int, int]]) -> None:
    noop = encode_record(NoOpRecord())
    for index, (base, raw, count) in enumerate(log.batches):
        batch, _size = decode_batch(raw, 0)
        if batch.is_control or not any(base <= last and first < base + count
                                       for first, last in ranges):
            continue
        values = [noop if any(first <= base + i <= last for first, last in ranges)
                  else record.value or b"" for i, record in enumerate(batch.records)]
        log.batches[index] = (base, encode_batch(base, batch.leader_epoch, batch.timestamp_ms,
                                                 values, False), count)


def without_elapsed(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in ("elapsed_s", "directory")}


def test_the_generator_writes_transactions_as_the_active_controller() -> None:
    assert TRANSACTION_BATCH_RECORDS == quorum_controller.TRANSACTION_BATCH_RECORDS
    log = LogBuilder((1, 2, 3), seed=0)
    log.append_records([TopicRecord(f"t{i}", uuid.UUID(int=i + 1))
                        for i in range(1500)], "CreateTopics")
    sizes = [count for _base, _raw, count in log.batches]
    assert sizes == [1000, 502]  # Begin + 999, 501 + End
    first = decode_record(decode_batch(log.batches[0][1], 0)[0].records[0].value or b"")
    last = decode_record(decode_batch(log.batches[1][1], 0)[0].records[-1].value or b"")
    assert first == BeginTransactionRecord("CreateTopics") and last == EndTransactionRecord()


def test_markers_are_found_from_their_first_bytes() -> None:
    assert [marker_name(encode_record(r)) for r in (
        BeginTransactionRecord("x"), EndTransactionRecord(), AbortTransactionRecord("y"),
        NoOpRecord(), TopicRecord("t", uuid.UUID(int=1)))] == [
        "BeginTransactionRecord", "EndTransactionRecord", "AbortTransactionRecord", None, None]
    assert marker_name(None) is None and marker_name(b"") is None


def test_hold_applies_at_the_end_drops_an_abort_and_an_open_one() -> None:
    hold: TransactionHold[str] = TransactionHold()
    assert not hold.hold("before") and hold.marker("EndTransactionRecord", 1) == []
    assert hold.marker("BeginTransactionRecord", 2) == [] and hold.hold("a")
    assert hold.marker("BeginTransactionRecord", 3) == [] and hold.hold("b")  # ignored
    assert hold.marker("EndTransactionRecord", 4) == ["a", "b"] and not hold.open
    hold.marker("BeginTransactionRecord", 5)
    hold.hold("c")
    assert hold.marker("AbortTransactionRecord", 6) == [] and not hold.open
    hold.marker("BeginTransactionRecord", 7)
    hold.hold("d")
    assert hold.clear(9) == 1 and not hold.hold("e")
    assert hold.dropped == [(5, 6), (7, 9)]


def test_baseline_drops_aborted_and_unfinished_transactions(story: Story) -> None:
    """The pure form: the same audit document as the log with those records as NoOps."""
    # Begin, FenceBrokerRecord, BIG PartitionChangeRecords; LeaderChange, NoOp, Abort.
    assert story.dropped[0][1] - story.dropped[0][0] + 1 == BIG + 5
    assert sum(last - first for first, last in story.dropped) > 2 * BIG + 1000
    with_aborted = run_baseline(story.with_aborted).to_json()
    reference = run_baseline(story.as_noops).to_json()
    assert without_elapsed(with_aborted) == without_elapsed(reference)
    # The committed transactions are applied: the big topic's partitions and its refencing.
    states = next(r for r in with_aborted["rules"] if r["rule"] == 10)["checked"]
    changes = next(r for r in with_aborted["rules"] if r["rule"] == 8)["checked"]
    assert states > 2 * BIG and changes > BIG, (states, changes)
