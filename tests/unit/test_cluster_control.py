"""ClusterControl: registration (broker epoch = record offset, clean vs unclean restart, rule 12),
heartbeats (unfence when caught up, rule 16), session-timeout fencing, controlled shutdown."""

from __future__ import annotations

import uuid

from controller.core import cluster_control as cc
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.errors import Errors
from metadata.metadata_image import MetadataImage
from metadata.partition_registration import PartitionRegistration
from metadata.records import (
    CONFIG_RESOURCE_TOPIC,
    ConfigRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from tests.unit.test_replication_control import apply

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
FOO = uuid.UUID(int=100)
SESSION_MS = 9000


def registration(
    broker: int, incarnation: int | None = None, previous_epoch: int = -1
) -> lifecycle.BrokerRegistrationRequest:
    return lifecycle.registration_request(
        broker,
        CLUSTER,
        uuid.UUID(int=incarnation if incarnation is not None else broker),
        [("PLAINTEXT", "127.0.0.1", 9000 + broker)],
        previous_broker_epoch=previous_epoch,
    )


class Cluster:
    """Applies every result's records, as the controller does after commit."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.tracker = cc.BrokerHeartbeatTracker()
        self.now_ms = 1_000

    def register(self, broker: int, incarnation: int | None = None, previous: int = -1) -> int:
        result = cc.register_broker(
            self.image,
            registration(broker, incarnation, previous),
            CLUSTER,
            self.tracker,
            self.now_ms,
            SESSION_MS,
        )
        assert result.response.error_code == 0, result.response
        self.image = apply(self.image, result.records)
        return self.image.brokers[broker].epoch

    def heartbeat(
        self, broker: int, offset: int | None = None, **flags: bool
    ) -> lifecycle.BrokerHeartbeatResponse:
        epoch = self.image.brokers[broker].epoch
        request = lifecycle.heartbeat_request(
            broker, epoch, self.image.offset if offset is None else offset, **flags
        )
        result = cc.process_heartbeat(self.image, request, self.tracker, self.now_ms)
        self.image = apply(self.image, result.records)
        return result.response

    def add_foo(self, isr: tuple[int, ...], min_isr: int = 2) -> None:
        self.image = apply(
            self.image,
            [
                TopicRecord("foo", FOO),
                ConfigRecord(CONFIG_RESOURCE_TOPIC, "foo", "min.insync.replicas", str(min_isr)),
                PartitionRecord(0, FOO, (1, 2, 3), isr, leader=isr[0]),
            ],
        )

    @property
    def foo0(self) -> PartitionRegistration:
        return self.image.topics[FOO].partitions[0]


def three_unfenced() -> Cluster:
    cluster = Cluster()
    for b in (1, 2, 3):
        cluster.register(b)
    for b in (1, 2, 3):
        assert cluster.heartbeat(b).is_fenced is False
    return cluster


def test_broker_epoch_is_the_offset_of_the_registration_record() -> None:
    cluster = Cluster()
    cluster.image = apply(cluster.image, [TopicRecord("x", uuid.UUID(int=9))])  # offset 0
    result = cc.register_broker(
        cluster.image, registration(1), CLUSTER, cluster.tracker, 0, SESSION_MS
    )
    (record,) = result.records
    assert isinstance(record, RegisterBrokerRecord)
    assert record.broker_epoch == -1 and record.fenced
    cluster.image = apply(cluster.image, result.records)
    assert cluster.image.brokers[1].epoch == 1
    assert cluster.image.brokers[1].fenced


def test_unfenced_only_once_caught_up_to_its_registration() -> None:
    cluster = Cluster()
    epoch = cluster.register(1)
    behind = cluster.heartbeat(1, offset=epoch - 1)
    assert behind.is_fenced and not behind.is_caught_up
    assert cluster.image.brokers[1].fenced
    caught_up = cluster.heartbeat(1, offset=epoch)
    assert caught_up.is_caught_up and not caught_up.is_fenced
    assert not cluster.image.brokers[1].fenced


def test_heartbeat_errors() -> None:
    cluster = three_unfenced()
    stale = lifecycle.heartbeat_request(1, 12345, 0)
    result = cc.process_heartbeat(cluster.image, stale, cluster.tracker, 0)
    assert result.response.error_code == Errors.STALE_BROKER_EPOCH and result.records == ()
    unknown = lifecycle.heartbeat_request(7, 0, 0)
    result = cc.process_heartbeat(cluster.image, unknown, cluster.tracker, 0)
    assert result.response.error_code == Errors.BROKER_ID_NOT_REGISTERED


def test_registration_errors() -> None:
    cluster = three_unfenced()
    other_cluster = lifecycle.registration_request(4, "another", uuid.UUID(int=4))
    result = cc.register_broker(
        cluster.image, other_cluster, CLUSTER, cluster.tracker, 0, SESSION_MS
    )
    assert result.response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    # Broker 1 is alive with another incarnation: Kafka's DUPLICATE_BROKER_REGISTRATION.
    result = cc.register_broker(
        cluster.image,
        registration(1, incarnation=77),
        CLUSTER,
        cluster.tracker,
        cluster.now_ms,
        SESSION_MS,
    )
    assert result.response.error_code == Errors.DUPLICATE_BROKER_REGISTRATION
    assert result.records == ()


def test_retried_registration_of_same_incarnation_returns_the_same_epoch() -> None:
    cluster = Cluster()
    epoch = cluster.register(1)
    result = cc.register_broker(
        cluster.image, registration(1), CLUSTER, cluster.tracker, cluster.now_ms, SESSION_MS
    )
    assert result.records == () and result.response.broker_epoch == epoch


def test_session_timeout_fences_and_moves_leadership() -> None:
    cluster = three_unfenced()
    cluster.add_foo((1, 2, 3))
    cluster.now_ms += SESSION_MS // 2
    cluster.heartbeat(2)
    cluster.heartbeat(3)
    assert (
        cc.fence_expired_brokers(cluster.image, cluster.tracker, cluster.now_ms, SESSION_MS).records
        == ()
    )
    cluster.now_ms += SESSION_MS // 2 + 1
    result = cc.fence_expired_brokers(cluster.image, cluster.tracker, cluster.now_ms, SESSION_MS)
    assert [(f.broker_id, f.broker_epoch) for f in result.response] == [
        (1, cluster.image.brokers[1].epoch)
    ]
    assert "session expired" in result.response[0].reason
    cluster.image = apply(cluster.image, result.records)
    assert cluster.image.brokers[1].fenced
    assert cluster.foo0.leader == 2 and cluster.foo0.isr == (2, 3)


def test_next_session_check_is_when_the_stalest_session_lapses() -> None:
    """Kafka's nextCheckTimeNs: the controller checks when the least recently heard-from
    unfenced broker's session lapses, not on a fixed period (issue 36: a killed broker is
    fenced at its session timeout); fenced brokers have no session to lapse."""
    cluster = three_unfenced()
    start = cluster.now_ms
    cluster.now_ms += 2000
    cluster.heartbeat(2)
    cluster.heartbeat(3)
    due = cluster.tracker.next_check_ms(cluster.image, cluster.now_ms, SESSION_MS)
    assert due == cluster.tracker.last_contact_ms[1] + SESSION_MS
    assert cc.fence_expired_brokers(cluster.image, cluster.tracker, due, SESSION_MS).records == ()
    result = cc.fence_expired_brokers(cluster.image, cluster.tracker, due + 1, SESSION_MS)
    assert [f.broker_id for f in result.response] == [1]
    cluster.image = apply(cluster.image, result.records)
    assert cluster.tracker.next_check_ms(cluster.image, due + 1, SESSION_MS) == (
        start + 2000 + SESSION_MS)


def test_fencing_several_brokers_at_once_elects_only_live_ones() -> None:
    cluster = three_unfenced()
    cluster.add_foo((1, 2, 3), min_isr=2)
    cluster.now_ms += SESSION_MS + 1
    cluster.heartbeat(3)
    result = cc.fence_expired_brokers(cluster.image, cluster.tracker, cluster.now_ms, SESSION_MS)
    assert [f.broker_id for f in result.response] == [1, 2]
    cluster.image = apply(cluster.image, result.records)
    # 1 then 2 leave: ISR [3] below min ISR 2, the second one to leave goes to the ELR (rule 10).
    assert cluster.foo0.leader == 3 and cluster.foo0.isr == (3,) and cluster.foo0.elr == (2,)


def test_unclean_restart_leaves_isr_and_elr() -> None:
    cluster = three_unfenced()
    cluster.add_foo((1, 2, 3), min_isr=3)
    old_epoch = cluster.image.brokers[2].epoch
    cluster.heartbeat(2, want_fence=True)
    assert cluster.foo0.isr == (1, 3) and cluster.foo0.elr == (2,)
    cluster.register(2, incarnation=22, previous=old_epoch - 1)  # not the current epoch: unclean
    assert cluster.foo0.elr == () and cluster.foo0.last_known_elr == (2,)


def test_clean_restart_keeps_elr_membership() -> None:
    cluster = three_unfenced()
    cluster.add_foo((1, 2, 3), min_isr=3)
    old_epoch = cluster.image.brokers[2].epoch
    cluster.heartbeat(2, want_fence=True)
    new_epoch = cluster.register(2, incarnation=22, previous=old_epoch)
    assert new_epoch > old_epoch
    assert cluster.foo0.elr == (2,) and cluster.foo0.last_known_elr == ()


def test_restart_after_session_expiry_is_accepted() -> None:
    cluster = three_unfenced()
    cluster.now_ms += SESSION_MS + 1
    cluster.heartbeat(2)
    cluster.heartbeat(3)
    fenced = cc.fence_expired_brokers(cluster.image, cluster.tracker, cluster.now_ms, SESSION_MS)
    cluster.image = apply(cluster.image, fenced.records)
    old = cluster.image.brokers[1].epoch
    assert cluster.register(1, incarnation=11) > old


def test_controlled_shutdown_moves_leadership_then_fences() -> None:
    cluster = three_unfenced()
    cluster.add_foo((1, 2, 3), min_isr=2)
    first = cluster.heartbeat(1, want_shut_down=True)
    assert not first.should_shut_down and not first.is_fenced
    assert cluster.image.brokers[1].in_controlled_shutdown
    assert cluster.foo0.leader == 2 and cluster.foo0.isr == (2, 3)
    second = cluster.heartbeat(1, want_shut_down=True)
    assert second.should_shut_down and second.is_fenced
    assert cluster.image.brokers[1].fenced
    # A broker in controlled shutdown cannot rejoin the ISR (rule 18: INELIGIBLE_REPLICA).
    assert cluster.foo0.isr == (2, 3)


def test_unfencing_reelects_a_leaderless_partition_rule_16() -> None:
    cluster = three_unfenced()
    cluster.add_foo((1, 2, 3), min_isr=3)
    for b in (3, 2, 1):
        cluster.heartbeat(b, want_fence=True)
    assert cluster.foo0.leader == -1 and cluster.foo0.elr == (1, 2, 3)
    response = cluster.heartbeat(2)
    assert not response.is_fenced
    assert cluster.foo0.leader == 2 and cluster.foo0.isr == (2,)
