"""Unclean recovery, the pure part: which replica to elect and when (seed 004, seed 001 KIP-966).

One selection function serves both the `unclean-recovery` tool (ranking by the PartitionLeaderEpoch
of GetReplicaLogInfo, seed 004) and the controller's recovery manager (ranking by the last written
leader epoch, KIP-966); the epoch to rank by is a parameter (CLI.md, INVARIANTS rule 14).

Ranking keys, best first:
- RankBy.PARTITION_LEADER_EPOCH (the tool): PartitionLeaderEpoch, then the last written leader
  epoch, then the log end offset, then the lowest broker id. PartitionLeaderEpoch is the broker's
  metadata view of the partition, not a property of its log: for an offline partition every live,
  caught-up broker reports the same value, so seed 004's "highest epoch, then longest log" would
  let the length alone decide, and a longer log that stopped at an older leader epoch (a deposed
  leader's diverged acks=1 suffix) would beat a shorter log that holds a later leader's writes.
  The last written leader epoch (minikraft's GetReplicaLogInfo carries it, as KIP-966 did) breaks
  that tie the way Raft compares logs (rule 22's truncation also trusts the later epoch), so the
  tool still ranks by PartitionLeaderEpoch first (CLI.md) and never prefers a diverged older log.
- RankBy.LAST_WRITTEN_LEADER_EPOCH (the manager, rule 14): the last written leader epoch, then the
  log end offset, then the lowest broker id; answers with a stale PartitionLeaderEpoch are dropped
  before ranking (`usable_answers`), so that epoch is equal on every ranked answer.
The recovery manager's decision order (rule 14) is `recovery_decision`; time is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from controller.core.partition_change import ELECTED_KINDS, ElectionKind
from kafkawire.errors import Errors
from metadata.partition_registration import PartitionRegistration
from metadata.records import LAST_KNOWN_LEADER_NONE, NO_LEADER

RECOVERY_MANAGER_ENABLED = "unclean.recovery.manager.enabled"
RECOVERY_STRATEGY = "unclean.recovery.strategy"
RECOVERY_TIMEOUT_MS = "unclean.recovery.timeout.ms"
DEFAULT_RECOVERY_TIMEOUT_MS = 300_000


class RankBy(Enum):
    """The epoch a replica is ranked by before its log length."""

    PARTITION_LEADER_EPOCH = "partition_leader_epoch"  # the tool (seed 004)
    LAST_WRITTEN_LEADER_EPOCH = "last_written_leader_epoch"  # the recovery manager (KIP-966)


class Strategy(Enum):
    """unclean.recovery.strategy (KIP-966)."""

    AGGRESSIVE = "Aggressive"
    BALANCED = "Balanced"
    NONE = "None"


class Decision(Enum):
    """What the recovery manager does with one partition (rule 14)."""

    NOT_NEEDED = "not_needed"  # it has a leader, or rule 13's clean path will elect one
    WAIT = "wait"  # the strategy waits (for a fenced ELR / LastKnownELR member, or the operator)
    RECOVER = "recover"  # collect GetReplicaLogInfo answers and elect the best replica


@dataclass(frozen=True, slots=True)
class ReplicaLogAnswer:
    """One broker's GetReplicaLogInfo answer for one partition."""

    broker_id: int
    broker_epoch: int
    partition_leader_epoch: int
    log_end_offset: int
    last_written_leader_epoch: int = -1
    error: Errors = Errors.NONE
    received_ms: int = 0

    def epoch(self, rank_by: RankBy) -> int:
        if rank_by is RankBy.PARTITION_LEADER_EPOCH:
            return self.partition_leader_epoch
        return self.last_written_leader_epoch


def usable_answers(
    answers: Iterable[ReplicaLogAnswer],
    replicas: Iterable[int],
    broker_epochs: Mapping[int, int] | None = None,
    partition_leader_epoch: int | None = None,
) -> list[ReplicaLogAnswer]:
    """Drop answers with an error, from a non-replica, with a stale broker epoch (the broker
    restarted after answering) or, when given, a stale partition leader epoch (rule 14)."""
    members = set(replicas)
    kept = []
    for answer in answers:
        if answer.error != Errors.NONE or answer.broker_id not in members:
            continue
        if broker_epochs is not None and broker_epochs.get(answer.broker_id) != answer.broker_epoch:
            continue
        if (
            partition_leader_epoch is not None
            and answer.partition_leader_epoch != partition_leader_epoch
        ):
            continue
        kept.append(answer)
    return kept


