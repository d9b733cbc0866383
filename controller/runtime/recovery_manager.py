"""KIP-966's unclean recovery manager on the active controller (INVARIANTS rule 14).

Off unless `unclean.recovery.manager.enabled=true` (seed 004 rejects it as risky in emergencies).
Every tick it finds leaderless partitions, applies rule 14's decision order for the partition's
strategy, asks the replicas GetReplicaLogInfo itself, and elects the best answer (highest last
written leader epoch, then the longest log) through the DESIGNATED path: RECOVERING, ISR = [it].
Nothing of it is written to the log: a controller failover starts every recovery afresh.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kio.static.primitive import i32

from controller.core import config_control, replication_control
from controller.core.controller_result import ControllerResult
from controller.core.election_policy import ElectionPolicy
from controller.core.unclean_recovery import (
    DEFAULT_RECOVERY_TIMEOUT_MS,
    RECOVERY_MANAGER_ENABLED,
    RECOVERY_STRATEGY,
    RECOVERY_TIMEOUT_MS,
    Decision,
    RankBy,
    ReplicaLogAnswer,
    Strategy,
    parse_strategy,
    ready_to_elect,
    recovery_decision,
    select_leader,
    usable_answers,
)
from kafkawire import admin_messages as am
from kafkawire import constants
from kafkawire import get_replica_log_info as grli
from kafkawire.client import KafkaClient
from kafkawire.config import NodeConfig
from kafkawire.constants import ZERO_UUID
from kafkawire.errors import Errors, KafkaError
from kafkawire.loop import cancel_and_wait
from kafkawire.messages import wire_error
from metadata.metadata_image import MetadataImage

log = logging.getLogger("minikraft.controller.recovery")

TICK_INTERVAL_MS = 500
ASK_TIMEOUT_MS = 2000

PartitionKey = tuple[uuid.UUID, int]
AskBroker = Callable[
    [str, grli.GetReplicaLogInfoRequest], Awaitable[grli.GetReplicaLogInfoResponse]
]
WriteFn = Callable[
    [Callable[[MetadataImage], ControllerResult[Any]], str], Awaitable[Any]
]


def manager_enabled(config: NodeConfig) -> bool:
    return config.get_bool(RECOVERY_MANAGER_ENABLED)


def build_recovery_manager(
    config: NodeConfig,
    clock_ms: Callable[[], int],
    image: Callable[[], MetadataImage],
    is_active: Callable[[], bool],
    active_epoch: Callable[[], int],
    write: WriteFn,
    policy: Callable[[MetadataImage], ElectionPolicy],
) -> RecoveryManager | None:
    """The manager with a GetReplicaLogInfo client, or None unless enabled (rule 14). The
    controller hands in what the manager reads and its single writer as callables, so this
    module never imports the quorum controller (no import cycle)."""
    if not manager_enabled(config):
        return None
    client = KafkaClient(
        f"controller-{config.node_id}-recovery", request_timeout_ms=ASK_TIMEOUT_MS
    )

    async def ask(address: str, request: grli.GetReplicaLogInfoRequest) -> Any:
        return await client.request(address, request, timeout_ms=ASK_TIMEOUT_MS)

    return RecoveryManager(
        config,
        image=image,
        is_active=is_active,
        active_epoch=active_epoch,
        write=write,
        policy=policy,
        ask=ask,
        clock_ms=clock_ms,
        on_stop=client.close,
    )


@dataclass(slots=True)
class _Session:
    """One partition's recovery in progress: when it started and the answers so far."""

    started_ms: int
    leader_epoch: int
    answers: dict[int, ReplicaLogAnswer] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Election:
    topic: str
    partition: int
    leader: int
    error: str | None


