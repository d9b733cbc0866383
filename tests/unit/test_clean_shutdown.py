"""broker.runtime.clean_shutdown (seed 001, rule 12) and broker.runtime.event_journal."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import msgpack
import pytest

from broker.core import journal_events
from broker.core.journal_events import (
    EVENT_TYPES,
    HwmAdvanced,
    IsrProposed,
    RoleChanged,
    Truncated,
    decode_event,
    encode_event,
    event_to_dict,
    pack_event,
)
from broker.runtime.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE_NAME,
    CleanShutdownFile,
    previous_broker_epoch,
    remove_clean_shutdown,
    write_clean_shutdown,
)
from broker.runtime.event_journal import EventJournal, read_journal, read_journal_dicts
from tests.unit.test_golden_encodings import journal_samples


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


def test_journal_events_are_built_without_a_frozen_init_and_encode_as_before() -> None:
    """Issue 35: a restarted broker builds and journals a RoleChanged for each of its 100,000
    partitions; a frozen dataclass's init sets each field through object.__setattr__ (4-5 us
    of 5.5). The events are plain slotted dataclasses (nothing changes one once built), and
    are packed from one getter of their fields: the bytes are those of the map of their
    fields in order, tuples as arrays (test_golden_encodings holds them byte for byte)."""
    assert not any(cls.__dataclass_params__.frozen for cls in EVENT_TYPES.values())  # type: ignore[attr-defined]
    event = RoleChanged(3, "bar", 2, "leader", 3, 7, 9, (3, 1), 0, 50, 40, 1_006, topic_id="x")
    body = event_to_dict(event)
    assert list(body) == [
        "event", "version", "broker_id", "topic", "partition", "role", "leader_id",
        "leader_epoch", "partition_epoch", "isr", "leader_recovery_state", "log_end_offset",
        "high_watermark", "ts", "topic_id",
    ]
    assert body["isr"] == [3, 1] and body["event"] == "RoleChanged"
    assert decode_event(encode_event(event)) == event
    assert msgpack.unpackb(encode_event(event)) == body


def test_the_journal_packs_its_events_with_a_packer_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: msgpack.packb builds a Packer and its buffer for each call; the journal packs
    every event with one Packer of its own, into the bytes encode_event gives."""
    events = sample_events()
    expected = b"".join(encode_event(event) for event in events)
    first = encode_event(events[0])

    def no_packb(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("packb called per event")

    monkeypatch.setattr(msgpack, "packb", no_packb)
    path = tmp_path / "broker-1.events"
    with EventJournal(path) as journal:
        assert journal.append(events) == 3
        with journal.buffered():
            journal.append(events[:1])
    assert path.read_bytes() == expected + first
    monkeypatch.undo()
    assert list(read_journal(path)) == [*events, events[0]]


def test_an_event_packed_as_its_flat_array_is_encode_events_bytes() -> None:
    """Issue 35: the journal packs an event as the flat array of its map's keys and values,
    the array's header replaced by the map's, without building the map (half its cost): the
    bytes of encode_event for every event type, and a map of 16 pairs or more (a map 16
    header, an array 16 one) too."""
    pack = msgpack.Packer(use_bin_type=True).pack
    samples = journal_samples()
    assert {type(event) for event in samples.values()} == set(EVENT_TYPES.values())
    for event in samples.values():
        assert pack_event(pack, event) == encode_event(event)
    names = tuple(f"f{i}" for i in range(20))
    layout = journal_events._flat_layout("Wide", names)
    flat = layout.template.copy()
    flat[5::2] = range(20)
    body = {"event": "Wide", "version": 0, **dict(zip(names, range(20), strict=True))}
    packed = layout.map_header + pack(flat)[layout.array_header_bytes :]
    assert packed == msgpack.packb(body, use_bin_type=True) and packed[0] == 0xDE


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


def test_the_writer_finds_a_torn_tail_without_building_the_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted broker's journal holds hundreds of thousands of events at 100,000
    partitions: the writer's check for a torn tail skips over them (msgpack's skip) instead
    of decoding every one (issue 35); it cuts the same tail."""
    from broker.runtime import event_journal

    path = tmp_path / "broker-1.events"
    with EventJournal(path) as journal:
        journal.append(sample_events())
    path.write_bytes(path.read_bytes()[:-5])

    def decoded(data: bytes) -> object:
        raise AssertionError("the writer decoded the journal's entries")

    monkeypatch.setattr(event_journal, "_complete_prefix", decoded)
    with EventJournal(path) as journal:
        journal.append(sample_events()[:1])
    monkeypatch.undo()
    assert list(read_journal(path)) == [*sample_events()[:2], sample_events()[0]]


def test_controlled_shutdown_keeps_asking_through_slow_answers_until_granted() -> None:
    """Kafka's BrokerLifecycleManager in PENDING_CONTROLLED_SHUTDOWN: a heartbeat the controller
    answers late is retried until the shutdown deadline, each given broker.session.timeout.ms
    / 2 (KAFKA-14392); three 1 s timeouts gave up every shutdown of three brokers stopping at
    once at 100,000 partitions (issue 35)."""
    import asyncio
    from types import SimpleNamespace
    from typing import Any

    from broker.runtime.broker_node import BrokerNode
    from kafkawire.config import NodeConfig
    from kafkawire.errors import Errors, KafkaError

    node = BrokerNode.__new__(BrokerNode)
    node.config = NodeConfig.from_props(
        {"node.id": "101", "process.roles": "broker", "controlled.shutdown.timeout.ms": "8000"}
    )
    node.broker_id, node.broker_epoch = 101, 7
    node.metadata = SimpleNamespace(published_offset=42)  # type: ignore[assignment]
    timeouts: list[int] = []
    answers: list[Any] = [KafkaError(Errors.REQUEST_TIMED_OUT, "slow")] * 4 + [
        SimpleNamespace(should_shut_down=False),
        SimpleNamespace(should_shut_down=True),
    ]

    async def controller_request(request: Any, timeout_ms: int) -> Any:
        assert request.want_shut_down
        timeouts.append(timeout_ms)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    node._controller_request = controller_request  # type: ignore[method-assign]
    asyncio.run(node._controlled_shutdown())
    assert not answers  # asked until granted, past four timeouts
    assert timeouts[0] == 4500  # broker.session.timeout.ms 9000 / 2


def test_the_controlled_shutdown_deadline_leaves_the_stop_time_within_down() -> None:
    """A broker's stop is its controlled shutdown (at most controlled.shutdown.timeout.ms) and
    then the final flush, checkpoints and logs: 1.3-2.5 s at 100,000 partitions. Both must fit
    in what `minikraft down` waits before it SIGKILLs a broker (issue 35: with 8 s of the 10,
    the brokers that waited for their grant were SIGKILLed)."""
    import inspect

    from broker.runtime.broker_node import BROKER_DEFAULTS
    from cluster.launch.local_cluster import LocalCluster

    down_s = inspect.signature(LocalCluster.stop).parameters["timeout_s"].default
    deadline_s = int(BROKER_DEFAULTS["controlled.shutdown.timeout.ms"]) / 1000
    assert deadline_s + 3.0 <= down_s
