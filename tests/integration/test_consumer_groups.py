"""Consumer groups against `minikraft up` (3 controllers + 3 brokers), judged by real clients
with their default settings but group.id: aiokafka, kafka-python and librdkafka members join,
rebalance and commit through the brokers' group coordinator (issue 16); offsets live in the
replicated `__consumer_offsets` and survive a kill -9 of a member and of the coordinator.

Consumers reset to "latest" by default: records are produced once the group is assigned, and a
group restarted after records were produced only sees them through its committed offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import BROKER_API_VERSIONS
from kafkawire.client import KafkaClient
from kafkawire.entities import build, item_type
from kafkawire.messages import request_schema
from tests.integration.conftest import minikraft, restart_node
from tests.integration.test_kafka_clients import Up, _admin, _create, _wait_leaders, start_up

confluent_kafka = pytest.importorskip("confluent_kafka", reason="dev extra: confluent-kafka")
kafka = pytest.importorskip("kafka", reason="dev extra: kafka-python")
pytest.importorskip("aiokafka", reason="dev extra: aiokafka")

from confluent_kafka import (  # noqa: E402
    Consumer,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    """The client tests' cluster; groups form at once (Kafka's own tests set the delay to 0)."""
    yield from start_up(tmp_path_factory, "group.initial.rebalance.delay.ms=0")

MEMBER_SCRIPT = Path(__file__).with_name("aiokafka_group_member.py")
MEMBER_MAX_SECONDS = 240  # a member process never outlives a failed test by long
Offsets = dict[int, list[int]]


class Member:
    """One aiokafka member process; its stdout lines parsed as they come."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER_SCRIPT), bootstrap, topic, group, str(MEMBER_MAX_SECONDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.records: list[tuple[int, int]] = []
        self.assigned: list[int] | None = None
        self.stopped = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            if event.get("event") == "ready":
                self.assigned = event["partitions"]
            elif event.get("event") == "stopped":
                self.stopped = True
            else:
                self.records.append((event["p"], event["o"]))

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def terminate(self, timeout_s: float = 30) -> None:
        self.proc.terminate()
        self.proc.wait(timeout_s)
        self._reader.join(5)


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    try:
        yield started
    finally:
        for member in started:
            if member.proc.poll() is None:
                member.kill()


def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _join(up: Up, members: list[Member], topic: str, group: str, count: int) -> None:
    """`count` aiokafka members of `group` started, until each has a partition and together
    they have all three of `topic` (three members: one partition each)."""
    members.extend(Member(up.bootstrap, topic, group) for _ in range(count))
    _wait(
        lambda: all(m.assigned for m in members)
        and sorted(p for m in members for p in m.assigned or ()) == [0, 1, 2],
        60,
        f"{count} members sharing three partitions",
    )


def _produce(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(per_partition * partitions):
        producer.produce(topic, str(i).encode(), partition=i % partitions)
        producer.poll(0)
    assert producer.flush(60) == 0


def _committed(up: Up, group: str) -> dict[int, int]:
    admin = _admin(up)  # kept alive until the answer is in
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    return {tp.partition: tp.offset for tp in result[group].result(timeout=20).topic_partitions}


def _new_topic(up: Up, topic: str, partitions: int) -> AdminClient:
    """The topic (replication factor 3) with a leader per partition; the admin client."""
    admin = _admin(up)
    _create(admin, NewTopic(topic, partitions, 3))
    _wait_leaders(admin, topic, partitions)
    return admin


def _by_partition(records: list[tuple[int, int]]) -> Offsets:
    out: Offsets = {}
    for partition, offset in records:
        out.setdefault(partition, []).append(offset)
    return out


def test_aiokafka_group_of_three_survives_kill_9_of_a_member_and_a_restart(
    up: Up, members: list[Member]
) -> None:
    topic, group = "grouped", "aiokafka-group"
    _new_topic(up, topic, 3)

    # 1. Three members, one partition each; every record consumed exactly once.
    _join(up, members, topic, group, 3)
    _produce(up.bootstrap, topic, 400, 3)
    _wait(lambda: sum(len(m.records) for m in members) >= 1200, 60, "1200 records consumed")
    time.sleep(1)  # anything consumed twice would show up now
    consumed = [r for m in members for r in m.records]
    assert sorted(consumed) == [(p, o) for p in range(3) for o in range(400)]

    # 2. Auto-commit (every 5 s) catches up; 50 more each; kill -9 one member right after it
    # read them (its last 50 may be uncommitted): after its session times out the others take
    # its partition over from the group's committed offset, and nothing is skipped.
    _wait(lambda: _committed(up, group) == dict.fromkeys(range(3), 400), 20, "auto-commits")
    _produce(up.bootstrap, topic, 50, 3)
    _wait(lambda: sum(len(m.records) for m in members) >= 1350, 60, "1350 records consumed")
    victim = members[0]
    (lost_partition,) = victim.assigned or ()
    victim.kill()
    committed = _committed(up, group)[lost_partition]  # the dead member commits nothing more
    assert committed in (400, 450)
    _produce(up.bootstrap, topic, 50, 3)
    survivors = members[1:]
    _wait(
        lambda: any(p == lost_partition for m in survivors for p, _ in m.records),
        60,
        "a survivor consuming the dead member's partition",
    )
    taken_over = [o for m in survivors for p, o in m.records if p == lost_partition]
    assert min(taken_over) == committed, "the survivor starts from the committed offset"
    _wait(
        lambda: {o for m in members for p, o in m.records if p == lost_partition}
        >= set(range(500)),
        60,
        "every record of the dead member's partition",
    )
    for p in range(3):
        seen = {o for m in members for q, o in m.records if q == p}
        assert seen >= set(range(500)), f"partition {p} skipped {sorted(set(range(500)) - seen)[:5]}"

    # 3. Stop the whole group cleanly (it commits), produce while it is down, restart it: the
    # new members resume from the commits (with reset=latest, nothing else would find these).
    for member in survivors:
        member.terminate()
    assert all(m.stopped for m in survivors)
    assert _committed(up, group) == dict.fromkeys(range(3), 500)
    _produce(up.bootstrap, topic, 50, 3)
    restarted = [Member(up.bootstrap, topic, group) for _ in range(3)]
    members.extend(restarted)
    _wait(lambda: sum(len(m.records) for m in restarted) >= 150, 60, "the restarted group")
    time.sleep(1)
    assert sorted(r for m in restarted for r in m.records) == [
        (p, o) for p in range(3) for o in range(500, 550)
    ]


def _poll_kafka_python(
    consumers: list[Any], until: int, seen: list[tuple[int, int]], timeout_s: float = 60
) -> None:
    deadline = time.monotonic() + timeout_s
    while len(seen) < until and time.monotonic() < deadline:
        for consumer in consumers:
            for tp, records in consumer.poll(timeout_ms=100).items():
                seen.extend((tp.partition, r.offset) for r in records)


def _kafka_python_member(bootstrap: str, topic: str, group: str) -> Any:
    """A kafka-python consumer subscribed to `topic`, with the topic already in its metadata.

    kafka-python 3.0.12 can lose a join: when the leader's metadata changes after it assigned
    (it joined before its first answer for the topic, KAFKA-3949's race), it rejoins without
    setting `rejoin_needed`; if poll's timeout splits that join, the finished assignment makes
    `need_rejoin()` false, `join_group_async` never awaits it, `_on_join_complete` never runs and
    the member holds no partitions (its coordinator/base.py and coordinator/consumer.py). Asking
    the topic's partitions first (a public, blocking metadata call) lets the first join see them.
    """
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group)
    try:
        _wait(lambda: consumer.partitions_for_topic(topic), 30, f"{topic} in the metadata")
    except BaseException:
        consumer.close()
        raise
    return consumer


