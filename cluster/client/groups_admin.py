"""Consumer group administration on Kafka's protocol, as Kafka's kafka-consumer-groups.sh does it:
ListGroups on every broker (each answers the groups it coordinates), the rest on the group's
coordinator (FindCoordinator, asked again when it moved); a reset commits with generation -1
(`minikraft consumer-groups`, the chaos group consumers)."""

from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass
from typing import Any

from cluster.client.bootstrap import UNREACHABLE, send_to_any
from kafkawire.api_keys import ApiKey
from kafkawire.client import KafkaClient
from kafkawire.entities import build, item_type
from kafkawire.errors import Errors, KafkaError
from kafkawire.messages import request_schema

GROUP_KEY_TYPE = 0
EARLIEST, LATEST = -2, -1
COORDINATOR_RETRY_S = 15.0
_MOVED = frozenset(
    {Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS}
)
_V = {  # one version per API, the newest our brokers advertise
    ApiKey.METADATA: 12,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.FIND_COORDINATOR: 4,
    ApiKey.LIST_GROUPS: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.OFFSET_FETCH: 8,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.DELETE_GROUPS: 2,
}


def _request(key: ApiKey, **fields: Any) -> Any:
    return build(request_schema(int(key), _V[key]), **fields)


def _check(code: Any, what: str) -> None:
    error = Errors.of(int(code))
    if error is not Errors.NONE:
        raise KafkaError(error, what)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """Kafka's ConsumerProtocolAssignment (version, [topic, [partition]], user data)."""
    if len(data) < 6:
        return {}
    position = 2  # version
    (count,) = struct.unpack_from(">i", data, position)
    position += 4
    out: dict[str, list[int]] = {}
    for _ in range(max(0, count)):
        (length,) = struct.unpack_from(">h", data, position)
        position += 2
        topic = data[position : position + length].decode()
        position += length
        (partitions,) = struct.unpack_from(">i", data, position)
        position += 4
        out[topic] = list(struct.unpack_from(f">{partitions}i", data, position))
        position += 4 * partitions
    return out


@dataclass
class Cluster:
    """What the commands need from Metadata: broker addresses and partition leaders."""

    brokers: dict[int, str]
    leaders: dict[tuple[str, int], int]


