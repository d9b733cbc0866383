"""The active controller at scale (issue 35): decisions over a big image come in slices, a broker
is fenced one per write, heartbeats count on arrival, and a session is timed on the time the
controller was listening (its own stalls do not fence a live broker)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from types import SimpleNamespace
from typing import Any, TypeVar, cast

import pytest

from controller.core import cluster_control as cc
from controller.core import replication_control as rc
from controller.core.election_policy import DEFAULT_POLICY
from controller.core.partition_change import written_records
from controller.core.partition_metrics import PartitionMetrics
from controller.core.steps import SLICE_PARTITIONS, Steps, drain
from controller.runtime.quorum_controller import QuorumController
from controller.runtime.session_clock import JITTER_S, SessionClock
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.errors import Errors
from metadata.records import (
    CONFIG_RESOURCE_TOPIC,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from tests.unit.test_cluster_control import SESSION_MS, Cluster, apply, three_unfenced

T = TypeVar("T")

BIG = uuid.UUID(int=200)


def big_cluster(partitions: int) -> Cluster:
    cluster = three_unfenced()
    cluster.image = apply(
        cluster.image,
        [TopicRecord("big", BIG)]
        + [
            PartitionRecord(p, BIG, (1, 2, 3), (1, 2, 3), leader=1 + p % 3)
            for p in range(partitions)
        ],
    )
    return cluster


def fake_writer(state: Any, append: Any, wait_for_commit: Any, end_offset: Any) -> Any:
    """A QuorumController that is active, over a fake loader state and Raft driver."""
    controller = QuorumController.__new__(QuorumController)
    controller._lock = asyncio.Lock()
    controller.state = state
    controller.raft = SimpleNamespace(  # type: ignore[assignment]
        driver=SimpleNamespace(
            append=append,
            wait_for_commit=wait_for_commit,
            log=SimpleNamespace(end_offset=end_offset),
        ),
        replica=SimpleNamespace(epoch=1),
    )
    controller._apply_waiters = []
    controller._pending = []

    async def active() -> None:
        return None

    controller._ensure_active = active  # type: ignore[method-assign]
    return controller


def drain_counting(steps: Steps[T]) -> tuple[int, T]:
    """`drain`, counting the times the steps gave the loop back."""
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return yields, stop.value
        yields += 1


def test_fencing_a_big_broker_yields_between_slices_and_equals_the_whole() -> None:
    """Fencing broker 1 of 1,000 partitions: the steps give the loop back every
    SLICE_PARTITIONS builds, and their result is the one-go result."""
    cluster = big_cluster(1000)
    yields, changes = drain_counting(rc.broker_fenced_steps(cluster.image, 1))
    assert yields == 1000 // SLICE_PARTITIONS
    assert changes == rc.broker_fenced_changes(cluster.image, 1)
    assert len(changes) == 1000
    led = [c for c in changes if c.record is not None and c.record.leader not in (-2, 1)]
    assert len(led) == 334  # the partitions broker 1 led elected 2, the ISR's next


def test_a_big_alter_partition_yields_between_slices_and_equals_the_whole() -> None:
    """A broker's AlterPartition names every ISR change it has pending (thousands after a big
    create): the steps give the loop back every SLICE_PARTITIONS partitions."""
    cluster = big_cluster(1000)
    epochs = {b: cluster.image.brokers[b].epoch for b in (1, 2, 3)}
    request = lifecycle.alter_partition_request(
        1,
        epochs[1],
        [(BIG, [
            lifecycle.alter_partition_partition(
                p, 0, [lifecycle.BrokerState(broker_id=b, broker_epoch=epochs[b]) for b in (1, 2)]
            )
            for p in range(0, 1000, 3)  # the 334 it leads
        ])],
    )
    yields, result = drain_counting(rc.alter_partition_steps(cluster.image, request))
    assert yields == 334 // SLICE_PARTITIONS
    assert result == rc.alter_partition(cluster.image, request)
    assert len(result.records) == 334
    assert {r.isr for r in result.records} == {(1, 2)}


def test_alter_partitions_waiting_for_the_writer_go_in_one_write_each_seeing_the_last() -> None:
    """The brokers' AlterPartition backlog (after a failover) is one write, not one commit
    each; every request is decided against the image the earlier ones leave and answered its
    own response."""
    cluster = big_cluster(3)
    epochs = {b: cluster.image.brokers[b].epoch for b in (1, 2, 3)}

    def request(isr: tuple[int, ...], partition_epoch: int) -> lifecycle.AlterPartitionRequest:
        states = [lifecycle.BrokerState(broker_id=b, broker_epoch=epochs[b]) for b in isr]
        return lifecycle.alter_partition_request(1, epochs[1], [
            (BIG, [lifecycle.alter_partition_partition(0, 0, states, 0, partition_epoch)])
        ])

    writes: list[str] = []
    records: list[object] = []

    async def stage(compute, what, user_op=False):  # type: ignore[no-untyped-def]
        writes.append(what)
        result = drain(compute(cluster.image))
        records.extend(result.records)
        return result.response, cluster.image, bool(result.records)

    async def finish(staged):  # type: ignore[no-untyped-def]
        return staged

    async def scenario() -> list[lifecycle.AlterPartitionResponse]:
        controller = QuorumController.__new__(QuorumController)
        controller._lock = asyncio.Lock()
        controller._alter_partitions = []
        controller._stage = stage  # type: ignore[method-assign]
        controller._finish = finish  # type: ignore[method-assign]
        controller.election_policy = lambda image: DEFAULT_POLICY  # type: ignore[method-assign]
        async with controller._lock:  # the writer is busy: three requests queue up
            waiting = [
                asyncio.ensure_future(controller._alter_partition(r))
                for r in (request((1, 2), 0), request((1, 2, 3), 1), request((1,), 0))
            ]
            await asyncio.sleep(0)
        return list(await asyncio.gather(*waiting))

    shrink, expand, stale = asyncio.run(scenario())
    assert writes == ["AlterPartition from broker 1 (3 requests)"]
    assert [p.error_code for t in shrink.topics for p in t.partitions] == [0]
    assert [p.isr for t in expand.topics for p in t.partitions] == [(1, 2, 3)]
    assert [p.partition_epoch for t in expand.topics for p in t.partitions] == [2]
    # against the image the first two left (partition epoch 2), the third one is stale
    assert [Errors.of(p.error_code) for t in stale.topics for p in t.partitions] == [
        Errors.INVALID_UPDATE_VERSION
    ]
    assert [r.isr for r in records] == [(1, 2), (1, 2, 3)]  # type: ignore[attr-defined]


def test_fencing_skips_partitions_the_broker_is_not_in() -> None:
    """Kafka's partitionsWithBrokerInIsr: only the partitions where fencing matters change."""
    cluster = three_unfenced()
    cluster.image = apply(
        cluster.image,
        [TopicRecord("big", BIG)]
        + [PartitionRecord(p, BIG, (1, 2, 3), (2, 3), leader=2) for p in range(50)]
        + [PartitionRecord(50, BIG, (1, 2, 3), (1, 2, 3), leader=2)],
    )
    changes = rc.broker_fenced_changes(cluster.image, 1)
    assert [c.record.partition_id for c in changes if c.record is not None] == [50]


