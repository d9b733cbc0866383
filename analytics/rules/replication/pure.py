"""Rules 20, 21, 22 and 23 (INVARIANTS.md: the broker's high watermark, leader recovery,
truncation, acked writes) as plain Python over reader rows (analytics.read.broker_inputs): the
Spark audit (analytics.rules.replication.spark) runs these functions per partition (applyInArrow)
or as the same predicate in a DataFrame filter, analytics.baseline calls them directly, and so
does the broker simulator (tests/sim/broker_sim.py) on its cores' outputs, so all three share one
definition. Rule 20's predicate is the broker's own (broker.core.high_watermark.hwm_may_advance).

Rule 21, as the journals show it: a broker that leads a RECOVERING partition (KIP-704) serves
nothing until RECOVERED is committed, so between a `RoleChanged role=leader` with
leader_recovery_state 1 (or a RecoveryStateChanged to 1) and the RecoveryStateChanged back to 0,
its journal has no HwmAdvanced that moves the HWM and no ProduceAcked. Rows are read per broker
journal and partition in journal order; a journal older than the RoleChanged row's recovery state
leaves the leader's state unknown, and its serving rows unchecked.

Rule 22, made precise for files: the reference log of a data partition is its final leader's
(the broker of the highest-epoch `RoleChanged role=leader` journal event, latest first; without
journals, the replica whose log ends at the highest (epoch, offset)). A follower is checked when
its journal shows it following at that final leader epoch (or when there are no journals): it
then fetched from the final leader, so it truncated first and its log must be a prefix of the
leader's. Each of its entries at an offset where the leader has no entry, or an entry of another
epoch, or of the same epoch with another key, is an entry the leader did not have. A replica that
never followed the final leader (dead or fenced until the end) has not truncated yet, by design,
and is counted as unchecked, not as a violation.

Below a replica's log start offset or cleaner checkpoint, entries it no longer has are not
entries the leader lacks (rule 22) nor lost acked writes (rule 23: counted as removed, not as a
violation): analytics.rules.cleanup (rules 24, 25) says where that floor is.

Rule 23: every write acked with acks=all (`ack` entry, acks -1, error NONE) appears in the
reference log exactly once. Missing is attributed (reported, not a violation) when the partition
went RECOVERING (an unclean or designated election: a PartitionRecord/PartitionChangeRecord with
leader_recovery_state 1, or a RecoveryStateChanged journal event to 1); otherwise a violation.
Duplicated is a violation when the producer is idempotent (its retries are deduplicated by the
brokers, or, minikraft's own producer, it never resends: a second copy is the brokers' doing) or
the journal does not say (older journals); a non-idempotent client's retries may write a value
twice, so then a duplicate is counted (rule 23's notes), not a violation.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

from broker.core.high_watermark import hwm_may_advance

T = TypeVar("T")

RECOVERING = 1
RECOVERED = 0
KNOWN_STATES = (RECOVERED, RECOVERING)
UNKNOWN_STATE = -1  # a RoleChanged of an older journal, without the recovery state
ACK_OK = "NONE"
LEADER = "leader"
FOLLOWER = "follower"

# rule 22's per-partition output kinds
REFERENCE = "reference"
CHECKED = "checked"
UNCHECKED = "unchecked"
VIOLATION = "violation"

# rule 23 outcomes
REMOVED = "removed"  # below the reference replica's log start or cleaner checkpoint (24, 25)
PRESENT = "present"
LOST = "lost"
ATTRIBUTED = "attributed"
DUPLICATED = "duplicated"
DUPLICATED_COUNTED = "duplicated-counted"  # a non-idempotent producer's retry: not a violation


def hwm_violation(event: str | None, old: int | None, new: int | None,
                  isr_size: int | None, min_isr: int | None) -> bool:
    """Rule 20: an HwmAdvanced that moved the HWM forward while the committed ISR was smaller
    than the effective min ISR in force: where broker.core.high_watermark.hwm_may_advance, the
    broker's own decision, says no (the Spark column is built from it too)."""
    return (event == "HwmAdvanced" and old is not None and new is not None and new > old
            and isr_size is not None and min_isr is not None
            and not hwm_may_advance(isr_size, min_isr))


