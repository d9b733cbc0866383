"""The console's pure core: the committed metadata log replayed with the nodes' records and merge,
decoded for the page as the seeds name the fields; rows and their diffs; server-side filters;
timelines; the guided scenarios' checks."""

from __future__ import annotations

import uuid

from cluster.console.core.metadata_view import MetadataView
from cluster.console.core.scenarios import ELR, SCENARIOS, Snapshot
from cluster.console.core.view import (
    ConsoleState,
    RowFilter,
    Timelines,
    brokers_model,
    diff_rows,
    partition_rows,
)
from metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode_record,
)
from raft.core.control_records import KRaftVersionRecord, Voter, VotersRecord, encode_control
from storage.core.record_batch import Record, RecordBatch, decode_batch, encode_batch

TOPIC_ID = uuid.UUID(int=7)


def batch(offset: int, *records: object, epoch: int = 3) -> RecordBatch:
    raw = encode_batch(offset, epoch, 1000 + offset,
                       [Record(None, encode_record(r)) for r in records])  # type: ignore[arg-type]
    return decode_batch(raw)[0]


def view_with_partition() -> MetadataView:
    view = MetadataView()
    voters = VotersRecord((Voter(1, uuid.UUID(int=11)), Voter(2, uuid.UUID(int=12))))
    control = decode_batch(encode_batch(0, 1, 999, [encode_control(KRaftVersionRecord(1)),
                                                   encode_control(voters)], is_control=True))[0]
    view.apply([control])
    view.apply([
        batch(2, *(RegisterBrokerRecord(b, uuid.UUID(int=b), -1, fenced=False) for b in (1, 2, 3))),
        batch(5, TopicRecord("foo", TOPIC_ID),
              PartitionRecord(0, TOPIC_ID, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)),
        batch(7, NoOpRecord()),
    ])
    return view


def test_replay_builds_partitions_brokers_and_voters_and_skips_what_was_applied() -> None:
    view = view_with_partition()
    assert view.next_offset == 8
    assert view.voters[0][0] == 1 and len(view.voters) == 2 and view.kraft_version == 1
    assert sorted(view.image.brokers) == [1, 2, 3]
    assert view.partitions[(TOPIC_ID, 0)].isr == (1, 2, 3)
    # A batch already applied (a re-read after a directory switch) changes nothing.
    again = view.apply([batch(5, TopicRecord("foo", TOPIC_ID),
                              PartitionRecord(0, TOPIC_ID, replicas=(1, 2, 3), isr=(1,), leader=3))])
    assert again == [] and view.partitions[(TOPIC_ID, 0)].leader == 1
    # NoOpRecords are replayed but not listed: they would bury the records people look for.
    assert "NoOpRecord" not in {e.type for e in view.entries}


def test_partition_change_is_listed_with_the_seed_field_names_and_only_what_changed() -> None:
    view = view_with_partition()
    new = view.apply([batch(8, PartitionChangeRecord(
        0, TOPIC_ID, isr=(1,), eligible_leader_replicas=(2,), last_known_elr=(3,)))])
    assert len(new) == 1
    entry = new[0]
    assert entry.type == "PartitionChangeRecord" and entry.topic == "foo" and entry.partition == 0
    assert entry.data["Isr"] == [1] and entry.data["EligibleLeaderReplicas"] == [2]
    assert entry.data["LastKnownELR"] == [3] and entry.data["TopicName"] == "foo"
    # Leader, LeaderRecoveryState, LastKnownLeader, Replicas: unchanged, so not shown.
    for absent in ("Leader", "LeaderRecoveryState", "LastKnownLeader", "Replicas"):
        assert absent not in entry.data, absent
    reg = view.partitions[(TOPIC_ID, 0)]
    assert reg.isr == (1,) and reg.elr == (2,) and reg.last_known_elr == (3,)
    assert reg.partition_epoch == 1 and reg.leader == 1


def test_rows_diff_and_filters() -> None:
    view = view_with_partition()
    status = {1: {"partitions": {"foo-0": {"log_end_offset": 10, "high_watermark": 9,
                                          "role": "leader"}}}, 2: None, 3: {"partitions": {}}}
    before = partition_rows(view, status)
    row = before["foo-0"]
    assert row["offsets"] == [[1, 10, 9, "leader"], [2, None, None, None], [3, None, None, None]]
    assert row["hwm"] == 9 and row["min_isr"] == 1
    view.apply([batch(8, FenceBrokerRecord(2, 3)),
                batch(9, PartitionChangeRecord(0, TOPIC_ID, isr=(1, 3), leader=3))])
    after = partition_rows(view, status)
    changed, removed = diff_rows(before, after)
    assert [r["key"] for r in changed] == ["foo-0"] and removed == []
    assert diff_rows(after, after) == ([], [])
    assert RowFilter.parse({"topic": "^fo+$"}).matches(after["foo-0"])
    assert not RowFilter.parse({"topic": "bar"}).matches(after["foo-0"])
    assert not RowFilter.parse({"partition": "1"}).matches(after["foo-0"])
    assert not RowFilter.parse({"only": "offline"}).matches(after["foo-0"])
    assert RowFilter.parse({"topic": "[unclosed"}).matches({**after["foo-0"], "topic": "x[unclosed"})
    assert RowFilter.parse({"partition": "0"}).matches_entry({"partition": 0, "topic": "foo"})
    assert not RowFilter.parse({"partition": "0"}).matches_entry({"partition": None})
    brokers = brokers_model(view, [1, 2, 3], status, {2: True})
    assert [(b["id"], b["fenced"], b["up"]) for b in brokers] == [
        (1, False, True), (2, True, False), (3, False, True)]
    assert brokers[1]["clean_shutdown_file"] is True


