"""The follower's fetchers, one per leader broker (Kafka's ReplicaFetcherManager with
num.replica.fetchers=1): a partition this broker follows is added to the fetcher of its leader
and removed from the one it was in when leadership moves; a fetcher left with no partition is
stopped (shutdownIdleFetcherThreads), so a broker follows 33,000 partitions with two fetch
loops and two connections, not 33,000 (issue 35)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from broker.core.messages import TopicIdPartition
from broker.core.partition_state import Role
from broker.runtime.hosted_partition import HostedPartition
from broker.runtime.replica_fetcher import ReplicaFetcher


class ReplicaFetcherManager:
    def __init__(self, make_fetcher: Callable[[int], ReplicaFetcher]) -> None:
        self._make_fetcher = make_fetcher
        self.fetchers: dict[int, ReplicaFetcher] = {}  # by leader broker id
        self._leader_of: dict[TopicIdPartition, int] = {}
        self._stopping: set[asyncio.Future[None]] = set()

    def __len__(self) -> int:
        """How many partitions the fetchers follow."""
        return len(self._leader_of)

    def update(self, hosted: HostedPartition, *, follow: bool) -> None:
        """The partition's leadership changed: out of its fetcher, into its new leader's if
        this broker follows it."""
        key = hosted.key
        old = self._leader_of.pop(key, None)
        if old is not None:
            fetcher = self.fetchers[old]
            fetcher.remove(key)
            if not fetcher.partitions:
                del self.fetchers[old]
                self._stopping.add(asyncio.ensure_future(fetcher.stop()))
                self._stopping = {t for t in self._stopping if not t.done()}
        if follow and hosted.state.role is Role.FOLLOWER:
            leader = hosted.state.leader_id
            follower = self.fetchers.get(leader)
            if follower is None:
                follower = self.fetchers[leader] = self._make_fetcher(leader)
                follower.start()
            follower.add(hosted)
            self._leader_of[key] = leader

    def status(self) -> dict[str, dict[str, int]]:
        """Per leader broker: the partitions its fetcher follows and its fetch session."""
        return {
            str(leader): {
                "partitions": len(fetcher.partitions),
                "session_id": fetcher.session.session_id,
                "session_epoch": fetcher.session.epoch,
            }
            for leader, fetcher in sorted(self.fetchers.items())
        }

    async def close(self) -> None:
        """All at once, as Kafka's ReplicaFetcherManager.shutdown."""
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._leader_of.clear()
        await asyncio.gather(
            *(f.stop() for f in fetchers), *self._stopping, return_exceptions=True
        )
