"""Rule checks the audit needs that controller.core.invariants does not have (yet).

Same shape as invariants.py: take a PartitionRegistration, return violation messages starting
with "rule N:". They need no broker view, so the audit can run them per partition.
"""

from __future__ import annotations

from controller.core.partition_registration import LeaderRecoveryState, PartitionRegistration
from controller.core.records import NO_LEADER


def check_leader_in_isr(reg: PartitionRegistration) -> list[str]:
    """Rule 13: a leader is an ISR member of the replica set; an unclean election may only elect
    outside the ISR by resetting ISR = [leader] under RECOVERING (rule 19)."""
    if reg.leader == NO_LEADER:
        return []
    if reg.leader not in reg.replicas:
        return [f"rule 13: leader {reg.leader} not in replicas {list(reg.replicas)}"]
    if reg.leader not in reg.isr and reg.leader_recovery_state != LeaderRecoveryState.RECOVERING:
        return [f"rule 13: leader {reg.leader} not in ISR {list(reg.isr)} and not RECOVERING"]
    return []
