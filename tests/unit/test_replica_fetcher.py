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

from broker.runtime.replica_fetcher import FetchSettings, PartitionFetchState, ReplicaFetcher
from broker.runtime.replica_manager import ReplicaManager, ReplicaSettings
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.entities import build
from kafkawire.errors import Errors
from metadata.metadata_image import BrokerRegistration, MetadataImage, TopicImage
from metadata.partition_registration import PartitionRegistration
from storage.core.record_batch import encode_batch

TOPIC_ID = uuid.UUID(int=9)
PARTITIONS = 5
BACKOFF_MS = 200


async def _no_controller(
    request: lifecycle.AlterPartitionRequest,
) -> lifecycle.AlterPartitionResponse:
    return lifecycle.alter_partition_response(Errors.NOT_CONTROLLER)


def _follower(tmp_path: Path) -> ReplicaManager:
    """Broker 2 following t-0..4 (leader 1, replicas 1, 2, 3)."""
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
        hosted.state.on_truncated(0, 0, 0, "test", 0)  # OffsetForLeaderEpoch done (rule 22)
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

    async def close(self) -> None:
        pass

    async def asked_at_least(self, count: int) -> None:
        for _ in range(200):
            if len(self.asked) >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{len(self.asked)} requests, not {count}: {self.asked}")


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
    fetcher = ReplicaFetcher(
        rm, 1, leader, lambda _: "127.0.0.1:1", lambda: 20,  # type: ignore[arg-type]
        FetchSettings(max_wait_ms=10, backoff_ms=BACKOFF_MS),
    )
    for hosted in rm.partitions.values():
        fetcher.add(hosted)
    fetcher.start()
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
