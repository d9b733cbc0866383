"""Unclean recovery (seed 004, KAFKA-20098): ask every broker GetReplicaLogInfo for the partitions
to recover until the duration passes (or every replica answered), pick per partition the replica
with the highest PartitionLeaderEpoch, then the highest last written leader epoch, then the
longest log (controller.core.unclean_recovery, shared with the controller's recovery manager),
and plan or send the DESIGNATED elections (`minikraft unclean-recovery`, the console)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import i32

from cluster.client.bootstrap import UNREACHABLE, new_client, request_admin, split_bootstrap
from cluster.client.elections import elect_leaders_request
from cluster.client.topics import describe_all
from cluster.output import (
    EXIT_FAILED,
    EXIT_OK,
    stderr,
)
from controller.core.unclean_recovery import RankBy, ReplicaLogAnswer, select_leader, usable_answers
from kafkawire import constants
from kafkawire import get_replica_log_info as grli
from kafkawire.client import KafkaClient
from kafkawire.errors import Errors, KafkaError
from kafkawire.messages import wire_error

DEFAULT_DURATION_MS = 30_000
DEFAULT_ELECTION_ATTEMPTS = 3  # seed 004: retries of transient failures, after the first try
ASK_TIMEOUT_MS = 2000
ROUND_PAUSE_S = 0.3
ELECTION_BACKOFF_S = 1.0

PartitionKey = tuple[str, int]


@dataclass(slots=True)
class Target:
    """One partition of the input set and what became of it."""

    topic: str
    partition: int
    topic_id: uuid.UUID | None = None
    replicas: tuple[int, ...] = ()
    leader: int = -1
    answers: dict[int, ReplicaLogAnswer] = field(default_factory=dict)
    designated_leader: int | None = None
    result: str = "pending"  # already_online, planned, elected, failed, interrupted
    error: str | None = None
    reason: str = ""

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def offline(self) -> bool:
        return self.topic_id is not None and self.leader < 0


def parse_partition_file(path: str) -> list[PartitionKey]:
    """Seed 004's input: {"partitions":[{"topic":"foo","partitions":[0,3,5]}]}."""
    data = json.loads(Path(path).read_text())
    keys: list[PartitionKey] = []
    for entry in data["partitions"]:
        topic = entry["topic"]
        if not isinstance(topic, str):
            raise ValueError(f"topic {topic!r} is not a string")
        for partition in entry["partitions"]:
            if not isinstance(partition, int) or isinstance(partition, bool):
                raise ValueError(f"partition {partition!r} of {topic} is not an integer")
            if (topic, partition) not in keys:
                keys.append((topic, partition))
    return keys


def plan_document(targets: list[Target]) -> dict[str, Any]:
    """The input of `leader-election --election-type DESIGNATED --path-to-json-file` (CLI.md)."""
    return {
        "partitions": [
            {"topic": t.topic, "partition": t.partition, "designatedLeader": t.designated_leader}
            for t in targets
            if t.designated_leader is not None and t.offline
        ]
    }


def answer_json(answer: ReplicaLogAnswer) -> dict[str, Any]:
    return {
        "broker_id": answer.broker_id,
        "broker_epoch": answer.broker_epoch,
        "partition_leader_epoch": answer.partition_leader_epoch,
        "last_written_leader_epoch": answer.last_written_leader_epoch,
        "log_end_offset": answer.log_end_offset,
        "error": None if answer.error == Errors.NONE else answer.error.name,
    }


def target_json(target: Target) -> dict[str, Any]:
    """CLI.md's --show-replica-info row, plus what the tool did with the partition."""
    return {
        "topic": target.topic,
        "partition": target.partition,
        "replicas": [answer_json(target.answers[b]) for b in sorted(target.answers)],
        "designated_leader": target.designated_leader,
        "result": target.result,
        "error": target.error,
        "leader": target.leader,
    }