class RecoveryManager:
    """The controller-side manager. Its collaborators are callables so tests can drive it."""

    def __init__(
        self,
        config: NodeConfig,
        image: Callable[[], MetadataImage],
        is_active: Callable[[], bool],
        active_epoch: Callable[[], int],
        write: WriteFn,
        policy: Callable[[MetadataImage], ElectionPolicy],
        ask: AskBroker,
        clock_ms: Callable[[], int],
        on_stop: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        configured = config.get(RECOVERY_STRATEGY)
        self.strategy: Strategy | None = parse_strategy(configured, False) if configured else None
        timeout_text = config.get(RECOVERY_TIMEOUT_MS)
        self.timeout_ms = int(timeout_text) if timeout_text else DEFAULT_RECOVERY_TIMEOUT_MS
        self._image = image
        self._is_active = is_active
        self._active_epoch = active_epoch
        self._write = write
        self._policy = policy
        self._ask = ask
        self._clock_ms = clock_ms
        self._listener = config.get("inter.broker.listener.name")
        self._sessions: dict[PartitionKey, _Session] = {}
        self._epoch: int | None = None
        self._count = 0
        self.finished_count = 0  # kafka.controller.unclean_recovery_finished_count (KIP-966)
        self._task: asyncio.Task[None] | None = None
        self._on_stop = on_stop

    # -- lifecycle and metrics -----------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        if self._on_stop is not None:
            await self._on_stop()

    def partitions_count(self) -> int:
        """Gauge unclean_recovery_partitions_count: partitions recovering, or waiting in Balanced
        for fenced ELR / LastKnownELR members (KIP-966); 0 when idle or not active."""
        return self._count if self._is_active() else 0

    def strategy_for(self, image: MetadataImage, topic_name: str) -> Strategy:
        """The configured strategy, else unclean.leader.election.enable's mapping (rule 14)."""
        if self.strategy is not None:
            return self.strategy
        return parse_strategy(
            None,
            # rule 15: the active controller's node level too (the policy names its id)
            config_control.unclean_allowed(image, topic_name, self._policy(image).controller_id),
        )

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_MS / 1000)
            try:
                await self.tick()
            except KafkaError as exc:
                log.debug("Unclean recovery tick skipped: %s", exc)

    # -- one round -----------------------------------------------------------------------------

    async def tick(self) -> list[Election]:
        """Decide, ask, and elect what is ready; returns the elections tried this round."""
        if not self._is_active():
            self._sessions.clear()
            self._epoch = None
            self._count = 0
            return []
        epoch = self._active_epoch()
        if epoch != self._epoch:
            self._sessions.clear()  # KIP-966: a new active controller starts afresh
            self._epoch = epoch
        image = self._image()
        now_ms = self._clock_ms()
        strategies = self._plan(image, now_ms)
        await self._collect(image)
        elections = []
        for key, session in list(self._sessions.items()):
            topic = image.topics.get(key[0])
            registration = None if topic is None else topic.partitions.get(key[1])
            if topic is None or registration is None:
                continue
            usable = self._usable(image, key, session)
            if ready_to_elect(
                strategies[key],
                registration,
                (a.broker_id for a in usable),
                session.started_ms,
                now_ms,
                self.timeout_ms,
            ):
                elections.append(await self._elect(topic.name, key))
        return elections

    def _plan(self, image: MetadataImage, now_ms: int) -> dict[PartitionKey, Strategy]:
        """Rule 14 per leaderless partition: start, keep or drop its session."""
        recovering: dict[PartitionKey, Strategy] = {}
        waiting = 0
        for name in sorted(image.topics_by_name):
            topic = image.topics_by_name[name]
            strategy = self.strategy_for(image, name)
            for partition_id in sorted(topic.partitions):
                registration = topic.partitions[partition_id]
                pending = replication_control.pending_election(
                    image, topic, partition_id, self._policy(image)
                )
                decision = recovery_decision(registration, image.is_fenced, strategy, pending)
                key = (topic.topic_id, partition_id)
                if decision is Decision.RECOVER:
                    recovering[key] = strategy
                    session = self._sessions.get(key)
                    if session is None or session.leader_epoch != registration.leader_epoch:
                        self._sessions[key] = _Session(now_ms, registration.leader_epoch)
                        log.info(
                            "Unclean recovery (%s) of %s-%s started: asking replicas %s",
                            strategy.value,
                            name,
                            partition_id,
                            list(registration.replicas),
                        )
                elif decision is Decision.WAIT and strategy is not Strategy.NONE:
                    waiting += 1
        for key in list(self._sessions):
            if key not in recovering:
                del self._sessions[key]
        self._count = len(recovering) + waiting
        return recovering

    def _usable(
        self, image: MetadataImage, key: PartitionKey, session: _Session
    ) -> list[ReplicaLogAnswer]:
        registration = image.partition(key[0], key[1])
        if registration is None:
            return []
        epochs = {b.broker_id: b.epoch for b in image.brokers.values()}
        kept = usable_answers(
            session.answers.values(), registration.replicas, epochs, registration.leader_epoch
        )
        return [a for a in kept if not image.is_fenced(a.broker_id)]

    async def _collect(self, image: MetadataImage) -> None:
        """Ask every unfenced replica that has no usable answer yet, at most 1000 partitions a
        request (seed 004), all brokers at once."""
        wanted: dict[int, list[PartitionKey]] = {}
        for key, session in self._sessions.items():
            registration = image.partition(key[0], key[1])
            if registration is None:
                continue
            have = {a.broker_id for a in self._usable(image, key, session)}
            for replica in registration.replicas:
                if replica not in have and not image.is_fenced(replica):
                    wanted.setdefault(replica, []).append(key)
        await asyncio.gather(
            *(self._ask_broker(image, broker_id, keys) for broker_id, keys in wanted.items())
        )

    async def _ask_broker(
        self, image: MetadataImage, broker_id: int, keys: list[PartitionKey]
    ) -> None:
        address = self._address(image, broker_id)
        if address is None:
            return
        limit = grli.MAX_PARTITIONS
        for start in range(0, len(keys), limit):
            by_topic: dict[uuid.UUID, list[int]] = {}
            for topic_id, partition in keys[start : start + limit]:
                by_topic.setdefault(topic_id, []).append(partition)
            request = grli.GetReplicaLogInfoRequest(
                topic_partitions=tuple(
                    grli.TopicPartitions(topic_id=t, partitions=tuple(i32(p) for p in ps))
                    for t, ps in by_topic.items()
                )
            )
            try:
                response = await self._ask(address, request)
            except KafkaError as exc:
                log.debug("GetReplicaLogInfo to broker %s failed: %s", broker_id, exc)
                return
            received_ms = self._clock_ms()
            for topic_info in response.topic_partition_log_info_list:
                for info in topic_info.partition_log_info:
                    topic_id = topic_info.topic_id or ZERO_UUID
                    session = self._sessions.get((topic_id, int(info.partition)))
                    if session is None:
                        continue
                    session.answers[broker_id] = ReplicaLogAnswer(
                        broker_id,
                        int(response.broker_epoch),
                        int(info.current_leader_epoch),
                        int(info.log_end_offset),
                        int(info.last_written_leader_epoch),
                        Errors.of(info.error_code),
                        received_ms,
                    )

    def _address(self, image: MetadataImage, broker_id: int) -> str | None:
        registration = image.brokers.get(broker_id)
        if registration is None or not registration.endpoints:
            return None
        endpoint = next(
            (e for e in registration.endpoints if e.name == self._listener),
            registration.endpoints[0],
        )
        return f"{endpoint.host}:{endpoint.port}"

    async def _elect(self, topic_name: str, key: PartitionKey) -> Election:
        """Elect through the DESIGNATED path, re-checking the answers against the image the
        write is computed from (a broker that restarted since answering is dropped)."""
        session = self._sessions[key]

        def compute(image: MetadataImage) -> ControllerResult[Election]:
            usable = self._usable(image, key, session)
            winner = select_leader(usable, RankBy.LAST_WRITTEN_LEADER_EPOCH)
            if winner is None:
                return ControllerResult((), Election(topic_name, key[1], -1, "NO_USABLE_ANSWER"))
            request = am.elect_leaders_request(
                constants.ELECTION_DESIGNATED,
                [am.election_topic(topic_name, [key[1]], [winner.broker_id])],
            )
            result = replication_control.elect_leaders(image, request, self._policy(image))
            partition = result.response.replica_election_results[0].partition_result[0]
            error = wire_error(partition.error_code, partition.error_message)
            error_name = None if error is Errors.NONE else error.name
            return ControllerResult(
                result.records,
                Election(topic_name, key[1], int(partition.leader_id), error_name),
                result.changes,  # the controller logs and counts the DESIGNATED election
            )

        election: Election = await self._write(compute, f"unclean recovery of {topic_name}")
        if election.error is None:
            self._sessions.pop(key, None)
            self.finished_count += 1
            log.info(
                "Unclean recovery elected broker %s for %s-%s (RECOVERING)",
                election.leader,
                topic_name,
                key[1],
            )
        else:
            log.info(
                "Unclean recovery of %s-%s not done: %s", topic_name, key[1], election.error
            )
        return election
