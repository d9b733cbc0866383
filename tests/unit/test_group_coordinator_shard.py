"""The classic group state machine (broker/core), driven with `now_ms` as Kafka's coordinator
would be: member ids (KIP-394), the initial rebalance delay, generations, leader election,
protocol selection, session and rebalance timeouts, fencing of offset commits, and the replay of
`__consumer_offsets` records."""

from __future__ import annotations

import struct

import pytest

from broker.core.classic_group import GroupState
from broker.core.group_coordinator_shard import (
    GroupConfig,
    GroupCoordinatorShard,
    JoinRequest,
    JoinResult,
    ShardResult,
)
from broker.runtime.group_coordinator import java_string_hash, partition_for
from kafkawire.errors import Errors
from kafkawire.group_coordinator_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

GROUP = "g"
SESSION_MS = 10_000
REBALANCE_MS = 30_000
DELAY_MS = 3_000
FORMED_MS = 4_000  # b joins at 1 s: the initial delay runs to 1 s + 3 s


def _request(member_id: str = "", *, client: str = "c", protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),), v4: bool = True, session_ms: int = SESSION_MS) -> JoinRequest:
    return JoinRequest(
        group_id=GROUP, member_id=member_id, group_instance_id=None, client_id=client,
        client_host="/127.0.0.1", session_timeout_ms=session_ms, rebalance_timeout_ms=REBALANCE_MS,
        protocol_type="consumer", protocols=protocols, require_known_member_id=v4,
    )


def _shard() -> GroupCoordinatorShard:
    return GroupCoordinatorShard(GroupConfig(initial_rebalance_delay_ms=DELAY_MS))


def _join_new(shard: GroupCoordinatorShard, now_ms: int, suffix: str, **kwargs: object) -> tuple[str, ShardResult]:
    """KIP-394's two steps: MEMBER_ID_REQUIRED with an id, then the join with it (waits)."""
    member_id, answer, _ = shard.join(_request(**kwargs), now_ms, suffix)  # type: ignore[arg-type]
    assert answer == JoinResult(Errors.MEMBER_ID_REQUIRED, member_id)
    assert member_id == f"c-{suffix}"
    again, answer, result = shard.join(_request(member_id, **kwargs), now_ms, "unused")  # type: ignore[arg-type]
    assert again == member_id and answer is None
    return member_id, result


def _joins(result: ShardResult) -> dict[str, JoinResult]:
    return {member: answer for _g, member, answer in result.joins}


def _stable_group_of_two(shard: GroupCoordinatorShard) -> tuple[str, str]:
    a, _ = _join_new(shard, 0, "a")
    b, _ = _join_new(shard, 1_000, "b")
    assert shard.tick(DELAY_MS).joins == []  # b's arrival extended the initial delay
    answers = _joins(shard.tick(FORMED_MS))
    assert set(answers) == {a, b}
    assert answers[a].generation_id == answers[b].generation_id == 1
    assert answers[a].leader_id == a and [m.member_id for m in answers[a].members] == [a, b]
    assert answers[b].members == ()  # only the leader learns the members
    answer, result = shard.sync(GROUP, a, 1, "consumer", "range", {a: b"A", b: b"B"}, FORMED_MS)
    assert answer is None and result.store is not None
    assert isinstance(result.records[0][0], GroupMetadataKey)
    waiting, _ = shard.sync(GROUP, b, 1, None, None, {}, FORMED_MS)
    assert waiting is None  # the follower waits for the leader's assignment to be stored
    stored = shard.on_group_stored(result.store, Errors.NONE, FORMED_MS)
    assert {m: s.assignment for _g, m, s in stored.syncs} == {a: b"A", b: b"B"}
    assert shard.groups[GROUP].state is GroupState.STABLE
    return a, b


def test_a_group_forms_after_the_initial_delay_with_one_generation_and_a_leader() -> None:
    shard = _shard()
    _a, result = _join_new(shard, 0, "a")
    assert result.joins == []  # the initial delay holds the first join
    assert shard.tick(DELAY_MS - 1).joins == []
    _stable_group_of_two(_shard())


