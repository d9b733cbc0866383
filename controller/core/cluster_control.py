"""Broker registration, heartbeats, fencing and controlled shutdown (Kafka's ClusterControlManager
and BrokerHeartbeatManager).

Pure: the active controller passes `now_ms` and keeps the last-heartbeat times in a
`BrokerHeartbeatTracker` in memory (they are not metadata: a new active controller starts every
session afresh). Each operation returns ControllerResult(records, response); partition effects come
from replication_control, so the election rules stay in PartitionChangeBuilder.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.core.controller_result import ControllerResult
from controller.core.election_policy import DEFAULT_POLICY, ElectionPolicy
from controller.core.partition_change import PartitionChange, written_records
from controller.core.replication_control import (
    broker_controlled_shutdown_steps,
    broker_fenced_steps,
    broker_restart_steps,
    broker_unfenced_steps,
)
from controller.core.steps import Steps, drain, drained
from kafkawire.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    heartbeat_response,
    registration_response,
)
from kafkawire.errors import Errors
from metadata.metadata_image import BrokerRegistration, MetadataDelta, MetadataImage
from metadata.records import (
    BROKER_FLAG_FALSE,
    BROKER_FLAG_TRUE,
    BrokerRegistrationChangeRecord,
    Endpoint,
    MetadataRecord,
    RegisterBrokerRecord,
)

# RegisterBrokerRecord.broker_epoch -1: replay uses the record's offset as the broker epoch.
EPOCH_FROM_OFFSET = -1
# Partition changes one controlled-shutdown heartbeat writes at most; the broker's next
# heartbeats write the rest, and it is granted once none is left. Kafka moves every
# leadership in the first heartbeat's write (handleBrokerInControlledShutdown), a few ms of
# Java at 100,000 partitions; here 100,000 changes are seconds of builder, Raft and replay,
# and three brokers stopping at once waited for each other's whole write until their
# shutdowns timed out (issue 35). Kafka bounds a controller event of elections the same way
# (ReplicationControlManager's maxElectionsPerImbalance, 1,000); 5,000 here: a batch is about
# 0.7 s at 20,000 partitions under load, well within the heartbeat's 4.5 s, and each write's
# fixed cost (Raft commit, fsync, publishing) is paid a fifth as often.
CONTROLLED_SHUTDOWN_BATCH = 5000


@dataclass
class BrokerHeartbeatTracker:
    """Last contact per broker, on the active controller only (in memory, like Kafka's)."""

    last_contact_ms: dict[int, int] = field(default_factory=dict)
    # Where the next controlled-shutdown batch starts (topic name, partition id): each batch
    # goes on from the last one instead of scanning the partitions already moved again.
    shutdown_cursor: tuple[str, int] | None = None

    def touch(self, broker_id: int, now_ms: int) -> None:
        self.last_contact_ms[broker_id] = now_ms

    def reset(self, broker_ids: list[int], now_ms: int) -> None:
        """A new active controller gives every broker a full session to reach it."""
        self.last_contact_ms = dict.fromkeys(broker_ids, now_ms)

    def has_valid_session(
        self, registration: BrokerRegistration, now_ms: int, session_timeout_ms: int
    ) -> bool:
        """Kafka's hasValidSession: unfenced and heard from within the session timeout."""
        if registration.fenced:
            return False
        last = self.last_contact_ms.get(registration.broker_id)
        return last is not None and now_ms - last <= session_timeout_ms

    def expired(
        self, image: MetadataImage, now_ms: int, session_timeout_ms: int
    ) -> list[BrokerRegistration]:
        """Unfenced brokers whose session lapsed; a broker never heard from is timed from now."""
        out = []
        for broker_id in sorted(image.brokers):
            registration = image.brokers[broker_id]
            if registration.fenced:
                continue
            last = self.last_contact_ms.setdefault(broker_id, now_ms)
            if now_ms - last > session_timeout_ms:
                out.append(registration)
        return out

    def next_check_ms(
        self, image: MetadataImage, now_ms: int, session_timeout_ms: int
    ) -> int | None:
        """When the least recently heard-from unfenced broker's session lapses (None: no
        unfenced broker), Kafka's BrokerHeartbeatManager.nextCheckTimeNs; a broker never heard
        from is timed from now, as in expired()."""
        lasts = [
            self.last_contact_ms.setdefault(broker_id, now_ms)
            for broker_id, registration in image.brokers.items()
            if not registration.fenced
        ]
        return min(lasts) + session_timeout_ms if lasts else None


def track_heartbeat(
    image: MetadataImage,
    request: BrokerHeartbeatRequest,
    tracker: BrokerHeartbeatTracker,
    now_ms: int,
) -> bool:
    """Kafka's ClusterControlManager.trackBrokerHeartbeat: note the contact of a registered
    broker with its current epoch as the heartbeat arrives, before it waits for the controller's
    single writer; False (nothing noted) for an unknown broker or a stale epoch."""
    registration = image.brokers.get(request.broker_id)
    if registration is None or registration.epoch != request.broker_epoch:
        return False
    tracker.touch(request.broker_id, now_ms)
    return True


@dataclass(frozen=True, slots=True)
class FencedBroker:
    broker_id: int
    broker_epoch: int
    reason: str


def _fence(
    image: MetadataImage, broker: BrokerRegistration, policy: ElectionPolicy
) -> Steps[tuple[list[MetadataRecord], list[PartitionChange]]]:
    """Rule 12: fence, and take the broker out of every ISR (partition changes first)."""
    changes = yield from broker_fenced_steps(image, broker.broker_id, policy)
    records: list[MetadataRecord] = [*written_records(changes)]
    records.append(
        BrokerRegistrationChangeRecord(broker.broker_id, broker.epoch, fenced=BROKER_FLAG_TRUE)
    )
    return records, changes


def register_broker_steps(
    image: MetadataImage,
    request: BrokerRegistrationRequest,
    cluster_id: str,
    tracker: BrokerHeartbeatTracker,
    now_ms: int,
    session_timeout_ms: int,
    policy: ElectionPolicy = DEFAULT_POLICY,
) -> Steps[ControllerResult[BrokerRegistrationResponse]]:
    """A new registration, fenced until caught up. The response's broker_epoch is -1 here: the
    epoch is the offset of the RegisterBrokerRecord, known once it is committed."""
    if request.incarnation_id is None:
        return _refused_registration(
            Errors.INVALID_REGISTRATION, "a registration needs an incarnation id"
        )
    if request.cluster_id != cluster_id:
        return _refused_registration(
            Errors.INCONSISTENT_CLUSTER_ID,
            f"broker {request.broker_id} is in cluster {request.cluster_id!r}, "
            f"this is {cluster_id!r}",
        )
    if request.broker_id < 0:
        return _refused_registration(
            Errors.INVALID_REGISTRATION, f"broker id {request.broker_id} is negative"
        )
    existing = image.brokers.get(request.broker_id)
    if existing is not None and existing.incarnation_id == request.incarnation_id:
        # A retried registration of the same process: answer the epoch it already has.
        tracker.touch(request.broker_id, now_ms)
        return ControllerResult((), registration_response(broker_epoch=existing.epoch))
    if existing is not None and tracker.has_valid_session(existing, now_ms, session_timeout_ms):
        return _refused_registration(
            Errors.DUPLICATE_BROKER_REGISTRATION,
            f"broker {request.broker_id} (epoch {existing.epoch}) is still alive with "
            "another incarnation; retry once its session expires",
        )
    changes: list[PartitionChange] = []
    if existing is not None:
        # Rule 12: equal PreviousBrokerEpoch (from the clean-shutdown file) means clean.
        clean = request.previous_broker_epoch == existing.epoch
        changes = yield from broker_restart_steps(image, request.broker_id, clean, policy)
    records: list[MetadataRecord] = [*written_records(changes)]
    records.append(
        RegisterBrokerRecord(
            broker_id=request.broker_id,
            incarnation_id=request.incarnation_id,
            broker_epoch=EPOCH_FROM_OFFSET,
            endpoints=tuple(
                Endpoint(lst.name, lst.host, int(lst.port)) for lst in request.listeners
            ),
            rack=request.rack,
            fenced=True,
            in_controlled_shutdown=False,
            log_dirs=tuple(d for d in request.log_dirs if d is not None),
        )
    )
    tracker.touch(request.broker_id, now_ms)
    return ControllerResult(tuple(records), registration_response(), tuple(changes))


register_broker = drained(register_broker_steps)


def _refused_registration(
    error: Errors, message: str
) -> ControllerResult[BrokerRegistrationResponse]:
    return ControllerResult((), registration_response(error), message=message)


def is_clean_restart(image: MetadataImage, request: BrokerRegistrationRequest) -> bool | None:
    """Rule 12 for the log line: None for a first registration."""
    existing = image.brokers.get(request.broker_id)
    if existing is None:
        return None
    return request.previous_broker_epoch == existing.epoch


def process_heartbeat_steps(
    image: MetadataImage,
    request: BrokerHeartbeatRequest,
    tracker: BrokerHeartbeatTracker,
    now_ms: int,
    policy: ElectionPolicy = DEFAULT_POLICY,
    shutdown_batch: int | None = CONTROLLED_SHUTDOWN_BATCH,
) -> Steps[ControllerResult[BrokerHeartbeatResponse]]:
    """Kafka's broker state machine: unfence when caught up, fence on request, and controlled
    shutdown in steps: move leadership and leave the ISRs (at most `shutdown_batch` partition
    changes a heartbeat), then, once nothing is left, fence and let it stop."""
    registration = image.brokers.get(request.broker_id)
    if registration is None:
        return ControllerResult(
            (),
            heartbeat_response(Errors.BROKER_ID_NOT_REGISTERED),
            message=f"broker {request.broker_id} is not registered",
        )
    if registration.epoch != request.broker_epoch:
        return ControllerResult(
            (),
            heartbeat_response(Errors.STALE_BROKER_EPOCH),
            message=f"broker {request.broker_id} sent epoch {request.broker_epoch}, "
            f"registered epoch is {registration.epoch}",
        )
    tracker.touch(request.broker_id, now_ms)
    caught_up = request.current_metadata_offset >= registration.epoch
    broker_id = request.broker_id

    if request.want_shut_down:
        if registration.fenced:
            return ControllerResult(
                (), heartbeat_response(is_caught_up=caught_up, should_shut_down=True)
            )
        if registration.in_controlled_shutdown:
            pending = yield from broker_controlled_shutdown_steps(
                image, (broker_id,), policy, limit=1, start=tracker.shutdown_cursor
            )
            if not pending:  # its leaderships moved, it left the ISRs: granted
                records, changes = yield from _fence(image, registration, policy)
                return ControllerResult(
                    tuple(records),
                    heartbeat_response(
                        is_caught_up=caught_up, is_fenced=True, should_shut_down=True
                    ),
                    tuple(changes),
                )
        # The next batch of every broker in controlled shutdown, this one included: brokers
        # stopping together share the work (one change per partition for all of them).
        shutting = {
            b for b, reg in image.brokers.items() if reg.in_controlled_shutdown and not reg.fenced
        }
        shutting.add(broker_id)
        changes = yield from broker_controlled_shutdown_steps(
            image, shutting, policy, limit=shutdown_batch, start=tracker.shutdown_cursor
        )
        moved = written_records(changes)
        tracker.shutdown_cursor = None
        if moved and len(changes) == shutdown_batch:  # more to come: go on after the last
            last = moved[-1]
            tracker.shutdown_cursor = (image.topics[last.topic_id].name, last.partition_id + 1)
        entering: tuple[MetadataRecord, ...] = ()
        if not registration.in_controlled_shutdown:
            entering = (
                BrokerRegistrationChangeRecord(
                    broker_id, registration.epoch, in_controlled_shutdown=BROKER_FLAG_TRUE
                ),
            )
        return ControllerResult(
            (*entering, *moved),
            heartbeat_response(is_caught_up=caught_up, is_fenced=False),
            tuple(changes),
        )

    if request.want_fence:
        records, changes = [], []
        if not registration.fenced:
            records, changes = yield from _fence(image, registration, policy)
        return ControllerResult(
            tuple(records),
            heartbeat_response(is_caught_up=caught_up, is_fenced=True),
            tuple(changes),
        )

    if registration.fenced and caught_up and not registration.in_controlled_shutdown:
        # Unfence first so rule 16's elections see the broker as eligible on replay.
        records = [
            BrokerRegistrationChangeRecord(
                broker_id,
                registration.epoch,
                fenced=BROKER_FLAG_FALSE,
                in_controlled_shutdown=BROKER_FLAG_FALSE,
            )
        ]
        changes = yield from broker_unfenced_steps(image, broker_id, policy)
        records.extend(written_records(changes))
        return ControllerResult(
            tuple(records),
            heartbeat_response(is_caught_up=True, is_fenced=False),
            tuple(changes),
        )
    return ControllerResult(
        (),
        heartbeat_response(is_caught_up=caught_up, is_fenced=registration.fenced),
    )


process_heartbeat = drained(process_heartbeat_steps)


def fence_expired_brokers(
    image: MetadataImage,
    tracker: BrokerHeartbeatTracker,
    now_ms: int,
    session_timeout_ms: int,
    policy: ElectionPolicy = DEFAULT_POLICY,
) -> ControllerResult[list[FencedBroker]]:
    """Fence every broker whose session lapsed (`broker.session.timeout.ms`), one at a time
    against an image that already has the earlier fencings, so elections skip them."""
    expired = tracker.expired(image, now_ms, session_timeout_ms)
    if not expired:
        return ControllerResult((), [])
    delta = MetadataDelta(image)
    current = image
    records: list[MetadataRecord] = []
    changes: list[PartitionChange] = []
    fenced = []
    for registration in expired:
        last = tracker.last_contact_ms.get(registration.broker_id, now_ms)
        batch, batch_changes = drain(_fence(current, registration, policy))
        records.extend(batch)
        changes.extend(batch_changes)
        for record in batch:
            delta.replay(record, image.offset)
        current = delta.image()
        fenced.append(
            FencedBroker(
                registration.broker_id,
                registration.epoch,
                f"session expired ({now_ms - last} ms since the last heartbeat, "
                f"timeout {session_timeout_ms} ms)",
            )
        )
    return ControllerResult(tuple(records), fenced, tuple(changes))


def fence_stale_broker_steps(
    image: MetadataImage,
    tracker: BrokerHeartbeatTracker,
    now_ms: int,
    session_timeout_ms: int,
    policy: ElectionPolicy = DEFAULT_POLICY,
) -> Steps[ControllerResult[list[FencedBroker]]]:
    """Fence at most one broker whose session lapsed: the one heard from least recently (Kafka's
    maybeFenceOneStaleBroker, one per controller event, "so that the effect of fencing each
    broker is visible to the system prior to processing the next one"); the caller asks again
    until nothing is fenced."""
    expired = tracker.expired(image, now_ms, session_timeout_ms)
    if not expired:
        return ControllerResult((), [])
    registration = min(
        expired,
        key=lambda r: (tracker.last_contact_ms.get(r.broker_id, now_ms), r.broker_id),
    )
    last = tracker.last_contact_ms.get(registration.broker_id, now_ms)
    records, changes = yield from _fence(image, registration, policy)
    fenced = FencedBroker(
        registration.broker_id,
        registration.epoch,
        f"session expired ({now_ms - last} ms since the last heartbeat, "
        f"timeout {session_timeout_ms} ms)",
    )
    return ControllerResult(tuple(records), [fenced], tuple(changes))