def hwm_message(row: dict[str, Any]) -> str:
    return (f"rule 20: broker {row['broker_id']} advanced the HWM of {row['topic']}-"
            f"{row['partition']} {row['old']} -> {row['new']} with ISR size {row['isr_size']}"
            f" < min ISR {row['min_isr']} (leader epoch {row['leader_epoch']})")


def serves(event: str | None, old: int | None, new: int | None) -> bool:
    """Rule 21's serving rows: a produce acknowledged, or the HWM moved forward (consumers
    read up to it)."""
    return event == "ProduceAcked" or (event == "HwmAdvanced" and old is not None
                                       and new is not None and new > old)


def recovering_serves(rows: Iterable[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], bool]]:
    """Rule 21 over one broker journal's rows of one partition, in journal order: each serving
    row while this broker leads the partition in a known recovery state, with True where that
    state is RECOVERING (a violation). The Spark form (analytics.rules.replication.spark.
    rule_21_recovering) carries the same state down a window."""
    role: str | None = None
    state: int | None = None  # None: no state yet; UNKNOWN_STATE: the journal does not say
    for row in rows:
        event = row.get("event")
        if event == "RoleChanged":
            role = row.get("role")
            lrs = row.get("leader_recovery_state")
            state = UNKNOWN_STATE if lrs is None else int(lrs)
        elif event == "RecoveryStateChanged" and row.get("new_state") is not None:
            state = int(row["new_state"])
        elif (serves(event, row.get("old"), row.get("new")) and role == LEADER
              and state in KNOWN_STATES):
            yield row, state == RECOVERING


def recovering_message(row: dict[str, Any]) -> str:
    what = ("acknowledged a produce" if row["event"] == "ProduceAcked"
            else f"advanced the HWM {row['old']} -> {row['new']}")
    return (f"rule 21: broker {row['broker_id']} {what} on {row['topic']}-{row['partition']} "
            f"while leading it RECOVERING (leader epoch {row['leader_epoch']})")


def final_leader(roles: Iterable[dict[str, Any]],
                 logs: dict[int, list[tuple[int, int, str | None, str]]]
                 ) -> tuple[int | None, int | None, str]:
    """(node, leader epoch, why) of the partition's reference log."""
    leaders = [r for r in roles if r.get("event") == "RoleChanged" and r.get("role") == LEADER
               and r.get("leader_epoch") is not None and r.get("broker_id") is not None]
    if leaders:
        best = max(leaders, key=lambda r: (r["leader_epoch"], r.get("ts") or 0))
        return int(best["broker_id"]), int(best["leader_epoch"]), "journal"
    ends = [(entries[-1][1], entries[-1][0], -node) for node, entries in logs.items() if entries]
    if not ends:
        return None, None, "none"
    epoch, _offset, neg_node = max(ends)
    return -neg_node, epoch, "longest log"