def test_one_stale_broker_is_fenced_per_write_the_least_recently_heard_first() -> None:
    """Kafka's maybeFenceOneStaleBroker: one per controller event, the stalest first."""
    cluster = big_cluster(10)
    cluster.now_ms += 1000
    cluster.heartbeat(1)  # 2 and 3 are stale, 2 heard from no later than 3
    cluster.now_ms += SESSION_MS
    cluster.heartbeat(1)
    result = drain(
        cc.fence_stale_broker_steps(cluster.image, cluster.tracker, cluster.now_ms, SESSION_MS)
    )
    assert [f.broker_id for f in result.response] == [2]
    cluster.image = apply(cluster.image, result.records)
    assert cluster.image.brokers[2].fenced and not cluster.image.brokers[3].fenced
    again = drain(
        cc.fence_stale_broker_steps(cluster.image, cluster.tracker, cluster.now_ms, SESSION_MS)
    )
    assert [f.broker_id for f in again.response] == [3]
    cluster.image = apply(cluster.image, again.records)
    last = drain(
        cc.fence_stale_broker_steps(cluster.image, cluster.tracker, cluster.now_ms, SESSION_MS)
    )
    assert last.records == () and last.response == []


def test_a_heartbeat_counts_on_arrival_only_with_the_current_epoch() -> None:
    """Kafka's trackBrokerHeartbeat: a stale epoch or an unknown broker notes nothing."""
    cluster = three_unfenced()
    epoch = cluster.image.brokers[2].epoch
    before = cluster.tracker.last_contact_ms[2]
    stale = lifecycle.heartbeat_request(2, epoch - 1, 0)
    assert not cc.track_heartbeat(cluster.image, stale, cluster.tracker, before + 5000)
    assert cluster.tracker.last_contact_ms[2] == before
    unknown = lifecycle.heartbeat_request(9, epoch, 0)
    assert not cc.track_heartbeat(cluster.image, unknown, cluster.tracker, before + 5000)
    current = lifecycle.heartbeat_request(2, epoch, 0)
    assert cc.track_heartbeat(cluster.image, current, cluster.tracker, before + 5000)
    assert cluster.tracker.last_contact_ms[2] == before + 5000


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_session_clock_does_not_count_the_loops_own_stall() -> None:
    """A 12 s stall of the controller's loop (a broker's heartbeats unread meanwhile) adds
    nothing to the session clock, neither while it lasts (the sampler overdue) nor after the
    sampler ran; time the loop was free counts in full."""
    fake = FakeMonotonic()
    clock = SessionClock(interval_s=0.05, monotonic=fake)
    clock._task = object()  # type: ignore[assignment]  # as if started: overdue counts
    clock._next_sample = fake.now + 0.05
    start = clock.now_ms()
    for _ in range(20):  # one free second, the sampler on time
        fake.now += 0.05
        clock.record_wakeup(fake.now)
    assert clock.now_ms() - start == 1000
    fake.now += 12.0  # the loop held: the sampler is 12 s overdue
    during = clock.now_ms() - start
    assert 1000 <= during <= 1050 + JITTER_S * 1000  # the sampler was due 50 ms in
    clock.record_wakeup(fake.now)
    assert clock.now_ms() - start == during
    fake.now += 0.05
    clock.record_wakeup(fake.now)
    assert clock.now_ms() - start == during + 50


