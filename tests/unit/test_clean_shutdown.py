"""broker.runtime.clean_shutdown (seed 001, rule 12) and broker.runtime.event_journal."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from broker.core.journal_events import (
    HwmAdvanced,
    IsrProposed,
    Truncated,
    decode_event,
    encode_event,
)
from broker.runtime.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE_NAME,
    CleanShutdownFile,
    previous_broker_epoch,
    remove_clean_shutdown,
    write_clean_shutdown,
)
from broker.runtime.event_journal import EventJournal, read_journal, read_journal_dicts


def test_write_read_remove(tmp_path: Path) -> None:
    handler = CleanShutdownFile(tmp_path)
    assert handler.read() == -1
    handler.write(42)
    assert json.loads((tmp_path / CLEAN_SHUTDOWN_FILE_NAME).read_text()) == {
        "version": 0, "BrokerEpoch": 42,
    }
    assert handler.read() == 42
    assert handler.remove()
    assert not handler.exists()
    assert handler.read() == -1
    assert not handler.remove()


def test_never_had_an_epoch_writes_minus_one(tmp_path: Path) -> None:
    CleanShutdownFile(tmp_path).write(-1)
    assert previous_broker_epoch([tmp_path]) == -1


def test_unreadable_file_is_an_unclean_shutdown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE_NAME).write_text('{"version": 0, "BrokerEp')
    with caplog.at_level(logging.WARNING):
        assert CleanShutdownFile(tmp_path).read() == -1
    assert "unreadable" in caplog.text
    (tmp_path / CLEAN_SHUTDOWN_FILE_NAME).write_text('{"version": 0, "BrokerEpoch": "17"}')
    assert CleanShutdownFile(tmp_path).read() == 17  # KIP-966 shows the epoch as a string


def test_previous_epoch_needs_every_log_dir_to_agree(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    write_clean_shutdown(dirs, 9)
    assert previous_broker_epoch(dirs) == 9
    CleanShutdownFile(dirs[1]).write(8)
    assert previous_broker_epoch(dirs) == -1
    remove_clean_shutdown(dirs)
    assert previous_broker_epoch(dirs) == -1
    CleanShutdownFile(dirs[0]).write(9)
    assert previous_broker_epoch(dirs) == -1  # one dir without the file: unclean


def sample_events() -> list[HwmAdvanced | Truncated | IsrProposed]:
    return [
        HwmAdvanced(1, "foo", 0, 0, 10, 2, 2, 5, 1_000, isr=(1, 2)),
        Truncated(2, "foo", 0, 20, 15, "epoch 5 ends at 15", 5, 10, 1_001),
        IsrProposed(1, "foo", 0, 3, "expand", 5, 10, (1, 2), (1, 2, 3), (100, 200, 300), 0,
                    1_002),
    ]


def test_journal_events_round_trip() -> None:
    for event in sample_events():
        assert decode_event(encode_event(event)) == event


def test_journal_appends_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "journal" / "broker-1.events"
    with EventJournal(path) as journal:
        assert journal.append(sample_events()[:2]) == 2
    with EventJournal(path, sync=True) as journal:
        journal.append(sample_events()[2:])
    assert list(read_journal(path)) == sample_events()
    assert read_journal_dicts(path)[0]["event"] == "HwmAdvanced"


def test_torn_journal_tail_is_skipped_and_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "broker-1.events"
    with EventJournal(path) as journal:
        journal.append(sample_events())
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    assert list(read_journal(path)) == sample_events()[:2]
    with caplog.at_level(logging.WARNING), EventJournal(path) as journal:
        journal.append(sample_events()[:1])
    assert "torn" in caplog.text
    assert list(read_journal(path)) == [*sample_events()[:2], sample_events()[0]]
