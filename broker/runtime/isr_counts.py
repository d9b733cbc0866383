"""The broker's ISR gauges kept as partitions change (Kafka's ReplicaManager
UnderMinIsrPartitionCount and UnderReplicatedPartitions): the partitions this broker leads with
an ISR below min.insync.replicas, and with an ISR that lacks a replica. A gauge walking 100,000
hosted partitions at every /metrics scrape held the loop 70-140 ms each time (issue 35); the
runtime calls `track` wherever a partition's role, ISR, replicas or min ISR may have moved (a
registration or broker view applied, an AlterPartition answered, a partition stopped or
removed), so a scrape reads two set sizes."""

from __future__ import annotations

from broker.core.messages import TopicIdPartition
from broker.runtime.hosted_partition import HostedPartition


class IsrCounts:
    def __init__(self) -> None:
        self.under_min_isr: set[TopicIdPartition] = set()
        self.under_replicated: set[TopicIdPartition] = set()

    def track(self, hosted: HostedPartition) -> None:
        key, state = hosted.key, hosted.state
        _keep(self.under_min_isr, key, state.is_under_min_isr)
        _keep(self.under_replicated, key, state.is_under_replicated)

    def forget(self, key: TopicIdPartition) -> None:
        self.under_min_isr.discard(key)
        self.under_replicated.discard(key)


def _keep(members: set[TopicIdPartition], key: TopicIdPartition, member: bool) -> None:
    if member:
        members.add(key)
    elif members:
        # Not hashed into an empty set: a key's hash is its topic UUID's, Python code, and a
        # restarted broker tracks its 100,000 partitions as it opens them (issue 35).
        members.discard(key)
