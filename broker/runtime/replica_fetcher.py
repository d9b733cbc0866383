"""A follower's fetch loop for one partition (Kafka's ReplicaFetcherThread, one task per
followed partition): truncate with OffsetsForLeaderEpoch first (rule 22), then Fetch from the
leader's log end with this broker's epoch (rule 17, KIP-903), append, and follow the leader's HWM.
A diverging-epoch answer sends it back to truncation. Errors back off replica.fetch.backoff.ms.

Both travel on Kafka's protocol to the leader's Kafka listener (broker/runtime/kafka_replication:
Fetch v17 with ReplicaState and topic ids, OffsetForLeaderEpoch v4 with ReplicaId). Each fetcher
has a connection of its own: a Kafka listener answers one request per connection at a time, so a
partition's long-polling fetch must not hold back another partition's (Kafka's
num.replica.fetchers, taken to one per followed partition).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.core import messages as bm
from broker.core.leader_epoch_cache import EpochEndOffset, follower_truncation
from broker.core.partition_state import Role
from broker.runtime.kafka_replication import (
    fetch_request_to_kio,
    fetch_response_from_kio,
    offset_for_leader_epoch_request_to_kio,
    offset_for_leader_epoch_response_from_kio,
)
from broker.runtime.replica_manager import HostedPartition, ReplicaManager
from kafkawire.client import KafkaClient
from kafkawire.clock import now_ms
from kafkawire.errors import Errors, KafkaError

log = logging.getLogger("minikraft.broker")

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 1 << 20


class ReplicaFetcher:
    def __init__(
        self,
        manager: ReplicaManager,
        hosted: HostedPartition,
        client: KafkaClient,
        leader_address: Callable[[int], str | None],
        broker_epoch: Callable[[], int],
        backoff_ms: int,
        cluster_id: str | None = None,
    ) -> None:
        self.manager = manager
        self.hosted = hosted
        self.client = client  # this fetcher's own; closed by stop()
        self.cluster_id = cluster_id
        self.leader_address = leader_address
        self.broker_epoch = broker_epoch
        self.backoff_ms = backoff_ms
        self.leader_id = hosted.state.leader_id
        self.leader_epoch = hosted.state.leader_epoch
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.client.close()

    def _current(self) -> bool:
        state = self.hosted.state
        return (
            state.role is Role.FOLLOWER
            and state.leader_id == self.leader_id
            and state.leader_epoch == self.leader_epoch
        )

    async def _run(self) -> None:
        name = f"{self.hosted.topic}-{self.hosted.partition}"
        while self._current():
            address = self.leader_address(self.leader_id)
            if address is None or self.broker_epoch() < 0:
                await self._backoff()
                continue
            try:
                # A leader's fsync may still run from before this replica became a follower:
                # truncation must not cut segments under it.
                await self.hosted.commit.idle()
                if self.hosted.state.truncation_pending:
                    await self._truncate(address)
                else:
                    await self._fetch(address)
            except KafkaError as exc:
                log.debug("Fetcher for %s from %s: %s", name, self.leader_id, exc)
                await self._backoff()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Fetcher for %s failed; retrying", name)
                await self._backoff()

    async def _backoff(self) -> None:
        await asyncio.sleep(self.backoff_ms / 1000)

    def _truncate_to(self, answer: EpochEndOffset, why: str) -> None:
        hosted = self.hosted
        plog = hosted.log
        decision = follower_truncation(
            answer, plog.epoch_cache, plog.log_end_offset, hosted.state.high_watermark
        )
        old_end = plog.log_end_offset
        new_end = plog.truncate_to(decision.offset)
        ready = hosted.state.on_truncated(
            old_end, new_end, plog.flushed_offset, f"{why}: {decision.reason}", now_ms(),
            complete=decision.complete,
        )
        self.manager.apply_ready(hosted, ready)

    async def _truncate(self, address: str) -> None:
        """Rule 22: ask the leader where our latest epoch ends before fetching."""
        hosted = self.hosted
        plog = hosted.log
        answer = await self.client.request(
            address,
            offset_for_leader_epoch_request_to_kio(
                bm.OffsetForLeaderEpochRequest(
                    hosted.topic,
                    hosted.partition,
                    leader_epoch=plog.latest_epoch(),
                    current_leader_epoch=self.leader_epoch,
                    replica_id=self.manager.broker_id,
                )
            ),
            dest_node_id=self.leader_id,
        )
        response = offset_for_leader_epoch_response_from_kio(
            answer, hosted.topic, hosted.partition
        )
        error = Errors.of(response.error_code)
        if error is not Errors.NONE:
            raise KafkaError(error, response.error_message)
        if not self._current():
            return  # stopped meanwhile: the partition may be gone and its log closed
        self._truncate_to(
            EpochEndOffset(response.leader_epoch, response.end_offset), "OffsetsForLeaderEpoch"
        )

    async def _fetch(self, address: str) -> None:
        hosted = self.hosted
        plog = hosted.log
        topic_id = hosted.topic_id
        answer = await self.client.request(
            address,
            fetch_request_to_kio(
                bm.FetchRequest(
                    hosted.topic,
                    hosted.partition,
                    fetch_offset=plog.log_end_offset,
                    replica_id=self.manager.broker_id,
                    replica_epoch=self.broker_epoch(),
                    current_leader_epoch=self.leader_epoch,
                    last_fetched_epoch=plog.latest_epoch(),
                    max_wait_ms=FETCH_MAX_WAIT_MS,
                    max_bytes=FETCH_MAX_BYTES,
                ),
                topic_id,
                self.cluster_id,
            ),
            timeout_ms=FETCH_MAX_WAIT_MS + 5000,
            dest_node_id=self.leader_id,
        )
        response = fetch_response_from_kio(answer, topic_id, hosted.partition)
        error = Errors.of(response.error_code)
        if error is not Errors.NONE:
            raise KafkaError(error, response.error_message)
        if not self._current():
            return
        if response.diverging_epoch != bm.NO_EPOCH:
            self._truncate_to(
                EpochEndOffset(response.diverging_epoch, response.diverging_end_offset),
                "diverging epoch in Fetch",
            )
            return
        if response.records:
            plog.append_as_follower(response.records)
            if plog.flush_due(None):
                # Before the next Fetch reports the new end (rule 20); group_commit says where.
                await hosted.commit.sync()
                if not self._current():
                    return
            hosted.notify()
        ready = hosted.state.on_fetch_response(
            response.high_watermark, plog.log_end_offset, plog.flushed_offset, now_ms()
        )
        self.manager.apply_ready(hosted, ready)
        self.manager.follow_log_start_offset(hosted, response.log_start_offset)  # DeleteRecords
