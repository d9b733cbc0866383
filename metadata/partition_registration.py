"""A partition's replicated state, and the one `merge` of a PartitionChangeRecord into it.

Controller, broker and the Spark audit all apply changes through `PartitionRegistration.merge`
so they cannot disagree on what a record means (STYLE.md, Kafka's PartitionRegistration).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from kafkawire.slots import slot_constructor
from metadata.records import (
    LAST_KNOWN_LEADER_NONE,
    LAST_KNOWN_LEADER_UNCHANGED,
    LEADER_RECOVERY_STATE_UNCHANGED,
    NO_LEADER,
    NO_LEADER_CHANGE,
    PartitionChangeRecord,
    PartitionRecord,
)


class LeaderRecoveryState(IntEnum):
    """KIP-704: RECOVERING after an unclean election until the leader reports RECOVERED."""

    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    last_known_leader: int = LAST_KNOWN_LEADER_NONE
    leader: int = NO_LEADER
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionRegistration:
        return cls(
            replicas=record.replicas,
            isr=record.isr,
            elr=record.eligible_leader_replicas,
            last_known_elr=record.last_known_elr,
            last_known_leader=record.last_known_leader,
            leader=record.leader,
            leader_recovery_state=LeaderRecoveryState(record.leader_recovery_state),
            leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            removing_replicas=record.removing_replicas,
            adding_replicas=record.adding_replicas,
        )

    def to_record(self, topic_id: uuid.UUID, partition_id: int) -> PartitionRecord:
        """The full-state record, as a snapshot writes it."""
        return PartitionRecord(
            partition_id=partition_id,
            topic_id=topic_id,
            replicas=self.replicas,
            isr=self.isr,
            removing_replicas=self.removing_replicas,
            adding_replicas=self.adding_replicas,
            leader=self.leader,
            leader_recovery_state=int(self.leader_recovery_state),
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            eligible_leader_replicas=self.elr,
            last_known_elr=self.last_known_elr,
            last_known_leader=self.last_known_leader,
        )

    def merge(self, change: PartitionChangeRecord) -> PartitionRegistration:
        """Apply a change: None / -1 / -2 fields are unchanged (seed 001 conventions).

        Rule 8: every record bumps the partition epoch; a record that names a leader (even the
        same one, which is how the builder asks for a bump) bumps the leader epoch.
        """
        leader, leader_epoch = self.leader, self.leader_epoch
        if change.leader != NO_LEADER_CHANGE:
            leader, leader_epoch = change.leader, self.leader_epoch + 1
        recovery = self.leader_recovery_state
        if change.leader_recovery_state != LEADER_RECOVERY_STATE_UNCHANGED:
            recovery = LeaderRecoveryState(change.leader_recovery_state)
        last_known_leader = self.last_known_leader
        if change.last_known_leader != LAST_KNOWN_LEADER_UNCHANGED:
            last_known_leader = change.last_known_leader
        # Every field set once, through the slots (_new_registration), not the frozen
        # constructor or dataclasses.replace: the audit's replay merges each of a million
        # records once, and every node merges 100,000 at a broker's fencing (issue 35).
        return _new_registration(
            self.replicas if change.replicas is None else change.replicas,
            self.isr if change.isr is None else change.isr,
            self.elr if change.eligible_leader_replicas is None else change.eligible_leader_replicas,
            self.last_known_elr if change.last_known_elr is None else change.last_known_elr,
            last_known_leader,
            leader,
            recovery,
            leader_epoch,
            self.partition_epoch + 1,
            self.removing_replicas if change.removing_replicas is None else change.removing_replicas,
            self.adding_replicas if change.adding_replicas is None else change.adding_replicas,
        )

    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


# A PartitionRegistration from every field in declaration order, set through its slots'
# descriptors (kafkawire.slots: about half the frozen constructor's cost).
_new_registration: Callable[..., PartitionRegistration] = slot_constructor(
    PartitionRegistration,
    (
        "replicas", "isr", "elr", "last_known_elr", "last_known_leader", "leader",
        "leader_recovery_state", "leader_epoch", "partition_epoch", "removing_replicas",
        "adding_replicas",
    ),
)
