"""ReplicationControl: CreateTopics placement and named errors, DeleteTopics, configs (rule 15),
broker fencing/unfencing/restart effects (rules 10-13, 16), ElectLeaders, AlterPartition and
DescribeTopicPartitions pagination (seed 001)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from kio.schema.describe_topic_partitions.v0 import request as dtp
from kio.schema.types import TopicName
from kio.static.primitive import i32

from controller.core import replication_control as rc
from controller.core.controller_result import ControllerResult
from controller.core.invariants import check_partition
from controller.core.partition_change import ElectionKind, written_records
from kafkawire import admin_messages as am
from kafkawire import broker_lifecycle as lifecycle
from kafkawire import constants
from kafkawire.config import NodeConfig
from kafkawire.errors import Errors
from kafkawire.messages import wire_error
from metadata import kafka_describe
from metadata.kafka_describe import DESCRIBE_PARTITIONS_DEFAULT_LIMIT
from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from metadata.records import (
    BROKER_FLAG_TRUE,
    CONFIG_RESOURCE_TOPIC,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)

FOO = uuid.UUID(int=100)

NODE = NodeConfig({"node.id": "3000"})  # the controller: Kafka's CreateTopics defaults


def ids() -> Iterator[uuid.UUID]:
    n = 1000
    while True:
        n += 1
        yield uuid.UUID(int=n)


def apply(image: MetadataImage, records: Iterable[MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(image)
    offset = image.offset
    for record in records:
        offset += 1
        delta.replay(record, offset)
    return delta.image()


def brokers(count: int, fenced: Iterable[int] = ()) -> MetadataImage:
    """Brokers 1..count with epoch = broker id - 1, unfenced unless named."""
    records: list[MetadataRecord] = []
    for b in range(1, count + 1):
        records.append(RegisterBrokerRecord(b, uuid.UUID(int=b), b - 1))
    for b in range(1, count + 1):
        if b not in set(fenced):
            records.append(UnfenceBrokerRecord(b, b - 1))
    return apply(MetadataImage(), records)


def with_foo(
    image: MetadataImage,
    isr: tuple[int, ...],
    min_isr: int = 2,
    leader: int | None = None,
    replicas: tuple[int, ...] = (1, 2, 3),
    elr: tuple[int, ...] = (),
) -> MetadataImage:
    return apply(
        image,
        [
            TopicRecord("foo", FOO),
            ConfigRecord(CONFIG_RESOURCE_TOPIC, "foo", "min.insync.replicas", str(min_isr)),
            PartitionRecord(
                0,
                FOO,
                replicas,
                isr,
                leader=isr[0] if leader is None and isr else (-1 if leader is None else leader),
                leader_epoch=3,
                partition_epoch=5,
                eligible_leader_replicas=elr,
            ),
        ],
    )


def foo0(image: MetadataImage) -> PartitionRegistration:
    return image.topics[FOO].partitions[0]


def run(image: MetadataImage, result: ControllerResult[Any]) -> MetadataImage:
    return apply(image, result.records)


def create(
    image: MetadataImage, name: str = "bar", partitions: int = 3, rf: int = 3, **configs: str
) -> ControllerResult[am.CreateTopicsResponse]:
    request = am.create_topics_request([am.creatable_topic(name, partitions, rf, configs)])
    return rc.create_topics(image, request, ids().__next__, NODE)


def create_error(image: MetadataImage, *args: object, **configs: str) -> int:
    result = create(image, *args, **configs)  # type: ignore[arg-type]
    assert result.records == ()  # nothing written on a rejected topic
    return result.response.topics[0].error_code


# -- CreateTopics ----------------------------------------------------------------------------


def test_create_places_replicas_round_robin_and_leaders_spread() -> None:
    image = brokers(3)
    result = create(image, partitions=3, rf=2, **{"min.insync.replicas": "2"})
    assert result.response.topics[0].error_code == 0
    after = run(image, result)
    bar = after.topics_by_name["bar"]
    assert result.response.topics[0].topic_id == bar.topic_id
    assignment = [bar.partitions[p].replicas for p in range(3)]
    assert assignment == [(1, 2), (2, 3), (3, 1)]
    assert [bar.partitions[p].leader for p in range(3)] == [1, 2, 3]
    assert all(bar.partitions[p].isr == bar.partitions[p].replicas for p in range(3))
    assert after.topic_min_insync_replicas("bar") == 2


def test_create_skips_fenced_brokers_in_placement() -> None:
    image = brokers(3, fenced=[2])
    after = run(image, create(image, partitions=2, rf=2))
    bar = after.topics_by_name["bar"]
    assert {r for p in bar.partitions.values() for r in p.replicas} == {1, 3}


def test_create_named_errors_write_nothing() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    assert create_error(image, "foo") == Errors.TOPIC_ALREADY_EXISTS
    assert create_error(image, "bar", 0) == Errors.INVALID_PARTITIONS
    assert create_error(image, "bar", -3) == Errors.INVALID_PARTITIONS
    assert create_error(image, "bar", 1, 4) == Errors.INVALID_REPLICATION_FACTOR
    assert create_error(image, "bar", 1, 0) == Errors.INVALID_REPLICATION_FACTOR
    assert create_error(image, "bad/name") == Errors.INVALID_TOPIC_EXCEPTION
    assert create_error(image, **{"min.insync.replicas": "0"}) == Errors.INVALID_CONFIG
    assert create_error(image, **{"min.insync.replicas": "two"}) == Errors.INVALID_CONFIG
    assert create_error(image, **{"unclean.leader.election.enable": "yes"}) == Errors.INVALID_CONFIG
    assert create_error(image, **{"no.such.config": "1"}) == Errors.INVALID_CONFIG


def test_rf_counts_only_unfenced_brokers() -> None:
    image = brokers(3, fenced=[3])
    assert create_error(image, "bar", 1, 3) == Errors.INVALID_REPLICATION_FACTOR


def test_validate_only_answers_without_writing() -> None:
    image = brokers(3)
    request = am.create_topics_request([am.creatable_topic("bar", 2, 2)], validate_only=True)
    result = rc.create_topics(image, request, ids().__next__, NODE)
    assert result.records == ()
    assert result.response.topics[0].error_code == 0


def test_duplicate_topic_in_one_request_is_invalid() -> None:
    image = brokers(3)
    request = am.create_topics_request([am.creatable_topic("bar", 1, 1)] * 2)
    result = rc.create_topics(image, request, ids().__next__, NODE)
    assert [t.error_code for t in result.response.topics] == [Errors.INVALID_REQUEST] * 2
    assert result.records == ()


def test_more_than_ten_thousand_partitions_in_one_request_is_a_policy_violation() -> None:
    # Kafka's ReplicationControlManager.validateTotalNumberOfPartitions: counted over the whole
    # request (two topics of 6,000 each), every topic refused, nothing written; 10,000 is fine.
    image = brokers(3)
    request = am.create_topics_request(
        [am.creatable_topic("a", 6000, 1), am.creatable_topic("b", 6000, 1)])
    result = rc.create_topics(image, request, ids().__next__, NODE)
    assert [t.error_code for t in result.response.topics] == [Errors.POLICY_VIOLATION] * 2
    assert {t.error_message for t in result.response.topics} == {
        "Excessively large number of partitions per request."}
    assert result.records == ()
    at_limit = am.create_topics_request([am.creatable_topic("a", 10_000, 1)], validate_only=True)
    assert rc.create_topics(image, at_limit, ids().__next__, NODE).response.topics[0].error_code == 0


# -- DeleteTopics ----------------------------------------------------------------------------


def test_delete_topic_and_unknown_topic() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    result = rc.delete_topics(image, am.delete_topics_request(["foo", "nope"]))
    codes = [r.error_code for r in result.response.responses]
    assert codes == [Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION]
    after = run(image, result)
    assert "foo" not in after.topics_by_name
    assert after.configs.get((CONFIG_RESOURCE_TOPIC, "foo")) is None


# -- IncrementalAlterConfigs -----------------------------------------------------------------


def alter(
    image: MetadataImage,
    name: str,
    key: str,
    value: str | None,
    op: int = constants.OP_SET,
    resource_type: int = constants.CONFIG_RESOURCE_TOPIC,
) -> ControllerResult[am.IncrementalAlterConfigsResponse]:
    resource = am.config_resource(resource_type, name, [am.alterable_config(key, op, value)])
    return rc.incremental_alter_configs(image, am.incremental_alter_configs_request([resource]))


def test_alter_config_errors_write_nothing() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    for name, key, value, error in [
        ("nope", "min.insync.replicas", "2", Errors.UNKNOWN_TOPIC_OR_PARTITION),
        ("foo", "min.insync.replicas", "-1", Errors.INVALID_CONFIG),
        ("foo", "unclean.leader.election.enable", "maybe", Errors.INVALID_CONFIG),
        ("foo", "bogus", "1", Errors.INVALID_CONFIG),
    ]:
        result = alter(image, name, key, value)
        assert result.response.responses[0].error_code == error, (name, key, value)
        assert result.records == ()


def test_min_isr_change_clears_elr_when_isr_reaches_it_rule_15() -> None:
    # ISR [1] below min ISR 3, ELR [2, 3]; lowering min ISR to 1 clears ELR, leader epoch kept.
    image = with_foo(brokers(3), (1,), min_isr=3, elr=(2, 3))
    before = foo0(image)
    result = alter(image, "foo", "min.insync.replicas", "1")
    assert result.response.responses[0].error_code == 0
    after = foo0(run(image, result))
    assert after.elr == () and after.last_known_elr == ()
    assert after.partition_epoch == before.partition_epoch + 1
    assert after.leader_epoch == before.leader_epoch


def test_min_isr_change_keeps_elr_while_isr_still_below() -> None:
    image = with_foo(brokers(3), (1,), min_isr=3, elr=(2, 3))
    result = alter(image, "foo", "min.insync.replicas", "2")
    assert foo0(run(image, result)).elr == (2, 3)
    assert not any(r for r in result.records if not isinstance(r, ConfigRecord))


def test_enabling_unclean_elects_a_leaderless_partition() -> None:
    # Leaderless, ISR and ELR empty, broker 2 unfenced: unclean election, RECOVERING (rule 13).
    image = with_foo(brokers(3, fenced=[1, 3]), (), leader=-1, min_isr=2)
    result = alter(image, "foo", "unclean.leader.election.enable", "true")
    after = foo0(run(image, result))
    assert after.leader == 2
    assert after.isr == (2,)
    assert after.leader_recovery_state == LeaderRecoveryState.RECOVERING


def test_cluster_default_broker_config() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    result = alter(image, "", "min.insync.replicas", "3", resource_type=constants.CONFIG_RESOURCE_BROKER)
    assert result.response.responses[0].error_code == 0
    unknown = alter(image, "9", "min.insync.replicas", "3", resource_type=constants.CONFIG_RESOURCE_BROKER)
    assert unknown.response.responses[0].error_code == Errors.INVALID_REQUEST


# -- broker effects (rules 10-13, 16) --------------------------------------------------------


def fence(image: MetadataImage, broker: int) -> MetadataImage:
    changes = written_records(rc.broker_fenced_changes(image, broker))
    epoch = image.brokers[broker].epoch
    return apply(
        image, [*changes, BrokerRegistrationChangeRecord(broker, epoch, fenced=BROKER_FLAG_TRUE)]
    )


def unfence(image: MetadataImage, broker: int) -> MetadataImage:
    epoch = image.brokers[broker].epoch
    image = apply(image, [UnfenceBrokerRecord(broker, epoch)])
    return apply(image, written_records(rc.broker_unfenced_changes(image, broker)))


def test_fencing_moves_members_below_min_isr_into_elr_rule_10() -> None:
    # INVARIANTS rule 10's example: ISR [1,2,3,4] min ISR 3; fencing 3 then 4 gives ELR [4].
    image = with_foo(brokers(4), (1, 2, 3, 4), min_isr=3, replicas=(1, 2, 3, 4))
    image = fence(fence(image, 3), 4)
    reg = foo0(image)
    assert reg.isr == (1, 2) and reg.elr == (4,)
    assert check_partition(reg, image, 3) == []


def test_fencing_the_last_isr_member_leaves_no_leader_and_last_known_leader() -> None:
    image = with_foo(brokers(3, fenced=[2, 3]), (1,), min_isr=2, elr=(2, 3))
    image = fence(image, 1)
    reg = foo0(image)
    assert reg.leader == -1 and reg.isr == ()
    assert reg.elr == (1, 2, 3) and reg.last_known_leader == 1
    assert check_partition(reg, image, 2) == []


def test_unfencing_elects_the_first_elr_member_with_isr_of_itself_rule_16() -> None:
    image = with_foo(brokers(3, fenced=[2, 3]), (1,), min_isr=2, elr=(2, 3))
    image = fence(image, 1)
    image = unfence(image, 3)
    reg = foo0(image)
    assert reg.leader == 3 and reg.isr == (3,)
    assert reg.last_known_leader == -1
    assert reg.leader_recovery_state == LeaderRecoveryState.RECOVERED


def test_unclean_restart_moves_elr_member_to_last_known_elr_rule_11() -> None:
    image = with_foo(brokers(3, fenced=[2, 3]), (1,), min_isr=2, elr=(2, 3))
    image = apply(image, written_records(rc.broker_restart_changes(image, 2, clean=False)))
    reg = foo0(image)
    assert reg.elr == (3,) and reg.last_known_elr == (2,)


def test_clean_restart_keeps_elr_rule_12() -> None:
    image = with_foo(brokers(3, fenced=[2, 3]), (1,), min_isr=2, elr=(2, 3))
    assert rc.broker_restart_changes(image, 2, clean=True) == []
    # The sole ISR member restarting cleanly joins the ELR and is LastKnownLeader (rule 11).
    image = apply(image, written_records(rc.broker_restart_changes(image, 1, clean=True)))
    reg = foo0(image)
    assert reg.isr == () and reg.elr == (1, 2, 3) and reg.last_known_leader == 1


def test_controlled_shutdown_moves_leadership_away() -> None:
    image = with_foo(brokers(3), (1, 2, 3), min_isr=2)
    changes = written_records(rc.broker_controlled_shutdown_changes(image, (1,)))
    reg = foo0(apply(image, changes))
    assert reg.leader == 2 and reg.isr == (2, 3)
    assert reg.leader_epoch == 4


# -- ElectLeaders ----------------------------------------------------------------------------


def elect(
    image: MetadataImage,
    election_type: int,
    partitions: list[int],
    designated: list[int] | None = None,
    topic: str = "foo",
) -> ControllerResult[am.ElectLeadersResponse]:
    request = am.elect_leaders_request(
        election_type, [am.election_topic(topic, partitions, designated)]
    )
    return rc.elect_leaders(image, request)


def first_result(
    result: ControllerResult[am.ElectLeadersResponse],
) -> am.ElectLeadersPartitionResult:
    return result.response.replica_election_results[0].partition_result[0]


def assert_leads_alone_recovering(
    image: MetadataImage, result: ControllerResult[am.ElectLeadersResponse], leader: int
) -> None:
    """An unclean or designated election's outcome: `leader` elected, alone in the ISR, and the
    partition RECOVERING until it reports its log recovered (KIP-966)."""
    assert first_result(result).error_code == 0
    reg = foo0(run(image, result))
    assert reg.leader == leader and reg.isr == (leader,)
    assert reg.leader_recovery_state == LeaderRecoveryState.RECOVERING


def test_preferred_election() -> None:
    image = with_foo(brokers(3), (1, 2, 3), leader=2)
    result = elect(image, constants.ELECTION_PREFERRED, [0])
    assert first_result(result).error_code == 0 and first_result(result).leader_id == 1
    assert foo0(run(image, result)).leader == 1
    again = elect(run(image, result), constants.ELECTION_PREFERRED, [0])
    assert first_result(again).error_code == Errors.ELECTION_NOT_NEEDED
    assert again.records == ()


def test_preferred_not_available_writes_nothing() -> None:
    image = with_foo(brokers(3), (2, 3), leader=2)
    result = elect(image, constants.ELECTION_PREFERRED, [0])
    assert first_result(result).error_code == Errors.PREFERRED_LEADER_NOT_AVAILABLE
    assert result.records == ()


def test_unclean_election_sets_recovering() -> None:
    image = with_foo(brokers(3, fenced=[1]), (1,), min_isr=1)
    image = fence(image, 1)  # ELR on, min ISR 1: ISR empties, no ELR (was at min ISR)
    assert foo0(image).leader == -1
    result = elect(image, constants.ELECTION_UNCLEAN, [0])
    assert_leads_alone_recovering(image, result, 2)


def test_unclean_election_not_needed_with_a_leader() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    assert (
        first_result(elect(image, constants.ELECTION_UNCLEAN, [0])).error_code
        == Errors.ELECTION_NOT_NEEDED
    )


def test_designated_election() -> None:
    image = with_foo(brokers(3, fenced=[1]), (1,), min_isr=1)
    image = fence(image, 1)
    bad = elect(image, constants.ELECTION_DESIGNATED, [0], [1])  # broker 1 is fenced
    assert first_result(bad).error_code == Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
    result = elect(image, constants.ELECTION_DESIGNATED, [0], [3])
    assert_leads_alone_recovering(image, result, 3)


def test_designated_all_partitions_and_unknown_partition() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    request = am.elect_leaders_request(constants.ELECTION_DESIGNATED, None)
    assert rc.elect_leaders(image, request).response.error_code == Errors.INVALID_REQUEST
    assert (
        first_result(elect(image, constants.ELECTION_PREFERRED, [7])).error_code
        == Errors.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert (
        first_result(elect(image, constants.ELECTION_PREFERRED, [0], topic="nope")).error_code
        == Errors.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_elect_leaders_serves_at_most_1000_partitions() -> None:
    image = brokers(3)
    image = run(image, create(image, "big", 1002, 1))
    request = am.elect_leaders_request(
        constants.ELECTION_PREFERRED, [am.election_topic("big", list(range(1002)))]
    )
    results = rc.elect_leaders(image, request).response.replica_election_results[0].partition_result
    # REQUEST_LIMIT_REACHED has no Kafka number: UNKNOWN_SERVER_ERROR named in the message.
    codes = [wire_error(r.error_code, r.error_message) for r in results]
    assert codes[:1000] == [Errors.ELECTION_NOT_NEEDED] * 1000
    assert codes[1000:] == [Errors.REQUEST_LIMIT_REACHED] * 2


# -- AlterPartition --------------------------------------------------------------------------


def test_alter_partition_stale_leader_epoch_writes_nothing() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    request = lifecycle.alter_partition_request(
        1,
        0,
        [
            (
                FOO,
                [
                    lifecycle.alter_partition_partition(
                        0, 2, [lifecycle.broker_state(1, 0), lifecycle.broker_state(2, 1)], 0, 5
                    )
                ],
            )
        ],
    )
    result = rc.alter_partition(image, request)
    assert result.records == ()
    assert result.response.topics[0].partitions[0].error_code == Errors.FENCED_LEADER_EPOCH


def test_alter_partition_shrink_and_stale_broker_epoch() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    data = lifecycle.alter_partition_partition(
        0, 3, [lifecycle.broker_state(1, 0), lifecycle.broker_state(2, 1)], 0, 5
    )
    good = rc.alter_partition(image, lifecycle.alter_partition_request(1, 0, [(FOO, [data])]))
    part = good.response.topics[0].partitions[0]
    assert part.error_code == 0 and part.isr == (1, 2) and part.partition_epoch == 6
    assert foo0(run(image, good)).isr == (1, 2)
    stale = rc.alter_partition(image, lifecycle.alter_partition_request(1, 7, [(FOO, [data])]))
    assert stale.response.error_code == Errors.STALE_BROKER_EPOCH and stale.records == ()


# -- DescribeTopicPartitions -----------------------------------------------------------------


def describe(
    image: MetadataImage,
    topics: list[str],
    limit: int = DESCRIBE_PARTITIONS_DEFAULT_LIMIT,
    cursor: Any = None,
    server_limit: int = DESCRIBE_PARTITIONS_DEFAULT_LIMIT,
) -> Any:
    """DescribeTopicPartitions v0 answered from `image` (as both node kinds answer it)."""
    request = dtp.DescribeTopicPartitionsRequest(
        topics=tuple(dtp.TopicRequest(name=TopicName(t)) for t in topics),
        response_partition_limit=i32(limit),
        cursor=None
        if cursor is None
        else dtp.Cursor(topic_name=TopicName(cursor.topic_name), partition_index=cursor.partition_index),
    )
    return kafka_describe.describe_topic_partitions(image, request, server_limit)


def test_describe_paginates_with_a_cursor() -> None:
    image = brokers(3)
    image = run(image, create(image, "a", 3, 1))
    image = run(image, create(image, "b", 2, 1))
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        response = describe(image, [], 2, cursor)
        pages += 1
        for topic in response.topics:
            seen += [(topic.name, p.partition_index) for p in topic.partitions]
        cursor = response.next_cursor
        if cursor is None:
            break
        assert pages < 10
    assert seen == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    assert pages == 3


def test_describe_caps_the_limit_at_the_server_limit_and_reports_unknown() -> None:
    image = brokers(3)
    image = run(image, create(image, "a", 5, 1))
    response = describe(image, ["a", "zz"], 100, server_limit=3)
    assert [p.partition_index for p in response.topics[0].partitions] == [0, 1, 2]
    assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == ("a", 3)
    rest = describe(image, ["a", "zz"], 100, response.next_cursor, 3)
    assert [p.partition_index for p in rest.topics[0].partitions] == [3, 4]
    assert rest.topics[1].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_reports_elr_fields_and_offline_replicas() -> None:
    image = with_foo(brokers(3, fenced=[2, 3]), (1,), min_isr=2, elr=(2, 3))
    image = fence(image, 1)
    part = describe(image, ["foo"]).topics[0].partitions[0]
    assert part.leader_id == -1 and part.isr_nodes == ()
    assert part.eligible_leader_replicas == (1, 2, 3)
    assert part.last_known_leader == 1
    assert part.offline_replicas == (1, 2, 3)
    assert part.partition_epoch == 6


def test_partition_counts_for_metrics() -> None:
    image = with_foo(brokers(3, fenced=[2, 3]), (1,), min_isr=2, elr=(2, 3))
    assert rc.partition_counts(image) == {
        "offline_partitions": 0,
        "under_min_isr_partitions": 1,
        "manual_leader_election_required_partitions": 0,
    }
    image = fence(image, 1)
    assert rc.partition_counts(image) == {
        "offline_partitions": 1,
        "under_min_isr_partitions": 1,
        "manual_leader_election_required_partitions": 0,  # the ELR members may come back
    }


def test_change_summaries_follow_the_builders_election_kind() -> None:
    """The log line and the KIP-966 counters read the builder's ElectionKind (no re-derivation):
    an ELR election, then a DESIGNATED one counted as unclean."""
    image = with_foo(brokers(3, fenced=[2, 3]), (1,), min_isr=2, elr=(2, 3))
    image = fence(image, 1)
    image = apply(image, [UnfenceBrokerRecord(3, image.brokers[3].epoch)])
    [change] = rc.broker_unfenced_changes(image, 3)
    summary = rc.summarize_change(image, change)
    assert change.election is ElectionKind.ELR
    assert summary is not None and summary.election == "ELR"
    assert summary.message.startswith("Elected broker 3 as leader of foo-0 from ELR")

    offline = with_foo(brokers(3, fenced=[1, 3]), (), leader=-1)
    request = am.elect_leaders_request(
        constants.ELECTION_DESIGNATED, [am.election_topic("foo", [0], [2])]
    )
    [designated] = rc.elect_leaders(offline, request).changes
    summary = rc.summarize_change(offline, designated)
    assert designated.election is ElectionKind.DESIGNATED
    assert summary is not None and summary.election == "unclean"
    assert "(designated, RECOVERING)" in summary.message
