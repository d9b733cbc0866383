"""The broker lifecycle messages, one shape each: kio's frozen entities of the one version of
BrokerRegistration (v4), BrokerHeartbeat (v1) and AlterPartition (v3) minikraft speaks between
brokers and the active controller (ARCHITECTURE.md "Wire protocol"). The broker's runtime and
core build them, the controller's core takes them and answers with them, and the wire carries
them as they are: no translation on either side.

Names here are the roles the cores read them in (kio's names are per schema: TopicData,
PartitionData); the few builders wrap kio's integer types once so the cores pass plain ints.
Kafka's responses carry no error message: the controller logs why, the broker logs the name.

Fields, as Kafka's:
- BrokerRegistration: ClusterId (a foreign one is INCONSISTENT_CLUSTER_ID), IncarnationId,
  Listeners (PLAINTEXT), Rack, LogDirs (directory ids), PreviousBrokerEpoch (rule 12, KIP-966).
  minikraft negotiates no features, so Features is empty and IsMigratingZkBroker false.
- BrokerHeartbeat: BrokerEpoch, CurrentMetadataOffset, WantFence, WantShutDown; OfflineLogDirs is
  empty (a broker with a failed log dir stops, it does not report it).
- AlterPartition: topic ids, NewIsrWithEpochs with each member's broker epoch (KIP-903, rule 17),
  LeaderRecoveryState (KIP-704, rule 19), PartitionEpoch; errors top-level (STALE_BROKER_EPOCH,
  NOT_CONTROLLER) and per partition (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable
from typing import Any

from kio.schema.alter_partition.v3 import request as alter_partition_req
from kio.schema.alter_partition.v3 import response as alter_partition_resp
from kio.schema.broker_heartbeat.v1 import request as heartbeat_req
from kio.schema.broker_heartbeat.v1 import response as heartbeat_resp
from kio.schema.broker_registration.v4 import request as registration_req
from kio.schema.broker_registration.v4 import response as registration_resp
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i64, u16

from kafkawire.api_keys import ApiKey
from kafkawire.constants import NO_BROKER_EPOCH
from kafkawire.entities import NO_THROTTLE
from kafkawire.errors import Errors
from kafkawire.messages import error_code
from kafkawire.slots import slot_constructor

REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
ALTER_PARTITION_VERSION = 3
SECURITY_PROTOCOL_PLAINTEXT = 0  # Kafka's SecurityProtocol.PLAINTEXT id

BrokerRegistrationRequest = registration_req.BrokerRegistrationRequest
BrokerListener = registration_req.Listener
BrokerRegistrationResponse = registration_resp.BrokerRegistrationResponse
BrokerHeartbeatRequest = heartbeat_req.BrokerHeartbeatRequest
BrokerHeartbeatResponse = heartbeat_resp.BrokerHeartbeatResponse
AlterPartitionRequest = alter_partition_req.AlterPartitionRequest
AlterPartitionTopic = alter_partition_req.TopicData
AlterPartitionPartition = alter_partition_req.PartitionData
BrokerState = alter_partition_req.BrokerState
AlterPartitionResponse = alter_partition_resp.AlterPartitionResponse
AlterPartitionTopicResult = alter_partition_resp.TopicData
AlterPartitionPartitionResult = alter_partition_resp.PartitionData


# -- BrokerRegistration ------------------------------------------------------------------------


def registration_request(
    broker_id: int,
    cluster_id: str,
    incarnation_id: uuid.UUID,
    listeners: Iterable[tuple[str, str, int]] = (),
    *,
    rack: str | None = None,
    log_dirs: Iterable[uuid.UUID] = (),
    previous_broker_epoch: int = NO_BROKER_EPOCH,
) -> BrokerRegistrationRequest:
    """`listeners`: (name, host, port) of each, PLAINTEXT."""
    return BrokerRegistrationRequest(
        broker_id=BrokerId(broker_id),
        cluster_id=cluster_id,
        incarnation_id=incarnation_id,
        listeners=tuple(
            BrokerListener(
                name=name,
                host=host,
                port=u16(port),
                security_protocol=i16(SECURITY_PROTOCOL_PLAINTEXT),
            )
            for name, host, port in listeners
        ),
        features=(),
        rack=rack,
        log_dirs=tuple(log_dirs),
        previous_broker_epoch=i64(previous_broker_epoch),
    )


def registration_response(
    error: Errors = Errors.NONE, broker_epoch: int = NO_BROKER_EPOCH
) -> BrokerRegistrationResponse:
    return BrokerRegistrationResponse(
        throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
        error_code=error_code(error),
        broker_epoch=i64(broker_epoch),
    )


# -- BrokerHeartbeat ---------------------------------------------------------------------------


def heartbeat_request(
    broker_id: int,
    broker_epoch: int,
    current_metadata_offset: int,
    *,
    want_fence: bool = False,
    want_shut_down: bool = False,
) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(
        broker_id=BrokerId(broker_id),
        broker_epoch=i64(broker_epoch),
        current_metadata_offset=i64(current_metadata_offset),
        want_fence=want_fence,
        want_shut_down=want_shut_down,
    )


def heartbeat_response(
    error: Errors = Errors.NONE,
    *,
    is_caught_up: bool = False,
    is_fenced: bool = True,
    should_shut_down: bool = False,
) -> BrokerHeartbeatResponse:
    return BrokerHeartbeatResponse(
        throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
        error_code=error_code(error),
        is_caught_up=is_caught_up,
        is_fenced=is_fenced,
        should_shut_down=should_shut_down,
    )


# -- AlterPartition ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def broker_state(broker_id: int, broker_epoch: int = NO_BROKER_EPOCH) -> BrokerState:
    """A proposed ISR member with its broker epoch (-1: an old sender, the check is skipped).
    One object per (broker, epoch), as kio's entities are frozen: a leader proposing 66,000
    expansions at once built three of them each, with kio's range checks (issue 35)."""
    return BrokerState(broker_id=BrokerId(broker_id), broker_epoch=i64(broker_epoch))


