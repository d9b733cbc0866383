"""broker.runtime.replica_fetcher: a follower's fetcher costs what changed, not what it follows
(issue 35). Against a scripted leader: the session's first Fetch names every partition, then a
Fetch names only the partitions whose position moved; a partition the leader answers with an
error leaves the session (Kafka's delayPartitions: a delayed partition is not in the request)
and comes back once replica.fetch.backoff.ms has passed."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from kio.schema.fetch.v17 import response as fetch_resp

from broker.runtime import replica_fetcher
from broker.runtime.replica_fetcher import FetchSettings, PartitionFetchState, ReplicaFetcher
from broker.runtime.replica_manager import ReplicaManager, ReplicaSettings
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.entities import build
from kafkawire.errors import Errors, KafkaError
from metadata.metadata_image import BrokerRegistration, MetadataImage, TopicImage
from metadata.partition_registration import PartitionRegistration
from storage.core.leader_epoch_cache import LeaderEpochCache
from storage.core.record_batch import encode_batch
from tests.loop_turns import LoopTurns, turns_between

TOPIC_ID = uuid.UUID(int=9)
PARTITIONS = 5
BACKOFF_MS = 200


async def _no_controller(
    request: lifecycle.AlterPartitionRequest,
) -> lifecycle.AlterPartitionResponse:
    return lifecycle.alter_partition_response(Errors.NOT_CONTROLLER)


def _follower(tmp_path: Path, *, truncated: bool = True) -> ReplicaManager:
    """Broker 2 following t-0..4 (leader 1, replicas 1, 2, 3); `truncated`: past Kafka's
    Truncating state of a new leader epoch."""
    brokers = {
        b: BrokerRegistration(b, epoch=10 * b, incarnation_id=uuid.UUID(int=b), fenced=False,
                              in_controlled_shutdown=False)
        for b in (1, 2, 3)
    }
    partitions = {
        p: PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
        for p in range(PARTITIONS)
    }
    topic = TopicImage("t", TOPIC_ID, MappingProxyType(partitions))
    rm = ReplicaManager(ReplicaSettings(broker_id=2, log_dirs=[tmp_path]), None, _no_controller,
                        lambda: 20)
    rm.apply_image(MetadataImage(
        brokers=MappingProxyType(brokers),
        topics=MappingProxyType({TOPIC_ID: topic}),
        topics_by_name=MappingProxyType({"t": topic}),
    ))
    for hosted in rm.partitions.values():
        if truncated:
            hosted.state.on_truncated(0, 0, 0, "test", 0)
    return rm


_PARTITION: dict[str, Any] = {
    "high_watermark": 0,
    "last_stable_offset": 0,
    "log_start_offset": 0,
    "diverging_epoch": fetch_resp.EpochEndOffset(epoch=-1, end_offset=-1),
    "current_leader": fetch_resp.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
    "snapshot_id": fetch_resp.SnapshotId(end_offset=-1, epoch=-1),
    "aborted_transactions": None,
    "preferred_read_replica": -1,
    "records": None,
}


def _answer(session_id: int, partitions: dict[int, dict[str, Any]]) -> Any:
    return build(
        fetch_resp.FetchResponse,
        session_id=session_id,
        responses=(
            fetch_resp.FetchableTopicResponse(
                topic_id=TOPIC_ID,
                partitions=tuple(
                    build(fetch_resp.PartitionData, **{**_PARTITION, "partition_index": p, **fields})
                    for p, fields in partitions.items()
                ),
            ),
        ) if partitions else (),
        node_endpoints=(),
    )


class _Leader:
    """Answers the fetcher's requests from a script, one at a time; records what it asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, list[int], list[int]]] = []  # (epoch, named, forgotten)
        self.answers: asyncio.Queue[Any] = asyncio.Queue()

    async def request(self, address: str, body: Any, **_: Any) -> Any:
        self.asked.append((
            int(body.session_epoch),
            sorted(int(p.partition) for t in body.topics for p in t.partitions),
            sorted(int(p) for t in body.forgotten_topics_data for p in t.partitions),
        ))
        return await self.answers.get()

    async def ready(self, address: str, **_: Any) -> None:
        pass

    async def close(self) -> None:
        pass

    async def asked_at_least(self, count: int) -> None:
        for _ in range(200):
            if len(self.asked) >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{len(self.asked)} requests, not {count}: {self.asked}")


