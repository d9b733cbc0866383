"""ElectionPolicy: how the controller may elect a leader, one value (INVARIANTS rules 10, 13, 14).

The runtime builds it from its config and the image's feature level and passes it down through
replication_control to PartitionChangeBuilder; nothing in a core reads ambient state for it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class ElectionPolicy:
    # Rule 10: `eligible.leader.replicas.version` (or the node's default when never written).
    elr_enabled: bool = True
    # Rule 13: unclean.leader.election.enable for the partition's topic; replication_control
    # fills it per topic from the image (`for_topic`), so a cluster-wide policy leaves it False.
    unclean_allowed: bool = False
    # Rule 14: with the recovery manager on, it replaces rule 13's LastKnownLeader and unclean
    # steps for the controller's own elections.
    recovery_manager: bool = False
    # Rule 15: the active controller's own node id, whose node-level
    # unclean.leader.election.enable is read between the topic and the cluster level (Kafka's
    # currentControllerConfig); -1: none.
    controller_id: int = -1

    def for_topic(self, unclean_allowed: bool) -> ElectionPolicy:
        """This policy for one topic, with that topic's unclean.leader.election.enable."""
        return replace(self, unclean_allowed=unclean_allowed)


# Rule 10's and 13's defaults: ELR on, unclean off, no recovery manager.
DEFAULT_POLICY = ElectionPolicy()