class KafkaPythonMember(threading.Thread):
    """One kafka-python consumer polling in its own thread (a JoinGroup blocks its caller until
    the rebalance completes, so two members must not share a thread)."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.args = (bootstrap, topic, group)
        self.records: list[tuple[int, int]] = []
        self.assigned: list[int] = []
        self.positioned = False
        self.done = threading.Event()
        self.deadline = time.monotonic() + 120  # bounded even if the test forgets to stop it
        self.start()

    def run(self) -> None:
        bootstrap, topic, group = self.args
        consumer = _kafka_python_member(bootstrap, topic, group)
        try:
            while not self.done.is_set() and time.monotonic() < self.deadline:
                for tp, records in consumer.poll(timeout_ms=100).items():
                    self.records.extend((tp.partition, r.offset) for r in records)
                assignment = consumer.assignment()
                partitions = sorted(tp.partition for tp in assignment)
                if partitions != self.assigned:
                    for tp in assignment:
                        consumer.position(tp)  # reset to latest before records arrive
                    self.assigned = partitions
        finally:
            consumer.close()  # commits what was consumed, then LeaveGroup

    def stop(self) -> None:
        self.done.set()
        self.join(30)


def test_kafka_python_group_rebalances_on_leave_and_resumes_from_commits(up: Up) -> None:
    topic, group = "grouped-kp", "kafka-python-group"
    _new_topic(up, topic, 3)
    group_members = [KafkaPythonMember(up.bootstrap, topic, group) for _ in range(2)]
    try:
        _wait(
            lambda: all(m.assigned for m in group_members)
            and sorted(p for m in group_members for p in m.assigned) == [0, 1, 2],
            60,
            "two kafka-python members sharing three partitions",
        )
        time.sleep(0.5)  # the positions are asked right after the assignment shows
        _produce(up.bootstrap, topic, 100, 3)
        _wait(lambda: sum(len(m.records) for m in group_members) >= 300, 60, "300 records")
        time.sleep(0.5)
        assert sorted(r for m in group_members for r in m.records) == [
            (p, o) for p in range(3) for o in range(100)
        ]
        # One member leaves (commit, LeaveGroup): the other takes every partition over.
        group_members[0].stop()
        survivor = group_members[1]
        _wait(lambda: survivor.assigned == [0, 1, 2], 60, "the survivor taking over")
        _produce(up.bootstrap, topic, 20, 3)
        _wait(lambda: sum(len(m.records) for m in group_members) >= 360, 60, "360 records")
        time.sleep(0.5)
        assert sorted(r for m in group_members for r in m.records) == [
            (p, o) for p in range(3) for o in range(120)
        ]
    finally:
        for member in group_members:
            member.stop()
    assert _committed(up, group) == dict.fromkeys(range(3), 120)
    _produce(up.bootstrap, topic, 10, 3)
    resumed = KafkaPythonMember(up.bootstrap, topic, group)
    try:
        _wait(lambda: len(resumed.records) >= 30, 60, "the resumed member")
        time.sleep(0.5)
        assert sorted(resumed.records) == [(p, o) for p in range(3) for o in range(120, 130)]
    finally:
        resumed.stop()


def test_librdkafka_group_consumes_once_rebalances_and_resumes(up: Up) -> None:
    topic, group = "grouped-rd", "librdkafka-group"
    _new_topic(up, topic, 3)
    assigned: dict[int, list[int]] = {}

    def consumer(index: int) -> Consumer:
        c = Consumer({"bootstrap.servers": up.bootstrap, "group.id": group})
        c.subscribe(
            [topic],
            on_assign=lambda _c, tps: assigned.__setitem__(index, [tp.partition for tp in tps]),
        )
        return c

    def poll(
        consumers: list[Consumer], until: int, seen: list[tuple[int, int]], timeout_s: float = 60
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while len(seen) < until and time.monotonic() < deadline:
            for c in consumers:
                message = c.poll(0.1)
                if message is not None and message.error() is None:
                    seen.append((message.partition(), message.offset()))

    consumers = [consumer(0), consumer(1)]
    seen: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 60
        while sorted(p for parts in assigned.values() for p in parts) != [0, 1, 2] or len(assigned) < 2:
            assert time.monotonic() < deadline, f"librdkafka members never assigned: {assigned}"
            poll(consumers, 1, seen, timeout_s=0.5)
        for c in consumers:
            for tp in c.assignment():
                c.position([tp])
        time.sleep(1)  # librdkafka resolves "latest" asynchronously after the assignment
        _produce(up.bootstrap, topic, 100, 3)
        poll(consumers, 300, seen)
        assert sorted(seen) == [(p, o) for p in range(3) for o in range(100)]
        consumers[0].close()  # commits, leaves: the other takes over from the commits
        _produce(up.bootstrap, topic, 20, 3)
        poll(consumers[1:], 360, seen)
        assert sorted(seen) == [(p, o) for p in range(3) for o in range(120)]
        consumers[1].close()
    finally:
        for c in consumers:
            with contextlib.suppress(RuntimeError):  # already closed
                c.close()
    assert _committed(up, group) == dict.fromkeys(range(3), 120)
    _produce(up.bootstrap, topic, 10, 3)
    resumed = consumer(2)
    again: list[tuple[int, int]] = []
    try:
        poll([resumed], 30, again)
    finally:
        resumed.close()
    assert sorted(again) == [(p, o) for p in range(3) for o in range(120, 130)]


# ---- bad input on the wire: Kafka's error codes, nothing corrupted ----


async def _call(
    client: KafkaClient, address: str, api_key: ApiKey, version: int, **fields: Any
) -> Any:
    return await client.request(address, build(request_schema(int(api_key), version), **fields))


def _coordinator_of(bootstrap: str, group: str) -> str:
    async def ask() -> str:
        client = KafkaClient("coordinator-probe")
        try:
            return await _coordinator_address(client, bootstrap, group)
        finally:
            await client.close()

    return asyncio.run(ask())


@contextlib.contextmanager
def _coordinator_killed(up: Up, group: str) -> Iterator[str]:
    """kill -9 of `group`'s coordinator: yields the surviving brokers' bootstrap, then checks
    the group has another coordinator; the broker is started again, and unfenced, even when the
    test fails."""
    before = _coordinator_of(up.bootstrap, group)
    victim = next(b for b in up.cluster.brokers if b.address == before)
    survivors = ",".join(b.address for b in up.cluster.brokers if b is not victim)
    up.cluster.kill(victim)
    try:
        yield survivors
        assert _coordinator_of(survivors, group) != before
    finally:
        restart_node(up.cluster, victim)  # the module's next test needs all three unfenced


async def _coordinator_address(client: KafkaClient, bootstrap: str, group: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        answer = await _call(
            client, bootstrap.split(",")[0], ApiKey.FIND_COORDINATOR, 6, key_type=0,
            coordinator_keys=(group,),
        )
        found = answer.coordinators[0]
        if found.error_code == ErrorCode.none:
            return f"{found.host}:{found.port}"
        assert found.error_code == ErrorCode.coordinator_not_available, found
        assert time.monotonic() < deadline, "no coordinator"
        await asyncio.sleep(0.2)


def _commit_fields(group: str, member_id: str, generation: int, offset: int) -> dict[str, Any]:
    topic_cls = item_type(request_schema(int(ApiKey.OFFSET_COMMIT), 9), "topics")
    partition_cls = item_type(topic_cls, "partitions")
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": (
            topic_cls(
                name="bad-input",
                partitions=(
                    partition_cls(
                        partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    }


def _join_fields(group: str, member_id: str, session_ms: int = 10_000) -> dict[str, Any]:
    protocol_cls = item_type(request_schema(int(ApiKey.JOIN_GROUP), 9), "protocols")
    return {
        "group_id": group,
        "session_timeout": datetime.timedelta(milliseconds=session_ms),
        "rebalance_timeout": datetime.timedelta(milliseconds=10_000),
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": (protocol_cls(name="range", metadata=b"\x00"),),
        "reason": None,
    }


def test_bad_group_input_gets_kafkas_error_codes_and_corrupts_nothing(up: Up) -> None:
    _create(_admin(up), NewTopic("bad-input", 1, 3))

    async def scenario() -> None:
        client = KafkaClient("bad-input-test")
        group = "raw-group"
        try:
            coordinator = await _coordinator_address(client, up.bootstrap, group)
            unknown = await _call(client, coordinator, ApiKey.JOIN_GROUP, 9, **_join_fields(group, "nobody"))
            assert unknown.error_code == ErrorCode.unknown_member_id
            # KIP-394: the first join hands out an id; the second joins with it.
            first = await _call(client, coordinator, ApiKey.JOIN_GROUP, 9, **_join_fields(group, "", 6_000))
            assert first.error_code == ErrorCode.member_id_required
            member_id = first.member_id
            assert member_id.startswith("bad-input-test-")
            joined = await _call(client, coordinator, ApiKey.JOIN_GROUP, 9, **_join_fields(group, member_id, 6_000))
            assert (joined.error_code, joined.generation_id, joined.leader) == (ErrorCode.none, 1, member_id)
            assignment_cls = item_type(request_schema(int(ApiKey.SYNC_GROUP), 5), "assignments")
            synced = await _call(
                client, coordinator, ApiKey.SYNC_GROUP, 5, group_id=group, generation_id=1,
                member_id=member_id, group_instance_id=None, protocol_type="consumer",
                protocol_name="range",
                assignments=(assignment_cls(member_id=member_id, assignment=b"A"),),
            )
            assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"A")
            ok = await _call(client, coordinator, ApiKey.OFFSET_COMMIT, 9, **_commit_fields(group, member_id, 1, 7))
            assert ok.topics[0].partitions[0].error_code == ErrorCode.none
            stale = await _call(client, coordinator, ApiKey.OFFSET_COMMIT, 9, **_commit_fields(group, member_id, 0, 99))
            assert stale.topics[0].partitions[0].error_code == ErrorCode.illegal_generation
            heartbeat = await _call(
                client, coordinator, ApiKey.HEARTBEAT, 4, group_id=group, generation_id=0,
                member_id=member_id, group_instance_id=None,
            )
            assert heartbeat.error_code == ErrorCode.illegal_generation
            stranger = await _call(client, coordinator, ApiKey.OFFSET_COMMIT, 9, **_commit_fields(group, "stranger", 1, 99))
            assert stranger.topics[0].partitions[0].error_code == ErrorCode.unknown_member_id
            # No heartbeat for the 6 s session: the member is fenced, its commit refused.
            await asyncio.sleep(7)
            fenced = await _call(client, coordinator, ApiKey.OFFSET_COMMIT, 9, **_commit_fields(group, member_id, 1, 99))
            assert fenced.topics[0].partitions[0].error_code == ErrorCode.unknown_member_id
            # A non-coordinator answers NOT_COORDINATOR.
            other = next(b.address for b in up.cluster.brokers if b.address != coordinator)
            moved = await _call(client, other, ApiKey.OFFSET_COMMIT, 9, **_commit_fields(group, member_id, 1, 99))
            assert moved.topics[0].partitions[0].error_code == ErrorCode.not_coordinator
        finally:
            await client.close()

    asyncio.run(scenario())
    # Nothing the refused commits carried was written: the group's offset is still 7.
    assert _committed(up, "raw-group") == {0: 7}


def _versions(key: ApiKey) -> range:
    return BROKER_API_VERSIONS[key].versions()


def test_every_advertised_group_api_version_is_served(up: Up) -> None:
    """Each group API at every version the brokers advertise, one member, one group."""
    _create(_admin(up), NewTopic("versioned", 1, 3))
    group = "versioned-group"

    async def scenario() -> None:
        client = KafkaClient("versions-test")
        try:
            coordinator = await _coordinator_address(client, up.bootstrap, group)
            for version in _versions(ApiKey.FIND_COORDINATOR):
                found = await _call(
                    client, up.bootstrap.split(",")[0], ApiKey.FIND_COORDINATOR, version,
                    key=group, key_type=0, coordinator_keys=(group,),
                )
                answer = found.coordinators[0] if version >= 4 else found
                assert (answer.error_code, f"{answer.host}:{answer.port}") == (ErrorCode.none, coordinator)
            first, *rest = _versions(ApiKey.JOIN_GROUP)
            # Before v4 a new member gets its id with the join itself (no MEMBER_ID_REQUIRED).
            joined = await _call(client, coordinator, ApiKey.JOIN_GROUP, first, **_join_fields(group, ""))
            assert (joined.error_code, joined.generation_id) == (ErrorCode.none, 1), joined
            member_id = joined.member_id
            assert joined.leader == member_id and [m.member_id for m in joined.members] == [member_id]
            for version in rest:  # the same member again: its answer, no new generation
                again = await _call(client, coordinator, ApiKey.JOIN_GROUP, version, **_join_fields(group, member_id))
                assert (again.error_code, again.generation_id, again.member_id) == (ErrorCode.none, 1, member_id)
            for version in _versions(ApiKey.SYNC_GROUP):
                assignment_cls = item_type(request_schema(int(ApiKey.SYNC_GROUP), version), "assignments")
                synced = await _call(
                    client, coordinator, ApiKey.SYNC_GROUP, version, group_id=group, generation_id=1,
                    member_id=member_id, group_instance_id=None, protocol_type="consumer",
                    protocol_name="range", assignments=(assignment_cls(member_id=member_id, assignment=b"A"),),
                )
                assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"A")
            for version in _versions(ApiKey.HEARTBEAT):
                beat = await _call(
                    client, coordinator, ApiKey.HEARTBEAT, version, group_id=group, generation_id=1,
                    member_id=member_id, group_instance_id=None,
                )
                assert beat.error_code == ErrorCode.none
            for version in _versions(ApiKey.OFFSET_COMMIT):
                schema = request_schema(int(ApiKey.OFFSET_COMMIT), version)
                topic_cls = item_type(schema, "topics")
                partition_cls = item_type(topic_cls, "partitions")
                committed = await client.request(coordinator, build(
                    schema, group_id=group, generation_id_or_member_epoch=1, member_id=member_id,
                    group_instance_id=None, retention_time=datetime.timedelta(milliseconds=-1),
                    topics=(topic_cls(name="versioned", partitions=(build(
                        partition_cls, partition_index=0, committed_offset=version,
                        committed_leader_epoch=-1, committed_metadata="v",
                    ),)),),
                ))
                assert committed.topics[0].partitions[0].error_code == ErrorCode.none
                for fetch_version in (min(_versions(ApiKey.OFFSET_FETCH)), 7, max(_versions(ApiKey.OFFSET_FETCH))):
                    assert await _fetched(client, coordinator, group, fetch_version) == version
            for version in _versions(ApiKey.OFFSET_FETCH):
                assert await _fetched(client, coordinator, group, version) == max(_versions(ApiKey.OFFSET_COMMIT))
            for version in _versions(ApiKey.LIST_GROUPS):
                listed = await _call(client, coordinator, ApiKey.LIST_GROUPS, version, states_filter=(), types_filter=())
                assert group in {g.group_id for g in listed.groups}
            for version in _versions(ApiKey.DESCRIBE_GROUPS):
                described = await _call(
                    client, coordinator, ApiKey.DESCRIBE_GROUPS, version, groups=(group,),
                    include_authorized_operations=False,
                )
                (only,) = described.groups
                assert (only.error_code, only.group_state, only.protocol_data) == (ErrorCode.none, "Stable", "range")
                assert [(m.member_id, m.member_assignment) for m in only.members] == [(member_id, b"A")]
            for version in _versions(ApiKey.LEAVE_GROUP):
                leaver = member_id if version == max(_versions(ApiKey.LEAVE_GROUP)) else "stranger"
                member_cls = item_type(request_schema(int(ApiKey.LEAVE_GROUP), version), "members") if version >= 3 else None
                left = await _call(
                    client, coordinator, ApiKey.LEAVE_GROUP, version, group_id=group, member_id=leaver,
                    members=(build(member_cls, member_id=leaver, group_instance_id=None, reason=None),) if member_cls else (),
                )
                code = left.error_code if version < 3 else left.members[0].error_code
                assert code == (ErrorCode.none if leaver == member_id else ErrorCode.unknown_member_id), version
            for version in _versions(ApiKey.DELETE_GROUPS):
                deleted = await _call(client, coordinator, ApiKey.DELETE_GROUPS, version, groups_names=(group,))
                expected = ErrorCode.none if version == 0 else ErrorCode.group_id_not_found
                assert deleted.results[0].error_code == expected
        finally:
            await client.close()

    asyncio.run(scenario())


async def _fetched(client: KafkaClient, coordinator: str, group: str, version: int) -> int:
    schema = request_schema(int(ApiKey.OFFSET_FETCH), version)
    if version >= 8:
        group_cls = item_type(schema, "groups")
        topic_cls = item_type(group_cls, "topics")
        topics = (topic_cls(name="versioned", partition_indexes=(0,)),)
        body = build(schema, require_stable=False, groups=(build(
            group_cls, group_id=group, member_id=None, member_epoch=-1, topics=topics,
        ),))
        answer = (await client.request(coordinator, body)).groups[0]
    else:
        topic_cls = item_type(schema, "topics")
        body = build(schema, group_id=group, require_stable=False,
                     topics=(topic_cls(name="versioned", partition_indexes=(0,)),))
        answer = await client.request(coordinator, body)
    (partition,) = answer.topics[0].partitions
    assert partition.error_code == ErrorCode.none
    return int(partition.committed_offset)


# ---- the consumer-groups CLI (kafka-consumer-groups.sh's shape) ----


def _cli(up: Up, *args: str) -> subprocess.CompletedProcess[str]:
    return minikraft("consumer-groups", "--bootstrap-server", up.bootstrap, *args, timeout=60)


def test_consumer_groups_cli_lists_describes_resets_and_deletes(up: Up) -> None:
    topic, group = "cli-grouped", "cli-group"
    _new_topic(up, topic, 2)
    _produce(up.bootstrap, topic, 10, 2)
    member = _kafka_python_member(up.bootstrap, topic, group)
    try:
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while len(member.assignment()) < 2:
            assert time.monotonic() < deadline, "the member was never assigned"
            _poll_kafka_python([member], 1, seen, timeout_s=0.5)
        member.commit({kafka.TopicPartition(topic, p): kafka.OffsetAndMetadata(4, None, -1) for p in range(2)})
        listed = _cli(up, "--list", "--output", "json")
        assert listed.returncode == 0, listed.stderr
        assert {"group": group, "state": "Stable", "protocol_type": "consumer"} in json.loads(listed.stdout)["groups"]
        described = _cli(up, "--describe", "--group", group, "--output", "json")
        assert described.returncode == 0, described.stderr
        report = json.loads(described.stdout)
        assert report["state"] == "Stable" and report["assignor"] == "range"
        (only,) = report["members"]
        assert only["assignment"] == [{"topic": topic, "partitions": [0, 1]}]
        assert [(o["partition"], o["current_offset"], o["log_end_offset"], o["lag"], o["consumer_id"]) for o in report["offsets"]] == [
            (0, 4, 10, 6, only["member_id"]), (1, 4, 10, 6, only["member_id"]),
        ]
        active = _cli(up, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
        assert active.returncode == 1 and "NON_EMPTY_GROUP" in active.stderr
    finally:
        member.close(autocommit=False)
    dry = _cli(up, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--output", "json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout) == {
        "group": group, "executed": False,
        "offsets": [{"topic": topic, "partition": p, "new_offset": 0} for p in range(2)],
    }
    assert _committed(up, group) == {0: 4, 1: 4}  # a dry run commits nothing
    reset = _cli(up, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "99", "--execute", "--output", "json")
    assert reset.returncode == 0, reset.stderr
    assert json.loads(reset.stdout)["offsets"] == [{"topic": topic, "partition": 1, "new_offset": 10}]  # clamped
    assert _committed(up, group) == {0: 4, 1: 10}
    deleted = _cli(up, "--delete", "--group", group, "--output", "json")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout) == {"group": group, "deleted": True}
    gone = _cli(up, "--describe", "--group", group)
    assert gone.returncode == 1 and "GROUP_ID_NOT_FOUND" in gone.stderr and "Traceback" not in gone.stderr


# ---- issue 38: what librdkafka / kafka-python applications rely on ----


def test_commits_to_a_missing_topic_or_partition_are_refused_per_partition(up: Up) -> None:
    """Kafka's KafkaApis answers UNKNOWN_TOPIC_OR_PARTITION for a topic or partition its
    metadata lacks and commits the rest; nothing is stored for the missing ones."""
    topic, group = "commit-target", "commit-missing"
    admin = _new_topic(up, topic, 2)
    consumer = Consumer({"bootstrap.servers": up.bootstrap, "group.id": group})
    try:
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            consumer.commit(
                offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 7, 5),
                         TopicPartition("no-such-topic", 0, 5)],
                asynchronous=False,
            )
        assert refused.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        consumer.close()
    assert _committed(up, group) == {0: 5}
    # The admin API's AlterConsumerGroupOffsets: the same answer, partition by partition.
    altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "alter-missing", [TopicPartition(topic, 1, 3), TopicPartition("no-such-topic", 0, 3)],
    )])
    answer = altered["alter-missing"].result(timeout=20)
    errors = {(tp.topic, tp.partition): tp.error and tp.error.code() for tp in answer.topic_partitions}
    assert errors == {
        (topic, 1): None,
        ("no-such-topic", 0): confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    assert _committed(up, "alter-missing") == {1: 3}


def test_offset_delete_removes_offsets_of_topics_the_group_no_longer_consumes(up: Up) -> None:
    """OffsetDelete (KIP-496) through kafka-python's admin: a topic the live group consumes
    keeps its offsets (GROUP_SUBSCRIBED_TO_TOPIC), another's go; an unknown group is
    GROUP_ID_NOT_FOUND."""
    consumed, dropped, group = "od-consumed", "od-dropped", "offset-delete-group"
    for topic in (consumed, dropped):
        _new_topic(up, topic, 1)
    member = _kafka_python_member(up.bootstrap, consumed, group)
    kp_admin = kafka.KafkaAdminClient(bootstrap_servers=up.bootstrap)
    try:
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while not member.assignment():
            assert time.monotonic() < deadline, "the member was never assigned"
            _poll_kafka_python([member], 1, seen, timeout_s=0.5)
        member.commit({
            kafka.TopicPartition(consumed, 0): kafka.OffsetAndMetadata(4, None, -1),
            kafka.TopicPartition(dropped, 0): kafka.OffsetAndMetadata(6, None, -1),
        })
        assert _committed_topics(up, group) == {(consumed, 0): 4, (dropped, 0): 6}
        results = kp_admin.delete_group_offsets(group, [
            kafka.TopicPartition(consumed, 0), kafka.TopicPartition(dropped, 0),
            kafka.TopicPartition("od-no-such-topic", 0),
        ])
        assert {tp.topic: error.__name__ for tp, error in results.items()} == {
            consumed: "GroupSubscribedToTopicError",
            dropped: "NoError",
            "od-no-such-topic": "UnknownTopicOrPartitionError",
        }
        assert _committed_topics(up, group) == {(consumed, 0): 4}
        with pytest.raises(kafka.errors.GroupIdNotFoundError):
            kp_admin.delete_group_offsets("od-no-such-group", [kafka.TopicPartition(consumed, 0)])
    finally:
        member.close(autocommit=False)
        kp_admin.close()
    # Once the group is empty it consumes nothing: the last offset can go too.
    kp_admin = kafka.KafkaAdminClient(bootstrap_servers=up.bootstrap)
    try:
        results = kp_admin.delete_group_offsets(group, [kafka.TopicPartition(consumed, 0)])
        assert [error.__name__ for error in results.values()] == ["NoError"]
    finally:
        kp_admin.close()
    assert _committed_topics(up, group) == {}


def _committed_topics(up: Up, group: str) -> dict[tuple[str, int], int]:
    admin = _admin(up)
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result[group].result(timeout=20).topic_partitions
    }


def test_authorized_operations_are_every_operation_without_an_authorizer(up: Up) -> None:
    """KIP-430 through librdkafka's admin API (DescribeCluster, Metadata, DescribeGroups):
    Kafka without an authorizer answers every operation the resource type supports
    (AuthHelper.authorizedOperations, AclEntry.supportedOperations)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation as Op

    topic, group = "authorized-ops", "authorized-ops-group"
    admin = _new_topic(up, topic, 1)
    consumer = Consumer({"bootstrap.servers": up.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=20)
    assert set(cluster.authorized_operations) == {
        Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
        Op.ALTER, Op.DESCRIBE,
    }
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    assert set(described[topic].result(timeout=20).authorized_operations) == {
        Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    }
    groups = admin.describe_consumer_groups([group], include_authorized_operations=True)
    assert set(groups[group].result(timeout=20).authorized_operations) == {
        Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
    }
    # Not asked for: not answered (the schemas' "absent" value).
    assert admin.describe_cluster().result(timeout=20).authorized_operations is None

    async def raw_answers() -> list[int]:
        """What librdkafka does not ask: DescribeCluster on a controller (KIP-919, Kafka's
        ControllerApis answers alike), Metadata v10's cluster operations, and
        DescribeTopicPartitions (Kafka fills it unasked); Kafka's bits or Int.MinValue."""
        client = KafkaClient("authorized-ops-test")
        broker = up.bootstrap.split(",")[0]
        topic_cls = item_type(request_schema(int(ApiKey.METADATA), 10), "topics")
        described_cls = item_type(request_schema(int(ApiKey.DESCRIBE_TOPIC_PARTITIONS), 0), "topics")
        try:
            asked, unasked = [
                await _call(client, up.cluster.bootstrap_controller.split(",")[0],
                            ApiKey.DESCRIBE_CLUSTER, 1, endpoint_type=2,
                            include_cluster_authorized_operations=include)
                for include in (True, False)
            ]
            metadata = await _call(
                client, broker, ApiKey.METADATA, 10, allow_auto_topic_creation=False,
                topics=(build(topic_cls, name=topic, topic_id=None),),
                include_cluster_authorized_operations=True, include_topic_authorized_operations=True,
            )
            partitions = await _call(
                client, broker, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, response_partition_limit=10,
                cursor=None, topics=(described_cls(name=topic),),
            )
            return [
                int(asked.cluster_authorized_operations), int(unasked.cluster_authorized_operations),
                int(metadata.cluster_authorized_operations),
                int(metadata.topics[0].topic_authorized_operations),
                int(partitions.topics[0].topic_authorized_operations),
            ]
        finally:
            await client.close()

    assert asyncio.run(raw_answers()) == [8096, -(2**31), 8096, 3576, 3576]


class StaticMembers:
    """librdkafka members of one group with a group.instance.id each (KIP-345), polled
    together; every rebalance callback and error is recorded under the member's label."""

    def __init__(self, up: Up, topic: str, group: str) -> None:
        self.up, self.topic, self.group = up, topic, group
        self.consumers: dict[str, Consumer] = {}
        self.events: list[tuple[str, str, list[int]]] = []
        self.errors: dict[str, list[Any]] = {}

    def start(self, label: str, instance_id: str) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.up.bootstrap, "group.id": self.group,
            "group.instance.id": instance_id, "session.timeout.ms": STATIC_SESSION_MS,
        })
        consumer.subscribe(
            [self.topic],
            on_assign=lambda _c, tps: self.events.append((label, "assign", [t.partition for t in tps])),
            on_revoke=lambda _c, tps: self.events.append((label, "revoke", [t.partition for t in tps])),
        )
        self.consumers[label] = consumer
        self.errors[label] = []

    def close(self, label: str) -> None:
        self.consumers.pop(label).close()

    def poll(self, seconds: float, until: Any = None) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not (until is not None and until()):
            for label, consumer in self.consumers.items():
                message = consumer.poll(0.05)
                if message is not None and message.error() is not None:
                    self.errors[label].append(message.error())

    def assigned(self, label: str) -> list[int] | None:
        """The partitions of the member's last assign callback (None if it had none)."""
        mine = [parts for who, kind, parts in self.events if who == label and kind == "assign"]
        return mine[-1] if mine else None

    def describe(self) -> tuple[str, dict[str, tuple[str, list[int]]]]:
        """(state, instance id -> (member id, partitions)) from DescribeGroups."""
        admin = _admin(self.up)
        found = admin.describe_consumer_groups([self.group])[self.group].result(timeout=20)
        return found.state.name, {
            m.group_instance_id: (m.member_id, sorted(t.partition for t in m.assignment.topic_partitions))
            for m in found.members
        }

    def stop(self) -> None:
        for label in list(self.consumers):
            self.close(label)


