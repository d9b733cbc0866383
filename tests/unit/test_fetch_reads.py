"""broker.runtime.fetch_reads: a follower's KIP-227 session on the leader reads only what may
have changed for it (issue 35). A caught-up follower in the ISR skips a partition until the
partition changes (an append wakes its waiting fetch, a new HWM or an ISR change is read at the
next read) and the fetches it skipped still count for the ISR as Kafka's would: a live follower
is not shrunk after an append to an idle partition, a dead one is shrunk from its last fetch."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from broker.core import messages as bm
from broker.core.fetch_session import FetchContext, FetchSessionCache, answer_changed
from broker.runtime import fetch_reads, replica_manager
from broker.runtime.fetch_reads import FetchReads, Read
from broker.runtime.hosted_partition import HostedPartition
from broker.runtime.kafka_replication import replica_fetch_to_kio
from broker.runtime.replica_manager import ReplicaManager, ReplicaSettings
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.api_keys import ApiKey
from kafkawire.errors import Errors
from kafkawire.messages import response_schema
from metadata.metadata_image import (
    MIN_INSYNC_REPLICAS,
    BrokerRegistration,
    MetadataImage,
    TopicImage,
)
from metadata.partition_registration import PartitionRegistration
from metadata.records import CONFIG_RESOURCE_TOPIC
from storage.core.record_batch import encode_batch
from tests.loop_turns import LoopTurns, turns_between

TOPIC_ID = uuid.UUID(int=7)
PARTITIONS = 20
LAG_MS = 30_000


def _image(
    isr: tuple[int, ...] = (1, 2, 3), isr_of_0: tuple[int, ...] | None = None,
    partition_epoch: int = 1,
) -> MetadataImage:
    brokers = {
        b: BrokerRegistration(b, epoch=10 * b, incarnation_id=uuid.UUID(int=b), fenced=False,
                              in_controlled_shutdown=False)
        for b in (1, 2, 3)
    }
    partitions = {
        p: PartitionRegistration(
            replicas=(1, 2, 3), isr=isr_of_0 if p == 0 and isr_of_0 else isr, leader=1,
            partition_epoch=partition_epoch + 1 if p == 0 and isr_of_0 else partition_epoch,
        )
        for p in range(PARTITIONS)
    }
    topic = TopicImage("t", TOPIC_ID, MappingProxyType(partitions))
    return MetadataImage(
        brokers=MappingProxyType(brokers),
        topics=MappingProxyType({TOPIC_ID: topic}),
        topics_by_name=MappingProxyType({"t": topic}),
        configs=MappingProxyType(
            {(CONFIG_RESOURCE_TOPIC, "t"): MappingProxyType({MIN_INSYNC_REPLICAS: "2"})}
        ),
    )


class _Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class _Leader:
    """Broker 1 leading t-0..19 (replicas 1, 2, 3), its session cache, and the reads."""

    def __init__(self, tmp_path: Path, clock: _Clock) -> None:
        self.proposals: list[lifecycle.AlterPartitionRequest] = []
        self.rm = ReplicaManager(
            ReplicaSettings(broker_id=1, log_dirs=[tmp_path], replica_lag_time_max_ms=LAG_MS),
            None, self._controller, lambda: 10,
        )
        self.rm.apply_image(_image())
        self.cache = FetchSessionCache()
        self.reads = FetchReads(self.rm, lambda topic: "t" if topic.topic_id == TOPIC_ID else None)
        self.clock = clock
        self._ids = itertools.count(41)
        self.read_count = 0
        real = self.rm.fetch_now

        def counted(
            request: bm.FetchRequest, *, record_progress: bool = True
        ) -> tuple[HostedPartition | None, bm.FetchResponse]:
            self.read_count += 1
            return real(request, record_progress=record_progress)

        self.rm.fetch_now = counted  # type: ignore[method-assign]

    async def _controller(
        self, request: lifecycle.AlterPartitionRequest
    ) -> lifecycle.AlterPartitionResponse:
        self.proposals.append(request)
        return lifecycle.alter_partition_response(Errors.NOT_CONTROLLER)

    async def read(
        self, replica: int, session: tuple[int, int], positions: dict[int, int],
        max_wait_ms: int = 0,
    ) -> tuple[FetchContext, Read]:
        """One Fetch of follower `replica` (its session id and epoch) naming `positions`: its
        session context and what the leader read."""
        body = replica_fetch_to_kio(
            replica, 10 * replica, None, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
            partitions=[
                (TOPIC_ID, bm.FetchRequest("t", p, offset, current_leader_epoch=0))
                for p, offset in positions.items()
            ],
            session_id=session[0], session_epoch=session[1],
        )
        context = self.cache.new_context(
            session[0], session[1],
            [(topic, partition) for topic in body.topics for partition in topic.partitions],
            [], privileged=True, now_ms=self.clock.ms, new_session_id=lambda: next(self._ids),
        )
        assert context.error is Errors.NONE
        read = await self.reads.read(
            context, replica_id=replica, replica_epoch=10 * replica, max_wait_ms=max_wait_ms,
            min_bytes=1, max_bytes=1 << 20, min_one_message=True,
        )
        return context, read

    async def fetch(
        self, replica: int, session: tuple[int, int], positions: dict[int, int],
        max_wait_ms: int = 0,
    ) -> tuple[int, dict[int, bm.FetchResponse]]:
        """read(), then the session id answered and the partitions the answer carries."""
        context, read = await self.read(replica, session, positions, max_wait_ms)
        answered = {
            int(cached.request.partition): result
            for cached, _, result in read
            if answer_changed(
                cached, result.error_code, bool(result.records), result.high_watermark,
                result.log_start_offset,
            ) or not context.incremental
        }
        return context.session_id, answered

    async def produce(self, partition: int, value: bytes) -> None:
        response = await self.rm.produce(
            bm.ProduceRequest("t", partition, encode_batch(0, 0, 0, [value]), acks=1)
        )
        assert response.error_code == 0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Clock]:
    clock = _Clock()
    monkeypatch.setattr(replica_manager, "now_ms", clock)
    monkeypatch.setattr(fetch_reads, "now_ms", clock)
    yield clock


async def _idle_session(leader: _Leader, replica: int = 2) -> int:
    """Follower `replica` opens its session at offset 0 everywhere; the next incremental
    read finds every partition idle."""
    session, answered = await leader.fetch(replica, (0, 0), dict.fromkeys(range(PARTITIONS), 0))
    assert len(answered) == PARTITIONS
    _, answered = await leader.fetch(replica, (session, 1), {})
    assert answered == {}
    return session


async def test_a_follower_session_reads_only_partitions_that_changed(
    tmp_path: Path, clock: _Clock
) -> None:
    leader = _Leader(tmp_path, clock)
    session = await _idle_session(leader)
    leader.read_count = 0
    _, answered = await leader.fetch(2, (session, 2), {})
    assert answered == {} and leader.read_count == 0  # 20 idle partitions: nothing read
    await leader.produce(7, b"a")
    _, answered = await leader.fetch(2, (session, 3), {})
    assert list(answered) == [7] and answered[7].records
    assert leader.read_count == 1


async def test_a_waiting_follower_fetch_wakes_on_an_append_to_a_skipped_partition(
    tmp_path: Path, clock: _Clock
) -> None:
    leader = _Leader(tmp_path, clock)
    session = await _idle_session(leader)
    started = time.monotonic()
    waiting = asyncio.ensure_future(leader.fetch(2, (session, 2), {}, max_wait_ms=5000))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await leader.produce(3, b"a")
    _, answered = await asyncio.wait_for(waiting, 2)
    assert list(answered) == [3] and answered[3].records
    assert time.monotonic() - started < 2


async def test_a_new_high_watermark_of_a_skipped_partition_reaches_the_follower(
    tmp_path: Path, clock: _Clock
) -> None:
    leader = _Leader(tmp_path, clock)
    await leader.produce(0, b"a")
    session2, answered = await leader.fetch(2, (0, 0), dict.fromkeys(range(PARTITIONS), 0))
    assert answered[0].records
    session3, _ = await leader.fetch(3, (0, 0), dict.fromkeys(range(PARTITIONS), 0))
    # Follower 2 at the log end of t-0 (1); the HWM waits for follower 3, in the ISR too.
    _, answered = await leader.fetch(2, (session2, 1), {0: 1})
    assert answered == {}  # nothing new for 2 (HWM 0 as last answered): t-0 skipped from now
    leader.read_count = 0
    _, answered = await leader.fetch(2, (session2, 2), {})
    assert answered == {} and leader.read_count == 0
    _, answered = await leader.fetch(3, (session3, 1), {0: 1})
    assert answered[0].high_watermark == 1
    _, answered = await leader.fetch(2, (session2, 3), {})
    assert list(answered) == [0] and answered[0].high_watermark == 1 and not answered[0].records


async def test_a_live_follower_skipped_while_idle_stays_in_the_isr_after_an_append(
    tmp_path: Path, clock: _Clock
) -> None:
    # Follower 2 fetches every 10 s with nothing new for 40 s (its reads skipped); follower 3
    # never fetches. An append, then the ISR pass: Kafka shrinks 3 (not caught up for 30 s)
    # and keeps 2, whose last fetch (at the old log end) was 0.1 s ago.
    leader = _Leader(tmp_path, clock)
    session = await _idle_session(leader)
    for epoch in (2, 3, 4, 5):
        clock.ms += 10_000
        await leader.fetch(2, (session, epoch), {})
    clock.ms += 100
    await leader.produce(0, b"a")
    clock.ms += 100
    leader.rm.tick()
    proposal = leader.rm.hosted("t", 0).state.inflight
    assert proposal is not None and proposal.isr == (1, 2)


async def test_a_follower_that_stopped_fetching_is_shrunk_from_its_last_fetch(
    tmp_path: Path, clock: _Clock
) -> None:
    # Followers 2 and 3 idle; 2 stops fetching (its last fetch skipped), 3 goes on and
    # follows an append. 2 leaves the ISR replica.lag.time.max.ms after its last fetch.
    leader = _Leader(tmp_path, clock)
    session2 = await _idle_session(leader, 2)
    session3 = await _idle_session(leader, 3)
    clock.ms += 10_000
    await leader.fetch(2, (session2, 2), {})
    await leader.fetch(3, (session3, 2), {})
    last_fetch_of_2 = clock.ms
    clock.ms += 10_000
    await leader.produce(0, b"a")
    await leader.fetch(3, (session3, 3), {})
    await leader.fetch(3, (session3, 4), {0: 1})
    hosted = leader.rm.hosted("t", 0)
    clock.ms = last_fetch_of_2 + LAG_MS - 1
    leader.rm.tick()
    assert hosted.state.inflight is None
    clock.ms = last_fetch_of_2 + LAG_MS + 1
    leader.rm.tick()
    proposal = hosted.state.inflight
    assert proposal is not None and proposal.isr == (1, 3)


async def test_an_isr_change_in_metadata_makes_a_skipped_partition_read_again(
    tmp_path: Path, clock: _Clock
) -> None:
    # The controller takes follower 2 out of t-0's ISR (a registration change journals nothing
    # on the leader): 2's next fetch is read and the leader proposes it back.
    leader = _Leader(tmp_path, clock)
    session = await _idle_session(leader)
    leader.rm.apply_image(_image(isr_of_0=(1, 3)))
    leader.read_count = 0
    await leader.fetch(2, (session, 2), {})
    assert leader.read_count == 1
    proposal = leader.rm.hosted("t", 0).state.inflight
    assert proposal is not None and proposal.isr == (1, 3, 2)


async def test_the_answer_to_a_fetch_of_many_partitions_is_built_in_slices(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: the first answer to a follower after a create names its 5,000 new partitions;
    building it gives the loop back every READ_BUDGET_S (0 here: after every partition), as
    the reads do, and the answer still names every partition."""
    leader = _Leader(tmp_path, clock)
    context, read = await leader.read(2, (0, 0), dict.fromkeys(range(PARTITIONS), 0))
    seen: list[str] = []
    real = fetch_reads.fetch_partition_to_kio

    def built(*args: Any) -> Any:
        seen.append("partition")
        return real(*args)

    monkeypatch.setattr(fetch_reads, "fetch_partition_to_kio", built)
    monkeypatch.setattr(fetch_reads, "READ_BUDGET_S", 0.0)

    async with LoopTurns(seen):
        answer = await fetch_reads.fetch_response(
            response_schema(int(ApiKey.FETCH), 17), read, context
        )
    assert sorted(int(p.partition_index) for t in answer.responses for p in t.partitions) == (
        list(range(PARTITIONS))
    )
    assert turns_between(seen, "partition", PARTITIONS), seen
    await leader.rm.close()