class RecoveryRun:
    """One run of the tool; `stop` (SIGTERM) ends it early with what was done so far."""

    def __init__(
        self,
        bootstrap: str,
        duration_ms: int,
        election_retries: int,
        bootstrap_controller: str | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.duration_ms = duration_ms
        # Seed 004's --recovery-election-attempts counts retries: N allows N + 1 sends.
        self.election_retries = max(0, election_retries)
        self.stop = asyncio.Event()
        self.client: KafkaClient = new_client("minikraft-unclean-recovery")
        # Admin requests (describe, elections): the controllers if given, else the brokers.
        self.admin_bootstrap = bootstrap_controller or bootstrap
        self.brokers: dict[int, str] = {}  # live broker id -> host:port, from Metadata

    async def close(self) -> None:
        await self.client.close()

    # -- discovery -----------------------------------------------------------------------------

    async def discover(self) -> None:
        """The live brokers from the first bootstrap broker that answers Metadata."""
        for address in split_bootstrap(self.bootstrap):
            try:
                metadata = await self.client.request(address, _METADATA, timeout_ms=ASK_TIMEOUT_MS)
            except KafkaError as exc:
                if exc.error not in UNREACHABLE:
                    raise
                continue
            self.brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in metadata.brokers}
            return
        if self.admin_bootstrap == self.bootstrap:
            raise KafkaError(
                Errors.NETWORK_EXCEPTION,
                f"no broker answered Metadata at {self.bootstrap} "
                "(unclean-recovery needs broker addresses)",
            )
        # The controllers still describe the partitions; no replica can be asked.
        stderr.print(
            f"no broker answered Metadata at {self.bootstrap}: no replica can be asked",
            highlight=False,
        )

    async def refresh_brokers(self) -> None:
        for address in list(self.brokers.values()):
            try:
                metadata = await self.client.request(address, _METADATA, timeout_ms=ASK_TIMEOUT_MS)
            except KafkaError:
                continue
            self.brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in metadata.brokers}
            return

    async def resolve(self, keys: list[PartitionKey] | None) -> list[Target]:
        """The input set against the controller's metadata (None: every offline partition)."""
        topics = await describe_all(self.admin_bootstrap, sorted({t for t, _ in keys or []}))
        found: dict[PartitionKey, Target] = {}
        for topic in topics:
            if topic.error_code != 0:
                continue
            for p in topic.partitions:
                found[(str(topic.name), int(p.partition_index))] = Target(
                    str(topic.name),
                    int(p.partition_index),
                    topic.topic_id,
                    tuple(int(b) for b in p.replica_nodes),
                    int(p.leader_id),
                )
        if keys is None:
            return [found[k] for k in sorted(found) if found[k].offline]
        targets = []
        for topic_name, partition in keys:
            target = found.get((topic_name, partition))
            if target is None:
                target = Target(topic_name, partition)
                target.result = "failed"
                target.error = Errors.UNKNOWN_TOPIC_OR_PARTITION.name
                target.reason = "no such topic or partition"
            elif not target.offline:
                target.result = "already_online"
            targets.append(target)
        return targets

    # -- GetReplicaLogInfo ---------------------------------------------------------------------

    async def collect(self, targets: list[Target]) -> None:
        """Ask until the duration passes, SIGTERM, or every replica answered without error."""
        offline = [t for t in targets if t.offline]
        deadline = time.monotonic() + self.duration_ms / 1000
        while offline and not self.stop.is_set():
            wanted: dict[int, list[Target]] = {}
            for target in offline:
                for replica in target.replicas:
                    answer = target.answers.get(replica)
                    if answer is None or answer.error != Errors.NONE:
                        wanted.setdefault(replica, []).append(target)
            if not wanted:
                return
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                return
            await asyncio.gather(
                *(self._ask(b, ts, min(ASK_TIMEOUT_MS, remaining_ms)) for b, ts in wanted.items())
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.stop.wait(), min(ROUND_PAUSE_S, max(0.0, deadline - time.monotonic()))
                )

    async def _ask(self, broker_id: int, targets: list[Target], timeout_ms: int) -> None:
        address = self.brokers.get(broker_id)
        if address is None:
            return
        limit = grli.MAX_PARTITIONS  # seed 004: more is HasMoreData (Truncated)
        by_key = {(t.topic_id, t.partition): t for t in targets}
        for start in range(0, len(targets), limit):
            by_topic: dict[uuid.UUID, list[int]] = {}
            for t in targets[start : start + limit]:
                assert t.topic_id is not None  # only resolved partitions are asked about
                by_topic.setdefault(t.topic_id, []).append(t.partition)
            request = grli.GetReplicaLogInfoRequest(
                topic_partitions=tuple(
                    grli.TopicPartitions(topic_id=tid, partitions=tuple(i32(p) for p in ps))
                    for tid, ps in by_topic.items()
                )
            )
            try:
                response = await self.client.request(
                    address, request, timeout_ms=timeout_ms, dest_node_id=broker_id
                )
            except KafkaError:
                return
            for topic_info in response.topic_partition_log_info_list:
                for info in topic_info.partition_log_info:
                    target = by_key.get((topic_info.topic_id, int(info.partition)))
                    if target is not None:
                        target.answers[broker_id] = ReplicaLogAnswer(
                            broker_id,
                            int(response.broker_epoch),
                            int(info.current_leader_epoch),
                            int(info.log_end_offset),
                            int(info.last_written_leader_epoch),
                            Errors.of(int(info.error_code)),
                        )

    def choose(self, targets: list[Target]) -> None:
        """Seed 004's pick per offline partition; a broker that re-registered since it
        answered (a newer epoch in METADATA) is dropped."""
        for target in targets:
            if not target.offline or target.result != "pending":
                continue
            # Kafka's Metadata carries no broker epoch: each replica's newest answer counts (the
            # controller refuses a designated leader that is not unfenced, seed 004).
            usable = usable_answers(target.answers.values(), target.replicas)
            winner = select_leader(usable, RankBy.PARTITION_LEADER_EPOCH)
            if winner is None:
                target.result = "failed"
                target.error = Errors.REQUEST_TIMED_OUT.name
                target.reason = (
                    f"no replica of {list(target.replicas)} answered GetReplicaLogInfo within "
                    f"{self.duration_ms} ms"
                )
                continue
            target.designated_leader = winner.broker_id
            target.result = "planned"

    # -- DESIGNATED elections ------------------------------------------------------------------

    async def elect(self, targets: list[Target]) -> None:
        """Send the planned elections, then retry transient failures up to the retry count."""
        pending = [t for t in targets if t.result == "planned"]
        for attempt in range(1 + self.election_retries):
            if not pending or self.stop.is_set():
                break
            if attempt > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), ELECTION_BACKOFF_S)
                if self.stop.is_set():
                    break
            retry: list[Target] = []
            for start in range(0, len(pending), constants.ELECT_LEADERS_MAX_PARTITIONS):
                retry += await self._elect_batch(
                    pending[start : start + constants.ELECT_LEADERS_MAX_PARTITIONS]
                )
            pending = retry
        for target in pending:
            if target.result == "planned":
                target.result = "failed"

    async def _elect_batch(self, batch: list[Target]) -> list[Target]:
        request = elect_leaders_request(
            constants.ELECTION_DESIGNATED,
            [(t.topic, t.partition, t.designated_leader) for t in batch],
        )
        try:
            response = await admin_request(self.admin_bootstrap, request)
        except KafkaError as exc:
            for failed in batch:
                failed.error, failed.reason = exc.error.name, exc.message
            return batch if exc.error.retriable else []
        if response.error_code != 0:
            top = Errors.of(int(response.error_code))
            for failed in batch:
                failed.error, failed.reason = top.name, "the election request was refused"
            return batch if top.retriable else []
        by_key = {(t.topic, t.partition): t for t in batch}
        retry = []
        for topic_result in response.replica_election_results:
            for p in topic_result.partition_result:
                target = by_key.get((str(topic_result.topic), int(p.partition_id)))
                if target is None:
                    continue
                error = wire_error(p.error_code, p.error_message)
                leader = int(p.leader_id)  # minikraft's tagged LeaderId (ElectLeaders v3)
                if error == Errors.NONE:
                    target.result, target.error, target.leader = "elected", None, leader
                elif error == Errors.ELECTION_NOT_NEEDED:
                    # Seed 004: it came back online meanwhile (idempotent elections).
                    target.result, target.error, target.leader = "already_online", None, leader
                else:
                    target.error, target.reason = error.name, p.error_message or ""
                    if error.retriable:
                        retry.append(target)
                    else:
                        target.result = "failed"
        return retry