def select_leader(answers: Iterable[ReplicaLogAnswer], rank_by: RankBy) -> ReplicaLogAnswer | None:
    """Seed 004 / KIP-966: the highest epoch, then the longest log; ties to the lowest broker id
    (deterministic). With PARTITION_LEADER_EPOCH the last written leader epoch ranks between the
    two (module docstring). Pass answers through `usable_answers` first."""
    best: ReplicaLogAnswer | None = None
    for answer in answers:
        if answer.error != Errors.NONE:
            continue
        if best is None or _rank(answer, rank_by) < _rank(best, rank_by):
            best = answer
    return best


def _rank(answer: ReplicaLogAnswer, rank_by: RankBy) -> tuple[int, int, int, int]:
    # A later written epoch beats a longer log: that log's suffix diverged (rules 14, 22).
    return (
        -answer.epoch(rank_by),
        -answer.last_written_leader_epoch,
        -answer.log_end_offset,
        answer.broker_id,
    )


# -- the recovery manager's policy (KIP-966, rule 14) ------------------------------------------


def parse_strategy(value: str | None, unclean_leader_election_enable: bool) -> Strategy:
    """An explicit unclean.recovery.strategy wins; else unclean.leader.election.enable maps
    true -> Aggressive, false -> Balanced (rule 14). Matching is case-insensitive."""
    if value:
        for strategy in Strategy:
            if strategy.value.lower() == value.strip().lower():
                return strategy
        raise ValueError(f"{RECOVERY_STRATEGY}={value!r} is not Aggressive, Balanced or None")
    return Strategy.AGGRESSIVE if unclean_leader_election_enable else Strategy.BALANCED


def recovery_decision(
    registration: PartitionRegistration,
    is_fenced: Callable[[int], bool],
    strategy: Strategy,
    pending: ElectionKind,
) -> Decision:
    """Rule 14's order. `pending` is the election PartitionChangeBuilder decides for the
    partition now under the manager's policy (replication_control.pending_election): an ISR or
    an unfenced ELR member is rule 13's clean path, so nothing to recover. Else with fenced ISR
    or ELR members Aggressive recovers and the others wait; else Aggressive recovers, Balanced
    recovers once every LastKnownELR member is unfenced, None waits for the operator."""
    if registration.leader != NO_LEADER or pending in ELECTED_KINDS:
        return Decision.NOT_NEEDED
    # A fenced ISR member (ELR off keeps the sole member in the ISR, rule 10) waits like ELR.
    if registration.elr or registration.isr:
        return Decision.RECOVER if strategy is Strategy.AGGRESSIVE else Decision.WAIT
    if strategy is Strategy.AGGRESSIVE:
        return Decision.RECOVER
    if strategy is Strategy.BALANCED:
        if all(not is_fenced(r) for r in registration.last_known_elr):
            return Decision.RECOVER
        return Decision.WAIT
    return Decision.WAIT


def manual_election_required(
    registration: PartitionRegistration, unclean_allowed: bool, strategy: Strategy | None
) -> bool:
    """KIP-966's manual_leader_election_required_partition_count: leaderless, no ISR or ELR
    member left to come back, and nothing automatic will elect a leader. With the recovery
    manager (`strategy` given) only None waits for the operator (rule 14); without it (rule 13)
    a LastKnownLeader or an allowed unclean election still elects once a broker returns."""
    if registration.leader != NO_LEADER or registration.isr or registration.elr:
        return False
    if strategy is not None:
        return strategy is Strategy.NONE
    return not unclean_allowed and registration.last_known_leader == LAST_KNOWN_LEADER_NONE


def ready_to_elect(
    strategy: Strategy,
    registration: PartitionRegistration,
    answered: Iterable[int],
    started_ms: int,
    now_ms: int,
    timeout_ms: int,
) -> bool:
    """When the collected usable answers suffice (rule 14). Aggressive: the answers received
    within the timeout, or the first one after it. Balanced: every LastKnownELR member has
    answered, plus whoever answered within the timeout. Either elects early once every replica
    answered (nothing more can arrive)."""
    have = set(answered)
    if not have or strategy is Strategy.NONE:
        return False
    everyone = all(r in have for r in registration.replicas)
    timed_out = now_ms - started_ms >= timeout_ms
    if strategy is Strategy.BALANCED and not all(r in have for r in registration.last_known_elr):
        return False
    return everyone or timed_out
