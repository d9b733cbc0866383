"""Issue 14 through the production controller code (replication_control, cluster_control):
ELR turned off wipes ELR state (rule 10), min.insync.replicas guards while ELR is on (rule 15),
and ElectLeaders for all partitions leaves ELECTION_NOT_NEEDED out (Kafka's electLeaders)."""

from __future__ import annotations

from controller.core import cluster_control, config_control
from controller.core import replication_control as rc
from controller.core.election_policy import ElectionPolicy
from controller.core.invariants import check_partition
from controller.core.partition_change import written_records
from kafkawire import admin_messages as am
from kafkawire import broker_lifecycle as lifecycle
from kafkawire import constants
from kafkawire.errors import Errors
from metadata.metadata_image import MetadataImage
from metadata.records import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    LAST_KNOWN_LEADER_NONE,
    ConfigRecord,
    PartitionRecord,
    TopicRecord,
)
from tests.unit.test_replication_control import (
    FOO,
    alter,
    apply,
    brokers,
    fence,
    foo0,
    run,
    with_foo,
)

BAR = FOO.__class__(int=200)


def alter_isr(image: MetadataImage, isr: tuple[int, ...], elr: bool) -> MetadataImage:
    """The leader (broker 1, epoch 0) proposes `isr` for foo-0 at its current epochs; `elr`
    is the controller's eligible.leader.replicas.enabled."""
    reg = foo0(image)
    data = lifecycle.alter_partition_partition(
        0,
        reg.leader_epoch,
        [lifecycle.broker_state(b, image.brokers[b].epoch) for b in isr],
        0,
        reg.partition_epoch,
    )
    request = lifecycle.alter_partition_request(1, 0, [(FOO, [data])])
    result = rc.alter_partition(image, request, ElectionPolicy(elr_enabled=elr))
    assert result.response.topics[0].partitions[0].error_code == Errors.NONE
    return run(image, result)


# -- rule 10: ELR off -----------------------------------------------------------------------


def test_isr_expansion_with_elr_off_wipes_elr_written_while_on() -> None:
    # The case: ELR [3] written while ELR was on (ISR [1, 2] below min ISR 3), then the
    # controller runs with eligible.leader.replicas.enabled=false; the leader expands the ISR.
    image = with_foo(brokers(3), (1, 2), min_isr=3, elr=(3,))
    image = alter_isr(image, (1, 2, 3), elr=False)
    reg = foo0(image)
    assert reg.isr == (1, 2, 3)
    assert reg.elr == () and reg.last_known_elr == ()
    assert check_partition(reg, image, 3, elr_enabled=False) == []


def test_isr_shrink_with_elr_off_wipes_elr_and_last_known_elr() -> None:
    # ELR state written by the controller while ELR was on: ISR [1,2,3,4], min ISR 4; fencing 3
    # then 4 gives ELR [3, 4]; 4 restarting uncleanly moves it to LastKnownELR (rules 10-11).
    image = with_foo(brokers(4), (1, 2, 3, 4), min_isr=4, replicas=(1, 2, 3, 4))
    image = fence(fence(image, 3), 4)
    image = apply(image, written_records(rc.broker_restart_changes(image, 4, clean=False)))
    assert (foo0(image).elr, foo0(image).last_known_elr) == ((3,), (4,))
    image = image
    image = alter_isr(image, (1,), elr=False)
    reg = foo0(image)
    assert reg.isr == (1,) and reg.elr == () and reg.last_known_elr == ()
    assert check_partition(reg, image, 4, elr_enabled=False) == []


def test_fencing_the_sole_isr_member_with_elr_off_keeps_it_and_writes_no_elr_state() -> None:
    # ELR state from when it was on, then the sole ISR member's session expires: the ISR never
    # empties with ELR off, ELR/LastKnownELR are wiped and no LastKnownLeader is written.
    image = with_foo(brokers(3, fenced=[2, 3]), (1,), min_isr=2, elr=(2, 3))
    tracker = cluster_control.BrokerHeartbeatTracker({1: 0})
    result = cluster_control.fence_expired_brokers(
        image, tracker, 10_000, 1_000, ElectionPolicy(elr_enabled=False)
    )
    assert [b.broker_id for b in result.response] == [1]
    image = run(image, result)
    reg = foo0(image)
    assert reg.isr == (1,) and reg.leader == -1
    assert reg.elr == () and reg.last_known_elr == ()
    assert reg.last_known_leader == LAST_KNOWN_LEADER_NONE
    assert check_partition(reg, image, 2, elr_enabled=False) == []


# -- rule 15: min.insync.replicas while ELR is on -------------------------------------------