def test_a_member_that_never_rejoins_is_dropped_at_the_rebalance_timeout() -> None:
    shard = _shard()
    a, b = _stable_group_of_two(shard)
    c, _ = _join_new(shard, 5_000, "c")
    assert shard.groups[GROUP].state is GroupState.PREPARING_REBALANCE
    assert shard.heartbeat(GROUP, a, 1, 6_000) is Errors.REBALANCE_IN_PROGRESS
    _member, answer, result = shard.join(_request(a), 6_000, "x")
    assert answer is None and result.joins == []  # b has not rejoined yet
    # b keeps heartbeating (so its session lives) but never rejoins: out at the deadline.
    assert shard.heartbeat(GROUP, b, 1, 20_000) is Errors.REBALANCE_IN_PROGRESS
    answers = _joins(shard.tick(5_000 + REBALANCE_MS))
    assert set(answers) == {a, c}
    assert all(j.generation_id == 2 for j in answers.values())
    assert b not in shard.groups[GROUP].members
    assert shard.heartbeat(GROUP, b, 2, 36_000) is Errors.UNKNOWN_MEMBER_ID


def test_a_silent_member_expires_after_its_session_and_the_group_rebalances() -> None:
    shard = _shard()
    a, b = _stable_group_of_two(shard)
    assert shard.heartbeat(GROUP, a, 1, FORMED_MS + 9_000) is Errors.NONE
    shard.tick(FORMED_MS + SESSION_MS - 1)
    assert shard.groups[GROUP].state is GroupState.STABLE
    shard.tick(FORMED_MS + SESSION_MS)  # b's session is over
    group = shard.groups[GROUP]
    assert b not in group.members and group.state is GroupState.PREPARING_REBALANCE
    # A fenced member's commit: UNKNOWN_MEMBER_ID; the survivor rejoins alone, generation 2.
    assert shard.validate_offset_commit(GROUP, b, 1, 14_000) is Errors.UNKNOWN_MEMBER_ID
    _m, _answer, result = shard.join(_request(a), 14_000, "x")
    assert _joins(result)[a].generation_id == 2 and _joins(result)[a].leader_id == a
    # The old generation is stale now.
    assert shard.validate_offset_commit(GROUP, a, 1, 14_000) is Errors.ILLEGAL_GENERATION
    assert shard.heartbeat(GROUP, a, 1, 14_000) is Errors.ILLEGAL_GENERATION
    assert shard.sync(GROUP, a, 1, None, None, {}, 14_000)[0].error is Errors.ILLEGAL_GENERATION  # type: ignore[union-attr]
    assert shard.validate_offset_commit(GROUP, a, 2, 14_000) is Errors.REBALANCE_IN_PROGRESS


def test_leave_group_rebalances_and_the_last_leave_empties_the_group() -> None:
    shard = _shard()
    a, b = _stable_group_of_two(shard)
    error, errors, _ = shard.leave(GROUP, [(b, None), ("nobody", None)], 4_000)
    assert (error, errors) == (Errors.NONE, [Errors.NONE, Errors.UNKNOWN_MEMBER_ID])
    _m, _answer, result = shard.join(_request(a), 4_100, "x")
    assert _joins(result)[a].generation_id == 2
    _e, _errs, result = shard.leave(GROUP, [(a, None)], 4_200)
    group = shard.groups[GROUP]
    # CompletingRebalance -> PreparingRebalance -> (no one left) Empty, generation 3, stored.
    assert group.state is GroupState.EMPTY and group.generation_id == 3
    assert isinstance(result.records[-1][1], GroupMetadataValue)
    assert result.records[-1][1].members == ()
    assert shard.validate_offset_commit(GROUP, "", -1, 5_000) is Errors.NONE  # admin reset


def test_join_errors_are_kafkas() -> None:
    shard = _shard()
    assert shard.join(_request("made-up"), 0, "x")[1] == JoinResult(Errors.UNKNOWN_MEMBER_ID)
    assert shard.join(_request(session_ms=1_000), 0, "x")[1].error is Errors.INVALID_SESSION_TIMEOUT  # type: ignore[union-attr]
    a, _b = _stable_group_of_two(shard)
    other = _request(protocols=(("roundrobin", b""),))
    assert shard.join(other, 5_000, "x")[1].error is Errors.INCONSISTENT_GROUP_PROTOCOL  # type: ignore[union-attr]
    assert shard.join(_request("c-unknown"), 5_000, "x")[1].error is Errors.UNKNOWN_MEMBER_ID  # type: ignore[union-attr]
    assert shard.sync(GROUP, a, 1, "consumer", "roundrobin", {}, 5_000)[0].error is Errors.INCONSISTENT_GROUP_PROTOCOL  # type: ignore[union-attr]
    assert shard.heartbeat("other", a, 1, 5_000) is Errors.UNKNOWN_MEMBER_ID
    # A v3 join gets its id at once and waits for the rebalance (no MEMBER_ID_REQUIRED).
    member_id, answer, _ = shard.join(_request(v4=False), 5_000, "old")
    assert member_id == "c-old" and answer is None