def alter_partition_partition(
    partition_index: int,
    leader_epoch: int,
    new_isr_with_epochs: Iterable[BrokerState],
    leader_recovery_state: int = 0,
    partition_epoch: int = 0,
) -> AlterPartitionPartition:
    # Plain ints, as alter_partition_result's: the leader's own epochs, and kio's range check
    # of each field through a metaclass isinstance cost more than the rest of building a
    # proposal (a returning broker's leaders propose 100,000, issue 35). Same bytes.
    # Through the entity's slots (kafkawire.slots), not kio's frozen __init__ with keywords.
    return _new_partition_data(
        partition_index,
        leader_epoch,
        tuple(new_isr_with_epochs),
        leader_recovery_state,
        partition_epoch,
    )


_new_partition_data = slot_constructor(
    AlterPartitionPartition,
    ("partition_index", "leader_epoch", "new_isr_with_epochs", "leader_recovery_state",
     "partition_epoch"),
)


def alter_partition_request(
    broker_id: int,
    broker_epoch: int,
    topics: Iterable[tuple[uuid.UUID, Iterable[AlterPartitionPartition]]],
) -> AlterPartitionRequest:
    """`topics`: (topic id, its partitions) pairs."""
    return AlterPartitionRequest(
        broker_id=BrokerId(broker_id),
        broker_epoch=i64(broker_epoch),
        topics=tuple(
            AlterPartitionTopic(topic_id=topic_id, partitions=tuple(partitions))
            for topic_id, partitions in topics
        ),
    )


def alter_partition_result(
    partition_index: int,
    error: Errors,
    leader_id: int = -1,
    leader_epoch: int = -1,
    isr: Iterable[int] = (),
    leader_recovery_state: int = 0,
    partition_epoch: int = -1,
) -> AlterPartitionPartitionResult:
    # Plain ints, not kio's phantom constructors (i32(), BrokerId()): the values are the
    # controller's own, from its image, and each constructor re-checks its range through a
    # metaclass isinstance, 8 of them a partition: 62 against 8 us a result, and an AlterPartition
    # answers every partition it names (thousands at 100,000 partitions, issue 35). Same bytes.
    # Through the entity's slots (kafkawire.slots), not kio's frozen __init__ with keywords.
    return _new_partition_result(
        partition_index,
        error_code(error),
        leader_id,
        leader_epoch,
        tuple(isr),
        leader_recovery_state,
        partition_epoch,
    )


_new_partition_result = slot_constructor(
    AlterPartitionPartitionResult,
    ("partition_index", "error_code", "leader_id", "leader_epoch", "isr",
     "leader_recovery_state", "partition_epoch"),
)


def alter_partition_response(
    error: Errors = Errors.NONE,
    topics: Iterable[tuple[uuid.UUID, Iterable[AlterPartitionPartitionResult]]] = (),
) -> AlterPartitionResponse:
    """`topics`: (topic id, its partitions' results) pairs."""
    return AlterPartitionResponse(
        throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
        error_code=error_code(error),
        topics=tuple(
            AlterPartitionTopicResult(topic_id=topic_id, partitions=tuple(results))
            for topic_id, results in topics
        ),
    )


# -- a whole request's error -------------------------------------------------------------------


def error_response(api_key: ApiKey, error: Errors) -> Any:
    """The response of a lifecycle request that failed as a whole (NOT_CONTROLLER on a standby,
    REQUEST_TIMED_OUT when the quorum cannot commit, a bug): the top-level error code."""
    if api_key == ApiKey.BROKER_REGISTRATION:
        return registration_response(error)
    if api_key == ApiKey.BROKER_HEARTBEAT:
        return heartbeat_response(error)
    if api_key == ApiKey.ALTER_PARTITION:
        return alter_partition_response(error)
    raise TypeError(f"not a broker lifecycle api: {api_key.name}")