def alter_broker(
    image: MetadataImage, name: str, key: str, value: str | None, op: int, elr: bool
) -> tuple[int, str, int]:
    resource = am.config_resource(
        constants.CONFIG_RESOURCE_BROKER, name, [am.alterable_config(key, op, value)]
    )
    result = rc.incremental_alter_configs(
        image, am.incremental_alter_configs_request([resource]), ElectionPolicy(elr_enabled=elr)
    )
    answer = result.response.responses[0]
    return answer.error_code, answer.error_message, len(result.records)


def test_broker_level_min_isr_set_or_delete_refused_while_elr_on() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    for op, value in ((constants.OP_SET, "2"), (constants.OP_DELETE, None)):
        error, message, written = alter_broker(image, "1", "min.insync.replicas", value, op, True)
        assert error == Errors.INVALID_CONFIG
        assert message == "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
        assert written == 0


def test_cluster_level_min_isr_delete_refused_while_elr_on_set_accepted() -> None:
    image = apply(
        with_foo(brokers(3), (1, 2, 3)),
        [ConfigRecord(CONFIG_RESOURCE_BROKER, "", "min.insync.replicas", "2")],
    )
    error, message, written = alter_broker(
        image, "", "min.insync.replicas", None, constants.OP_DELETE, True
    )
    assert error == Errors.INVALID_CONFIG and written == 0
    assert message == "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
    error, _, written = alter_broker(image, "", "min.insync.replicas", "3", constants.OP_SET, True)
    assert error == Errors.NONE and written >= 1
    # With ELR off the cluster-level delete goes through (the effective min ISR drops to 1).
    error, _, written = alter_broker(image, "", "min.insync.replicas", None, constants.OP_DELETE, False)
    assert error == Errors.NONE and written == 1


def test_broker_level_keys_the_controller_does_not_honour_are_refused() -> None:
    # The controller reads unclean.leader.election.enable per topic then cluster-wide, never
    # per broker; min.insync.replicas likewise (ELR off): refused rather than silently ignored.
    image = with_foo(brokers(3), (1, 2, 3))
    for key, value in (("unclean.leader.election.enable", "true"), ("min.insync.replicas", "2")):
        for elr in (True, False):
            error, message, written = alter_broker(image, "2", key, value, constants.OP_SET, elr)
            assert error == Errors.INVALID_CONFIG and written == 0, (key, elr)
            assert message.startswith(f"Broker-level {key} ")
    # Cluster-wide, unclean.leader.election.enable is honoured: a leaderless partition elects.
    image = with_foo(brokers(3, fenced=[1, 3]), (), leader=-1, min_isr=2)
    resource = am.config_resource(
        constants.CONFIG_RESOURCE_BROKER,
        "",
        [am.alterable_config("unclean.leader.election.enable", constants.OP_SET, "true")],
    )
    after = run(
        image, rc.incremental_alter_configs(image, am.incremental_alter_configs_request([resource]))
    )
    assert foo0(after).leader == 2


def test_min_isr_change_with_elr_off_writes_no_partition_change() -> None:
    # Rule 15, Kafka's createClearElrRecordsAsNeeded returns at once with ELR off: the config
    # record alone, even for a partition still holding ELR written while ELR was on.
    for elr in ((), (3,)):
        image = with_foo(brokers(3), (1, 2), min_isr=3, elr=elr)
        for value in ("2", "1", "3"):
            resource = am.config_resource(
                constants.CONFIG_RESOURCE_TOPIC, "foo",
                [am.alterable_config("min.insync.replicas", constants.OP_SET, value)],
            )
            result = rc.incremental_alter_configs(
                image, am.incremental_alter_configs_request([resource]),
                ElectionPolicy(elr_enabled=False),
            )
            assert result.response.responses[0].error_code == Errors.NONE
            kinds = [type(r).__name__ for r in result.records]
            assert "PartitionChangeRecord" not in kinds, (elr, value, kinds)
            assert foo0(run(image, result)).partition_epoch == 5


def alter_node_unclean(image: MetadataImage, node: str, value: str | None, op: int,
                       controller_id: int) -> tuple[int, str, MetadataImage]:
    resource = am.config_resource(
        constants.CONFIG_RESOURCE_BROKER, node,
        [am.alterable_config("unclean.leader.election.enable", op, value)],
    )
    result = rc.incremental_alter_configs(
        image, am.incremental_alter_configs_request([resource]),
        ElectionPolicy(controller_id=controller_id),
    )
    answer = result.response.responses[0]
    return answer.error_code, answer.error_message, run(image, result)