class GroupsAdmin:
    def __init__(self, client: KafkaClient, bootstrap: str) -> None:
        self.client = client
        self.bootstrap = bootstrap

    async def cluster(self, topics: list[str] | None) -> Cluster:
        topic_cls = item_type(request_schema(int(ApiKey.METADATA), _V[ApiKey.METADATA]), "topics")
        _addr, answer = await send_to_any(
            self.client,
            self.bootstrap,
            _request(
                ApiKey.METADATA,
                topics=None if topics is None else tuple(build(topic_cls, name=t, topic_id=None) for t in topics),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            ),
        )
        brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in answer.brokers}
        leaders = {}
        for topic in answer.topics:
            _check(topic.error_code, f"topic {topic.name}")
            for p in topic.partitions:
                leaders[(str(topic.name), int(p.partition_index))] = int(p.leader_id)
        return Cluster(brokers, leaders)

    async def coordinator(self, group: str) -> str:
        deadline = time.monotonic() + COORDINATOR_RETRY_S
        while True:
            _addr, answer = await send_to_any(
                self.client,
                self.bootstrap,
                _request(ApiKey.FIND_COORDINATOR, key_type=GROUP_KEY_TYPE, coordinator_keys=(group,)),
            )
            found = answer.coordinators[0]
            error = Errors.of(int(found.error_code))
            if error is Errors.NONE:
                return f"{found.host}:{found.port}"
            if error not in _MOVED or time.monotonic() > deadline:
                raise KafkaError(error, found.error_message or f"coordinator of group {group}")
            await asyncio.sleep(0.2)

    async def to_coordinator(self, group: str, body: Any, error_of: Any) -> Any:
        """Send to the group's coordinator; find it again while it moves (bounded)."""
        deadline = time.monotonic() + COORDINATOR_RETRY_S
        while True:
            answer = await self.client.request(await self.coordinator(group), body)
            error = Errors.of(int(error_of(answer)))
            if error not in _MOVED or time.monotonic() > deadline:
                return answer
            await asyncio.sleep(0.2)

    async def list_groups(self) -> list[dict[str, Any]]:
        cluster = await self.cluster([])
        groups: dict[str, dict[str, Any]] = {}
        for address in cluster.brokers.values():
            try:
                answer = await self.client.request(
                    address, _request(ApiKey.LIST_GROUPS, states_filter=())
                )
            except KafkaError as exc:
                if exc.error not in UNREACHABLE:
                    raise
                continue  # a broker just lost: its groups moved to the new coordinators
            _check(answer.error_code, f"ListGroups at {address}")
            for g in answer.groups:
                groups[str(g.group_id)] = {
                    "group": str(g.group_id), "state": g.group_state, "protocol_type": g.protocol_type,
                }
        return [groups[name] for name in sorted(groups)]

    async def describe_group(self, group: str) -> Any:
        answer = await self.to_coordinator(
            group,
            _request(ApiKey.DESCRIBE_GROUPS, groups=(group,), include_authorized_operations=False),
            lambda a: a.groups[0].error_code,
        )
        described = answer.groups[0]
        _check(described.error_code, f"group {group}")
        return described

    async def committed(self, group: str) -> dict[tuple[str, int], int]:
        group_cls = item_type(request_schema(int(ApiKey.OFFSET_FETCH), _V[ApiKey.OFFSET_FETCH]), "groups")
        answer = await self.to_coordinator(
            group,
            _request(ApiKey.OFFSET_FETCH, groups=(group_cls(group_id=group, topics=None),), require_stable=False),
            lambda a: a.groups[0].error_code,
        )
        fetched = answer.groups[0]
        _check(fetched.error_code, f"offsets of group {group}")
        return {
            (str(t.name), int(p.partition_index)): int(p.committed_offset)
            for t in fetched.topics
            for p in t.partitions
            if int(p.committed_offset) >= 0
        }

    async def log_offsets(
        self, cluster: Cluster, partitions: list[tuple[str, int]], timestamp: int
    ) -> dict[tuple[str, int], int]:
        """Earliest (-2) or latest (-1) offset of each partition, asked of its leader."""
        schema = request_schema(int(ApiKey.LIST_OFFSETS), _V[ApiKey.LIST_OFFSETS])
        topic_cls = item_type(schema, "topics")
        partition_cls = item_type(topic_cls, "partitions")
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, partition in partitions:
            leader = cluster.leaders.get((topic, partition), -1)
            if leader < 0:
                raise KafkaError(Errors.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader")
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
        out: dict[tuple[str, int], int] = {}
        for leader, topics in by_leader.items():
            body = build(
                schema,
                replica_id=-1,
                isolation_level=0,
                topics=tuple(
                    topic_cls(
                        name=topic,
                        partitions=tuple(
                            build(partition_cls, partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                            for p in parts
                        ),
                    )
                    for topic, parts in topics.items()
                ),
            )
            answer = await self.client.request(cluster.brokers[leader], body)
            for t in answer.topics:
                for p in t.partitions:
                    _check(p.error_code, f"offsets of {t.name}-{p.partition_index}")
                    out[(str(t.name), int(p.partition_index))] = int(p.offset)
        return out

    async def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        schema = request_schema(int(ApiKey.OFFSET_COMMIT), _V[ApiKey.OFFSET_COMMIT])
        topic_cls = item_type(schema, "topics")
        partition_cls = item_type(topic_cls, "partitions")
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))
        body = build(
            schema,
            group_id=group,
            generation_id_or_member_epoch=-1,  # not a member: allowed while the group is Empty
            member_id="",
            group_instance_id=None,
            topics=tuple(
                topic_cls(
                    name=topic,
                    partitions=tuple(
                        partition_cls(partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
                        for p, o in parts
                    ),
                )
                for topic, parts in by_topic.items()
            ),
        )
        answer = await self.to_coordinator(group, body, lambda a: a.topics[0].partitions[0].error_code if a.topics else 0)
        for t in answer.topics:
            for p in t.partitions:
                _check(p.error_code, f"commit of {t.name}-{p.partition_index}")

    async def delete(self, group: str) -> None:
        answer = await self.to_coordinator(
            group, _request(ApiKey.DELETE_GROUPS, groups_names=(group,)), lambda a: a.results[0].error_code
        )
        _check(answer.results[0].error_code, f"group {group}")


async def describe_report(admin: GroupsAdmin, group: str) -> dict[str, Any]:
    """Kafka's --describe: each assigned or committed partition with its offsets and lag."""
    described = await admin.describe_group(group)
    if described.group_state == "Dead":
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group '{group}' does not exist.")
    owners: dict[tuple[str, int], Any] = {}
    members = []
    for m in described.members:
        assignment = decode_assignment(bytes(m.member_assignment))
        members.append({
            "member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
            "assignment": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items())],
        })
        for topic, assigned in assignment.items():
            for p in assigned:
                owners[(topic, p)] = m
    committed = await admin.committed(group)
    partitions = sorted(set(committed) | set(owners))
    topics = sorted({t for t, _p in partitions})
    ends = (
        await admin.log_offsets(await admin.cluster(topics), partitions, LATEST) if partitions else {}
    )
    offsets = []
    for tp in partitions:
        current = committed.get(tp)
        end = ends.get(tp)
        owner = owners.get(tp)
        offsets.append({
            "topic": tp[0], "partition": tp[1], "current_offset": current, "log_end_offset": end,
            "lag": None if current is None or end is None else max(0, end - current),
            "consumer_id": owner.member_id if owner else None,
            "host": owner.client_host if owner else None,
            "client_id": owner.client_id if owner else None,
        })
    return {
        "group": group, "state": described.group_state, "protocol_type": described.protocol_type,
        "assignor": described.protocol_data, "coordinator": await admin.coordinator(group),
        "members": members, "offsets": offsets,
    }


async def reset_plan(
    admin: GroupsAdmin, group: str, topics: list[str], all_topics: bool, target: tuple[str, int]
) -> dict[tuple[str, int], int]:
    """The offsets a reset would commit, per partition (Kafka clamps to [earliest, latest])."""
    committed = await admin.committed(group)
    names = sorted({t for t, _p in committed}) if all_topics else sorted({t.split(":")[0] for t in topics})
    cluster = await admin.cluster(names)
    wanted: list[tuple[str, int]] = []
    for item in topics if not all_topics else names:
        name, _sep, listed = item.partition(":")
        chosen = (
            [int(p) for p in listed.split(",") if p.strip()]
            if listed
            else sorted(p for t, p in cluster.leaders if t == name)
        )
        for p in chosen:
            if (name, p) not in cluster.leaders:
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{name}-{p}")
            wanted.append((name, p))
    earliest = await admin.log_offsets(cluster, wanted, EARLIEST)
    latest = await admin.log_offsets(cluster, wanted, LATEST)
    kind, value = target
    plan = {}
    for tp in wanted:
        if kind == "earliest":
            offset = earliest[tp]
        elif kind == "latest":
            offset = latest[tp]
        elif kind == "offset":
            offset = value
        else:  # shift-by, from the committed offset (or the log end when there is none)
            offset = committed.get(tp, latest[tp]) + value
        plan[tp] = min(max(offset, earliest[tp]), latest[tp])
    return plan