def check_partition_replicas(entries: Iterable[dict[str, Any]],
                             roles: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Rule 22 for one data partition. entries: partition-log rows (node, file, topic,
    partition, offset, leader_epoch, key, corrupt); roles: that partition's RoleChanged journal
    rows. Yields a REFERENCE row, one CHECKED/UNCHECKED row per other replica (count = entries),
    and one VIOLATION per follower holding entries the leader does not have."""
    logs: dict[int, list[tuple[int, int, str | None, str]]] = {}
    topic: str | None = None
    partition: int | None = None
    for e in entries:
        topic, partition = e["topic"], e["partition"]
        if e["corrupt"] or e["offset"] is None or e["offset"] < 0:
            continue
        logs.setdefault(int(e["node"]), []).append(
            (int(e["offset"]), int(e["leader_epoch"]), e["key"], e["file"]))
    role_list = list(roles)
    for r in role_list:
        topic, partition = r["topic"], r["partition"]
    for node_entries in logs.values():
        node_entries.sort()
    leader, epoch, why = final_leader(role_list, logs)
    base = {"topic": topic, "partition": partition}
    if leader is None:
        return
    leader_log = {o: (ep, key) for o, ep, key, _f in logs.get(leader, [])}
    leader_end = max(leader_log, default=-1) + 1
    yield {**base, "kind": REFERENCE, "node": leader, "leader_epoch": epoch,
           "count": len(leader_log), "message": why, "file": None, "offset": leader_end}
    followed = {int(r["broker_id"]) for r in role_list
                if r.get("event") == "RoleChanged" and r.get("role") == FOLLOWER
                and r.get("leader_epoch") is not None and epoch is not None
                and r["leader_epoch"] >= epoch}
    for node in sorted(logs):
        if node == leader:
            continue
        node_entries = logs[node]
        if role_list and node not in followed:
            yield {**base, "kind": UNCHECKED, "node": node, "leader_epoch": None,
                   "count": len(node_entries), "file": None, "offset": None,
                   "message": f"replica {node} never followed leader {leader} at epoch {epoch}"}
            continue
        yield {**base, "kind": CHECKED, "node": node, "leader_epoch": None,
               "count": len(node_entries), "file": None, "offset": None, "message": None}
        bad = entries_the_leader_lacks(leader_log, node_entries)
        if not bad:
            continue
        offset, bad_epoch, _key, file = bad[0]
        leader_epoch_there = leader_log.get(offset, (None, None))[0]
        yield {**base, "kind": VIOLATION, "node": node, "leader_epoch": bad_epoch,
               "count": len(bad), "file": file, "offset": offset,
               "message": f"rule 22: follower {node} of {topic}-{partition} kept {len(bad)} "
                          f"entries the final leader {leader} (epoch {epoch}, log end "
                          f"{leader_end}) does not have, from offset {offset} (epoch "
                          f"{bad_epoch}; leader's epoch there: {leader_epoch_there})"}


def entries_the_leader_lacks(
    leader_log: Mapping[int, tuple[int, str | None]],
    entries: Iterable[tuple[int, int, str | None, T]],
) -> list[tuple[int, int, str | None, T]]:
    """Rule 22: a follower's entries (offset, leader epoch, key, where) that its leader's log
    (offset -> (leader epoch, key)) does not have: no entry at that offset, or another one."""
    return [(o, ep, key, f) for o, ep, key, f in entries
            if o not in leader_log or leader_log[o] != (ep, key)]


def classify_acked(count_in_leader_log: int, recovered: bool,
                   idempotent: bool | None = True, removed: bool = False) -> str:
    """Rule 23's verdict on one acked acks=all write (idempotent None: the journal does not
    say, judged as idempotent). `removed`: its offset is below the final leader's log start
    offset or cleaner checkpoint, where retention or compaction may take it (rules 24, 25)."""
    if count_in_leader_log == 0 and removed:
        return REMOVED
    if count_in_leader_log == 1:
        return PRESENT
    if count_in_leader_log > 1:
        return DUPLICATED_COUNTED if idempotent is False else DUPLICATED
    return ATTRIBUTED if recovered else LOST












def acked_message(outcome: str, row: dict[str, Any]) -> str:
    where = f"{row['topic']}-{row['partition']}"
    if outcome == DUPLICATED:
        return (f"rule 23: acked write {row['key']} appears {row['count']} times in the final "
                f"leader's log of {where}")
    if outcome == ATTRIBUTED:
        return (f"rule 23: acked write {row['key']} (offset {row['offset']}) is not in the final "
                f"log of {where}; attributed to its unclean/designated election (RECOVERING)")
    return (f"rule 23: acked write {row['key']} (offset {row['offset']}, leader epoch "
            f"{row['leader_epoch']}) is missing from the final leader's log of {where} and no "
            f"unclean or designated election explains it")
