"""Seed 003's raft-metrics for voter changes, read from a replica's state (pure).

`number-of-possible-voters`: observers the leader could add (rule 4: an id, a directory id and an
endpoint it fetched with; brokers fetch without one, so only controllers count), judged on the
full key so a replaced disk of a voter id counts. `pending-add-voter` / `pending-remove-voter`:
1 while the voter change the leader appended is not committed (rule 5: one at a time). A replica
that does not lead reports 0 for all three, as only the leader runs voter changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from raft.core.leader_state import LeaderState
from raft.core.raft_replica import RaftReplica


@dataclass(frozen=True, slots=True)
class MembershipMetrics:
    number_of_possible_voters: int = 0
    pending_add_voter: int = 0
    pending_remove_voter: int = 0


def membership_metrics(replica: RaftReplica) -> MembershipMetrics:
    state = replica.state
    if not isinstance(state, LeaderState):
        return MembershipMetrics()
    voters = replica.voters
    possible = sum(
        1
        for p in state.observer_progress(voters)
        if p.endpoint and p.key.id >= 0 and p.key.directory_id.int != 0
    )
    changes = replica.voter_set_changes()
    add = remove = 0
    if len(changes) > 1 and changes[-1][0] >= replica.high_watermark:
        before, after = set(changes[-2][1]), set(changes[-1][1])
        add = int(bool(after - before))
        remove = int(bool(before - after))
    return MembershipMetrics(possible, add, remove)
