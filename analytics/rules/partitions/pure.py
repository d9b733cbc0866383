"""Rules 8, 10, 11, 13 and 19 over one controller's metadata log, record by record in log
order: every partition's registration is rebuilt with the controller's own merge
(PartitionRegistration.merge) and checked with controller.core.invariants after each record,
under the min ISR and the ELR feature level in force at that point of the log.

One pass in log order, every partition at once (a dict of their states), so the records need no
grouping and no sort: the audit's replay shards (analytics.rules.partitions.shards) feed it as they decode
the log, the single-process baseline (analytics.baseline) feeds it the same records, and both
get the same violations and tallies from this one definition. Pure Python, no Spark.

The min ISR in force (rule 9) is min(min.insync.replicas, replication factor): the topic's
ConfigRecord (by the topic's name, as TopicRecords map ids to names) over the cluster
default's (the broker resource named ""), else 1. A FeatureLevelRecord for ELR below 1
switches rule 10's ELR-off checks and rule 11 off.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from analytics.read.datasource import PARTITION_VALUE_NAMES
from analytics.rules.result import RuleResult, rule_result
from controller.core.invariants import (
    check_epochs_bumped,
    check_isr_elr_disjoint,
    check_last_known_elr,
    check_leader_election,
    check_recovering_isr,
    effective_min_isr,
)
from metadata.features import ELR_VERSION
from metadata.metadata_image import DEFAULT_MIN_INSYNC_REPLICAS, MIN_INSYNC_REPLICAS
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from metadata.records import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    LAST_KNOWN_LEADER_UNCHANGED,
    LEADER_RECOVERY_STATE_UNCHANGED,
    NO_LEADER,
    NO_LEADER_CHANGE,
    PartitionChangeRecord,
    PartitionRecord,
)
from metadata.transactions import TransactionHold
from raft.core.replica_key import uuid_from_str

PARTITION_RECORD_TYPES = ("PartitionRecord", "PartitionChangeRecord")
SIDE_RECORD_TYPES = ("TopicRecord", "ConfigRecord", "FeatureLevelRecord")
# LogReplay.side_record's arguments: these columns of a side record's row.
SIDE_FIELDS = ("record_type", "topic_id", "topic_name", "resource_type", "resource", "name",
               "value")
PARTITION_RULES = (8, 10, 11, 13, 19)
POINT = "point"
VIOLATION = "violation"
TALLY = "tally"  # one row per partition: how many states and changes its replay saw
_RULE_PREFIX = re.compile(r"^rule (\d+):")

# A partition record as LogReplay.partition_record takes it: partition_values' tuple
# (analytics.read.datasource: PARTITION_VALUE_NAMES, in that order), with null meaning "unchanged"
# in a PartitionChangeRecord.
_AT = {name: index for index, name in enumerate(PARTITION_VALUE_NAMES)}
(_TYPE, _TOPIC, _PARTITION, _LEADER, _LRS, _LEADER_EPOCH, _PARTITION_EPOCH, _LAST_KNOWN_LEADER,
 _REPLICAS, _ISR, _ELR, _LAST_KNOWN_ELR, _ADDING, _REMOVING) = (_AT[name] for name in (
    "record_type", "topic_id", "partition_id", "leader", "leader_recovery_state",
    "leader_epoch", "partition_epoch", "last_known_leader", "replicas", "isr", "elr",
    "last_known_elr", "adding_replicas", "removing_replicas"))

# A timeline point (what the report draws), as ints: offset, batch timestamp (NO_TIMESTAMP:
# none), 1 for a PartitionChangeRecord, leader, leader epoch, partition epoch, ISR size, ELR
# size, min ISR, 1 while RECOVERING (point_row names them).
NO_TIMESTAMP = -(2**63)
PointSink = Callable[[int, str, tuple[int, ...]], None]  # (partition index, file, point)


def _tuple(values: Any) -> tuple[int, ...] | None:
    return None if values is None else tuple(values)


def _change_record(values: tuple[Any, ...], topic_id: uuid.UUID) -> PartitionChangeRecord:
    """The PartitionChangeRecord the values were decoded from (null = "unchanged")."""
    leader, lrs, lkl = values[_LEADER], values[_LRS], values[_LAST_KNOWN_LEADER]
    return PartitionChangeRecord(
        partition_id=int(values[_PARTITION]),
        topic_id=topic_id,
        isr=_tuple(values[_ISR]),
        leader=NO_LEADER_CHANGE if leader is None else int(leader),
        replicas=_tuple(values[_REPLICAS]),
        removing_replicas=_tuple(values[_REMOVING]),
        adding_replicas=_tuple(values[_ADDING]),
        leader_recovery_state=LEADER_RECOVERY_STATE_UNCHANGED if lrs is None else int(lrs),
        eligible_leader_replicas=_tuple(values[_ELR]),
        last_known_elr=_tuple(values[_LAST_KNOWN_ELR]),
        last_known_leader=LAST_KNOWN_LEADER_UNCHANGED if lkl is None else int(lkl),
    )


def _full_record(values: tuple[Any, ...], topic_id: uuid.UUID) -> PartitionRecord:
    return PartitionRecord(
        partition_id=int(values[_PARTITION]),
        topic_id=topic_id,
        replicas=_tuple(values[_REPLICAS]) or (),
        isr=_tuple(values[_ISR]) or (),
        removing_replicas=_tuple(values[_REMOVING]) or (),
        adding_replicas=_tuple(values[_ADDING]) or (),
        leader=int(values[_LEADER]),
        leader_recovery_state=int(values[_LRS]),
        leader_epoch=int(values[_LEADER_EPOCH]),
        partition_epoch=int(values[_PARTITION_EPOCH]),
        eligible_leader_replicas=_tuple(values[_ELR]) or (),
        last_known_elr=_tuple(values[_LAST_KNOWN_ELR]) or (),
        last_known_leader=int(values[_LAST_KNOWN_LEADER]),
    )


@dataclass
class PartitionState:
    """One partition's registration so far and its tally: states (records applied), changes
    (PartitionChangeRecords), leader changes, and the time (batch timestamps) it had no leader
    or an ISR below the min ISR in force."""

    index: int  # its number in this replay, for a PointSink
    topic_id: str
    partition_id: int
    topic_uuid: uuid.UUID
    reg: PartitionRegistration | None = None
    states: int = 0
    changes: int = 0
    leader_changes: int = 0
    unavailable_ms: int = 0
    under_min_isr_ms: int = 0
    violations: int = 0
    last_ms: int | None = None  # the batch timestamp of the last state
    last_leader: int = NO_LEADER
    last_under_min_isr: bool = False
    last_where: tuple[str, int] = ("", -1)  # (file, offset) of the last state


class LogReplay:
    """Feed it one log's records in log order (the snapshot's, then the segments' by offset):
    side_record for TopicRecord, ConfigRecord and FeatureLevelRecord rows, partition_record
    for partition records, transaction_marker for the segments' KIP-868 markers. Violations
    come back from partition_record and transaction_marker; each state goes to `points` if
    one is given; `tallies` ends the replay.

    A transaction's records are held and applied at its End, dropped at its Abort, and never
    applied if the log ends first (metadata.transactions: the MetadataLoader's rule, as the
    nodes apply the log; the snapshot is read first, so none is open when it loads)."""

    def __init__(self, node: int, points: PointSink | None = None) -> None:
        self.node = node
        self.points = points
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self._topic_names: dict[str, str] = {}  # topic id -> name
        self._topic_min: dict[str, int | None] = {}  # topic name -> its min.insync.replicas
        self._cluster_min: int | None = None
        self._elr_enabled = True
        # Held: (True, partition_record's arguments) or (False, side_record's).
        self.transaction: TransactionHold[tuple[bool, tuple[Any, ...]]] = TransactionHold()

    def transaction_marker(self, record_type: str, offset: int) -> list[dict[str, Any]]:
        """A Begin/End/AbortTransactionRecord at `offset`; the violations of the records an
        End applies."""
        out: list[dict[str, Any]] = []
        for is_partition, args in self.transaction.marker(record_type, offset):
            if is_partition:
                out += self._partition_record(*args)
            else:
                self._side_record(*args)
        return out

    def side_record(self, record_type: str, topic_id: str | None, topic_name: str | None,
                    resource_type: int | None, resource: str | None, name: str | None,
                    value: str | None) -> None:
        """A TopicRecord (id -> name), a min.insync.replicas ConfigRecord (a topic's, or the
        cluster default: the broker resource ""), or the ELR FeatureLevelRecord; any other
        row changes nothing."""
        args = (record_type, topic_id, topic_name, resource_type, resource, name, value)
        if not (self.transaction.open and self.transaction.hold((False, args))):
            self._side_record(*args)

    def _side_record(self, record_type: str, topic_id: str | None, topic_name: str | None,
                     resource_type: int | None, resource: str | None, name: str | None,
                     value: str | None) -> None:
        if record_type == "TopicRecord":
            if topic_id is not None and topic_name is not None:
                self._topic_names[topic_id] = topic_name
        elif record_type == "ConfigRecord" and name == MIN_INSYNC_REPLICAS:
            configured = None if value is None else int(value)
            if resource_type == CONFIG_RESOURCE_TOPIC and resource is not None:
                self._topic_min[resource] = configured
            elif resource_type == CONFIG_RESOURCE_BROKER and resource == "":
                self._cluster_min = configured
        elif record_type == "FeatureLevelRecord" and name == ELR_VERSION and value is not None:
            self._elr_enabled = int(value) >= 1

    def _min_isr(self, topic_id: str, replicas: int) -> int:
        name = self._topic_names.get(topic_id)
        configured = self._topic_min.get(name) if name is not None else None
        if configured is None:
            configured = self._cluster_min
        return effective_min_isr(
            configured if configured is not None else DEFAULT_MIN_INSYNC_REPLICAS, replicas)

    def state_of(self, topic_id: str, partition_id: int) -> PartitionState:
        key = (topic_id, partition_id)
        state = self.partitions.get(key)
        if state is None:
            state = self.partitions[key] = PartitionState(
                len(self.partitions), topic_id, partition_id, uuid_from_str(topic_id))
        return state

    def partition_record(self, values: tuple[Any, ...], file: str, offset: int,
                         batch_timestamp_ms: int | None, in_snapshot: bool = False
                         ) -> list[dict[str, Any]]:
        """Apply one PartitionRecord / PartitionChangeRecord (values: PARTITION_VALUE_NAMES); the
        violations it shows (rules 8, 10, 11, 13, 19), each with where it was found. Inside a
        transaction: held, nothing yet."""
        if self.transaction.open:  # the hot path allocates nothing more
            self.transaction.hold((True, (values, file, offset, batch_timestamp_ms, in_snapshot)))
            return []
        return self._partition_record(values, file, offset, batch_timestamp_ms, in_snapshot)

    def _partition_record(self, values: tuple[Any, ...], file: str, offset: int,
                          batch_timestamp_ms: int | None, in_snapshot: bool
                          ) -> list[dict[str, Any]]:
        record_type = values[_TYPE]
        state = self.state_of(values[_TOPIC], values[_PARTITION])
        reg = state.reg
        messages: list[str] = []
        before = None  # the state a PartitionChangeRecord applies to (rule 13's change check)
        if record_type == "PartitionRecord":
            after = PartitionRegistration.from_record(_full_record(values, state.topic_uuid))
            if reg is not None and not in_snapshot:
                messages += check_epochs_bumped(reg, after)  # rule 8: a re-sent full state
        elif reg is None:
            state.violations += 1
            return [self._violation(8, "rule 8: PartitionChangeRecord for a partition with no "
                                       "PartitionRecord before it", state, record_type, file,
                                    offset, batch_timestamp_ms)]
        else:
            after = reg.merge(_change_record(values, state.topic_uuid))  # the one merge
            messages += check_epochs_bumped(reg, after)  # rule 8
            before = reg
        elr_enabled = self._elr_enabled
        min_isr = self._min_isr(state.topic_id, len(after.replicas))
        messages += check_isr_elr_disjoint(after, min_isr, elr_enabled)  # rule 10
        if elr_enabled:
            messages += check_last_known_elr(after, min_isr)  # rule 11
        messages += check_leader_election(after, before=before)  # rule 13, no broker view
        messages += check_recovering_isr(after)  # rule 19
        state.reg = after
        self._tally(state, after, record_type, min_isr, file, offset, batch_timestamp_ms)
        if not messages:
            return []
        state.violations += len(messages)
        out = []
        for message in messages:
            match = _RULE_PREFIX.match(message)
            out.append(self._violation(int(match.group(1)) if match else 0, message, state,
                                       record_type, file, offset, batch_timestamp_ms))
        return out

    def _tally(self, state: PartitionState, after: PartitionRegistration, record_type: str,
               min_isr: int, file: str, offset: int, batch_timestamp_ms: int | None) -> None:
        """The state into the partition's tally and, as a point, into `points`."""
        now = batch_timestamp_ms or 0
        if state.states:
            held = max(0, now - (state.last_ms or 0))
            if state.last_leader == NO_LEADER:
                state.unavailable_ms += held
            if state.last_under_min_isr:
                state.under_min_isr_ms += held
            state.leader_changes += after.leader != state.last_leader
        state.states += 1
        is_change = record_type == "PartitionChangeRecord"
        state.changes += is_change
        state.last_ms = batch_timestamp_ms
        state.last_leader = after.leader
        isr_size = len(after.isr)
        state.last_under_min_isr = isr_size < min_isr
        state.last_where = (file, offset)
        if self.points is not None:
            self.points(state.index, file, (
                offset, NO_TIMESTAMP if batch_timestamp_ms is None else batch_timestamp_ms, is_change,
                after.leader, after.leader_epoch, after.partition_epoch, isr_size,
                len(after.elr), min_isr,
                after.leader_recovery_state == LeaderRecoveryState.RECOVERING))

    def _violation(self, rule: int, message: str, state: PartitionState, record_type: str,
                   file: str, offset: int, batch_timestamp_ms: int | None) -> dict[str, Any]:
        return {"kind": VIOLATION, "rule": rule, "message": message, "node": self.node,
                "file": file, "offset": offset, "topic_id": state.topic_id,
                "partition_id": state.partition_id, "record_type": record_type,
                "batch_timestamp_ms": batch_timestamp_ms}

    def tallies(self) -> Iterator[dict[str, Any]]:
        """One TALLY row per partition that has a state, where its last state was found."""
        for state in self.partitions.values():
            if not state.states:
                continue
            file, offset = state.last_where
            yield {"kind": TALLY, "rule": None, "message": None, "node": self.node,
                   "file": file, "offset": offset, "topic_id": state.topic_id,
                   "partition_id": state.partition_id, "states": state.states,
                   "changes": state.changes, "unavailable_ms": state.unavailable_ms,
                   "under_min_isr_ms": state.under_min_isr_ms,
                   "leader_changes": state.leader_changes}