async def admin_request(bootstrap: str, body: Any) -> Any:
    """The tool's one way to send an admin request (tests replace it to script answers)."""
    return await request_admin(bootstrap, body)


_METADATA = MetadataRequest(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def _interrupt(targets: list[Target]) -> None:
    for target in targets:
        if target.result in ("pending", "planned") and target.offline:
            target.result = "failed"
            target.error = target.error or "INTERRUPTED"
            target.reason = target.reason or "stopped by SIGTERM"


async def run_recovery(
    bootstrap: str,
    keys: list[PartitionKey] | None,
    duration_ms: int,
    election_retries: int,
    automated: bool,
    bootstrap_controller: str | None = None,
) -> tuple[list[Target], bool]:
    """The whole run: (every partition of the input set with its outcome, stopped by SIGTERM)."""
    run = RecoveryRun(bootstrap, duration_ms, election_retries, bootstrap_controller)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGTERM, run.stop.set)
    try:
        await run.discover()
        targets = await run.resolve(keys)
        await run.collect(targets)
        if run.stop.is_set():
            _interrupt(targets)
            return targets, True
        await run.refresh_brokers()
        run.choose(targets)
        if automated:
            await run.elect(targets)
        if run.stop.is_set():
            _interrupt(targets)
        return targets, run.stop.is_set()
    finally:
        with contextlib.suppress(RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)
        await run.close()


def exit_code(targets: list[Target], automated: bool) -> int:
    """CLI.md: with --automated-recovery 0 only if every partition of the input set has a leader
    afterwards; show or plan only: 0 when every offline partition got answers and a plan."""
    good = ("elected", "already_online") if automated else ("planned", "already_online")
    return EXIT_OK if all(t.result in good for t in targets) else EXIT_FAILED