STATIC_SESSION_MS = 6_000


def test_static_members_rejoin_without_a_rebalance_are_fenced_and_expire(up: Up) -> None:
    """KIP-345 with librdkafka: a restarted member keeping its group.instance.id gets a new
    member id and its old partitions and the other member is not disturbed; a second
    consumer with the same instance id fences the first (FENCED_INSTANCE_ID, fatal to
    librdkafka); a static member closing (no LeaveGroup) stays until its session times out;
    kafka-python's admin removes a member by instance id (LeaveGroup v3+)."""
    topic, group = "static-grouped", "static-group"
    _new_topic(up, topic, 2)
    members = StaticMembers(up, topic, group)
    try:
        members.start("a1", "instance-a")
        members.start("b", "instance-b")
        members.poll(60, until=lambda: members.assigned("a1") and members.assigned("b"))
        assert sorted((members.assigned("a1") or []) + (members.assigned("b") or [])) == [0, 1]
        state, before = members.describe()
        assert state == "STABLE" and before["instance-a"][0].startswith("instance-a-")
        b_events = [e for e in members.events if e[0] == "b"]

        # 1. a restarts: its close sends no LeaveGroup, the group keeps its place.
        members.close("a1")
        assert members.describe() == ("STABLE", before)
        members.start("a2", "instance-a")
        members.poll(30, until=lambda: members.assigned("a2") is not None)
        assert members.assigned("a2") == before["instance-a"][1]
        state, after = members.describe()
        assert state == "STABLE" and after["instance-b"] == before["instance-b"]
        assert after["instance-a"][1] == before["instance-a"][1]
        assert after["instance-a"][0] != before["instance-a"][0]  # a new member id
        members.poll(1)
        assert [e for e in members.events if e[0] == "b"] == b_events, "b was rebalanced"

        # 2. A second consumer with instance-a takes over; a2 is fenced.
        members.start("a3", "instance-a")
        members.poll(
            30,
            until=lambda: members.assigned("a3") is not None and members.errors["a2"],
        )
        assert members.assigned("a3") == before["instance-a"][1]
        assert any("fenced" in str(e).lower() for e in members.errors["a2"]), members.errors["a2"]
        assert members.errors["a2"][0].code() == confluent_kafka.KafkaError._FATAL
        members.close("a2")
        assert members.describe()[1]["instance-a"][0] not in (before["instance-a"][0], after["instance-a"][0])
        assert [e for e in members.events if e[0] == "b"] == b_events, "b was rebalanced"

        # 3. a3 closes (no LeaveGroup): instance-a stays until its 6 s session times out,
        # then b takes both partitions.
        members.close("a3")
        closed = time.monotonic()
        members.poll(2)
        assert "instance-a" in members.describe()[1]
        members.poll(30, until=lambda: members.assigned("b") == [0, 1])
        assert members.assigned("b") == [0, 1]
        assert time.monotonic() - closed >= STATIC_SESSION_MS / 1000 - 1

        # 4. b closes too; an admin removes it by its instance id: the group is empty at once.
        members.close("b")
        assert "instance-b" in members.describe()[1]
        kp_admin = kafka.KafkaAdminClient(bootstrap_servers=up.bootstrap)
        try:
            removed = kp_admin.remove_group_members(group, [
                kafka.admin.MemberToRemove(group_instance_id="instance-b"),
                kafka.admin.MemberToRemove(group_instance_id="instance-z"),
            ])
        finally:
            kp_admin.close()
        assert {k: v.__name__ for k, v in removed.items()} == {
            "instance-b": "NoError", "instance-z": "UnknownMemberIdError",
        }
        assert members.describe() == ("EMPTY", {})
    finally:
        members.stop()