def point_row(node: int, state: PartitionState, file: str, point: tuple[int, ...]
              ) -> dict[str, Any]:
    """A timeline point as a replay output row (analytics.rules.partitions.shards.REPLAY_OUTPUT_COLUMNS)."""
    (offset, batch_timestamp_ms, is_change, leader, leader_epoch, partition_epoch, isr_size,
     elr_size, min_isr, recovering) = point
    return {"kind": POINT, "rule": None, "message": None, "node": node, "file": file,
            "offset": offset, "topic_id": state.topic_id, "partition_id": state.partition_id,
            "record_type": "PartitionChangeRecord" if is_change else "PartitionRecord",
            "batch_timestamp_ms": None if batch_timestamp_ms == NO_TIMESTAMP else batch_timestamp_ms,
            "leader": leader, "leader_epoch": leader_epoch, "partition_epoch": partition_epoch,
            "isr_size": isr_size, "elr_size": elr_size, "min_isr": min_isr,
            "recovering": bool(recovering)}


# What a replay_in_log_order item is: a side record, a partition record, a transaction marker.
SIDE_ITEM, PARTITION_ITEM, MARKER_ITEM = 0, 1, 2


def replay_in_log_order(node: int, items: list[tuple[int, int, int, tuple[Any, ...]]]
                     ) -> list[RuleResult]:
    """Rules 8, 10, 11, 13, 19 over the replay source's records as the baseline gathers them
    ((major, minor, SIDE/PARTITION/MARKER_ITEM, LogReplay arguments)), sorted into log order (a
    stable sort: the snapshot's first) and replayed as the Spark audit's shards replay them."""
    items.sort(key=lambda item: (item[0], item[1]))
    replay = LogReplay(node)
    violations: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for _major, _minor, kind, args in items:
        if kind == SIDE_ITEM:
            replay.side_record(*args)
            continue
        found = (replay.partition_record(*args) if kind == PARTITION_ITEM
                 else replay.transaction_marker(*args))
        for out in found:
            out["partition"] = f"{out['topic_id']}-{out['partition_id']}"
            violations[out["rule"]].append(out)
    states = sum(s.states for s in replay.partitions.values())
    changes = sum(s.changes for s in replay.partitions.values())
    results = []
    for rule in PARTITION_RULES:
        found = sorted(violations.get(rule, []), key=lambda v: (v["offset"], v["topic_id"],
                                                                 v["partition_id"]))
        results.append(rule_result(rule, changes if rule == 8 else states, found))
    return results

