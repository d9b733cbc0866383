"""The group coordinator's APIs on Kafka's wire protocol (classic protocol): FindCoordinator,
JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
DescribeGroups, DeleteGroups, OffsetDelete. Each handler translates the kio request of any advertised version
into GroupCoordinator calls and the answer into the response of the same version.

A group whose offsets partition this broker does not lead is answered NOT_COORDINATOR (the
client asks FindCoordinator again), as Kafka does.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from broker.core.classic_group import GroupState
from broker.core.group_coordinator_shard import JoinRequest, JoinResult
from broker.runtime.broker_context import BrokerContext, listener_name
from broker.runtime.group_coordinator import GroupCoordinator
from kafkawire.api_keys import ApiKey
from kafkawire.authorized_operations import GROUP_OPERATIONS, NOT_REQUESTED
from kafkawire.connection import KafkaRequestContext
from kafkawire.constants import NO_LEADER_EPOCH
from kafkawire.entities import build, item_type
from kafkawire.errors import Errors, KafkaError
from kafkawire.messages import KafkaRequest, error_code, response_schema

GROUP_KEY_TYPE = 0  # FindCoordinator: 0 group, 1 transaction (not served: no transactions)
TRANSACTION_KEY_TYPE = 1
NO_TRANSACTIONS = (
    "minikraft has no transaction coordinator: no transactional.id is usable "
    "(idempotent producers are)"
)
NO_OFFSET = -1

GroupHandler = Callable[[Any, int, KafkaRequestContext], Awaitable[Any]]


def _ms(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def _client_host(ctx: KafkaRequestContext) -> str:
    return f"/{ctx.peer[0]}" if ctx.peer else ""


class KafkaGroupApis:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.coordinator = GroupCoordinator(broker)
        self.handlers: dict[ApiKey, GroupHandler] = {
            ApiKey.FIND_COORDINATOR: self._find_coordinator,
            ApiKey.JOIN_GROUP: self._join_group,
            ApiKey.SYNC_GROUP: self._sync_group,
            ApiKey.HEARTBEAT: self._heartbeat,
            ApiKey.LEAVE_GROUP: self._leave_group,
            ApiKey.OFFSET_COMMIT: self._offset_commit,
            ApiKey.OFFSET_FETCH: self._offset_fetch,
            ApiKey.LIST_GROUPS: self._list_groups,
            ApiKey.DESCRIBE_GROUPS: self._describe_groups,
            ApiKey.DELETE_GROUPS: self._delete_groups,
            ApiKey.OFFSET_DELETE: self._offset_delete,
        }

    async def handle(self, request: KafkaRequest, ctx: KafkaRequestContext) -> Any:
        header = request.header
        return await self.handlers[ApiKey(header.api_key)](request.body, header.api_version, ctx)

    # ---- FindCoordinator ----

    async def _find_coordinator(self, body: Any, version: int, ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.FIND_COORDINATOR), version)
        key_type = int(getattr(body, "key_type", GROUP_KEY_TYPE))
        keys = list(body.coordinator_keys) if version >= 4 else [body.key]
        answers = []
        for key in keys:
            values: dict[str, Any] = {"node_id": -1, "host": "", "port": -1}
            message: str | None
            if key_type == TRANSACTION_KEY_TYPE:
                # Kafka's answer for a transactional id the caller may not use (KafkaApis
                # getCoordinator): the one InitProducerId gives a transactional id here too.
                # Clients treat it as fatal at once; COORDINATOR_NOT_AVAILABLE would have them
                # retry until their timeout for a coordinator that never comes.
                error, message = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, NO_TRANSACTIONS
            elif key_type != GROUP_KEY_TYPE:
                error, message = Errors.INVALID_REQUEST, "only group coordinators (key type 0)"
            else:
                try:
                    found = self.coordinator.find_coordinator(key, listener_name(ctx, self.broker))
                    values = {"node_id": found.node_id, "host": found.host, "port": found.port}
                    error, message = Errors.NONE, ""
                except KafkaError as exc:
                    error, message = exc.error, exc.message
            answers.append((key, error, message or None, values))
        if version >= 4:
            coordinator_cls = item_type(schema, "coordinators")
            return build(
                schema,
                coordinators=tuple(
                    build(coordinator_cls, key=key, error_code=error_code(error),
                          error_message=message, **values)
                    for key, error, message, values in answers
                ),
            )
        _key, error, message, values = answers[0]
        return build(schema, error_code=error_code(error), error_message=message, **values)

    # ---- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ----

    async def _join_group(self, body: Any, version: int, ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.JOIN_GROUP), version)
        member_cls = item_type(schema, "members")
        request = JoinRequest(
            group_id=str(body.group_id),
            member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            client_id=ctx.client_id or "",
            client_host=_client_host(ctx),
            session_timeout_ms=_ms(body.session_timeout),
            rebalance_timeout_ms=_ms(body.rebalance_timeout),
            protocol_type=body.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
        )
        try:
            result = await self.coordinator.join(request)
        except KafkaError as exc:
            result = JoinResult(exc.error, body.member_id)
        return build(
            schema,
            error_code=error_code(result.error),
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            # Before v7 the name is not nullable: "" when none was chosen.
            protocol_name=result.protocol_name if version >= 7 else result.protocol_name or "",
            leader=result.leader_id,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=tuple(
                build(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id,
                      metadata=m.metadata)
                for m in result.members
            ),
        )

    async def _sync_group(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.SYNC_GROUP), version)
        try:
            result = await self.coordinator.sync(
                str(body.group_id),
                body.member_id,
                int(body.generation_id),
                getattr(body, "protocol_type", None),
                getattr(body, "protocol_name", None),
                {a.member_id: bytes(a.assignment) for a in body.assignments},
                getattr(body, "group_instance_id", None),
            )
            error, fields = result.error, {
                "protocol_type": result.protocol_type,
                "protocol_name": result.protocol_name,
                "assignment": result.assignment,
            }
        except KafkaError as exc:
            error, fields = exc.error, {"assignment": b""}
        return build(schema, error_code=error_code(error), **fields)

    async def _heartbeat(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.HEARTBEAT), version)
        try:
            error = self.coordinator.heartbeat(
                str(body.group_id), body.member_id, int(body.generation_id),
                getattr(body, "group_instance_id", None),
            )
        except KafkaError as exc:
            error = exc.error
        return build(schema, error_code=error_code(error))

    async def _leave_group(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.LEAVE_GROUP), version)
        leaving = (
            [(m.member_id, m.group_instance_id) for m in body.members]
            if version >= 3
            else [(body.member_id, None)]
        )
        try:
            error, errors = self.coordinator.leave(str(body.group_id), leaving)
        except KafkaError as exc:
            error, errors = exc.error, []
        if version < 3:
            # One member: its error is the top-level one (Kafka's v0-2 answer).
            return build(schema, error_code=error_code(errors[0] if errors else error))
        member_cls = item_type(schema, "members")
        return build(
            schema,
            error_code=error_code(error),
            members=tuple(
                build(member_cls, member_id=member_id, group_instance_id=instance_id,
                      error_code=error_code(member_error))
                for (member_id, instance_id), member_error in zip(leaving, errors, strict=False)
            ),
        )

    # ---- OffsetCommit / OffsetFetch ----

    async def _offset_commit(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.OFFSET_COMMIT), version)
        topic_cls = item_type(schema, "topics")
        partition_cls = item_type(topic_cls, "partitions")
        commits = [
            (
                str(t.name),
                int(p.partition_index),
                int(p.committed_offset),
                int(getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH)),
                p.committed_metadata or "",
            )
            for t in body.topics
            for p in t.partitions
        ]
        # Kafka's KafkaApis answers a topic or partition missing from the metadata itself,
        # UNKNOWN_TOPIC_OR_PARTITION, and sends only the rest to the coordinator.
        missing = [not self._partition_exists(topic, partition) for topic, partition, *_ in commits]
        known = [c for c, gone in zip(commits, missing, strict=True) if not gone]
        known_errors: list[Errors] = []
        if known:
            try:
                known_errors = await self.coordinator.commit_offsets(
                    str(body.group_id),
                    body.member_id,
                    int(body.generation_id_or_member_epoch),
                    known,
                    getattr(body, "group_instance_id", None),
                )
            except KafkaError as exc:
                known_errors = [exc.error] * len(known)
        answers = iter(known_errors)
        errors = [Errors.UNKNOWN_TOPIC_OR_PARTITION if gone else next(answers) for gone in missing]
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition, *_rest), error in zip(commits, errors, strict=True):
            by_topic.setdefault(topic, []).append(
                build(partition_cls, partition_index=partition, error_code=error_code(error))
            )
        return build(
            schema,
            topics=tuple(topic_cls(name=name, partitions=tuple(p)) for name, p in by_topic.items()),
        )

    async def _offset_delete(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        """OffsetDelete (KIP-496): a group's committed offsets of topics it no longer
        consumes. Missing topics or partitions are answered here, as for OffsetCommit; a
        top-level error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) answers alone (Kafka's
        OffsetDeleteResponse.Builder.merge)."""
        schema = response_schema(int(ApiKey.OFFSET_DELETE), version)
        topic_cls = item_type(schema, "topics")
        partition_cls = item_type(topic_cls, "partitions")
        asked = [(str(t.name), int(p.partition_index)) for t in body.topics for p in t.partitions]
        missing = [not self._partition_exists(topic, partition) for topic, partition in asked]
        known = [tp for tp, gone in zip(asked, missing, strict=True) if not gone]
        # Unlike OffsetCommit, Kafka asks the coordinator even with nothing left: the group's
        # own errors come first.
        try:
            top_error, known_errors = await self.coordinator.delete_offsets(str(body.group_id), known)
        except KafkaError as exc:
            top_error, known_errors = exc.error, []
        if top_error is not Errors.NONE:
            return build(schema, error_code=error_code(top_error), topics=())
        answers = iter(known_errors)
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), gone in zip(asked, missing, strict=True):
            error = Errors.UNKNOWN_TOPIC_OR_PARTITION if gone else next(answers)
            by_topic.setdefault(topic, []).append(
                build(partition_cls, partition_index=partition, error_code=error_code(error))
            )
        return build(
            schema,
            error_code=error_code(Errors.NONE),
            topics=tuple(topic_cls(name=name, partitions=tuple(p)) for name, p in by_topic.items()),
        )

    def _partition_exists(self, topic: str, partition: int) -> bool:
        found = self.broker.metadata.image.topics_by_name.get(topic)
        return found is not None and partition in found.partitions

    async def _offset_fetch(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.OFFSET_FETCH), version)
        if version >= 8:
            group_cls = item_type(schema, "groups")
            return build(
                schema,
                groups=tuple(
                    self._fetch_group(group_cls, str(g.group_id), g.topics, with_group_id=True)
                    for g in body.groups
                ),
            )
        # v1 has no top-level error code: `build` drops it and each partition carries it.
        return self._fetch_group(schema, str(body.group_id), body.topics, with_group_id=False)

    def _fetch_group(self, schema: type, group_id: str, topics: Any, with_group_id: bool) -> Any:
        topic_cls = item_type(schema, "topics")
        partition_cls = item_type(topic_cls, "partitions")
        extra = {"group_id": group_id} if with_group_id else {}
        try:
            committed = self.coordinator.shard_for(group_id).shard.committed(group_id)
        except KafkaError as exc:
            error_partitions = (
                ()
                if topics is None
                else tuple(
                    topic_cls(
                        name=t.name,
                        partitions=tuple(
                            build(partition_cls, partition_index=p, committed_offset=NO_OFFSET,
                                  committed_leader_epoch=NO_LEADER_EPOCH, metadata="",
                                  error_code=error_code(exc.error))
                            for p in t.partition_indexes
                        ),
                    )
                    for t in topics
                )
            )
            return build(schema, error_code=error_code(exc.error), topics=error_partitions, **extra)
        wanted: dict[str, list[int]] = {}
        if topics is None:  # every committed offset of the group
            for topic, partition in sorted(committed):
                wanted.setdefault(topic, []).append(partition)
        else:
            for t in topics:
                wanted.setdefault(str(t.name), []).extend(int(p) for p in t.partition_indexes)
        answer_topics = []
        for topic, partitions in wanted.items():
            rows = []
            for partition in partitions:
                found = committed.get((topic, partition))
                rows.append(
                    build(
                        partition_cls,
                        partition_index=partition,
                        committed_offset=NO_OFFSET if found is None else found.offset,
                        committed_leader_epoch=NO_LEADER_EPOCH if found is None else found.leader_epoch,
                        metadata="" if found is None else found.metadata,
                        error_code=error_code(Errors.NONE),
                    )
                )
            answer_topics.append(topic_cls(name=topic, partitions=tuple(rows)))
        return build(schema, error_code=error_code(Errors.NONE), topics=tuple(answer_topics), **extra)

    # ---- ListGroups / DescribeGroups / DeleteGroups ----

    async def _list_groups(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.LIST_GROUPS), version)
        group_cls = item_type(schema, "groups")
        states = {s.lower() for s in getattr(body, "states_filter", ())}
        types = {t.lower() for t in getattr(body, "types_filter", ())}
        groups = []
        for loaded in self.coordinator.loaded_shards():
            for group in sorted(loaded.shard.groups.values(), key=lambda g: g.group_id):
                if group.state is GroupState.DEAD:
                    continue
                if states and group.state.value.lower() not in states:
                    continue
                if types and "classic" not in types:
                    continue
                groups.append(
                    build(
                        group_cls,
                        group_id=group.group_id,
                        protocol_type=group.protocol_type or "",
                        group_state=group.state.value,
                        group_type="classic",
                    )
                )
        return build(schema, error_code=error_code(Errors.NONE), groups=tuple(groups))

    async def _describe_groups(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.DESCRIBE_GROUPS), version)
        group_cls = item_type(schema, "groups")
        member_cls = item_type(group_cls, "members")
        described = []
        for group_id in body.groups:
            values: dict[str, Any] = {
                "group_id": group_id, "group_state": GroupState.DEAD.value, "protocol_type": "",
                "protocol_data": "", "members": (), "authorized_operations": NOT_REQUESTED,
            }
            try:
                group = self.coordinator.shard_for(str(group_id)).shard.groups.get(str(group_id))
                if group is None or group.state is GroupState.DEAD:
                    # v6+ says so; older versions answer Dead with no error (Kafka's way).
                    error = Errors.GROUP_ID_NOT_FOUND if version >= 6 else Errors.NONE
                    message = f"Group {group_id} not found." if version >= 6 else None
                else:
                    error, message = Errors.NONE, None
                    stable = group.state is GroupState.STABLE
                    values.update(
                        group_state=group.state.value,
                        protocol_type=group.protocol_type or "",
                        protocol_data=(group.protocol_name or "") if stable else "",
                        members=tuple(
                            build(
                                member_cls,
                                member_id=m.member_id,
                                group_instance_id=m.group_instance_id,
                                client_id=m.client_id,
                                client_host=m.client_host,
                                # Kafka fills metadata/assignment only for a Stable group.
                                member_metadata=m.metadata_for(group.protocol_name) if stable else b"",
                                member_assignment=m.assignment if stable else b"",
                            )
                            for m in group.members.values()
                        ),
                    )
            except KafkaError as exc:
                error, message = exc.error, exc.message or None
            if version >= 3 and body.include_authorized_operations and error is Errors.NONE:
                values["authorized_operations"] = GROUP_OPERATIONS  # no authorizer: all
            described.append(
                build(group_cls, error_code=error_code(error), error_message=message, **values)
            )
        return build(schema, groups=tuple(described))

    async def _delete_groups(self, body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        schema = response_schema(int(ApiKey.DELETE_GROUPS), version)
        result_cls = item_type(schema, "results")
        results = []
        for group_id in body.groups_names:
            try:
                error = await self.coordinator.delete_group(str(group_id))
            except KafkaError as exc:
                error = exc.error
            results.append(build(result_cls, group_id=group_id, error_code=error_code(error)))
        return build(schema, results=tuple(results))