def test_session_clock_ignores_timer_jitter() -> None:
    fake = FakeMonotonic()
    clock = SessionClock(interval_s=0.05, monotonic=fake)
    clock._next_sample = fake.now + 0.05
    start = clock.now_ms()
    for _ in range(100):
        fake.now += 0.05 + JITTER_S / 2  # each wake-up a little late, as timers are
        clock.record_wakeup(fake.now)
    assert clock.now_ms() - start == round(100 * (0.05 + JITTER_S / 2) * 1000)


def test_partition_gauges_are_kept_per_topic_and_follow_every_change() -> None:
    """One PartitionMetrics across commits, as the runtime keeps it between scrapes: a topic no
    commit touched keeps its figures, a changed topic or a changed min.insync.replicas is
    counted again."""
    metrics = PartitionMetrics()
    cluster = big_cluster(30)
    image = cluster.image
    assert metrics.counts(image)["under_min_isr_partitions"] == 0
    raised = apply(
        image, [ConfigRecord(CONFIG_RESOURCE_TOPIC, "big", "min.insync.replicas", "3")]
    )
    assert metrics.counts(raised)["under_min_isr_partitions"] == 0
    fenced = apply(raised, written_records(rc.broker_fenced_changes(raised, 1)))
    assert metrics.counts(fenced)["under_min_isr_partitions"] == 30
    assert metrics.electable_leaders(fenced)[:2] == [("big", 0, 3), ("big", 1, 3)]  # ISR + ELR
    lowered = apply(
        fenced, [ConfigRecord(CONFIG_RESOURCE_TOPIC, "big", "min.insync.replicas", "2")]
    )
    assert metrics.counts(lowered)["under_min_isr_partitions"] == 0
    assert metrics.counts(lowered) == rc.partition_counts(lowered)


