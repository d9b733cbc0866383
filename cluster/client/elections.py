"""Leader elections as ElectLeaders v3 (PREFERRED, UNCLEAN, seed 004's DESIGNATED with minikraft's
DesignatedLeaders, kafkawire.elect_leaders_v3); at most 1000 partitions a request
(REQUEST_LIMIT_REACHED for the rest), so larger sets go in slices and what came back over the
limit is sent again (`minikraft leader-election`, the console, unclean recovery)."""

from __future__ import annotations

from typing import Any

from cluster.client.bootstrap import ADMIN_TIMEOUT_MS
from cluster.client.topics import error_name, run_admin
from cluster.output import fail
from kafkawire import admin_messages as am
from kafkawire import constants
from kafkawire import elect_leaders_v3 as el3
from kafkawire.errors import Errors
from kafkawire.messages import wire_error

_MAX_ROUNDS = 100
Target = tuple[str, int, int | None]  # topic, partition, designated leader


def elect_leaders_request(
    election_type: int, targets: list[Target] | None
) -> el3.ElectLeadersRequest:
    """ElectLeaders v3 for `targets` (None: every partition); DesignatedLeaders by index with
    Partitions for DESIGNATED (seed 004), null otherwise."""
    if targets is None:
        return am.elect_leaders_request(election_type, None, ADMIN_TIMEOUT_MS)
    by_topic: dict[str, tuple[list[int], list[int]]] = {}
    for topic, partition, leader in targets:
        partitions, leaders = by_topic.setdefault(topic, ([], []))
        partitions.append(partition)
        leaders.append(-1 if leader is None else leader)
    designated = election_type == constants.ELECTION_DESIGNATED
    return am.elect_leaders_request(
        election_type,
        (
            am.election_topic(topic, parts, leaders if designated else None)
            for topic, (parts, leaders) in by_topic.items()
        ),
        ADMIN_TIMEOUT_MS,
    )


def run_elections(
    bootstrap: str, election_type: int, targets: list[Target] | None
) -> list[dict[str, Any]]:
    """Send the elections in slices of at most 1000, resending REQUEST_LIMIT_REACHED ones."""
    results: dict[tuple[str, int], dict[str, Any]] = {}
    designated = {(t, p): d for t, p, d in targets or []}
    pending: list[list[Target] | None] = (
        [None]
        if targets is None
        else [
            targets[i : i + constants.ELECT_LEADERS_MAX_PARTITIONS]
            for i in range(0, len(targets), constants.ELECT_LEADERS_MAX_PARTITIONS)
        ]
    )
    for _ in range(_MAX_ROUNDS):
        if not pending:
            break
        batch = pending.pop(0)
        response = run_admin(bootstrap, elect_leaders_request(election_type, batch))
        if response.error_code != 0:
            fail(f"{Errors.of(int(response.error_code)).name}: the election request was refused")
        again: list[Target] = []
        for topic_result in response.replica_election_results:
            for p in topic_result.partition_result:
                key = (str(topic_result.topic), int(p.partition_id))
                error = wire_error(p.error_code, p.error_message)
                if error == Errors.REQUEST_LIMIT_REACHED:
                    again.append((key[0], key[1], designated.get(key)))
                    continue
                results[key] = {
                    "topic": key[0],
                    "partition": key[1],
                    "error": error_name(error),
                    "leader": int(p.leader_id),
                }
        for i in range(0, len(again), constants.ELECT_LEADERS_MAX_PARTITIONS):
            pending.append(again[i : i + constants.ELECT_LEADERS_MAX_PARTITIONS])
    return [results[k] for k in sorted(results)]
