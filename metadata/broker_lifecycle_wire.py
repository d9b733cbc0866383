"""Broker lifecycle on Kafka's wire protocol, the translation both sides share: BrokerRegistration v4, BrokerHeartbeat v1 and
AlterPartition v3 between brokers and the active controller (ARCHITECTURE.md "Wire protocol").

Both sides translate here, so one module owns each field's meaning: the broker turns the
controller core's dataclasses (controller.core.messages) into kio requests and reads
kio responses back; the controller's handlers (controller/runtime/kafka_broker_lifecycle.py)
turn kio requests into the same dataclasses, run QuorumController, and answer the kio response.
Shared here, not in either runtime, so no node runtime imports the other (issue 18). Fields:

- BrokerRegistration: ClusterId (a foreign one is INCONSISTENT_CLUSTER_ID), IncarnationId,
  Listeners (PLAINTEXT), Rack, LogDirs (directory ids), PreviousBrokerEpoch (rule 12, KIP-966).
  minikraft negotiates no features, so Features is empty and IsMigratingZkBroker false.
- BrokerHeartbeat: BrokerEpoch, CurrentMetadataOffset, WantFence, WantShutDown; OfflineLogDirs is
  empty (a broker with a failed log dir stops, it does not report it).
- AlterPartition: topic ids, NewIsrWithEpochs with each member's broker epoch (KIP-903, rule 17),
  LeaderRecoveryState (KIP-704, rule 19), PartitionEpoch; errors top-level (STALE_BROKER_EPOCH,
  NOT_CONTROLLER) and per partition (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...), as Kafka.

Kafka's responses carry no error message: the controller logs why, the broker logs the name.
"""

from __future__ import annotations

from typing import Any

from kio.schema.alter_partition.v3 import request as alter_partition_req
from kio.schema.alter_partition.v3 import response as alter_partition_resp
from kio.schema.broker_heartbeat.v1 import request as heartbeat_req
from kio.schema.broker_heartbeat.v1 import response as heartbeat_resp
from kio.schema.broker_registration.v4 import request as registration_req
from kio.schema.broker_registration.v4 import response as registration_resp
from kio.static.primitive import i8, i16, i32, i64, u16

from controller.core import messages as cm
from kafkawire import constants
from kafkawire.api_keys import ApiKey
from kafkawire.entities import NO_THROTTLE
from kafkawire.errors import Errors, KafkaError
from kafkawire.messages import error_code

REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
ALTER_PARTITION_VERSION = 3
SECURITY_PROTOCOL_PLAINTEXT = 0  # Kafka's SecurityProtocol.PLAINTEXT id

# -- BrokerRegistration ------------------------------------------------------------------------


def registration_request_to_kio(
    request: cm.BrokerRegistrationRequest,
) -> registration_req.BrokerRegistrationRequest:
    return registration_req.BrokerRegistrationRequest(
        broker_id=i32(request.broker_id),  # type: ignore[arg-type]
        cluster_id=request.cluster_id,
        incarnation_id=request.incarnation_id,
        listeners=tuple(
            registration_req.Listener(
                name=lst.name,
                host=lst.host,
                port=u16(lst.port),
                security_protocol=i16(SECURITY_PROTOCOL_PLAINTEXT),
            )
            for lst in request.listeners
        ),
        features=(),
        rack=request.rack,
        log_dirs=tuple(request.log_dirs),
        previous_broker_epoch=i64(request.previous_broker_epoch),
    )


def registration_request_from_kio(body: Any) -> cm.BrokerRegistrationRequest:
    if body.incarnation_id is None:
        raise KafkaError(Errors.INVALID_REGISTRATION, "a registration needs an incarnation id")
    return cm.BrokerRegistrationRequest(
        broker_id=int(body.broker_id),
        cluster_id=body.cluster_id,
        incarnation_id=body.incarnation_id,
        listeners=[cm.BrokerListener(lst.name, lst.host, int(lst.port)) for lst in body.listeners],
        rack=body.rack,
        log_dirs=[d for d in body.log_dirs if d is not None],
        previous_broker_epoch=int(body.previous_broker_epoch),
    )


def registration_response_to_kio(
    response: cm.BrokerRegistrationResponse,
) -> registration_resp.BrokerRegistrationResponse:
    return registration_resp.BrokerRegistrationResponse(
        throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
        error_code=error_code(response.error_code),
        broker_epoch=i64(response.broker_epoch),
    )


def registration_response_from_kio(body: Any) -> cm.BrokerRegistrationResponse:
    return cm.BrokerRegistrationResponse(
        error_code=int(body.error_code), broker_epoch=int(body.broker_epoch)
    )


# -- BrokerHeartbeat ---------------------------------------------------------------------------


def heartbeat_request_to_kio(
    request: cm.BrokerHeartbeatRequest,
) -> heartbeat_req.BrokerHeartbeatRequest:
    return heartbeat_req.BrokerHeartbeatRequest(
        broker_id=i32(request.broker_id),  # type: ignore[arg-type]
        broker_epoch=i64(request.broker_epoch),
        current_metadata_offset=i64(request.current_metadata_offset),
        want_fence=request.want_fence,
        want_shut_down=request.want_shut_down,
    )


def heartbeat_request_from_kio(body: Any) -> cm.BrokerHeartbeatRequest:
    return cm.BrokerHeartbeatRequest(
        broker_id=int(body.broker_id),
        broker_epoch=int(body.broker_epoch),
        current_metadata_offset=int(body.current_metadata_offset),
        want_fence=bool(body.want_fence),
        want_shut_down=bool(body.want_shut_down),
    )