def _started_fetcher(rm: ReplicaManager, leader: _Leader) -> ReplicaFetcher:
    """A fetcher from broker 1 (the scripted `leader`) of every partition rm hosts."""
    fetcher = ReplicaFetcher(
        rm, 1, leader, lambda _: "127.0.0.1:1", lambda: 20,  # type: ignore[arg-type]
        FetchSettings(max_wait_ms=10, backoff_ms=BACKOFF_MS),
    )
    for hosted in rm.partitions.values():
        fetcher.add(hosted)
    fetcher.start()
    return fetcher


async def test_a_fetch_names_only_partitions_whose_position_moved_and_delayed_ones_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked_at: list[int] = []  # the partitions whose position a round computed
    real = PartitionFetchState.position

    def position(state: PartitionFetchState, max_bytes: int) -> Any:
        looked_at.append(state.hosted.partition)
        return real(state, max_bytes)

    monkeypatch.setattr(PartitionFetchState, "position", position)
    rm = _follower(tmp_path)
    leader = _Leader()
    fetcher = _started_fetcher(rm, leader)
    try:
        await leader.asked_at_least(1)
        assert leader.asked[0] == (0, [0, 1, 2, 3, 4], [])  # the session's full Fetch
        leader.answers.put_nowait(_answer(77, {
            2: {"records": encode_batch(0, 0, 0, [b"a"]), "high_watermark": 0},
            3: {"error_code": int(Errors.NOT_LEADER_OR_FOLLOWER)},
        }))
        await leader.asked_at_least(2)
        # 2 moved to offset 1; 3 is delayed, so out of the session; the others unchanged.
        assert leader.asked[1] == (1, [2], [3])
        looked_at.clear()
        leader.answers.put_nowait(_answer(77, {}))
        await leader.asked_at_least(3)
        assert leader.asked[2][1:] == ([], [])  # nothing moved: an empty incremental Fetch
        assert looked_at == []  # and the round looked at no partition
        await asyncio.sleep(BACKOFF_MS / 1000)
        leader.answers.put_nowait(_answer(77, {}))
        await leader.asked_at_least(4)
        assert leader.asked[3][1:] == ([3], [])  # its backoff over, 3 is fetched again
        assert rm.hosted("t", 2).log.log_end_offset == 1
    finally:
        await fetcher.stop()
        await rm.close()


