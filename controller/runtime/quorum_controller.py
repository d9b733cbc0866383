"""The active controller (Kafka's QuorumController): controller requests become metadata records,
appended through Raft and answered once committed and replayed.

Every write is decided and appended under one asyncio lock, a single writer like Kafka's
controller event queue: each operation reads the image with every earlier operation's records
already replayed, committed or not (the writer replays a write's records as it appends them, and
the loader takes that image when they commit instead of replaying them again); the writer is
free while they commit, and each write is answered once its own records are committed and
applied. Only the Raft leader writes; a standby answers NOT_CONTROLLER (reads are served from its
committed image). A new leader first commits a NoOpRecord in its epoch, so its image holds
everything committed before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from controller.core import cluster_control, config_control, feature_control, replication_control
from controller.core.controller_result import ControllerResult
from controller.core.election_policy import ElectionPolicy
from controller.core.partition_metrics import PartitionMetrics
from controller.core.steps import Steps
from controller.runtime.recovery_manager import (
    RecoveryManager,
    build_recovery_manager,
    manager_enabled,
)
from controller.runtime.session_clock import SessionClock
from kafkawire.api_keys import ApiKey
from kafkawire.broker_lifecycle import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    registration_response,
)
from kafkawire.clock import now_ms
from kafkawire.config import NodeConfig
from kafkawire.errors import Errors, KafkaError
from kafkawire.loop import cancel_and_wait, run_sliced
from kafkawire.uuids import random_uuid
from metadata.kafka_describe import DESCRIBE_PARTITIONS_DEFAULT_LIMIT
from metadata.loader import LoaderManifest, MetadataLoader, PreparedWrite
from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.records import (
    BROKER_FLAG_FALSE,
    BROKER_FLAG_TRUE,
    TRANSACTION_MARKERS,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    EndTransactionRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    encode_record,
)
from raft.runtime.raft_manager import RaftManager

log = logging.getLogger("minikraft.controller")

R = TypeVar("R")
# A write's decision: its result at once, or Steps that give the loop back between slices.
Compute = Callable[[MetadataImage], ControllerResult[R] | Steps[ControllerResult[R]]]

# The writes a client's admin request asks for (user operations, MAX_RECORDS_PER_USER_OP), by
# the name their log line gives them.
_ADMIN_WRITES = {
    ApiKey.CREATE_TOPICS: "CreateTopics",
    ApiKey.DELETE_TOPICS: "DeleteTopics",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    ApiKey.ALTER_CONFIGS: "AlterConfigs",
    ApiKey.ELECT_LEADERS: "ElectLeaders",
}
CONTROLLER_API_KEYS = frozenset(
    {ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION, *_ADMIN_WRITES}
)
WRITE_TIMEOUT_MS = 10_000
# ... and 1 ms more per record: a broker's fencing of 86,000 partitions took longer than 10 s to
# replay at load 46, answered REQUEST_TIMED_OUT though committed, and reset the activation.
WRITE_TIMEOUT_MS_PER_RECORD = 1
# The session check never spins: at most one every 10 ms while a lapsed broker is being fenced.
SESSION_CHECK_MIN_S = 0.01
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP (= MAX_RECORDS_PER_BATCH): an operation a
# user asked for (create/delete topics, create partitions, configs, elections) may write at most
# this many records; a bigger one fails whole with Kafka's PolicyViolationException message
# (EventHandlerExceptionInfo's BoundedListTooLongException case). A topic of 10,000 partitions
# is 10,001 records: Kafka refuses it too.
MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_BATCH_MESSAGE = "Unable to perform excessively large batch operation."
# More partition changes than this in one write: one INFO summary, the per-partition lines at
# DEBUG (issue 35: thousands of INFO lines a minute held the controller's loop).
LOG_DETAIL_LIMIT = 20
# Records encoded between two yields of the loop when a write is appended (issue 35).
ENCODE_SLICE_RECORDS = 500
# A write of more records than this is appended as a KIP-868 transaction of batches of at most
# this many (issue 35).
TRANSACTION_BATCH_RECORDS = 1000
# How often a new leader checks that it has activated, and waits for its first record.
ACTIVATION_POLL_S = 0.02
# A write that held the writer this long is logged with the time of each of its stages (issue
# 35: a broker's fencing at 100,000 partitions held a restarted broker's registration for 9 s).
SLOW_WRITE_MS = 1000
_SUMMARY_KINDS = {
    "": "ISR/ELR changes",
    "ISR": "elections from ISR",
    "ELR": "elections from ELR",
    "unclean": "unclean elections",
    "offline": "partitions left without a leader",
}


@dataclass(eq=False)
class _Staged(Generic[R]):
    """A write decided and appended, its commit and apply still to wait for (_finish)."""

    result: ControllerResult[R]
    before: MetadataImage
    what: str
    start: float
    stages: dict[str, float]
    # The last offset to wait for (its own, or the last pending write's); None: nothing.
    offset: int | None = None
    timeout_ms: int = WRITE_TIMEOUT_MS
    appended: float = 0.0


class QuorumController:
    def __init__(
        self,
        raft: RaftManager,
        state: MetadataLoader,
        config: NodeConfig,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        self.raft = raft
        self.state = state
        self.config = config
        self._clock_ms = clock_ms
        self.session_timeout_ms = config.get_int("broker.session.timeout.ms")
        self.elr_default = config.get_bool("eligible.leader.replicas.enabled", default=True)
        # The static min.insync.replicas: the cluster-level value written when ELR is turned on
        # (Kafka's getStaticallyConfiguredMinInsyncReplicas); a garbled value stops the node.
        config.props.setdefault("min.insync.replicas", "1")
        self.static_min_isr = config.get_int("min.insync.replicas")
        # Rule 14: with the manager on, builders leave LastKnownLeader/unclean steps to it.
        self.recovery_manager_enabled = manager_enabled(config)
        self.describe_limit = int(
            config.get(
                "max.request.partition.size.limit", str(DESCRIBE_PARTITIONS_DEFAULT_LIMIT)
            )
            or DESCRIBE_PARTITIONS_DEFAULT_LIMIT
        )
        self.tracker = cluster_control.BrokerHeartbeatTracker()
        # The partition gauges, recomputed per scrape only for the topics that changed.
        self.partition_metrics = PartitionMetrics()
        # Broker sessions are timed on listening time, not wall time (session_clock.py).
        self.session_clock = SessionClock()
        self._lock = asyncio.Lock()
        # AlterPartition requests waiting for the writer (_alter_partition), with their answers.
        self._alter_partitions: list[
            tuple[AlterPartitionRequest, asyncio.Future[AlterPartitionResponse]]
        ] = []
        self._ready_epoch: int | None = None
        # The epoch this node activated in: a failed write resets _ready_epoch (the next write
        # re-syncs) but not this, so steady heartbeats are still answered at once meanwhile.
        self._activated_epoch: int | None = None
        # Writers waiting for their offset to reach the image: (offset, future), woken by
        # on_metadata_update (this controller is one of the loader's publishers).
        self._apply_waiters: list[tuple[int, asyncio.Future[None]]] = []
        # Writes appended in the active epoch and not yet applied: (last offset, the image
        # with their records). The next write is decided on the last of them, not on the
        # committed image, as Kafka's QuorumController decides on its in-memory state with
        # every record it generated replayed: the writer is free once a write is appended,
        # not once it is committed and applied (issue 35: a restarted broker's registration
        # waited for the 100,000-record fencing before it to commit and be applied).
        self._pending: list[tuple[int, MetadataImage]] = []
        self._timer: asyncio.Task[None] | None = None
        self._activator: asyncio.Task[None] | None = None
        # Counters behind the KIP-966 metrics (ElectionFromEligibleLeaderReplicasPerSec, ...).
        self.elections_from_elr = 0
        self.unclean_elections = 0
        # -- unclean recovery manager (issue 7, rule 14): only with unclean.recovery.manager.enabled
        self.recovery_manager: RecoveryManager | None = build_recovery_manager(
            config,
            clock_ms,
            image=lambda: self.state.image,
            is_active=lambda: self.is_active,
            active_epoch=lambda: self.raft.replica.epoch,
            write=self.write,
            policy=self.election_policy,
        )

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self.session_clock.start()
        self._timer = asyncio.ensure_future(self._session_timer())
        self._activator = asyncio.ensure_future(self._activation_loop())
        if self.recovery_manager is not None:  # issue 7: rule 14, off by default
            await self.recovery_manager.start()

    async def stop(self) -> None:
        if self.recovery_manager is not None:  # issue 7
            await self.recovery_manager.stop()
        await cancel_and_wait(self._timer, self._activator)
        self._timer = self._activator = None
        await self.session_clock.stop()

    @property
    def is_active(self) -> bool:
        return self.raft.replica.role == "Leader"

    def metrics(self) -> dict[str, int]:
        """Controller metrics (KIP-966 names in ARCHITECTURE.md) from the committed image."""
        image = self.state.image
        fenced = sum(1 for b in image.brokers.values() if b.fenced)
        manager = self.recovery_manager
        return {
            **self.partition_metrics.counts(
                image,
                (lambda topic: manager.strategy_for(image, topic)) if manager else lambda _: None,
                self.config.node_id,
            ),
            "fenced_broker_count": fenced,
            "active_broker_count": len(image.brokers) - fenced,
            "election_from_eligible_leader_replicas_total": self.elections_from_elr,
            "unclean_leader_elections_total": self.unclean_elections,
            # issue 7: KIP-966's gauge, 0 while the recovery manager is off or idle
            "unclean_recovery_partitions_count": manager.partitions_count() if manager else 0,
            # KIP-966's counter of finished recoveries, 0 again after a restart
            "unclean_recovery_finished_count": manager.finished_count if manager else 0,
        }

    # -- requests ----------------------------------------------------------------------------

    async def handle(self, api_key: ApiKey, request: Any, source_node_id: int | None) -> Any:
        """The response for a controller API; None when `api_key` is not one."""
        if api_key not in CONTROLLER_API_KEYS:
            return None
        if api_key == ApiKey.BROKER_REGISTRATION:
            return await self._register_broker(request)
        if api_key == ApiKey.BROKER_HEARTBEAT:
            # Kafka's trackBrokerHeartbeat: the contact counts on arrival, before the heartbeat
            # waits for any write in progress (the session must not lapse behind one).
            cluster_control.track_heartbeat(
                self.state.image, request, self.tracker, self.session_clock.now_ms()
            )
            steady = self._steady_heartbeat(request)
            if steady is not None:
                return steady
            if request.want_shut_down:
                why = "controlled shutdown, leaderships moved away"
            elif request.want_fence:
                why = "the broker asked to be fenced"
            else:
                why = f"caught up to metadata offset {request.current_metadata_offset}"
            return await self.write(
                lambda image: cluster_control.process_heartbeat_steps(
                    image,
                    request,
                    self.tracker,
                    self.session_clock.now_ms(),
                    self.election_policy(image),
                ),
                why,
            )
        if api_key == ApiKey.ALTER_PARTITION:
            return await self._alter_partition(request)
        return await self.write(
            self._admin_write(api_key, request), _ADMIN_WRITES[api_key], user_op=True
        )

    def _admin_write(self, api_key: ApiKey, request: Any) -> Compute[Any]:
        if api_key == ApiKey.CREATE_TOPICS:
            return lambda image: replication_control.create_topics_steps(
                image, request, random_uuid, self.config
            )
        if api_key == ApiKey.DELETE_TOPICS:
            return lambda image: replication_control.delete_topics(image, request)
        if api_key == ApiKey.ELECT_LEADERS:
            return lambda image: replication_control.elect_leaders(
                image, request, self.election_policy(image)
            )
        # AlterConfigs is applied as an incremental change of the same keys.
        return lambda image: replication_control.incremental_alter_configs(
            image, request, self.election_policy(image)
        )

    async def _alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """AlterPartition requests waiting for the single writer go in one write: the first to
        get the lock decides every one queued by then, each against the image the earlier
        ones leave, commits their records together and answers each its own response. Each
        write waits for its commit and replay, so the brokers' backlog after a failover (ten
        requests in a row at 100,000 partitions, 0.3-0.8 s each) held a CreateTopics behind
        it for seconds; Kafka's QuorumController does not wait for one event's commit before
        the next (issue 35)."""
        answer: asyncio.Future[AlterPartitionResponse] = (
            asyncio.get_running_loop().create_future()
        )
        self._alter_partitions.append((request, answer))
        async with self._lock:
            batch, self._alter_partitions = self._alter_partitions, []
            staged = await self._alter_partition_batch(batch) if batch else None
        if staged is not None:
            await self._alter_partition_answers(batch, staged)
        return await answer

    async def _alter_partition_batch(
        self,
        batch: list[tuple[AlterPartitionRequest, asyncio.Future[AlterPartitionResponse]]],
    ) -> _Staged[list[Any]] | None:
        """The batch's write decided and appended (the writer held); None if it failed (each
        request answered the failure)."""
        def compute(image: MetadataImage) -> Steps[ControllerResult[list[Any]]]:
            responses: list[Any] = []
            records: list[MetadataRecord] = []
            changes: list[Any] = []
            for count, (request, _) in enumerate(batch, 1):
                result = yield from replication_control.alter_partition_steps(
                    image, request, self.election_policy(image)
                )
                if result.message:
                    log.info("AlterPartition from broker %s: %s %s", request.broker_id,
                             Errors.of(result.response.error_code).name, result.message)
                if result.records and count < len(batch):
                    # The next request sees this one's changes; after the last one nothing
                    # reads them (a broker's request names thousands, issue 35).
                    delta = MetadataDelta(image)
                    for record in result.records:
                        delta.replay(record, image.offset)
                    image = delta.image()
                responses.append(result.response)
                records.extend(result.records)
                changes.extend(result.changes)
            return ControllerResult(tuple(records), responses, tuple(changes))

        brokers = sorted({request.broker_id for request, _ in batch})
        what = f"AlterPartition from broker {', '.join(map(str, brokers))}"
        if len(batch) > 1:
            what += f" ({len(batch)} requests)"
        try:
            return await self._stage(compute, what)
        except BaseException as exc:
            self._fail_alter_partitions(batch, exc)
            if isinstance(exc, Exception):
                return None
            raise

    async def _alter_partition_answers(
        self,
        batch: list[tuple[AlterPartitionRequest, asyncio.Future[AlterPartitionResponse]]],
        staged: _Staged[list[Any]],
    ) -> None:
        try:
            responses, _, _ = await self._finish(staged)
        except BaseException as exc:
            self._fail_alter_partitions(batch, exc)
            if isinstance(exc, Exception):
                return
            raise
        for (_, answer), response in zip(batch, responses, strict=True):
            if not answer.done():
                answer.set_result(response)

    @staticmethod
    def _fail_alter_partitions(
        batch: list[tuple[AlterPartitionRequest, asyncio.Future[AlterPartitionResponse]]],
        exc: BaseException,
    ) -> None:
        """Each request fails as a lone write would; a cancelled writer (its connection
        closed) leaves the others a timeout, which their brokers retry."""
        failure = (
            exc if isinstance(exc, Exception)
            else KafkaError(Errors.REQUEST_TIMED_OUT, "the write was cancelled")
        )
        for _, answer in batch:
            if not answer.done():
                answer.set_exception(failure)

    async def _register_broker(
        self, request: BrokerRegistrationRequest
    ) -> BrokerRegistrationResponse:
        clean: bool | None = None

        def compute(image: MetadataImage) -> Steps[ControllerResult[BrokerRegistrationResponse]]:
            nonlocal clean
            clean = cluster_control.is_clean_restart(image, request)
            return cluster_control.register_broker_steps(
                image,
                request,
                self.raft.cluster_id,
                self.tracker,
                self.session_clock.now_ms(),
                self.session_timeout_ms,
                self.election_policy(image),
            )

        response, image, written = await self._write_result(
            compute, f"registration of broker {request.broker_id}"
        )
        if response.error_code != 0 or not written:
            return response
        registration = image.brokers.get(request.broker_id)
        if registration is None or registration.incarnation_id != request.incarnation_id:
            raise KafkaError(Errors.NOT_CONTROLLER, "registration was superseded; retry")
        how = {None: "first registration", True: "clean restart", False: "unclean restart"}[clean]
        log.info(
            "Registered broker %s with epoch %s (%s, previous broker epoch %s)",
            request.broker_id,
            registration.epoch,
            how,
            request.previous_broker_epoch,
        )
        return registration_response(broker_epoch=registration.epoch)

    # -- the single writer -------------------------------------------------------------------

    def election_policy(self, image: MetadataImage) -> ElectionPolicy:
        """The policy every write passes to the builders (rules 10, 13, 14)."""
        return config_control.election_policy(
            image, self.elr_default, self.recovery_manager_enabled, self.config.node_id
        )

    async def write(
        self,
        compute: Compute[R],
        what: str,
        *,
        user_op: bool = False,
    ) -> R:
        response, _, _ = await self._write_result(compute, what, user_op=user_op)
        return response

    async def _write_result(
        self,
        compute: Compute[R],
        what: str,
        *,
        user_op: bool = False,
    ) -> tuple[R, MetadataImage, bool]:
        queued = time.monotonic()
        async with self._lock:
            staged = await self._stage(compute, what, user_op=user_op, queued=queued)
        return await self._finish(staged)

    def _head(self) -> MetadataImage:
        """The image a write is decided on: the committed one with every write appended since
        replayed (the last pending one's), as Kafka's controller decides on its in-memory
        state."""
        applied = self.state.committed_offset
        while self._pending and self._pending[0][0] < applied:
            self._pending.pop(0)
        return self._pending[-1][1] if self._pending else self.state.image

    def _invalidate(self) -> None:
        """A write failed (or may not commit): nothing appended since the committed image is
        decided on any more, and the next write re-syncs (_ensure_active)."""
        self._ready_epoch = None
        self._pending.clear()
        self.state.forget_written()

    async def _stage(
        self,
        compute: Compute[R],
        what: str,
        *,
        user_op: bool = False,
        queued: float | None = None,
    ) -> _Staged[R]:
        """Decide a write on the head image and append its records (the writer held); its
        commit and apply are waited for by _finish, the writer free meanwhile."""
        start = time.monotonic()
        await self._ensure_active()
        before = self._head()
        computing = time.monotonic()
        result = await self._compute(compute, before, user_op)
        stages = {
            "waited for the writer": start - (start if queued is None else queued),
            "computed": time.monotonic() - computing,
        }
        if result.message:
            # Kafka's lifecycle responses carry no message: the controller logs why.
            error = Errors.of(getattr(result.response, "error_code", 0))
            log.info("%s: %s %s", what, error.name, result.message)
        if user_op and len(result.records) > MAX_RECORDS_PER_USER_OP:
            log.info(
                "Refused %s: %s records, more than %s for one operation",
                what,
                len(result.records),
                MAX_RECORDS_PER_USER_OP,
            )
            raise KafkaError(Errors.POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE)
        staged = _Staged(result, before, what, start, stages)
        if result.records:
            # A user operation is one batch (at most MAX_RECORDS_PER_USER_OP records); what
            # the controller decides for itself (fencing a broker of 30,000 partitions) may
            # span batches, as Kafka's non-atomic ControllerResult does.
            staged.offset, staged.timeout_ms = await self._append(
                result.records, what, before, atomic=user_op, stages=stages
            )
        elif self._pending:
            # Decided on records not yet applied: answered once they are (Kafka completes a
            # read-only operation after the purgatory's latest offset).
            staged.offset = self._pending[-1][0]
        staged.appended = time.monotonic()
        return staged

    async def _finish(self, staged: _Staged[R]) -> tuple[R, MetadataImage, bool]:
        """Wait until the staged write is committed and applied (the writer free), log it."""
        result, stages = staged.result, staged.stages
        if staged.offset is not None:
            mark = time.monotonic()
            try:
                if result.records:
                    await self.raft.driver.wait_for_commit(staged.offset, staged.timeout_ms)
                    stages["committed"], mark = time.monotonic() - mark, time.monotonic()
                await self._wait_applied(staged.offset, staged.timeout_ms)
                stages["applied"] = time.monotonic() - mark
            except asyncio.CancelledError:
                raise  # its asker left (a closed connection): the records go on regardless
            except BaseException:
                # The records may still commit later: re-sync before the next write.
                self._invalidate()
                raise
        if result.records:
            self._log_changes(staged.before, result, staged.what)
        self._log_slow_write(
            staged.what, len(result.records), staged.start, staged.appended, stages
        )
        return result.response, self.state.image, bool(result.records)

    @staticmethod
    def _log_slow_write(
        what: str, records: int, start: float, appended: float, stages: dict[str, float]
    ) -> None:
        """One line with each stage of a write answered SLOW_WRITE_MS or more after it took the
        writer (the wait for the writer is before it; the writer is free once it appended):
        where a big write's seconds go."""
        took_ms = (time.monotonic() - start) * 1000
        if took_ms < SLOW_WRITE_MS:
            return
        log.info(
            "%s: %s records held the writer %.0f ms, answered after %.0f ms (%s)",
            what,
            records,
            (appended - start) * 1000,
            took_ms,
            ", ".join(f"{stage} {seconds * 1000:.0f} ms" for stage, seconds in stages.items()),
        )

    @staticmethod
    async def _compute(
        compute: Compute[R], image: MetadataImage, user_op: bool
    ) -> ControllerResult[R]:
        """Run a write's decision on the loop, giving it back between the slices of a big one
        (fencing a broker of 100,000 partitions is seconds of pure Python): Raft's fetches and
        votes and the brokers' heartbeats are served in between (issue 35). Not on a worker
        thread: pure Python holds the GIL, and the loop starved behind it. Safe: the image is
        immutable and the single-writer lock is held."""
        outcome = compute(image)
        if not isinstance(outcome, Generator):
            return outcome
        # A budget of 0: the loop is given back after every slice.
        return await run_sliced(outcome, 0.0)  # type: ignore[no-any-return]

    def _steady_heartbeat(self, request: Any) -> Any:
        """The answer to a heartbeat that changes nothing (the steady state: an unfenced broker
        heard from, a fenced one not yet caught up), from the committed image without waiting
        for the write in progress; None when it must be a write. Kafka answers heartbeats in
        milliseconds; behind a 100,000-partition write here they waited seconds."""
        replica = self.raft.replica
        if replica.role != "Leader" or self._activated_epoch != replica.epoch:
            return None
        image = self.state.image
        registration = image.brokers.get(request.broker_id)
        if request.want_shut_down and registration is not None and not registration.fenced:
            return None  # a controlled shutdown's batch: a write (cluster_control)
        steps = cluster_control.process_heartbeat_steps(
            image, request, self.tracker, self.session_clock.now_ms(), self.election_policy(image)
        )
        try:
            next(steps)
        except StopIteration as stop:
            result: ControllerResult[Any] = stop.value
            if result.records:
                return None
            if result.message:
                log.info("Broker heartbeat: %s %s",
                         Errors.of(result.response.error_code).name, result.message)
            return result.response
        steps.close()  # it has partitions to change: a write
        return None

    async def _activation_loop(self) -> None:
        """A new leader activates as soon as it wins (its NoOp committed, a transaction left
        open aborted), not at the first write that comes its way: that write, a broker's
        heartbeat or a CreateTopics, is then answered at once (issue 35)."""
        while True:
            await asyncio.sleep(ACTIVATION_POLL_S)
            replica = self.raft.replica
            if replica.role != "Leader" or self._ready_epoch == replica.epoch:
                continue
            try:
                async with self._lock:
                    await self._ensure_active()
            except KafkaError as exc:
                log.debug("Activation in epoch %s: %s", replica.epoch, exc)

    async def _ensure_active(self) -> None:
        """Refuse on a standby; on the first write of a new epoch, catch the image up."""
        replica = self.raft.replica
        if replica.role != "Leader":
            raise KafkaError(
                Errors.NOT_CONTROLLER,
                f"node {replica.node_id} is not the active controller; "
                f"leader is {replica.leader_id} in epoch {replica.epoch}",
            )
        epoch = replica.epoch
        if self._ready_epoch == epoch:
            return
        self._pending.clear()  # decided in another epoch (or failed): replayed from the log
        # Everything committed by earlier leaders is below our own first commit (Raft), so once
        # this NoOp is replayed the image is complete.
        offset = await self._commit(
            (NoOpRecord(),), f"activation in epoch {epoch}", open_transaction_ok=True
        )
        if self.state.in_transaction:
            # Kafka's ActivationRecordsGenerator: a transaction the last leader left open (it
            # lost the leadership between two of its batches) is aborted, and its records are
            # never applied (KIP-868).
            offset = await self._commit(
                (AbortTransactionRecord(reason="Controller failover"),),
                f"activation in epoch {epoch}",
            )
        bootstrap = feature_control.bootstrap_records(
            self.state.image, self.elr_default, self.static_min_isr
        )
        if bootstrap:  # a new cluster: Kafka's bootstrap metadata (finalized features)
            offset = await self._commit(bootstrap, "bootstrap features")
        self.tracker.reset(list(self.state.image.brokers), self.session_clock.now_ms())
        self._ready_epoch = self._activated_epoch = epoch
        log.info(
            "Node %s is the active controller in epoch %s (metadata replayed to offset %s, "
            "%s brokers, %s topics)",
            replica.node_id,
            epoch,
            offset,
            len(self.state.image.brokers),
            len(self.state.image.topics),
        )

    async def _commit(
        self,
        records: tuple[MetadataRecord, ...],
        what: str,
        *,
        atomic: bool = True,
        open_transaction_ok: bool = False,
        stages: dict[str, float] | None = None,
    ) -> int:
        """Append, commit and wait until replayed. More than TRANSACTION_BATCH_RECORDS records
        go in a KIP-868 transaction (Begin ... End) of batches of at most that many: bounded
        batches through Raft, and every node applies them together, never half of them (an
        atomic result as one batch of 10,000 records, or a fencing of 100,000 split in
        batches anyone could see half of, before). `open_transaction_ok`: replayed into a
        transaction another leader left open is enough (activation)."""
        times = {} if stages is None else stages
        mark = time.monotonic()
        records, atomic, encoded, timeout_ms = await self._encode(records, what, atomic)
        self.state.written(zip(encoded, records, strict=True))  # replayed as they are
        times["encoded"], mark = time.monotonic() - mark, time.monotonic()
        try:
            offset = await self.raft.driver.append_and_commit(
                encoded, timeout_ms, atomic=atomic, batch_records=TRANSACTION_BATCH_RECORDS
            )
            times["committed"], mark = time.monotonic() - mark, time.monotonic()
            if open_transaction_ok:
                await self._wait_replayed(offset)
            else:
                await self._wait_applied(offset, timeout_ms)
            times["applied"] = time.monotonic() - mark
        except BaseException:
            # The records may still commit later: re-sync before the next write.
            self._ready_epoch = None
            self.state.forget_written()
            raise
        log.debug("Committed %s records for %s at offset %s", len(records), what, offset)
        return offset

    async def _append(
        self,
        records: tuple[MetadataRecord, ...],
        what: str,
        before: MetadataImage,
        *,
        atomic: bool,
        stages: dict[str, float],
    ) -> tuple[int, int]:
        """Append a write's records (a KIP-868 transaction past TRANSACTION_BATCH_RECORDS, as
        _commit) after replaying them onto `before`, the image they were decided on: that
        image is what the next write is decided on (self._pending), and what the loader
        takes when they commit instead of replaying them (MetadataLoader.prepared). The last
        offset and the write's timeout."""
        mark = time.monotonic()
        records, atomic, encoded, timeout_ms = await self._encode(records, what, atomic)
        stages["encoded"], mark = time.monotonic() - mark, time.monotonic()
        driver = self.raft.driver
        # Where they go: nothing else appends while the writer is held (checked below).
        first = driver.log.end_offset()
        epoch = self.raft.replica.epoch
        delta = MetadataDelta(before)
        await run_sliced(_replay_steps(delta, records, first), 0.0)
        after = delta.image()
        stages["replayed"], mark = time.monotonic() - mark, time.monotonic()
        self.state.prepared(
            PreparedWrite(first, first + len(records), epoch, len(records), before, delta, after)
        )
        try:
            last = await driver.append(
                encoded, atomic=atomic, batch_records=TRANSACTION_BATCH_RECORDS
            )
        except BaseException:
            self._invalidate()
            raise
        if last != first + len(records) - 1:
            # Not where they were replayed at: the next write is decided on the committed
            # image again, once re-synced (the loader replays these when they commit).
            log.warning("%s: appended at %s, replayed at %s: re-syncing", what,
                        last - len(records) + 1, first)
            self._invalidate()
        else:
            self._pending.append((last, after))
        stages["appended"] = time.monotonic() - mark
        return last, timeout_ms

    @staticmethod
    async def _encode(
        records: tuple[MetadataRecord, ...], what: str, atomic: bool
    ) -> tuple[tuple[MetadataRecord, ...], bool, list[bytes], int]:
        """The records as appended (more than TRANSACTION_BATCH_RECORDS in a KIP-868
        transaction, not atomic), whether atomic, their encodings (the loop given back every
        ENCODE_SLICE_RECORDS) and the write's timeout."""
        if len(records) > TRANSACTION_BATCH_RECORDS:
            records = (BeginTransactionRecord(name=what), *records, EndTransactionRecord())
            atomic = False
        encoded = []
        for index, record in enumerate(records):
            encoded.append(encode_record(record))
            if index % ENCODE_SLICE_RECORDS == ENCODE_SLICE_RECORDS - 1:
                await asyncio.sleep(0)
        timeout_ms = WRITE_TIMEOUT_MS + WRITE_TIMEOUT_MS_PER_RECORD * len(records)
        return records, atomic, encoded, timeout_ms

    async def _wait_replayed(self, offset: int) -> None:
        """Until `offset` is applied, or replayed into a transaction left open (then nothing
        is published until it ends: only the activation may wait so)."""
        deadline = asyncio.get_running_loop().time() + WRITE_TIMEOUT_MS / 1000
        while self.state.committed_offset <= offset:
            if self.raft.driver.applied_offset > offset and self.state.in_transaction:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise KafkaError(Errors.REQUEST_TIMED_OUT, f"offset {offset} not replayed")
            await asyncio.sleep(ACTIVATION_POLL_S)

    async def _wait_applied(self, offset: int, timeout_ms: int = WRITE_TIMEOUT_MS) -> None:
        if self.state.committed_offset > offset:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (offset, waiter)
        self._apply_waiters.append(entry)
        try:
            await asyncio.wait_for(waiter, timeout_ms / 1000)
        except TimeoutError:
            raise KafkaError(Errors.REQUEST_TIMED_OUT, f"offset {offset} not replayed") from None
        finally:
            if entry in self._apply_waiters:
                self._apply_waiters.remove(entry)

    # ---- MetadataPublisher: the loader tells this controller of every replayed commit ----

    @property
    def name(self) -> str:
        return "QuorumController"

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        if not self._apply_waiters:
            return
        still: list[tuple[int, asyncio.Future[None]]] = []
        for offset, waiter in self._apply_waiters:
            if manifest.end_offset > offset:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                still.append((offset, waiter))
        self._apply_waiters = still

    def _log_changes(
        self, before: MetadataImage, result: ControllerResult[Any], why: str
    ) -> None:
        for record in result.records:
            if isinstance(record, BrokerRegistrationChangeRecord):
                self._log_broker_change(record, why)
        many = len(result.changes) > LOG_DETAIL_LIMIT
        # Per-partition sentences cost a merge each: only built when they are logged.
        sentences = not many or log.isEnabledFor(logging.DEBUG)
        kinds: dict[str, int] = {}
        for change in result.changes:
            if change.record is None:
                continue
            # The builder's ElectionKind, carried with the result (not re-derived from states).
            election = replication_control.election_label(change.election)
            if sentences:
                summary = replication_control.summarize_change(before, change)
                if summary is None:
                    continue
                (log.debug if many else log.info)("%s", summary.message)
            if election == "ELR":
                self.elections_from_elr += 1
            elif election == "unclean":
                self.unclean_elections += 1
            kind = _SUMMARY_KINDS.get(election, election)
            kinds[kind] = kinds.get(kind, 0) + 1
        if len(result.changes) > LOG_DETAIL_LIMIT:
            log.info(
                "%s: %s partition changes (%s)",
                why,
                len(result.changes),
                ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())),
            )

    @staticmethod
    def _log_broker_change(record: BrokerRegistrationChangeRecord, why: str) -> None:
        broker = f"broker {record.broker_id} (epoch {record.broker_epoch})"
        if record.fenced == BROKER_FLAG_TRUE:
            log.info("Fenced %s: %s", broker, why)
        elif record.fenced == BROKER_FLAG_FALSE:
            log.info("Unfenced %s: %s", broker, why)
        elif record.in_controlled_shutdown == BROKER_FLAG_TRUE:
            log.info("Broker %s is in controlled shutdown: moving its leaderships away", broker)

    # -- session timeouts --------------------------------------------------------------------

    async def _session_timer(self) -> None:
        # As Kafka's QuorumController.rescheduleMaybeFenceStaleBrokers: the check runs when the
        # least recently heard-from broker's session lapses, so a killed broker is fenced at its
        # session timeout rather than up to a period later, and an idle cluster runs no fencing
        # write at all; woken at least every `cap_s` for new brokers and a new leadership.
        cap_s = max(0.05, min(self.session_timeout_ms / 4, 1000) / 1000)
        while True:
            await asyncio.sleep(self._until_session_check_s(cap_s))
            if not self.is_active:
                continue
            now_ms = self.session_clock.now_ms()
            due = self.tracker.next_check_ms(self._head(), now_ms, self.session_timeout_ms)
            if due is None or due >= now_ms:
                continue
            try:
                await self.fence_expired()
            except KafkaError as exc:
                log.debug("Session check skipped: %s", exc)

    def _until_session_check_s(self, cap_s: float) -> float:
        if not self.is_active:
            return cap_s
        now_ms = self.session_clock.now_ms()
        due = self.tracker.next_check_ms(self._head(), now_ms, self.session_timeout_ms)
        if due is None:
            return cap_s
        # Just past the deadline (expired() counts a session lapsed once strictly over it).
        return min(cap_s, max(SESSION_CHECK_MIN_S, (due + 1 - now_ms) / 1000))

    async def fence_expired(self) -> list[cluster_control.FencedBroker]:
        """Fence the brokers whose `broker.session.timeout.ms` lapsed (active controller only),
        one per write as Kafka's maybeFenceOneStaleBroker: other writes (a heartbeat that
        unfences, a CreateTopics) go between two fencings."""
        fenced_all: list[cluster_control.FencedBroker] = []
        while True:
            fenced = await self.write(
                lambda image: cluster_control.fence_stale_broker_steps(
                    image,
                    self.tracker,
                    self.session_clock.now_ms(),
                    self.session_timeout_ms,
                    self.election_policy(image),
                ),
                "session expired",
            )
            for broker in fenced:
                log.info(
                    "Broker %s (epoch %s): %s", broker.broker_id, broker.broker_epoch, broker.reason
                )
            if not fenced:
                return fenced_all
            fenced_all.extend(fenced)


def _replay_steps(
    delta: MetadataDelta, records: tuple[MetadataRecord, ...], first_offset: int
) -> Generator[None, None, None]:
    """Replay a write's records onto `delta` at the offsets they are appended at, as the
    loader would (transaction markers change nothing in an image), runs of partition changes
    together; yields every ENCODE_SLICE_RECORDS records."""
    for start in range(0, len(records), ENCODE_SLICE_RECORDS):
        changes: list[PartitionChangeRecord] = []
        for index in range(start, min(start + ENCODE_SLICE_RECORDS, len(records))):
            record = records[index]
            if type(record) is PartitionChangeRecord:
                changes.append(record)
                continue
            if changes:
                delta.replay_partition_changes(changes, first_offset + index - len(changes))
                changes = []
            if not isinstance(record, TRANSACTION_MARKERS):
                delta.replay(record, first_offset + index)
        if changes:
            end = min(start + ENCODE_SLICE_RECORDS, len(records))
            delta.replay_partition_changes(changes, first_offset + end - len(changes))
        yield