def test_unclean_at_the_active_controllers_node_level_is_accepted_and_read() -> None:
    # Rule 15 (Kafka's currentControllerConfig): the node level of the active controller's own
    # id (3000, not a broker) sits between the topic and the cluster level.
    image = with_foo(brokers(3, fenced=[1, 3]), (), leader=-1, min_isr=2)
    error, _, after = alter_node_unclean(image, "3000", "true", constants.OP_SET, 3000)
    assert error == Errors.NONE
    assert after.configs[(CONFIG_RESOURCE_BROKER, "3000")] == {
        "unclean.leader.election.enable": "true"}
    assert foo0(after).leader == 2  # honoured at once: the leaderless partition elects
    assert config_control.unclean_allowed(after, "foo", 3000)
    assert not config_control.unclean_allowed(after, "foo", 3001)  # another controller leads
    # Most specific first: the topic's false beats the controller's true.
    topic = apply(image, [ConfigRecord(CONFIG_RESOURCE_TOPIC, "foo",
                                       "unclean.leader.election.enable", "false")])
    error, _, after = alter_node_unclean(topic, "3000", "true", constants.OP_SET, 3000)
    assert error == Errors.NONE and foo0(after).leader == -1
    # The controller's false beats the cluster-level true.
    cluster = apply(image, [
        ConfigRecord(CONFIG_RESOURCE_BROKER, "3000", "unclean.leader.election.enable", "false"),
        ConfigRecord(CONFIG_RESOURCE_BROKER, "", "unclean.leader.election.enable", "true")])
    assert not config_control.unclean_allowed(cluster, "foo", 3000)
    assert config_control.unclean_allowed(cluster, "foo", 3001)


def test_unclean_at_another_nodes_level_is_still_refused() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    error, message, after = alter_node_unclean(image, "2", "true", constants.OP_SET, 3000)
    assert error == Errors.INVALID_CONFIG
    assert message.startswith("Broker-level unclean.leader.election.enable ")
    assert after.configs.get((CONFIG_RESOURCE_BROKER, "2")) is None
    # An id that is neither a registered broker nor the active controller: not registered.
    error, _, after = alter_node_unclean(image, "3001", "true", constants.OP_SET, 3000)
    assert error == Errors.INVALID_REQUEST
    assert after.configs.get((CONFIG_RESOURCE_BROKER, "3001")) is None
    # min.insync.replicas stays refused at the controller's own node level too (rule 15).
    resource = am.config_resource(
        constants.CONFIG_RESOURCE_BROKER, "3000",
        [am.alterable_config("min.insync.replicas", constants.OP_SET, "2")])
    for elr in (True, False):
        result = rc.incremental_alter_configs(
            image, am.incremental_alter_configs_request([resource]),
            ElectionPolicy(elr_enabled=elr, controller_id=3000))
        assert result.response.responses[0].error_code == Errors.INVALID_CONFIG
        assert result.records == ()


# -- ElectLeaders for every partition -------------------------------------------------------


def two_topics() -> MetadataImage:
    image = with_foo(brokers(3), (1, 2, 3), leader=2)  # foo-0: not on its preferred leader
    return apply(
        image,
        [
            TopicRecord("bar", BAR),
            PartitionRecord(0, BAR, (1, 2, 3), (1, 2, 3), leader=1),  # already preferred
        ],
    )


def test_elect_all_partitions_leaves_election_not_needed_out() -> None:
    image = two_topics()
    result = rc.elect_leaders(image, am.elect_leaders_request(constants.ELECTION_PREFERRED))
    answered = {
        (t.topic, p.partition_id): p.error_code
        for t in result.response.replica_election_results
        for p in t.partition_result
    }
    assert answered == {("foo", 0): Errors.NONE}
    assert foo0(run(image, result)).leader == 1


def test_elect_listed_partitions_still_report_election_not_needed() -> None:
    image = two_topics()
    request = am.elect_leaders_request(
        constants.ELECTION_PREFERRED, [am.election_topic("bar", [0])]
    )
    result = rc.elect_leaders(image, request)
    codes = [p.error_code for p in result.response.replica_election_results[0].partition_result]
    assert codes == [Errors.ELECTION_NOT_NEEDED]
    assert result.records == ()


def test_refused_cluster_level_delete_keeps_the_effective_min_isr() -> None:
    # The silent drop the refusal prevents: foo's effective min ISR stays 2, not Kafka's 1.
    image = apply(
        brokers(3),
        [
            ConfigRecord(CONFIG_RESOURCE_BROKER, "", "min.insync.replicas", "2"),
            TopicRecord("foo", FOO),
            PartitionRecord(0, FOO, (1, 2, 3), (1, 2, 3), leader=1),
        ],
    )
    result = alter(image, "", "min.insync.replicas", None, constants.OP_DELETE, constants.CONFIG_RESOURCE_BROKER)
    assert result.response.responses[0].error_code == Errors.INVALID_CONFIG
    assert run(image, result).effective_min_isr(FOO, 0) == 2