class _RecordingLeader(_Leader):
    """Also records each request's kind and each named partition's (offset, last epoch)."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds: list[str] = []
        self.positions: list[dict[int, tuple[int, int]]] = []

    async def request(self, address: str, body: Any, **kwargs: Any) -> Any:
        self.kinds.append(type(body).__name__)
        if self.kinds[-1] != "FetchRequest":  # the kind tells it: no answer comes
            self.asked.append((-1, [], []))
            self.positions.append({})
            return await asyncio.Event().wait()
        self.positions.append({
            int(p.partition): (int(p.fetch_offset), int(p.last_fetched_epoch))
            for t in body.topics for p in t.partitions
        })
        return await super().request(address, body, **kwargs)


async def test_a_new_follower_truncates_on_fetch_without_offsets_for_leader_epoch(
    tmp_path: Path,
) -> None:
    """Kafka's fetcher (AbstractFetcherThread.partitionFetchState, truncateToHighWatermark,
    KAFKA-10554): a partition new to the leader epoch whose log has an epoch fetches from its
    log end with that epoch as its last fetched epoch and truncates on the leader's
    DivergingEpoch; one whose log has no epoch is cut to its high watermark locally (an empty
    new log: nothing to cut). Its first request is the Fetch: no OffsetsForLeaderEpoch, which
    cost the leader a round per new partition (issue 35)."""
    rm = _follower(tmp_path, truncated=False)
    ahead = rm.hosted("t", 1)  # offsets 0-2 in epoch 0, then 3-4 in epoch 1 the leader lacks
    ahead.log.append_as_follower(encode_batch(0, 0, 0, [b"a", b"b", b"c"]))
    ahead.log.append_as_follower(encode_batch(3, 1, 0, [b"d", b"e"]))
    no_epoch = rm.hosted("t", 2)  # three records, no epoch, high watermark 1
    for offset in range(3):
        no_epoch.log.append_as_follower(encode_batch(offset, 0, 0, [b"a"]))
    no_epoch.log.epoch_cache = LeaderEpochCache()
    for hosted in (ahead, no_epoch):
        rm.apply_ready(hosted, hosted.state.on_fetch_response(1, hosted.log.log_end_offset, 0, 0))
    assert all(h.state.truncation_pending for h in rm.partitions.values())
    leader = _RecordingLeader()
    fetcher = _started_fetcher(rm, leader)
    try:
        await leader.asked_at_least(1)
        assert leader.kinds[0] == "FetchRequest"
        assert leader.positions[0] == {0: (0, -1), 1: (5, 1), 2: (1, -1), 3: (0, -1), 4: (0, -1)}
        assert no_epoch.log.log_end_offset == 1 and not no_epoch.state.truncation_pending
        leader.answers.put_nowait(_answer(77, {
            1: {"diverging_epoch": fetch_resp.EpochEndOffset(epoch=0, end_offset=3)},
        }))
        await leader.asked_at_least(2)
        assert ahead.log.log_end_offset == 3
        assert leader.positions[1] == {1: (3, 0)}  # back at its epoch 0's end
        assert set(leader.kinds) == {"FetchRequest"}
    finally:
        await fetcher.stop()
        await rm.close()


async def test_a_diverging_epoch_at_the_log_end_drops_the_epoch_that_has_no_records(
    tmp_path: Path,
) -> None:
    """A broker elected leader of epoch 1 at offset 3 that appended nothing before it lost the
    leadership has (1, 3) in its epoch cache and no record of epoch 1. As a follower it fetches
    at (3, 1); the new leader, without epoch 1, answers epoch 0 ends at 5, so the cut is at 3,
    its log end. Kafka's UnifiedLog.truncateTo truncates the epoch cache even when the offset
    is at the log end ("this broker was a leader and inserted the first start offset entry,
    but then failed to append any entries"): the next Fetch says (3, 0). Cutting nothing left
    (1, 3) behind and the follower asked (3, 1) again forever, never back in the ISR (a chaos
    run's partition stayed under min ISR)."""
    rm = _follower(tmp_path)
    was_leader = rm.hosted("t", 1)
    was_leader.log.append_as_follower(encode_batch(0, 0, 0, [b"a", b"b", b"c"]))
    was_leader.log.epoch_cache.assign(1, 3)
    leader = _RecordingLeader()
    fetcher = _started_fetcher(rm, leader)
    try:
        await leader.asked_at_least(1)
        assert leader.positions[0][1] == (3, 1)
        leader.answers.put_nowait(_answer(77, {
            1: {"diverging_epoch": fetch_resp.EpochEndOffset(epoch=0, end_offset=5)},
        }))
        await leader.asked_at_least(2)
        assert was_leader.log.log_end_offset == 3
        assert was_leader.log.epoch_cache.latest_epoch() == 0
        assert leader.positions[1] == {1: (3, 0)}
    finally:
        await fetcher.stop()
        await rm.close()


async def test_a_round_of_many_partitions_gives_the_loop_back_between_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a create hands a fetcher thousands of new partitions at once, to move out of
    Kafka's Truncating state, into one Fetch request and then one answer; each walk yields the
    loop once it has run ROUND_BUDGET_S (0 here: after every partition), so others run in
    between. Looking again at the touched partitions too: 5,000 of them twice a create, in
    one stretch before."""
    monkeypatch.setattr(replica_fetcher, "ROUND_BUDGET_S", 0.0)
    seen: list[str] = []
    real_cut, real_process = ReplicaFetcher._cut, ReplicaFetcher._process_partition

    def cut(self: ReplicaFetcher, *args: Any) -> None:
        seen.append("cut")
        real_cut(self, *args)

    async def process(self: ReplicaFetcher, *args: Any) -> None:
        seen.append("answer")
        await real_process(self, *args)

    real_request = ReplicaFetcher._request

    def request(self: ReplicaFetcher, *args: Any) -> Any:
        seen.append("request")
        return real_request(self, *args)

    real_refresh = ReplicaFetcher._refresh_one

    def refresh(self: ReplicaFetcher, *args: Any) -> None:
        seen.append("refresh")
        real_refresh(self, *args)

    monkeypatch.setattr(ReplicaFetcher, "_cut", cut)
    monkeypatch.setattr(ReplicaFetcher, "_process_partition", process)
    monkeypatch.setattr(ReplicaFetcher, "_request", request)
    monkeypatch.setattr(ReplicaFetcher, "_refresh_one", refresh)

    rm = _follower(tmp_path, truncated=False)
    leader = _Leader()
    fetcher = _started_fetcher(rm, leader)
    try:
        async with LoopTurns(seen):
            await leader.asked_at_least(1)
            leader.answers.put_nowait(_answer(77, {p: {} for p in range(PARTITIONS)}))
            await leader.asked_at_least(2)
        for kind in ("refresh", "cut", "request", "answer"):
            assert turns_between(seen, kind, PARTITIONS), seen
    finally:
        await fetcher.stop()
        await rm.close()


async def test_the_answer_to_a_fetch_of_many_partitions_is_decoded_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a Fetch naming DECODE_IN_THREAD_PARTITIONS or more (5 here) has its answer,
    which names them all, decoded in a worker thread (KafkaClient's decode_in_thread), and
    is itself built and encoded in one (encode_in_thread: 20-35 ms of kio for 5,000); a
    Fetch of a few partitions is decoded on the loop (no thread hop for replication)."""
    monkeypatch.setattr(replica_fetcher, "DECODE_IN_THREAD_PARTITIONS", PARTITIONS)
    in_thread: list[bool] = []
    encoded_in_thread: list[bool] = []

    class _Asked(_Leader):
        async def request(self, address: str, body: Any, **kwargs: Any) -> Any:
            in_thread.append(kwargs.get("decode_in_thread", False))
            encoded_in_thread.append(kwargs.get("encode_in_thread", False))
            return await super().request(address, body, **kwargs)

    rm = _follower(tmp_path)
    leader = _Asked()
    fetcher = _started_fetcher(rm, leader)
    try:
        await leader.asked_at_least(1)
        leader.answers.put_nowait(_answer(77, {2: {"records": encode_batch(0, 0, 0, [b"a"])}}))
        await leader.asked_at_least(2)
        assert [len(named) for _, named, _ in leader.asked] == [PARTITIONS, 1]
        assert in_thread == [True, False]
        assert encoded_in_thread == [True, False]
    finally:
        await fetcher.stop()
        await rm.close()


async def test_a_fetch_waits_request_timeout_ms_for_its_answer(tmp_path: Path) -> None:
    """Kafka's fetcher waits request.timeout.ms (30 s) for a Fetch answer; at
    replica.fetch.wait.max.ms + 5 s a restarted broker's first, full Fetch of 100,000 partitions
    timed out at its leader and was sent again and again (issue 35)."""
    timeouts: list[int | None] = []

    class _Timed(_Leader):
        async def request(self, address: str, body: Any, **kwargs: Any) -> Any:
            timeouts.append(kwargs.get("timeout_ms"))
            return await super().request(address, body, **kwargs)

    rm = _follower(tmp_path)
    leader = _Timed()
    fetcher = _started_fetcher(rm, leader)
    try:
        await leader.asked_at_least(1)
        assert timeouts == [30000]
    finally:
        await fetcher.stop()
        await rm.close()


async def test_nothing_is_built_for_a_leader_that_refuses_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a killed leader refused every round, and each round built a full Fetch of
    every partition followed from it (33,000 on each of its followers at 100,000 partitions,
    about a third of a core until the fencing moved them). The fetcher builds a request only
    once the connection is up (Kafka's awaitReady), after replica.fetch.backoff.ms."""
    built: list[int] = []
    real_request = ReplicaFetcher._request

    def request(self: ReplicaFetcher, *args: Any) -> Any:
        built.append(1)
        return real_request(self, *args)

    monkeypatch.setattr(ReplicaFetcher, "_request", request)
    monkeypatch.setattr(replica_fetcher, "replica_fetch_to_kio", _counted(built))

    class _Down(_Leader):
        def __init__(self) -> None:
            super().__init__()
            self.refusals = 3

        async def ready(self, address: str, **_: Any) -> None:
            if self.refusals:
                self.refusals -= 1
                raise KafkaError(Errors.NETWORK_EXCEPTION, "connection refused")

    rm = _follower(tmp_path)
    leader = _Down()
    fetcher = ReplicaFetcher(
        rm, 1, leader, lambda _: "127.0.0.1:1", lambda: 20,  # type: ignore[arg-type]
        FetchSettings(max_wait_ms=10, backoff_ms=20),
    )
    for hosted in rm.partitions.values():
        fetcher.add(hosted)
    fetcher.start()
    try:
        await leader.asked_at_least(1)
        assert leader.refusals == 0
        # One round's requests and its kio request: nothing for the three refused rounds.
        assert len(built) == PARTITIONS + 1
        assert [len(named) for _, named, _ in leader.asked] == [PARTITIONS]
    finally:
        await fetcher.stop()
        await rm.close()


def _counted(calls: list[int]) -> Any:
    real = replica_fetcher.replica_fetch_to_kio

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    return counted