class _HeldController:
    """An active controller that holds every AlterPartition until `answer` releases it: with
    each partition's proposed ISR (partition epoch + 1), or `error` for every partition."""

    def __init__(self, on_send: Any = None) -> None:
        self.held: list[tuple[lifecycle.AlterPartitionRequest, asyncio.Future[None]]] = []
        self._on_send = on_send

    async def __call__(
        self, request: lifecycle.AlterPartitionRequest
    ) -> lifecycle.AlterPartitionResponse:
        if self._on_send is not None:
            self._on_send()
        released: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.held.append((request, released))
        error = await released
        return lifecycle.alter_partition_response(Errors.NONE, [
            (topic.topic_id, [
                lifecycle.alter_partition_result(
                    p.partition_index, error or Errors.NONE, leader_id=1,
                    leader_epoch=p.leader_epoch,
                    isr=tuple(b.broker_id for b in p.new_isr_with_epochs),
                    leader_recovery_state=0, partition_epoch=p.partition_epoch + 1,
                )
                for p in topic.partitions
            ])
            for topic in request.topics
        ])

    async def answer(self, error: Errors | None = None) -> None:
        for _, released in self.held:
            released.set_result(error)  # type: ignore[arg-type]
        self.held = []
        for _ in range(5):
            await asyncio.sleep(0)


