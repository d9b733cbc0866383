"""What the page shows, built from one poll, and the diff from the previous poll.

Inputs per tick (gathered by runtime/poller.py, bounded: one HTTP status per node, one
DescribeQuorum, the new bytes of one metadata log): the MetadataView, each node's /v1/status
(None when it did not answer), the quorum as its leader describes it, the faults journaled so
far. Output: a Tick holding only what changed (rows, quorum, brokers, new log entries, new
timeline points); the runtime sends each subscriber the part its filter selects. Rows are plain
JSON-able dicts so a diff is a dict comparison.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster.console.core.metadata_view import LogEntry, MetadataView
from metadata.partition_registration import LeaderRecoveryState
from raft.core.replica_key import uuid_to_str

Row = dict[str, Any]
TIMELINE_POINTS = 400  # per partition, newest kept
TIMELINE_PARTITIONS = 20_000


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def replica_offsets(
    key: str, replicas: Iterable[int], broker_status: Mapping[int, dict[str, Any] | None]
) -> list[list[Any]]:
    """[[broker id, log end offset, high watermark, role]] per replica; None where the broker
    did not answer or does not host the partition yet."""
    out: list[list[Any]] = []
    for broker_id in replicas:
        status = broker_status.get(broker_id)
        hosted = (status or {}).get("partitions", {}).get(key)
        if hosted is None:
            out.append([broker_id, None, None, None])
        else:
            out.append([broker_id, hosted.get("log_end_offset"), hosted.get("high_watermark"),
                        hosted.get("role")])
    return out


def partition_rows(
    view: MetadataView, broker_status: Mapping[int, dict[str, Any] | None]
) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for (topic_id, partition), reg in view.partitions.items():
        topic = view.topic_name(topic_id)
        key = partition_key(topic, partition)
        offsets = replica_offsets(key, reg.replicas, broker_status)
        leader_hwm = next((o[2] for o in offsets if o[0] == reg.leader), None)
        rows[key] = {
            "key": key,
            "topic": topic,
            "partition": partition,
            "leader": reg.leader,
            "leader_epoch": reg.leader_epoch,
            "partition_epoch": reg.partition_epoch,
            "replicas": list(reg.replicas),
            "isr": list(reg.isr),
            "elr": list(reg.elr),
            "last_known_elr": list(reg.last_known_elr),
            "last_known_leader": reg.last_known_leader,
            "leader_recovery_state": LeaderRecoveryState(reg.leader_recovery_state).name,
            "min_isr": _min_isr(view, topic, len(reg.replicas)),
            "hwm": leader_hwm,
            "offsets": offsets,
        }
    return rows


def _min_isr(view: MetadataView, topic: str, replication_factor: int) -> int:
    return min(view.image.topic_min_insync_replicas(topic), replication_factor)


def diff_rows(old: Mapping[str, Row], new: Mapping[str, Row]) -> tuple[list[Row], list[str]]:
    """(rows new or different, keys gone)."""
    changed = [row for key, row in new.items() if old.get(key) != row]
    removed = [key for key in old if key not in new]
    return changed, removed


ONLY_CHOICES = ("", "offline", "under-min-isr", "elr", "recovering", "changed")


@dataclass(frozen=True)
class RowFilter:
    """Server-side filter of a subscription: a topic regex (or plain substring when it does not
    compile), a partition number, and one of ONLY_CHOICES."""

    topic: str = ""
    partition: int | None = None
    only: str = ""
    selected: str = ""  # the partition whose timeline the page draws

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> RowFilter:
        partition = query.get("partition", "").strip()
        only = query.get("only", "")
        return cls(
            topic=query.get("topic", "").strip(),
            partition=int(partition) if partition.lstrip("-").isdigit() else None,
            only=only if only in ONLY_CHOICES else "",
            selected=query.get("select", "").strip(),
        )

    def _topic_ok(self, topic: str | None) -> bool:
        if not self.topic:
            return True
        if topic is None:
            return False
        try:
            return re.search(self.topic, topic) is not None
        except re.error:
            return self.topic in topic

    def matches(self, row: Row, recently_changed: bool = False) -> bool:
        if not self._topic_ok(row["topic"]):
            return False
        if self.partition is not None and row["partition"] != self.partition:
            return False
        if self.only == "offline":
            return bool(row["leader"] < 0)
        if self.only == "under-min-isr":
            return len(row["isr"]) < row["min_isr"]
        if self.only == "elr":
            return bool(row["elr"] or row["last_known_elr"])
        if self.only == "recovering":
            return row["leader_recovery_state"] == "RECOVERING"
        if self.only == "changed":
            return recently_changed
        return True

    def matches_entry(self, entry: dict[str, Any]) -> bool:
        """A log entry: with a topic or partition filter, only that topic's records (its
        TopicRecord, configs, partitions); without one, every record."""
        if self.partition is not None and entry.get("partition") != self.partition:
            return False
        return not self.topic or self._topic_ok(entry.get("topic"))


@dataclass
class Timelines:
    """Per partition, a point each time leader, ISR/ELR size or HWM changed (bounded)."""

    points: dict[str, deque[list[Any]]] = field(default_factory=dict)

    def observe(self, rows: Iterable[Row], now_ms: int) -> dict[str, list[Any]]:
        added: dict[str, list[Any]] = {}
        for row in rows:
            point = [now_ms, row["leader"], len(row["isr"]), len(row["elr"]), row["hwm"]]
            series = self.points.get(row["key"])
            if series is None:
                if len(self.points) >= TIMELINE_PARTITIONS:
                    continue
                series = self.points[row["key"]] = deque(maxlen=TIMELINE_POINTS)
            if series and series[-1][1:] == point[1:]:
                continue
            series.append(point)
            added[row["key"]] = point
        return added

    def series(self, key: str) -> list[list[Any]]:
        return list(self.points.get(key, ()))


def quorum_model(
    view: MetadataView,
    controller_status: Mapping[int, dict[str, Any] | None],
    described: dict[str, Any] | None,
) -> dict[str, Any]:
    """Controllers (role, epoch, log end, HWM as each reports), voters as (id, directory id),
    observers, the active controller, kraft.version and finalized features."""
    controllers: list[dict[str, Any]] = []
    for node_id, status in sorted(controller_status.items()):
        if status is None:
            controllers.append({"id": node_id, "up": False})
            continue
        controllers.append({
            "id": node_id, "up": True, "role": status.get("role"),
            "epoch": status.get("epoch"), "leader_id": status.get("leader_id"),
            "log_end_offset": status.get("log_end_offset"),
            "high_watermark": status.get("high_watermark"),
            "directory_id": status.get("directory_id"),
        })
    voters = [{"id": i, "directory_id": d} for i, d in view.voters]
    observers: list[dict[str, Any]] = []
    leader_id = None
    leader_epoch = None
    hwm = None
    if described is not None:
        leader_id = described.get("leader_id")
        leader_epoch = described.get("leader_epoch")
        hwm = described.get("high_watermark")
        if described.get("voters"):
            voters = described["voters"]
        observers = described.get("observers", [])
    return {
        "leader_id": leader_id,
        "leader_epoch": leader_epoch,
        "high_watermark": hwm,
        "controllers": controllers,
        "voters": voters,
        "observers": observers,
        "kraft_version": view.kraft_version,
        "features": dict(sorted(view.image.features.items())),
        "metadata_offset": view.next_offset,
    }


def brokers_model(
    view: MetadataView,
    broker_ids: Iterable[int],
    broker_status: Mapping[int, dict[str, Any] | None],
    clean_shutdown_files: Mapping[int, bool],
) -> list[dict[str, Any]]:
    """Each broker as the metadata log registers it (epoch, fenced, controlled shutdown) and as
    the process reports itself (up, whether its last start found a clean-shutdown file)."""
    out = []
    for broker_id in sorted(set(broker_ids) | set(view.image.brokers)):
        reg = view.image.brokers.get(broker_id)
        status = broker_status.get(broker_id)
        out.append({
            "id": broker_id,
            "up": status is not None,
            "registered": reg is not None,
            "epoch": None if reg is None else reg.epoch,
            "fenced": None if reg is None else reg.fenced,
            "in_controlled_shutdown": None if reg is None else reg.in_controlled_shutdown,
            "incarnation_id": None if reg is None else uuid_to_str(reg.incarnation_id),
            "started_after_clean_shutdown": (status or {}).get("started_after_clean_shutdown"),
            "clean_shutdown_file": clean_shutdown_files.get(broker_id, False),
            "partitions": len((status or {}).get("partitions", {})),
        })
    return out


@dataclass
class Tick:
    """One poll's changes."""

    ts_ms: int
    changed: list[Row]
    removed: list[str]
    log: list[dict[str, Any]]
    quorum: dict[str, Any] | None  # None: unchanged
    brokers: list[dict[str, Any]] | None
    timeline: dict[str, list[Any]]
    faults: list[dict[str, Any]]
    cluster_down: str | None