def test_a_follower_rejoining_with_the_same_metadata_gets_the_current_generation() -> None:
    shard = _shard()
    a, b = _stable_group_of_two(shard)
    _m, answer, _ = shard.join(_request(b), 5_000, "x")
    assert answer is not None and answer.generation_id == 1 and answer.leader_id == a
    assert shard.groups[GROUP].state is GroupState.STABLE


def test_protocol_selection_takes_the_most_votes_among_common_protocols() -> None:
    shard = _shard()
    both = (("roundrobin", b"r"), ("range", b"m"))
    _join_new(shard, 0, "a", protocols=(("range", b"m"), ("roundrobin", b"r")))
    _join_new(shard, 0, "b", protocols=both)
    _join_new(shard, 0, "c", protocols=both)
    answers = _joins(shard.tick(DELAY_MS))
    assert {j.protocol_name for j in answers.values()} == {"roundrobin"}


def test_a_failed_group_store_answers_the_syncs_and_rebalances() -> None:
    shard = _shard()
    a, _ = _join_new(shard, 0, "a")
    shard.tick(DELAY_MS)
    _answer, result = shard.sync(GROUP, a, 1, None, None, {a: b"A"}, DELAY_MS)
    assert result.store is not None
    failed = shard.on_group_stored(result.store, Errors.NOT_COORDINATOR, DELAY_MS)
    assert [(m, s.error) for _g, m, s in failed.syncs] == [(a, Errors.NOT_COORDINATOR)]
    assert shard.groups[GROUP].state is GroupState.PREPARING_REBALANCE


def test_offsets_replay_later_record_wins_and_tombstones_delete() -> None:
    shard = _shard()
    records = shard.offset_records(GROUP, [("t", 0, 42, 3, "meta")], 1_000)
    key, value = records[0]
    shard.replay(key, value, 10, 1_000)
    assert shard.committed(GROUP)[("t", 0)].offset == 42
    older = shard.offset_records(GROUP, [("t", 0, 7, 3, "")], 900)[0]
    shard.replay(older[0], older[1], 5, 1_000)  # an earlier log offset never overwrites
    assert shard.committed(GROUP)[("t", 0)].offset == 42
    assert shard.groups[GROUP].state is GroupState.EMPTY  # offsets alone make an Empty group
    assert shard.prepare_delete("missing", 0)[0] is Errors.GROUP_ID_NOT_FOUND
    error, tombstones = shard.prepare_delete(GROUP, 2_000)
    assert error is Errors.NONE and all(v is None for _k, v in tombstones)
    assert shard.groups[GROUP].state is GroupState.DEAD
    shard.finish_delete(GROUP, Errors.NONE, 2_000)
    for k, v in tombstones:
        shard.replay(k, v, 20, 2_000)
    assert GROUP not in shard.groups and shard.committed(GROUP) == {}


def _reloaded(shard: GroupCoordinatorShard, now_ms: int) -> GroupCoordinatorShard:
    """A new shard replaying the group's record, through its bytes, as a new leader would."""
    record = shard._group_record(shard.groups[GROUP])
    loaded = _shard()
    key = decode_key(encode_key(record[0]))
    loaded.replay(key, decode_value(key, encode_value(record[1])), 0, now_ms)
    return loaded


def test_a_stored_group_reloads_stable_and_a_non_empty_group_cannot_be_deleted() -> None:
    shard = _shard()
    a, b = _stable_group_of_two(shard)
    loaded = _reloaded(shard, 50_000)
    group = loaded.groups[GROUP]
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert {m: x.assignment for m, x in group.members.items()} == {a: b"A", b: b"B"}
    assert loaded.heartbeat(GROUP, a, 1, 55_000) is Errors.NONE
    assert loaded.prepare_delete(GROUP, 55_000)[0] is Errors.NON_EMPTY_GROUP
    loaded.tick(50_000 + SESSION_MS)  # b never heartbeats after the load: expires
    assert b not in loaded.groups[GROUP].members


def test_commit_to_an_unknown_group_needs_generation_minus_one() -> None:
    shard = _shard()
    assert shard.validate_offset_commit("simple", "", 5, 0) is Errors.ILLEGAL_GENERATION
    assert shard.validate_offset_commit("simple", "", -1, 0) is Errors.NONE
    assert shard.groups["simple"].state is GroupState.EMPTY


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (OffsetCommitKey(group="g", topic="t", partition=2), OffsetCommitValue(offset=5, leader_epoch=1, metadata="m", commit_timestamp=7)),  # type: ignore[arg-type]
        (GroupMetadataKey(group="g"), None),
    ],
)
def test_records_round_trip_in_kafkas_layout(key: object, value: object) -> None:
    data = encode_key(key)  # type: ignore[arg-type]
    assert data[:2] == (b"\x00\x01" if isinstance(key, OffsetCommitKey) else b"\x00\x02")
    decoded = decode_key(data)
    assert decoded == key
    assert decode_value(decoded, encode_value(value)) == value  # type: ignore[arg-type]