async def _returning_follower(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch,
    journal: Any = None, on_send: Any = None,
) -> tuple[_Leader, _HeldController, int]:
    """Broker 1 leads t-0..19 with ISR (1, 2); follower 3 comes back: its full Fetch (every
    partition at the log end, 0) proposes 20 expansions, held at the controller (in one
    request: the read does not yield, whatever the machine's load), and its first
    incremental Fetch reads them again."""
    monkeypatch.setattr(fetch_reads, "READ_BUDGET_S", 60.0)
    controller = _HeldController(on_send)
    leader = _Leader(tmp_path, clock)
    leader.rm.journal = journal
    leader.rm.alter_partitions._send = controller
    leader.rm.apply_image(_image(isr=(1, 2)))
    session, answered = await leader.fetch(3, (0, 0), dict.fromkeys(range(PARTITIONS), 0))
    assert len(answered) == PARTITIONS
    for _ in range(3):
        await asyncio.sleep(0)
    proposed = sum(len(t.partitions) for request, _ in controller.held for t in request.topics)
    assert proposed == PARTITIONS
    await leader.fetch(3, (session, 1), {})
    return leader, controller, session


async def test_a_returning_follower_is_not_read_again_while_its_expansion_is_in_flight(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a follower back to 66,000 partitions had each read at every Fetch until its
    expansion committed (each read about 0.1 ms of the leader's loop). Caught up, with its
    expansion in flight, the partition is idle for it: the session skips it."""
    leader, controller, session = await _returning_follower(tmp_path, clock, monkeypatch)
    leader.read_count = 0
    _, answered = await leader.fetch(3, (session, 2), {})
    assert answered == {} and leader.read_count == 0
    await controller.answer()
    assert leader.rm.hosted("t", 5).state.committed_isr == (1, 2, 3)
    _, answered = await leader.fetch(3, (session, 3), {})
    assert answered == {} and leader.read_count == 0
    # The registration the leader already learned from its answer reads nothing again
    # either (it used to read the whole session again as the commits were applied).
    leader.rm.apply_image(_image(isr=(1, 2, 3), partition_epoch=2))
    _, answered = await leader.fetch(3, (session, 4), {})
    assert answered == {} and leader.read_count == 0
    await leader.rm.close()


async def test_a_returning_followers_full_fetch_reads_each_partition_once(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a follower back to 66,000 partitions had each read twice in its first Fetch
    (the read that proposes its expansion, and again as the fetch waited out max_wait_ms with
    nothing to send). A partition its first read finds idle (the expansion in flight) is
    answered with that read; the answer still carries every partition, and a partition that
    changes while the fetch waits is read again."""
    monkeypatch.setattr(fetch_reads, "READ_BUDGET_S", 60.0)
    controller = _HeldController(None)
    leader = _Leader(tmp_path, clock)
    leader.rm.alter_partitions._send = controller
    leader.rm.apply_image(_image(isr=(1, 2)))

    async def touch_partition_3() -> None:
        await asyncio.sleep(0.02)
        leader.rm.hosted("t", 3).notify()

    toucher = asyncio.ensure_future(touch_partition_3())
    session, answered = await leader.fetch(
        3, (0, 0), dict.fromkeys(range(PARTITIONS), 0), max_wait_ms=100
    )
    await toucher
    assert sorted(answered) == list(range(PARTITIONS))
    assert all(r.error_code == 0 and r.high_watermark == 0 for r in answered.values())
    assert leader.read_count == PARTITIONS + 1  # partition 3 read again once it changed
    for _ in range(3):
        await asyncio.sleep(0)
    proposed = sum(len(t.partitions) for request, _ in controller.held for t in request.topics)
    assert proposed == PARTITIONS
    leader.read_count = 0
    _, answered = await leader.fetch(3, (session, 1), {})
    assert answered == {} and leader.read_count == 0
    await controller.answer()
    await leader.rm.close()


async def test_a_follower_read_looks_its_partition_up_once_and_builds_no_frozen_message(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a returning follower's Fetch reads each of 66,000 partitions on its leader,
    which proposes its expansion. The partition read is the one the session's idle check
    reads (no second lookup by name), and the broker's FetchRequest and FetchResponse of each
    are built through their slots, not their frozen __init__ (kafkawire.slots); the answers
    are what they were."""
    controller = _HeldController(None)
    leader = _Leader(tmp_path, clock)
    leader.rm.alter_partitions._send = controller
    leader.rm.apply_image(_image(isr=(1, 2)))
    lookups = {"by_name": 0}
    by_name = leader.rm.hosted_by_name

    def counted(topic: str, partition: int) -> Any:
        lookups["by_name"] += 1
        return by_name(topic, partition)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("built through the frozen __init__")

    await leader.produce(5, b"x")  # partition 5 has a record for the follower
    body = replica_fetch_to_kio(
        3, 30, None, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        partitions=[
            (TOPIC_ID, bm.FetchRequest("t", p, 0, current_leader_epoch=0))
            for p in range(PARTITIONS)
        ],
        session_id=0, session_epoch=0,
    )
    context = leader.cache.new_context(
        0, 0, [(topic, partition) for topic in body.topics for partition in topic.partitions],
        [], privileged=True, now_ms=clock.ms, new_session_id=lambda: 41,
    )
    monkeypatch.setattr(leader.rm, "hosted_by_name", counted)
    monkeypatch.setattr(bm.FetchRequest, "__init__", refuse)
    monkeypatch.setattr(bm.FetchResponse, "__init__", refuse)
    read = await leader.reads.read(
        context, replica_id=3, replica_epoch=30, max_wait_ms=0, min_bytes=1,
        max_bytes=1 << 20, min_one_message=True,
    )
    monkeypatch.undo()
    assert lookups["by_name"] == 0
    answered = {int(cached.request.partition): result for cached, _, result in read}
    assert sorted(answered) == list(range(PARTITIONS))
    assert [p for p, r in answered.items() if r.records] == [5]
    assert all(
        (r.error_code, r.high_watermark, r.log_start_offset, r.leader_id, r.leader_epoch)
        == (0, 0, 0, 1, 0) and r.log_end_offset == (1 if p == 5 else 0)
        for p, r in answered.items()
    )
    for _ in range(3):
        await asyncio.sleep(0)
    # Every follower is at the HWM (0, Kafka's isFollowerInSync), partition 5's too.
    proposed = sum(len(t.partitions) for request, _ in controller.held for t in request.topics)
    assert proposed == PARTITIONS
    await controller.answer()
    await leader.rm.close()


async def test_a_leader_applies_its_own_committed_expansion_without_its_core(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: the PartitionChangeRecords of a leader's expansions, which it learned from the
    AlterPartition answer, were each handed to its core again (66,000 on one leader when a
    broker came back). A registration the state already holds only replaces the hosted
    registration; one that moves anything else (here the topic's min ISR in the same change)
    still goes to the core."""
    from broker.core.partition_state import PartitionState
    from metadata.metadata_image import MetadataDelta
    from metadata.records import ConfigRecord, PartitionChangeRecord

    leader, controller, _ = await _returning_follower(tmp_path, clock, monkeypatch)
    await controller.answer()
    applied: list[int] = []
    real = PartitionState.apply_registration

    def counted(self: PartitionState, *args: Any, **kwargs: Any) -> Any:
        applied.append(self.partition)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(PartitionState, "apply_registration", counted)

    def commit(records: list[Any]) -> None:
        delta = MetadataDelta(leader.rm.image)
        for offset, record in enumerate(records, 100):
            delta.replay(record, offset)
        for _ in leader.rm.apply_delta_steps(delta, delta.image(), []):
            pass

    commit([PartitionChangeRecord(p, TOPIC_ID, isr=(1, 2, 3)) for p in range(10)])
    assert applied == []
    for p in range(10):
        hosted = leader.rm.hosted("t", p)
        assert hosted.registration == leader.rm.image.partition(TOPIC_ID, p)
        assert (hosted.state.committed_isr, hosted.state.partition_epoch) == ((1, 2, 3), 2)
    commit([
        ConfigRecord(CONFIG_RESOURCE_TOPIC, "t", MIN_INSYNC_REPLICAS, "3"),
        *(PartitionChangeRecord(p, TOPIC_ID, isr=(1, 2, 3)) for p in range(10, 20)),
    ])
    assert applied == list(range(10, 20))
    assert leader.rm.hosted("t", 15).state.effective_min_isr == 3
    await leader.rm.close()


async def test_a_refused_expansion_reads_the_follower_again_and_proposes_it_anew(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The expansion skipped as in flight is refused (NOT_LEADER-like errors keep it pending,
    INELIGIBLE_REPLICA ends it, rule 18): the follower's next Fetch reads every partition,
    and an expansion goes again once the broker's registration moves."""
    leader, controller, session = await _returning_follower(tmp_path, clock, monkeypatch)
    await controller.answer(Errors.INELIGIBLE_REPLICA)
    assert leader.rm.hosted("t", 5).state.inflight is None
    leader.read_count = 0
    await leader.fetch(3, (session, 2), {})
    assert leader.read_count == PARTITIONS
    assert controller.held == []  # rule 18: not the same proposal again
    await leader.rm.close()


def test_an_isr_proposal_and_its_outcome_wake_no_fetch() -> None:
    """No Fetch answer reads the ISR (a moved HWM comes as its own HwmAdvanced): a
    follower's parked Fetch of 66,000 partitions was woken, and read every partition again,
    at each of 66,000 outcomes (issue 35)."""
    from broker.core.journal_events import IsrProposed, IsrResult
    from broker.core.partition_state import PartitionReady

    proposed = IsrProposed(
        1, "t", 0, proposal_id=1, kind="expand", leader_epoch=0, partition_epoch=1,
        committed_isr=(1, 2), proposed_isr=(1, 2, 3), broker_epochs=(10, 20, 30),
        leader_recovery_state=0, ts=0,
    )
    result = IsrResult(
        1, "t", 0, leader_epoch=0, partition_epoch=2, isr=(1, 2, 3), leader_recovery_state=0,
        proposal_id=1, error="NONE", outcome="committed", ts=0,
    )
    ready = PartitionReady(0, events=(proposed, result))
    assert not ready.news_for_followers and not ready.news_for_fetches


async def test_proposals_in_flight_wait_in_no_task_of_their_own(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each outcome comes back in a callback of the AlterPartition answer: a follower back to
    66,000 partitions made a task per expansion (issue 35). Neither a refusal check (rule 18:
    nothing was refused) is computed for them."""
    from broker.core.partition_state import PartitionState

    signatures: list[int] = []
    real = PartitionState._signature

    def counted(self: PartitionState, *args: Any) -> tuple[object, ...]:
        signatures.append(1)
        return real(self, *args)

    monkeypatch.setattr(PartitionState, "_signature", counted)
    leader, controller, _ = await _returning_follower(tmp_path, clock, monkeypatch)
    # This test's and the manager's one request in flight: none per proposal.
    assert len(asyncio.all_tasks()) == 2
    assert signatures == []
    await controller.answer()
    assert leader.rm.hosted("t", 5).state.committed_isr == (1, 2, 3)
    await leader.rm.close()


async def test_an_answers_outcomes_are_handled_together_and_journaled_in_one_write(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch, journal_writes: list[int]
) -> None:
    """Issue 35: a returning broker's 66,000 expansions on one leader came back as 66,000
    callbacks of their futures, each on a loop turn of its own with its own journal write
    (IsrResult). The outcomes of one answer are handled as it is, together, their events in
    one write; no proposal waits in a future."""
    from broker.runtime.event_journal import EventJournal, read_journal

    journal = EventJournal(tmp_path / "broker.journal")
    leader, controller, _ = await _returning_follower(
        tmp_path, clock, monkeypatch, journal=journal
    )
    futures: list[object] = []
    real_create = asyncio.get_running_loop().create_future

    def counted_future() -> asyncio.Future[Any]:
        futures.append(1)
        return real_create()

    monkeypatch.setattr(asyncio.get_running_loop(), "create_future", counted_future)
    journal_writes.clear()
    for _, released in controller.held:
        released.set_result(None)  # type: ignore[arg-type]
    controller.held = []
    for _ in range(3):
        await asyncio.sleep(0)
    assert all(leader.rm.hosted("t", p).state.committed_isr == (1, 2, 3)
               for p in range(PARTITIONS))
    results = [e for e in read_journal(journal.path) if type(e).__name__ == "IsrResult"]
    assert sorted(e.partition for e in results) == list(range(PARTITIONS))
    assert len(journal_writes) == 1, journal_writes
    assert futures == []  # the proposals waited in none (the answer's own aside)
    await leader.rm.close()
    journal.close()


async def test_a_read_journals_each_slice_of_its_partitions_in_one_write(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch, journal_writes: list[int]
) -> None:
    """Issue 35: a follower back to 66,000 partitions made its leader journal each expansion
    (IsrProposed) in a write of its own. A slice of the read (here all 20 partitions: the
    read does not yield) writes its events together, all of them, before the loop runs
    anything else: the AlterPartition they propose goes on a later turn."""
    from broker.runtime.event_journal import EventJournal, read_journal

    writes = journal_writes
    journal = EventJournal(tmp_path / "broker.journal")
    sent: list[int] = []
    leader, controller, _ = await _returning_follower(
        tmp_path, clock, monkeypatch,
        journal=journal, on_send=lambda: sent.append(len(writes)),
    )
    proposed = [e for e in read_journal(journal.path) if type(e).__name__ == "IsrProposed"]
    assert sorted(e.partition for e in proposed) == list(range(PARTITIONS))
    assert writes and sent and sent[0] >= 1  # written before the AlterPartition went
    # One write for the full Fetch's slice (before: one per partition).
    assert len(writes) <= 3, writes
    await controller.answer()
    await leader.rm.close()
    journal.close()