def heartbeat_response_to_kio(
    response: cm.BrokerHeartbeatResponse,
) -> heartbeat_resp.BrokerHeartbeatResponse:
    return heartbeat_resp.BrokerHeartbeatResponse(
        throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
        error_code=error_code(response.error_code),
        is_caught_up=response.is_caught_up,
        is_fenced=response.is_fenced,
        should_shut_down=response.should_shut_down,
    )


def heartbeat_response_from_kio(body: Any) -> cm.BrokerHeartbeatResponse:
    return cm.BrokerHeartbeatResponse(
        error_code=int(body.error_code),
        is_caught_up=bool(body.is_caught_up),
        is_fenced=bool(body.is_fenced),
        should_shut_down=bool(body.should_shut_down),
    )


# -- AlterPartition ----------------------------------------------------------------------------


def alter_partition_request_to_kio(
    request: cm.AlterPartitionRequest,
) -> alter_partition_req.AlterPartitionRequest:
    return alter_partition_req.AlterPartitionRequest(
        broker_id=i32(request.broker_id),  # type: ignore[arg-type]
        broker_epoch=i64(request.broker_epoch),
        topics=tuple(
            alter_partition_req.TopicData(
                topic_id=topic.topic_id,
                partitions=tuple(
                    alter_partition_req.PartitionData(
                        partition_index=i32(p.partition_index),
                        leader_epoch=i32(p.leader_epoch),
                        new_isr_with_epochs=tuple(
                            alter_partition_req.BrokerState(
                                broker_id=i32(b.broker_id),  # type: ignore[arg-type]
                                broker_epoch=i64(b.broker_epoch),
                            )
                            for b in p.new_isr_with_epochs
                        ),
                        leader_recovery_state=i8(p.leader_recovery_state),
                        partition_epoch=i32(p.partition_epoch),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )


def alter_partition_request_from_kio(body: Any) -> cm.AlterPartitionRequest:
    return cm.AlterPartitionRequest(
        broker_id=int(body.broker_id),
        broker_epoch=int(body.broker_epoch),
        topics=[
            cm.AlterPartitionTopicData(
                topic_id=topic.topic_id or constants.ZERO_UUID,
                partitions=[
                    cm.AlterPartitionPartitionData(
                        partition_index=int(p.partition_index),
                        leader_epoch=int(p.leader_epoch),
                        new_isr_with_epochs=[
                            cm.BrokerState(int(b.broker_id), int(b.broker_epoch))
                            for b in p.new_isr_with_epochs
                        ],
                        leader_recovery_state=int(p.leader_recovery_state),
                        partition_epoch=int(p.partition_epoch),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in body.topics
        ],
    )


def alter_partition_response_to_kio(
    response: cm.AlterPartitionResponse,
) -> alter_partition_resp.AlterPartitionResponse:
    return alter_partition_resp.AlterPartitionResponse(
        throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
        error_code=error_code(response.error_code),
        topics=tuple(
            alter_partition_resp.TopicData(
                topic_id=topic.topic_id,
                partitions=tuple(
                    alter_partition_resp.PartitionData(
                        partition_index=i32(p.partition_index),
                        error_code=error_code(p.error_code),
                        leader_id=i32(p.leader_id),  # type: ignore[arg-type]
                        leader_epoch=i32(p.leader_epoch),
                        isr=tuple(i32(b) for b in p.isr),  # type: ignore[misc]
                        leader_recovery_state=i8(p.leader_recovery_state),
                        partition_epoch=i32(p.partition_epoch),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in response.topics
        ),
    )


def alter_partition_response_from_kio(body: Any) -> cm.AlterPartitionResponse:
    return cm.AlterPartitionResponse(
        error_code=int(body.error_code),
        topics=[
            cm.AlterPartitionTopicResult(
                topic_id=topic.topic_id or constants.ZERO_UUID,
                partitions=[
                    cm.AlterPartitionPartitionResult(
                        partition_index=int(p.partition_index),
                        error_code=int(p.error_code),
                        leader_id=int(p.leader_id),
                        leader_epoch=int(p.leader_epoch),
                        isr=[int(b) for b in p.isr],
                        leader_recovery_state=int(p.leader_recovery_state),
                        partition_epoch=int(p.partition_epoch),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in body.topics
        ],
    )


# -- client side: any of the three core requests as its kio request ----------------------------


LIFECYCLE_REQUESTS = (
    cm.BrokerRegistrationRequest,
    cm.BrokerHeartbeatRequest,
    cm.AlterPartitionRequest,
)


def is_lifecycle_request(request: object) -> bool:
    return isinstance(request, LIFECYCLE_REQUESTS)


def lifecycle_request_to_kio(request: Any) -> Any:
    """The kio request for a core lifecycle request (the broker's side)."""
    if isinstance(request, cm.BrokerRegistrationRequest):
        return registration_request_to_kio(request)
    if isinstance(request, cm.BrokerHeartbeatRequest):
        return heartbeat_request_to_kio(request)
    if isinstance(request, cm.AlterPartitionRequest):
        return alter_partition_request_to_kio(request)
    raise TypeError(f"not a broker lifecycle request: {type(request).__name__}")


def lifecycle_response_from_kio(body: Any) -> Any:
    """The core response for a kio lifecycle response (the broker's side)."""
    api_key = int(body.__api_key__)
    if api_key == ApiKey.BROKER_REGISTRATION:
        return registration_response_from_kio(body)
    if api_key == ApiKey.BROKER_HEARTBEAT:
        return heartbeat_response_from_kio(body)
    if api_key == ApiKey.ALTER_PARTITION:
        return alter_partition_response_from_kio(body)
    raise TypeError(f"not a broker lifecycle response: api key {api_key}")
