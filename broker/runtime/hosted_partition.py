"""One partition a broker hosts: its log, its PartitionState core, its registration, the
long-polling fetches parked on it and its group commit (Kafka's Partition with its log)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.core.fetch_session import FetchSession
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
    key: TopicIdPartition = field(init=False, repr=False, compare=False)
    # Follower fetch sessions that skip this partition as idle, by follower
    # (broker.core.fetch_session.FetchSession.skip; None while there is none).
    idle_in: dict[int, FetchSession] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.commit = GroupCommit(self.log, in_thread=self.flush_in_thread)
        self.key = TopicIdPartition(self.topic_id, self.partition)

    def notify(self) -> None:
        """Wake every long-polling fetch: new data, a truncation, a new leader or log start."""
        self.waiters.wake_all()
        self.follower_waiters.wake_all()
        self.changed(wake=True)

    def notify_appended(self) -> None:
        """A leader's append: news for followers only, as consumers read to the HWM."""
        self.follower_waiters.wake_all()
        self.changed(wake=True)

    def notify_high_watermark(self) -> None:
        """A new HWM: news for consumers only (PartitionReady.news_for_followers); a follower
        session that skipped the partition reads it again at its next read."""
        self.waiters.wake_all()
        self.changed(wake=False)

    def skipped_by(self, session: FetchSession) -> None:
        """`session` skips this partition until it changes (FetchSession.skip)."""
        if self.idle_in is None:
            self.idle_in = {}
        self.idle_in[session.replica_id] = session

    def changed(self, *, wake: bool) -> None:
        """Something a follower's answer or progress reads moved (its log, HWM, log start,
        registration): every session skipping the partition reads it again, after the fetches
        it skipped are counted (PartitionState.on_follower_idle), and its waiting fetch wakes
        unless `wake` is False (a new HWM alone: the follower reads it at its next read)."""
        sessions = self.idle_in
        if not sessions:
            return
        self.idle_in = None
        for session in sessions.values():
            self._wake(session, wake)

    def left_isr(self, replicas: Iterable[int]) -> None:
        """`replicas` left the committed ISR, and nothing else a follower session's skipping
        reads moved (a leader kept its new registration: PartitionState.lead_on): their
        sessions read the partition again (follower_idle no longer holds for them, and their
        expansion waits on a read of their fetch); the members still in the ISR go on
        skipping it, as their follower_idle still holds. A fencing at 100,000 partitions
        shrinks each of a leader's 33,000-66,000 ISRs by the fenced broker alone, and the
        other follower's session read every one of them again (issue 35)."""
        sessions = self.idle_in
        if not sessions:
            return
        for replica in replicas:
            session = sessions.pop(replica, None)
            if session is not None:
                self._wake(session, True)
        if not sessions:
            self.idle_in = None

    def _wake(self, session: FetchSession, wake: bool) -> None:
        """One session skipping the partition reads it again, after the fetches it skipped
        are counted; its waiting fetch wakes if `wake`."""
        if session.wake(self.key):
            self.state.on_follower_idle(session.replica_id, session.fetch_ms)
            if wake and session.parked is not None:
                session.parked.wake_all()

    def parked(self, follower: bool) -> ParkedFetches:
        return self.follower_waiters if follower else self.waiters