def test_offset_commit_key_bytes_are_kafkas() -> None:
    # version 1, group "g", topic "t", partition 2: int16 lengths, as Kafka's OffsetCommitKey.
    key = OffsetCommitKey(group="g", topic="t", partition=2)  # type: ignore[arg-type]
    assert encode_key(key).hex() == "0001" "000167" "000174" "00000002"


def test_a_group_lands_on_the_offsets_partition_kafka_would_pick() -> None:
    # Java: "hello".hashCode() == 99162322; "polygenelubricants".hashCode() == Integer.MIN_VALUE.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("") == 0
    assert partition_for("hello", 50) == 99162322 % 50
    # Utils.abs(MIN_VALUE) is 0 (Kafka masks the sign bit, it does not negate).
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 code units


# ---- KIP-345 static membership (issue 38), after Kafka's GroupMetadataManager ----


def _static(instance: str, member_id: str = "", *, v9: bool = False, protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),)) -> JoinRequest:
    return JoinRequest(
        group_id=GROUP, member_id=member_id, group_instance_id=instance, client_id="c",
        client_host="/127.0.0.1", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
        protocol_type="consumer", protocols=protocols, require_known_member_id=True,
        supports_skip_assignment=v9,
    )


def _stable_static_group(shard: GroupCoordinatorShard) -> tuple[str, str]:
    """Static members ia (leader) and ib, Stable at generation 1 with assignments A and B."""
    a, answer, _ = shard.join(_static("ia"), 0, "1")
    assert (a, answer) == ("ia-1", None)  # no MEMBER_ID_REQUIRED for a static member
    b, answer, _ = shard.join(_static("ib"), 0, "2")
    answers = _joins(shard.tick(DELAY_MS))
    assert answers[a].leader_id == a and answers[b].generation_id == 1
    _answer, result = shard.sync(GROUP, a, 1, None, None, {a: b"A", b: b"B"}, DELAY_MS, "ia")
    assert result.store is not None
    shard.sync(GROUP, b, 1, None, None, {}, DELAY_MS, "ib")
    shard.on_group_stored(result.store, Errors.NONE, DELAY_MS)
    assert shard.groups[GROUP].state is GroupState.STABLE
    return a, b


@pytest.mark.parametrize("v9", [False, True])
def test_a_restarted_static_member_gets_a_new_id_and_its_assignment_without_a_rebalance(v9: bool) -> None:
    shard = _shard()
    a, b = _stable_static_group(shard)
    new_a, answer, result = shard.join(_static("ia", v9=v9), 5_000, "3")
    assert (new_a, answer) == ("ia-3", None)  # answered once the group record is written
    assert isinstance(result.records[0][1], GroupMetadataValue)
    written = {m.group_instance_id: m.member_id for m in result.records[0][1].members}
    assert written == {"ia": new_a, "ib": b}
    assert result.store is not None and result.joins == []
    assert shard.heartbeat(GROUP, b, 1, 5_000, "ib") is Errors.NONE  # b: no rebalance
    (joined,) = shard.on_group_stored(result.store, Errors.NONE, 5_100).joins
    assert joined[1] == new_a and joined[2].generation_id == 1 and joined[2].error is Errors.NONE
    if v9:  # the leader learns the members, and that its assignment stands
        assert joined[2].leader_id == new_a and joined[2].skip_assignment
        assert sorted(m.group_instance_id or "" for m in joined[2].members) == ["ia", "ib"]
    else:  # older clients: the old leader id, so it syncs as a follower
        assert joined[2].leader_id == a and joined[2].members == ()
    synced, _ = shard.sync(GROUP, new_a, 1, None, None, {}, 5_200, "ia")
    assert synced is not None and synced.assignment == b"A"
    # The old id is fenced by its instance id, unknown without it.
    assert shard.heartbeat(GROUP, a, 1, 5_300, "ia") is Errors.FENCED_INSTANCE_ID
    assert shard.heartbeat(GROUP, a, 1, 5_300) is Errors.UNKNOWN_MEMBER_ID
    assert shard.validate_offset_commit(GROUP, a, 1, 5_300, "ia") is Errors.FENCED_INSTANCE_ID
    assert shard.join(_static("ia", a), 5_300, "x")[1] == JoinResult(Errors.FENCED_INSTANCE_ID, a)
    assert shard.groups[GROUP].generation_id == 1