def test_a_big_change_logs_one_summary_at_info_and_each_partition_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Logging that scales (issue 35): fencing a broker of 1,000 partitions is two INFO lines
    (the fencing, the summary, as Kafka's 'changing N partition(s)'), each partition's change
    at DEBUG; a change of a few partitions names each at INFO."""
    cluster = big_cluster(1000)
    result = drain(
        cc.fence_stale_broker_steps(cluster.image, cluster.tracker, cluster.now_ms + SESSION_MS
                                    * 2, SESSION_MS)
    )
    counters = SimpleNamespace(elections_from_elr=0, unclean_elections=0,
                               _log_broker_change=QuorumController._log_broker_change)
    caplog.set_level(logging.DEBUG, logger="minikraft.controller")
    QuorumController._log_changes(counters, cluster.image, result, "session expired")  # type: ignore[arg-type]
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(info) == 2 and info[0].startswith("Fenced broker 1")
    assert info[1].startswith("session expired: 1000 partition changes (")
    assert len(debug) == 1000
    caplog.clear()
    small = big_cluster(3)
    few = drain(cc.fence_stale_broker_steps(small.image, small.tracker,
                                            small.now_ms + SESSION_MS * 2, SESSION_MS))
    QuorumController._log_changes(counters, small.image, few, "session expired")  # type: ignore[arg-type]
    assert len([r for r in caplog.records if r.levelno == logging.INFO]) == 1 + 3


def test_a_steady_heartbeat_is_answered_without_the_writer_even_after_a_failed_write() -> None:
    """A heartbeat that changes nothing is answered from the committed image at once, also
    while a failed write left the next one to re-sync (_ready_epoch None): the 100K run's
    brokers waited 5 s per heartbeat behind the writer and were fenced. One that must write
    (unfencing a caught-up broker) goes to the writer (None)."""
    cluster = three_unfenced()
    replica = SimpleNamespace(role="Leader", epoch=3)
    controller = SimpleNamespace(
        raft=SimpleNamespace(replica=replica), _activated_epoch=3, _ready_epoch=None,
        state=SimpleNamespace(image=cluster.image), tracker=cluster.tracker,
        session_clock=SimpleNamespace(now_ms=lambda: cluster.now_ms),
        election_policy=lambda _image: DEFAULT_POLICY,
    )
    epoch = cluster.image.brokers[1].epoch
    steady = lifecycle.heartbeat_request(1, epoch, cluster.image.offset)
    answer = QuorumController._steady_heartbeat(controller, steady)  # type: ignore[arg-type]
    assert answer is not None and not answer.is_fenced and answer.is_caught_up
    controller._activated_epoch = 2  # not yet activated in this epoch: the writer activates
    assert QuorumController._steady_heartbeat(controller, steady) is None  # type: ignore[arg-type]
    controller._activated_epoch = 3
    cluster.heartbeat(1, want_fence=True)
    controller.state.image = cluster.image
    unfence = lifecycle.heartbeat_request(1, epoch, cluster.image.offset)
    assert QuorumController._steady_heartbeat(controller, unfence) is None  # type: ignore[arg-type]


def test_brokers_shutting_down_together_are_granted_in_bounded_batches_that_share_the_work(
) -> None:
    """`minikraft down` stops the three brokers at once (issue 35). Each shutdown heartbeat
    writes at most CONTROLLED_SHUTDOWN_BATCH partition changes, so it is answered while the
    rest waits for the next one; a batch moves every broker in controlled shutdown out of a
    partition in one change, and each broker is granted (fenced, should_shut_down) once it
    leads nothing and is in no ISR."""
    batch = cc.CONTROLLED_SHUTDOWN_BATCH
    partitions = 3 * batch + 1
    cluster = big_cluster(partitions)
    writes: list[int] = []
    granted: list[int] = []
    rounds = 0
    while len(granted) < 3:
        rounds += 1
        assert rounds < 20, "the shutdowns never end"
        for broker in (1, 2, 3):
            if broker in granted:
                continue
            epoch = cluster.image.brokers[broker].epoch
            request = lifecycle.heartbeat_request(
                broker, epoch, cluster.image.offset, want_shut_down=True
            )
            result = drain(
                cc.process_heartbeat_steps(cluster.image, request, cluster.tracker, cluster.now_ms)
            )
            changes = [r for r in result.records if not isinstance(r, BrokerRegistrationChangeRecord)]
            assert len(changes) <= batch
            writes.append(len(changes))
            cluster.image = apply(cluster.image, result.records)
            if result.response.should_shut_down:
                assert result.response.is_fenced and cluster.image.brokers[broker].fenced
                granted.append(broker)
    partitions_now = cluster.image.topics[BIG].partitions.values()
    assert all(p.leader == -1 and p.isr == () for p in partitions_now)
    # One change per partition for the three, bar the first batch of each broker (made before
    # the others were in controlled shutdown): far from a change per broker and partition.
    assert sum(writes) <= partitions + 3 * batch
    assert max(writes) == batch


def test_a_controlled_shutdown_batch_goes_on_from_where_the_last_one_stopped() -> None:
    """The next batch starts after the last partition the previous one changed and goes round
    to just before it: every partition is reached, none scanned again on every heartbeat."""
    cluster = big_cluster(1000)
    tracker = cluster.tracker
    epoch = cluster.image.brokers[1].epoch
    request = lifecycle.heartbeat_request(1, epoch, cluster.image.offset, want_shut_down=True)
    first = drain(cc.process_heartbeat_steps(
        cluster.image, request, tracker, cluster.now_ms, shutdown_batch=300))
    moved = [r.partition_id for r in first.records if isinstance(r, PartitionChangeRecord)]
    assert moved == list(range(300)) and tracker.shutdown_cursor == ("big", 300)

    def ids(start: tuple[str, int]) -> list[int]:
        changes = rc.broker_controlled_shutdown_changes(cluster.image, (1,), limit=3, start=start)
        return [c.record.partition_id for c in changes if c.record is not None]

    assert ids(("big", 500)) == [500, 501, 502]
    assert ids(("big", 998)) == [998, 999, 0]  # round to the start


def test_the_last_alter_partition_of_a_write_is_not_replayed_for_a_next_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each request of a write is decided against the image the earlier ones leave; the last
    one's changes are replayed by the commit alone (issue 35: a lone request of thousands of
    expansions was replayed into a throwaway image first, 8% of the active controller's
    samples while a broker came back)."""
    from controller.runtime import quorum_controller as qc

    cluster = big_cluster(3)
    epochs = {b: cluster.image.brokers[b].epoch for b in (1, 2, 3)}
    states = [lifecycle.BrokerState(broker_id=b, broker_epoch=epochs[b]) for b in (1, 2)]
    request = lifecycle.alter_partition_request(1, epochs[1], [
        (BIG, [lifecycle.alter_partition_partition(0, 0, states, 0, 0)])
    ])
    replayed: list[object] = []

    class CountingDelta(qc.MetadataDelta):
        def replay(self, record: object, offset: int) -> None:  # type: ignore[override]
            replayed.append(record)
            super().replay(record, offset)  # type: ignore[arg-type]

    monkeypatch.setattr(qc, "MetadataDelta", CountingDelta)
    written: list[object] = []

    async def stage(compute, what, user_op=False):  # type: ignore[no-untyped-def]
        result = drain(compute(cluster.image))
        written.extend(result.records)
        return result.response, cluster.image, bool(result.records)

    async def finish(staged):  # type: ignore[no-untyped-def]
        return staged

    async def scenario() -> lifecycle.AlterPartitionResponse:
        controller = QuorumController.__new__(QuorumController)
        controller._lock = asyncio.Lock()
        controller._alter_partitions = []
        controller._stage = stage  # type: ignore[method-assign]
        controller._finish = finish  # type: ignore[method-assign]
        controller.election_policy = lambda image: DEFAULT_POLICY  # type: ignore[method-assign]
        return await controller._alter_partition(request)

    response = asyncio.run(scenario())
    assert [p.isr for t in response.topics for p in t.partitions] == [(1, 2)]
    assert len(written) == 1 and replayed == []


def test_a_slow_write_logs_the_time_of_each_of_its_stages(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where a big write's seconds go (issue 35: a fencing at 100,000 partitions held a
    restarted broker's registration 9 s): one line with the wait for the writer, the decision,
    the encoding, the commit and the replay; a write under SLOW_WRITE_MS logs none."""
    from controller.core.controller_result import ControllerResult
    from controller.runtime import quorum_controller as qc

    cluster = big_cluster(3)
    fence = BrokerRegistrationChangeRecord(3, cluster.image.brokers[3].epoch, fenced=1)

    async def append(encoded, **kwargs):  # type: ignore[no-untyped-def]
        return 10

    async def wait_for_commit(offset, timeout_ms):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.02)
        state.committed_offset = 11
        return offset

    state = SimpleNamespace(
        image=cluster.image, committed_offset=0,
        prepared=lambda write: None, forget_written=lambda: None,
    )

    async def scenario() -> None:
        controller = fake_writer(state, append, wait_for_commit, lambda: 10)
        async with controller._lock:  # the writer is busy: the write queues up
            write = asyncio.ensure_future(
                controller.write(lambda image: ControllerResult((fence,), None), "session expired")
            )
            await asyncio.sleep(0.05)
        await write

    monkeypatch.setattr(qc, "SLOW_WRITE_MS", 10_000)
    with caplog.at_level(logging.INFO, logger="minikraft.controller"):
        asyncio.run(scenario())
    assert not [r for r in caplog.records if "held the writer" in r.getMessage()]
    monkeypatch.setattr(qc, "SLOW_WRITE_MS", 0)
    with caplog.at_level(logging.INFO, logger="minikraft.controller"):
        asyncio.run(scenario())
    [line] = [r.getMessage() for r in caplog.records if "held the writer" in r.getMessage()]
    assert line.startswith("session expired: 1 records held the writer ")
    stages = dict(
        (part.rsplit(" ", 2)[0], int(part.rsplit(" ", 2)[1]))
        for part in line.split("(", 1)[1].rstrip(")").split(", ")
    )
    assert list(stages) == [
        "waited for the writer", "computed", "encoded", "replayed", "appended", "committed",
        "applied",
    ]
    assert stages["waited for the writer"] >= 40 and stages["committed"] >= 15


def test_a_big_create_is_decided_in_slices_with_one_replica_list_per_rotation() -> None:
    """Issue 35: a CreateTopics or CreatePartitions of 5,000 partitions was one stretch of
    30-45 ms of the active controller's loop (late loop-lag samples of 130-210 ms at load 4-7).
    Its steps yield every CREATE_SLICE_PARTITIONS partitions built, and the partitions share
    one replica list per rotation of the brokers (the ISR is the same tuple when every replica
    is usable), where each built its own two."""
    from controller.core.create_partitions import create_partitions_steps
    from kafkawire import admin_messages as am
    from tests.unit.test_replication_control import NODE, apply, ids

    cluster = three_unfenced()
    request = am.create_topics_request([am.creatable_topic("big", 5_000, 3)])
    steps = rc.create_topics_steps(cluster.image, request, ids().__next__, NODE)
    yields, created = drain_counting(steps)
    assert yields == 5_000 // rc.CREATE_SLICE_PARTITIONS
    assert created == rc.create_topics(cluster.image, request, ids().__next__, NODE)
    image = apply(cluster.image, created.records)
    grow = am.create_partitions_request([am.create_partitions_topic("big", 10_000)])
    yields, grown = drain_counting(create_partitions_steps(image, grow))
    assert yields == 5_000 // rc.CREATE_SLICE_PARTITIONS
    for result, first in ((created, 0), (grown, 5_000)):
        partitions = [r for r in result.records if isinstance(r, PartitionRecord)]
        assert [p.partition_id for p in partitions] == list(range(first, first + 5_000))
        assert len({id(p.replicas) for p in partitions}) == 3
        assert all(p.isr is p.replicas and p.leader == p.replicas[0] for p in partitions)
        assert {p.leader for p in partitions} == {1, 2, 3}


async def test_the_active_controller_runs_a_create_as_steps() -> None:
    """The writes of CreateTopics and CreatePartitions reach the single writer as Steps, which
    it drives giving the loop back between slices (QuorumController._compute)."""
    from collections.abc import Generator

    from controller.runtime.kafka_admin_apis import ControllerKafkaAdminApis
    from kafkawire import admin_messages as am
    from kafkawire.api_keys import ApiKey
    from tests.unit.test_replication_control import NODE, apply

    cluster = three_unfenced()
    controller = QuorumController.__new__(QuorumController)
    controller.config = NODE
    request = am.create_topics_request([am.creatable_topic("big", 600, 3)])
    created = controller._admin_write(ApiKey.CREATE_TOPICS, request)(cluster.image)
    assert isinstance(created, Generator)
    image = apply(cluster.image, drain(created).records)
    computes: list[object] = []

    async def write(compute, what, user_op=False):  # type: ignore[no-untyped-def]
        outcome = compute(image)
        computes.append(outcome)
        return drain(outcome).response

    apis = ControllerKafkaAdminApis(cast(Any, SimpleNamespace(config=NODE, write=write)))
    grow = am.create_partitions_request([am.create_partitions_topic("big", 1_200)])
    response = await apis.create_partitions(grow, 3, cast(Any, None))
    assert [t.error_code for t in response.results] == [0]
    assert len(computes) == 1 and isinstance(computes[0], Generator)


def test_a_fencing_decides_without_the_builder_what_the_builder_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fencing a broker of 100,000 partitions (issue 35): a partition whose ISR keeps a member
    that may lead gets its change without a PartitionChangeBuilder, and every change is the
    builder's: followers and leaders, ELR on and off, below and at min ISR, with ELR state
    left over, RECOVERING, leaderless, a leader fenced or shutting down, one replica alone."""
    import random

    from controller.core import partition_change as pc
    from controller.core.election_policy import ElectionPolicy
    from metadata.metadata_image import MetadataImage
    from metadata.records import (
        BROKER_FLAG_TRUE,
        LAST_KNOWN_LEADER_NONE,
        RegisterBrokerRecord,
        UnfenceBrokerRecord,
    )
    from tests.unit.test_replication_control import apply

    rng = random.Random(35)
    records: list[Any] = []
    for b in range(1, 6):
        records.append(RegisterBrokerRecord(b, uuid.UUID(int=b), b - 1))
        if b != 5:  # broker 5 stays fenced
            records.append(UnfenceBrokerRecord(b, b - 1))
    # Broker 4 is shutting down.
    records.append(BrokerRegistrationChangeRecord(4, 3, in_controlled_shutdown=BROKER_FLAG_TRUE))
    for t, min_isr in enumerate((1, 2, 3)):
        topic_id = uuid.UUID(int=300 + t)
        records.append(TopicRecord(f"t{t}", topic_id))
        records.append(ConfigRecord(CONFIG_RESOURCE_TOPIC, f"t{t}", "min.insync.replicas",
                                    str(min_isr)))
        for p in range(400):
            replicas = tuple(rng.sample(range(1, 6), rng.choice((1, 2, 3, 3, 3, 4))))
            isr = tuple(r for r in replicas if rng.random() < 0.8) or replicas[:1]
            elr = tuple(r for r in replicas if r not in isr and rng.random() < 0.15)
            lke = tuple(r for r in replicas if r not in isr + elr and rng.random() < 0.1)
            leader = rng.choice((*isr, *isr, *isr, -1))
            records.append(PartitionRecord(
                p, topic_id, replicas, isr, leader=leader, leader_epoch=3, partition_epoch=5,
                leader_recovery_state=1 if rng.random() < 0.05 else 0,
                eligible_leader_replicas=elr, last_known_elr=lke,
                last_known_leader=rng.choice((LAST_KNOWN_LEADER_NONE,) * 9 + replicas[:1]),
            ))
    image = apply(MetadataImage(), records)
    fast_calls: list[bool] = []
    real = pc.fenced_replica_change

    def counting(*args: Any) -> Any:
        change = real(*args)
        fast_calls.append(change is not None)
        return change

    for elr in (True, False):
        policy = ElectionPolicy(elr_enabled=elr)
        for broker in (1, 2, 3):
            monkeypatch.setattr(rc, "fenced_replica_change", counting)
            fast = rc.broker_fenced_changes(image, broker, policy)
            monkeypatch.setattr(rc, "fenced_replica_change", lambda *args: None)
            slow = rc.broker_fenced_changes(image, broker, policy)
            assert fast == slow
    decided_fast = fast_calls.count(True)
    left_to_the_builder = fast_calls.count(False)
    # Both paths were exercised: the fast decision for most, the builder for the rest.
    assert decided_fast > 900  # of 3,186 asked
    assert left_to_the_builder > 0


def test_the_next_write_is_decided_on_the_last_one_appended_and_answered_after_it() -> None:
    """Kafka's QuorumController frees its event queue once a write's records are appended and
    replayed into its in-memory state (issue 35: a restarted broker's registration waited for
    the commit and apply of the 100,000-record fencing before it): the next write is decided
    on the image with the fencing while the fencing commits, and is answered after it."""
    from controller.core.controller_result import ControllerResult

    cluster = big_cluster(3)
    fence = BrokerRegistrationChangeRecord(3, cluster.image.brokers[3].epoch, fenced=1)
    end = [10]
    prepared: list[Any] = []

    async def append(encoded, **kwargs):  # type: ignore[no-untyped-def]
        end[0] += len(encoded)
        return end[0] - 1

    state = SimpleNamespace(
        image=cluster.image, committed_offset=10, prepared=prepared.append,
        forget_written=lambda: None,
    )
    seen: list[bool] = []

    def registration(image: Any) -> ControllerResult[str]:
        seen.append(image.brokers[3].fenced)
        return ControllerResult((), "registered")

    async def scenario() -> tuple[Any, Any]:
        released = asyncio.Event()

        async def wait_for_commit(offset, timeout_ms):  # type: ignore[no-untyped-def]
            await released.wait()
            state.committed_offset = end[0]  # committed and applied
            controller.on_metadata_update(None, None, SimpleNamespace(end_offset=end[0]))  # type: ignore[arg-type]
            return offset

        controller = fake_writer(state, append, wait_for_commit, lambda: end[0])
        fencing = asyncio.ensure_future(
            controller.write(lambda image: ControllerResult((fence,), "fenced"), "session expired")
        )
        await asyncio.sleep(0.02)
        registered = asyncio.ensure_future(controller.write(registration, "registration"))
        await asyncio.sleep(0.02)
        assert seen == [True]  # decided on the fencing's image, before its commit
        assert not fencing.done() and not registered.done()  # answered after it
        released.set()
        return await fencing, await registered

    assert asyncio.run(scenario()) == ("fenced", "registered")
    [write] = prepared
    assert (write.first_offset, write.next_offset, write.base) == (10, 11, cluster.image)
    assert write.image.brokers[3].fenced and write.image.offset == 10


def test_a_write_replayed_as_written_is_the_image_the_loader_replays() -> None:
    """The active controller replays a write's records as it appends them (runs of partition
    changes together, MetadataDelta.replay_partition_changes): the image and what the delta
    names are the loader's replay of the same records, and a change of an unknown partition
    is refused as replay refuses it."""
    from controller.runtime import quorum_controller as qc
    from metadata.loader import MetadataLoader
    from metadata.metadata_image import MetadataDelta, MetadataReplayError
    from metadata.records import BeginTransactionRecord, EndTransactionRecord
    from tests.metadata_batches import batches

    cluster = big_cluster(1200)
    other = uuid.UUID(int=201)
    image = apply(cluster.image, [TopicRecord("other", other)] + [
        PartitionRecord(p, other, (1, 2, 3), (1, 2, 3), leader=1) for p in range(3)
    ])
    changes = written_records(rc.broker_fenced_changes(image, 3))
    records = (
        BeginTransactionRecord(name="w"), *changes,
        BrokerRegistrationChangeRecord(3, image.brokers[3].epoch, fenced=1),
        EndTransactionRecord(),
    )
    first = image.offset + 1
    delta = MetadataDelta(image)
    drain(qc._replay_steps(delta, records, first))
    mine = delta.image()
    loader = MetadataLoader()
    loader._latest = loader.image = image
    loader.handle_commit(batches(first, 1, records))
    assert mine == loader.image and mine.offset == loader.image.offset
    assert len(delta.partitions) == len(changes) == 1203 and delta.brokers == {3}
    assert delta.records == len(records) - 2
    with pytest.raises(MetadataReplayError):
        MetadataDelta(image).replay_partition_changes([PartitionChangeRecord(5, other)], 0)


def test_the_idle_noop_record_is_written_through_the_controllers_writer() -> None:
    """Kafka writes its idle NoOpRecord as a controller write event: through the single
    writer, which knows where each write's records go and decides it on every record appended
    before it (issue 35: a NoOp appended beside the writer moved a fencing's records one
    offset past where they were replayed, and the active controller replayed them again)."""
    from controller.runtime.controller_node import ControllerNode
    from kafkawire.config import NodeConfig
    from metadata.records import NoOpRecord

    written: list[tuple[object, ...]] = []
    appended: list[object] = []

    async def write(compute, what):  # type: ignore[no-untyped-def]
        written.append(compute(None).records)

    async def append(records):  # type: ignore[no-untyped-def]
        appended.append(records)

    async def scenario() -> None:
        node = ControllerNode.__new__(ControllerNode)
        node.config = NodeConfig({"node.id": "1", "metadata.max.idle.interval.ms": "5"})
        node.quorum_controller = SimpleNamespace(write=write)  # type: ignore[assignment]
        node.raft = SimpleNamespace(  # type: ignore[assignment]
            replica=SimpleNamespace(role="Leader"), driver=SimpleNamespace(append=append)
        )
        loop = asyncio.ensure_future(node._noop_loop())
        await asyncio.sleep(0.05)
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)

    asyncio.run(scenario())
    assert written and all(records == (NoOpRecord(),) for records in written)
    assert appended == []


def test_a_write_whose_asker_left_stays_what_the_next_write_is_decided_on() -> None:
    """A write's records are appended once its asker waits for their commit: the asker
    leaving (its connection closed, the handler cancelled) changes nothing for them, and the
    next write is still decided on them without a re-sync."""
    from controller.core.controller_result import ControllerResult

    cluster = big_cluster(3)
    fence = BrokerRegistrationChangeRecord(3, cluster.image.brokers[3].epoch, fenced=1)
    end = [10]
    forgotten: list[bool] = []

    async def append(encoded, **kwargs):  # type: ignore[no-untyped-def]
        end[0] += len(encoded)
        return end[0] - 1

    state = SimpleNamespace(
        image=cluster.image, committed_offset=10, prepared=lambda write: None,
        forget_written=lambda: forgotten.append(True),
    )

    async def scenario() -> list[bool]:
        never = asyncio.Event()

        async def wait_for_commit(offset, timeout_ms):  # type: ignore[no-untyped-def]
            await never.wait()

        controller = fake_writer(state, append, wait_for_commit, lambda: end[0])
        fencing = asyncio.ensure_future(
            controller.write(lambda image: ControllerResult((fence,), None), "session expired")
        )
        await asyncio.sleep(0.02)
        fencing.cancel()
        await asyncio.gather(fencing, return_exceptions=True)
        seen: list[bool] = []

        def registration(image: Any) -> ControllerResult[None]:
            seen.append(image.brokers[3].fenced)
            return ControllerResult((), None)

        await controller._stage(registration, "registration")
        return seen

    assert asyncio.run(scenario()) == [True]
    assert forgotten == []