@dataclass
class ConsoleState:
    """Everything the page can be sent: the last rows, quorum and brokers, the timelines, the
    faults journaled, and when each row last changed (for the "changed" filter)."""

    rows: dict[str, Row] = field(default_factory=dict)
    quorum: dict[str, Any] = field(default_factory=dict)
    brokers: list[dict[str, Any]] = field(default_factory=list)
    timelines: Timelines = field(default_factory=Timelines)
    faults: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=2000))
    changed_at: dict[str, int] = field(default_factory=dict)
    cluster_down: str | None = None

    def advance(
        self,
        now_ms: int,
        rows: dict[str, Row],
        quorum: dict[str, Any],
        brokers: list[dict[str, Any]],
        log: list[LogEntry],
        faults: list[dict[str, Any]],
        cluster_down: str | None,
    ) -> Tick:
        changed, removed = diff_rows(self.rows, rows)
        for row in changed:
            self.changed_at[row["key"]] = now_ms
        for key in removed:
            self.changed_at.pop(key, None)
        self.rows = rows
        timeline = self.timelines.observe(changed, now_ms)
        quorum_changed = quorum != self.quorum
        brokers_changed = brokers != self.brokers
        self.quorum, self.brokers = quorum, brokers
        self.faults.extend(faults)
        down_changed = cluster_down != self.cluster_down
        self.cluster_down = cluster_down
        return Tick(
            now_ms, changed, removed, [e.to_json() for e in log],
            quorum if quorum_changed or down_changed else None,
            brokers if brokers_changed or down_changed else None,
            timeline, faults, cluster_down,
        )

    def recently_changed(self, key: str, now_ms: int, window_ms: int = 10_000) -> bool:
        return now_ms - self.changed_at.get(key, -window_ms - 1) <= window_ms

    def filtered_rows(self, flt: RowFilter, now_ms: int) -> list[Row]:
        return sorted(
            (r for r in self.rows.values()
             if flt.matches(r, self.recently_changed(r["key"], now_ms))),
            key=lambda r: (r["topic"], r["partition"]),
        )

    def tick_for(self, tick: Tick, flt: RowFilter) -> dict[str, Any]:
        """The part of a tick one subscriber sees (its filter applied server-side)."""
        message: dict[str, Any] = {
            "ts": tick.ts_ms,
            "changed": [r for r in tick.changed if flt.matches(r, True)],
            # A row that changed out of the filter is removed from that page.
            "removed": tick.removed + [r["key"] for r in tick.changed
                                       if not flt.matches(r, True)],
            "log": [e for e in tick.log if flt.matches_entry(e)],
            "faults": tick.faults,
            "down": tick.cluster_down,
        }
        if tick.quorum is not None:
            message["quorum"] = tick.quorum
        if tick.brokers is not None:
            message["brokers"] = tick.brokers
        if flt.selected and flt.selected in tick.timeline:
            message["timeline"] = {flt.selected: tick.timeline[flt.selected]}
        return message

    def full_for(self, flt: RowFilter, now_ms: int, log: Iterable[LogEntry],
                 log_limit: int = 500) -> dict[str, Any]:
        """What a new subscriber is sent first: every row its filter selects, the last log
        entries it selects, quorum, brokers, faults, and the selected partition's timeline."""
        entries = [e.to_json() for e in log]
        entries = [e for e in entries if flt.matches_entry(e)][-log_limit:]
        return {
            "ts": now_ms,
            "rows": self.filtered_rows(flt, now_ms),
            "total": len(self.rows),
            "log": entries,
            "quorum": self.quorum,
            "brokers": self.brokers,
            "faults": list(self.faults),
            "down": self.cluster_down,
            "timeline": {flt.selected: self.timelines.series(flt.selected)}
            if flt.selected else {},
        }