def test_a_failed_write_of_the_replacement_restores_the_old_member_id() -> None:
    shard = _shard()
    a, _b = _stable_static_group(shard)
    new_a, _answer, result = shard.join(_static("ia"), 5_000, "3")
    assert result.store is not None
    (joined,) = shard.on_group_stored(result.store, Errors.NOT_COORDINATOR, 5_100).joins
    assert (joined[1], joined[2].error, joined[2].member_id) == (new_a, Errors.NOT_COORDINATOR, "")
    assert shard.groups[GROUP].static_members["ia"] == a
    assert shard.heartbeat(GROUP, a, 1, 5_200, "ia") is Errors.NONE
    assert shard.groups[GROUP].members[a].assignment == b"A"


def test_a_waiting_old_member_is_fenced_and_an_absent_static_member_outlives_the_join_phase() -> None:
    shard = _shard()
    a, b = _stable_static_group(shard)
    # b rejoins with new metadata: a rebalance; the static leader a does not rejoin.
    assert shard.join(_static("ib", b, protocols=(("range", b"n"),)), 5_000, "x")[1] is None
    for now_ms in (12_000, 21_000, 30_000):  # a's session stays alive by heartbeats
        assert shard.heartbeat(GROUP, a, 1, now_ms, "ia") is Errors.REBALANCE_IN_PROGRESS
    answers = _joins(shard.tick(5_000 + REBALANCE_MS))
    assert list(answers) == [b]  # a keeps its place, unanswered
    assert answers[b].leader_id == b and answers[b].generation_id == 2  # a leader that rejoined
    assert set(shard.groups[GROUP].members) == {a, b}
    # A duplicate of b joins while b waits in SyncGroup: b is fenced there.
    assert shard.sync(GROUP, b, 2, None, None, {}, 36_000, "ib")[0] is None
    new_b, _answer, result = shard.join(_static("ib"), 36_000, "4")
    assert [(m, s.error) for _g, m, s in result.syncs] == [(b, Errors.FENCED_INSTANCE_ID)]
    assert shard.groups[GROUP].state is GroupState.PREPARING_REBALANCE and new_b in shard.groups[GROUP].members
    # a never heartbeats: its session ends and it is out.
    shard.tick(36_000 + SESSION_MS)
    assert set(shard.groups[GROUP].members) == {new_b}


def test_leave_by_instance_id_and_a_reloaded_group_knows_its_static_members() -> None:
    shard = _shard()
    a, b = _stable_static_group(shard)
    loaded = _reloaded(shard, 50_000)
    assert loaded.groups[GROUP].static_members == {"ia": a, "ib": b}
    error, errors, _ = loaded.leave(GROUP, [("", "ib"), ("", "iz"), (a, "ib")], 50_100)
    assert (error, errors) == (Errors.NONE, [Errors.NONE, Errors.UNKNOWN_MEMBER_ID, Errors.UNKNOWN_MEMBER_ID])
    assert set(loaded.groups[GROUP].members) == {a}
    assert loaded.groups[GROUP].state is GroupState.PREPARING_REBALANCE


def _subscription(*topics: str) -> bytes:
    """Kafka's ConsumerProtocolSubscription v0: version, [topic], user data (null)."""
    body = b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    return struct.pack(">hi", 0, len(topics)) + body + struct.pack(">i", -1)


def test_offset_delete_keeps_the_offsets_of_subscribed_topics() -> None:
    shard = _shard()
    assert shard.delete_offsets(GROUP, [("t", 0)])[0] is Errors.GROUP_ID_NOT_FOUND
    member, _ = _join_new(shard, 0, "a", protocols=(("range", _subscription("t")),))
    shard.tick(DELAY_MS)
    for k, v in shard.offset_records(GROUP, [("t", 0, 5, -1, ""), ("u", 0, 6, -1, "")], DELAY_MS):
        shard.replay(k, v, 1, DELAY_MS)
    error, errors, tombstones = shard.delete_offsets(GROUP, [("t", 0), ("u", 0), ("u", 1)])
    assert (error, errors) == (Errors.NONE, [Errors.GROUP_SUBSCRIBED_TO_TOPIC, Errors.NONE, Errors.NONE])
    assert tombstones == [(OffsetCommitKey(group=GROUP, topic="u", partition=0), None)]  # type: ignore[arg-type]
    # Empty again: it consumes nothing, every offset may go.
    shard.leave(GROUP, [(member, None)], DELAY_MS + 1)
    assert shard.delete_offsets(GROUP, [("t", 0)])[1] == [Errors.NONE]