# ---- kill -9 of the coordinator's broker (runs last: it kills a broker) ----


def test_kill_9_of_the_coordinator_moves_the_group_and_keeps_its_offsets(up: Up) -> None:
    topic, group = "coordinated", "coordinator-failover"
    _new_topic(up, topic, 3)
    committer = Consumer({"bootstrap.servers": up.bootstrap, "group.id": group})
    try:
        offsets = [TopicPartition(topic, p, 10 + p) for p in range(3)]
        committed = committer.commit(offsets=offsets, asynchronous=False)
        assert [tp.error for tp in committed] == [None, None, None]
    finally:
        committer.close()

    with _coordinator_killed(up, group) as survivors:
        deadline = time.monotonic() + 60
        while True:
            consumer = Consumer({"bootstrap.servers": survivors, "group.id": group})
            try:
                found = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
                if [tp.offset for tp in found] == [10, 11, 12]:
                    break
            except confluent_kafka.KafkaException:
                pass  # the coordinator is moving: ask again
            finally:
                consumer.close()
            assert time.monotonic() < deadline, "the group's offsets never came back"
            time.sleep(0.5)


@pytest.mark.slow
def test_a_live_aiokafka_group_follows_its_coordinator_through_kill_9(
    up: Up, members: list[Member]
) -> None:
    topic, group = "coord-live", "coord-live-group"
    _new_topic(up, topic, 3)
    _join(up, members, topic, group, 2)
    _produce(up.bootstrap, topic, 100, 3)
    _wait(lambda: _committed(up, group) == dict.fromkeys(range(3), 100), 30, "auto-commits")

    with _coordinator_killed(up, group) as survivors:
        _produce(survivors, topic, 100, 3)
        _wait(
            lambda: {(p, o) for m in members for p, o in m.records}
            >= {(p, o) for p in range(3) for o in range(200)},
            90,
            "every record, across the coordinator's move",
        )
        # The members' auto-commits reach the new coordinator; the old offsets were kept.
        _wait(
            lambda: _committed_via(survivors, group) == dict.fromkeys(range(3), 200),
            60,
            "commits to the new coordinator",
        )


def _committed_via(bootstrap: str, group: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        return {tp.partition: tp.offset for tp in result[group].result(timeout=20).topic_partitions}
    except confluent_kafka.KafkaException:
        return {}  # the coordinator is moving: the caller asks again