def test_state_sends_each_subscriber_only_its_changed_rows() -> None:
    state = ConsoleState()
    rows = {f"t-{p}": {"key": f"t-{p}", "topic": "t", "partition": p, "leader": 1,
                       "isr": [1], "elr": [], "last_known_elr": [], "min_isr": 1, "hwm": 0,
                       "leader_recovery_state": "RECOVERED"} for p in range(10_000)}
    first = state.advance(1000, rows, {"q": 1}, [], [], [], None)
    assert len(first.changed) == 10_000 and first.quorum == {"q": 1}
    moved = dict(rows)
    moved["t-42"] = {**rows["t-42"], "leader": -1, "isr": []}
    tick = state.advance(15_000, moved, {"q": 1}, [], [], [], None)
    assert [r["key"] for r in tick.changed] == ["t-42"] and tick.quorum is None
    assert tick.timeline["t-42"][1:4] == [-1, 0, 0]
    offline = state.tick_for(tick, RowFilter(only="offline"))
    assert [r["key"] for r in offline["changed"]] == ["t-42"]
    other = state.tick_for(tick, RowFilter(topic="^u$"))
    assert other["changed"] == [] and other["removed"] == ["t-42"]
    full = state.full_for(RowFilter(only="changed"), 16_000, [])
    assert [r["key"] for r in full["rows"]] == ["t-42"] and full["total"] == 10_000
    down = state.advance(17_000, moved, {"q": 1}, [], [], [], "cluster down")
    assert down.cluster_down == "cluster down" and down.quorum is not None


def test_timelines_add_a_point_only_when_something_moved() -> None:
    timelines = Timelines()
    row = {"key": "t-0", "leader": 1, "isr": [1, 2], "elr": [], "hwm": 5}
    assert timelines.observe([row], 1) == {"t-0": [1, 1, 2, 0, 5]}
    assert timelines.observe([row], 2) == {}
    assert timelines.observe([{**row, "hwm": 6}], 3) == {"t-0": [3, 1, 2, 0, 6]}
    assert len(timelines.series("t-0")) == 2


def _elr_snapshot(**row: object) -> Snapshot:
    base = {"key": "t-0", "topic": "t", "partition": 0, "leader": 1, "replicas": [1, 2, 3],
            "isr": [1, 2, 3], "elr": [], "last_known_elr": [], "last_known_leader": -1,
            "leader_recovery_state": "RECOVERED", "offsets": [[1, 0, 0, "l"], [2, 0, 0, "f"],
                                                               [3, 0, 0, "f"]], "hwm": 0}
    base.update(row)
    return Snapshot({"t-0": base}, [{"id": b, "epoch": b * 10} for b in (1, 2, 3)], {})


def test_elr_scenario_checks_hold_only_for_the_states_the_seed_describes() -> None:
    ctx = {"topic": "t"}
    steps = ELR.steps
    assert steps[0].check(ctx, _elr_snapshot(isr=[1, 2])) is not None  # not a full ISR yet
    assert steps[0].check(ctx, _elr_snapshot()) is None
    assert (ctx["leader"], ctx["a"], ctx["b"]) == (1, 2, 3)
    assert steps[1].act(ctx, _elr_snapshot()) == {"action": "stop", "node": "broker-2"}
    assert steps[1].check(ctx, _elr_snapshot(isr=[1, 3])) is None
    assert steps[1].check(ctx, _elr_snapshot(isr=[1, 3], elr=[2])) is not None
    assert steps[2].check(ctx, _elr_snapshot(isr=[1], elr=[3])) is None
    killed = {"leader": -1, "isr": [], "elr": [1, 3], "last_known_leader": 1}
    assert steps[3].check(ctx, _elr_snapshot(**killed)) is None
    assert steps[3].check(ctx, _elr_snapshot(**{**killed, "last_known_leader": -1})) is not None
    unclean = {"leader": -1, "isr": [], "elr": [3], "last_known_elr": [1]}
    assert steps[4].check(ctx, _elr_snapshot(**unclean)) is None
    assert steps[4].check(ctx, _elr_snapshot(**{**unclean, "last_known_elr": []})) is not None
    assert steps[5].check(ctx, _elr_snapshot(leader=3, isr=[3])) is None
    assert set(SCENARIOS) == {"elr", "unclean-recovery", "unclean-election", "broker-epoch",
                              "controller-disk"}


def test_unclean_scenarios_need_the_recovering_record_in_the_log() -> None:
    scenario = SCENARIOS["unclean-recovery"]
    ctx = {"topic": "t", "leader": 1, "a": 2, "b": 3, "epochs": {}}
    final = scenario.steps[-1]
    row = {"leader": 2, "leader_recovery_state": "RECOVERED"}
    assert final.check(ctx, _elr_snapshot(**row)) is not None  # no RECOVERING record seen
    snap = _elr_snapshot(**row)
    snap.log.append({"type": "PartitionChangeRecord", "topic": "t",
                     "data": {"LeaderRecoveryState": 1}})
    assert final.check(ctx, snap) is None
    assert final.check(ctx, _elr_snapshot(leader=1)) is not None


def test_broker_registration_change_keeps_the_broker_row_current() -> None:
    view = view_with_partition()
    view.apply([batch(8, BrokerRegistrationChangeRecord(1, 2, in_controlled_shutdown=1))])
    assert view.image.brokers[1].in_controlled_shutdown
