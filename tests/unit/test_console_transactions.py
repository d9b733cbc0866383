"""The console replays KIP-868 metadata transactions as the nodes' loader applies them (issue
35): following the generated log of tests/unit/test_audit_transactions.py on disk, as its high
watermark moves (cluster.console.runtime.metadata_tail, a few hundred offsets a tick, so a
transaction spans ticks), it shows at every tick the same partitions, topics, brokers and log
entries as it does on the same log with the aborted and open transactions' records as
NoOpRecords; a transaction's records appear at its End, and a loaded snapshot drops an open
one (Kafka's MetadataBatchLoader.resetToImage)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from analytics.generate import partition_dir
from cluster.console.core.metadata_view import MetadataView
from cluster.console.core.view import partition_rows
from cluster.console.runtime.metadata_tail import MetadataTail
from metadata.records import (
    BeginTransactionRecord,
    EndTransactionRecord,
    PartitionRecord,
    TopicRecord,
    encode_record,
)
from metadata.transactions import MARKER_NAMES
from storage.core.record_batch import RecordBatch, decode_batch, encode_batch
from tests.unit.test_audit_transactions import BIG, Story, story  # noqa: F401 (a fixture)

STEP = 1000  # offsets committed per tick


def _ticks(root: Path, end: int) -> list[tuple[dict[str, Any], list[str], list[Any]]]:
    """What the console shows after each tick: partition rows, topics and brokers, and the new
    log entries but the transaction markers."""
    view, tail = MetadataView(), MetadataTail()
    shown = []
    for high_watermark in range(STEP, end + STEP, STEP):
        entries = tail.read([partition_dir(root, 1)], high_watermark, view)
        shown.append((partition_rows(view, {}),
                      sorted(view.image.topics_by_name) + [str(b) for b in view.image.brokers],
                      [e.to_json() for e in entries if e.type not in MARKER_NAMES]))
    return shown


def test_console_drops_aborted_and_unfinished_transactions(story: Story) -> None:  # noqa: F811
    end = story.dropped[-1][1] + 1
    with_aborted, reference = _ticks(story.with_aborted, end), _ticks(story.as_noops, end)
    assert len(with_aborted) == len(reference) > 6
    for tick, (shown, expected) in enumerate(zip(with_aborted, reference, strict=True)):
        assert shown == expected, f"tick {tick}"
    rows, names, _entries = with_aborted[-1]
    assert "ghost" not in names and sum(r["topic"] == "big" for r in rows.values()) == BIG


TOPIC = uuid.UUID(int=9)


def _batch(offset: int, *records: object) -> RecordBatch:
    raw = encode_batch(offset, 1, 1000 + offset, [encode_record(r) for r in records])  # type: ignore[arg-type]
    return decode_batch(raw)[0]


def test_a_transaction_shows_at_its_end_and_a_snapshot_drops_an_open_one() -> None:
    view = MetadataView()
    view.apply([_batch(0, BeginTransactionRecord("CreateTopics"), TopicRecord("t", TOPIC))])
    view.apply([_batch(2, PartitionRecord(0, TOPIC, replicas=(1,), isr=(1,), leader=1))])
    assert not view.partitions and not view.image.topics
    new = view.apply([_batch(3, EndTransactionRecord())])
    assert [e.type for e in new] == ["TopicRecord", "PartitionRecord", "EndTransactionRecord"]
    assert set(view.partitions) == {(TOPIC, 0)} and set(view.image.topics_by_name) == {"t"}
    view.apply([_batch(4, BeginTransactionRecord("x"), TopicRecord("u", uuid.UUID(int=10)))])
    view.load_snapshot(6, [_batch(0, TopicRecord("s", uuid.UUID(int=11)))])
    view.apply([_batch(6, EndTransactionRecord())])  # out of place after the snapshot: ignored
    assert set(view.image.topics_by_name) == {"s"}
