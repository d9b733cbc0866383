"""One partition a broker hosts: its log, its PartitionState core, its registration, the
long-polling fetches parked on it and its group commit (Kafka's Partition with its log)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from broker.core.messages import TopicIdPartition
from broker.core.partition_state import PartitionState
from broker.runtime.group_commit import GroupCommit
from broker.runtime.partition_log import PartitionLog
from metadata.partition_registration import PartitionRegistration
from raft.runtime.parked_fetches import ParkedFetches


@dataclass
class HostedPartition:
    topic: str
    partition: int
    log: PartitionLog
    state: PartitionState
    topic_id: uuid.UUID
    registration: PartitionRegistration | None = None
    # Long-polling fetches parked on this partition (broker.runtime.purgatory): consumers', and
    # followers' (a follower reads to the log end, a consumer to the HWM).
    waiters: ParkedFetches = field(default_factory=ParkedFetches)
    follower_waiters: ParkedFetches = field(default_factory=ParkedFetches)
    flush_in_thread: bool = False
    commit: GroupCommit = field(init=False)

    def __post_init__(self) -> None:
        self.commit = GroupCommit(self.log, in_thread=self.flush_in_thread)

    @property
    def key(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)

    def notify(self) -> None:
        """Wake every long-polling fetch: new data, a truncation, a new leader or log start."""
        self.waiters.wake_all()
        self.follower_waiters.wake_all()

    def notify_appended(self) -> None:
        """A leader's append: news for followers only, as consumers read to the HWM."""
        self.follower_waiters.wake_all()

    def notify_high_watermark(self) -> None:
        """A new HWM: news for consumers only (PartitionReady.news_for_followers)."""
        self.waiters.wake_all()

    def parked(self, follower: bool) -> ParkedFetches:
        return self.follower_waiters if follower else self.waiters
