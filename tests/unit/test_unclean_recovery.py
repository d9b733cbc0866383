"""Unclean recovery (issue 7): the one selection function (seed 004 / KIP-966), rule 14's decision
order, the controller-side RecoveryManager driven by fake brokers, the builder leaving rule 13's
LastKnownLeader/unclean steps to the manager, and the tool's pure helpers (CLI.md)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from cluster.client.unclean_recovery import Target, exit_code, parse_partition_file, plan_document
from controller.core import replication_control as rc
from controller.core.config_control import UNCLEAN_LEADER_ELECTION_ENABLE
from controller.core.controller_result import ControllerResult
from controller.core.election_policy import ElectionPolicy
from controller.core.partition_change import ElectionKind, PartitionChangeBuilder
from controller.core.unclean_recovery import (
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
from controller.runtime.recovery_manager import RecoveryManager, manager_enabled
from kafkawire import get_replica_log_info as grli
from kafkawire.config import ConfigError, NodeConfig
from kafkawire.entities import NO_THROTTLE
from kafkawire.errors import Errors, KafkaError
from metadata.metadata_image import MetadataImage
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from metadata.records import (
    CONFIG_RESOURCE_TOPIC,
    ConfigRecord,
    Endpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from tests.unit.test_replication_control import apply

FOO = uuid.UUID(int=7)


def answer(
    broker: int,
    leo: int,
    epoch: int = 5,
    written: int = 5,
    broker_epoch: int = 0,
    error: Errors = Errors.NONE,
) -> ReplicaLogAnswer:
    return ReplicaLogAnswer(broker, broker_epoch, epoch, leo, written, error)


# -- selection ---------------------------------------------------------------------------------


def test_select_highest_epoch_then_longest_log_then_lowest_id() -> None:
    answers = [answer(1, 100, epoch=4), answer(2, 50, epoch=5), answer(3, 80, epoch=5)]
    winner = select_leader(answers, RankBy.PARTITION_LEADER_EPOCH)
    assert winner is not None and winner.broker_id == 3  # epoch 5 beats a longer epoch-4 log
    tie = select_leader([answer(3, 80), answer(2, 80)], RankBy.PARTITION_LEADER_EPOCH)
    assert tie is not None and tie.broker_id == 2
    assert select_leader([], RankBy.PARTITION_LEADER_EPOCH) is None


def test_rank_by_is_the_epoch_parameter() -> None:
    # Broker 1's metadata view lags (epoch 5) but its last write is newer than broker 2's.
    answers = [answer(1, 90, epoch=5, written=5), answer(2, 60, epoch=6, written=4)]
    tool = select_leader(answers, RankBy.PARTITION_LEADER_EPOCH)
    manager = select_leader(answers, RankBy.LAST_WRITTEN_LEADER_EPOCH)
    assert tool is not None and tool.broker_id == 2
    assert manager is not None and manager.broker_id == 1


def test_tool_never_prefers_a_longer_log_from_an_older_written_epoch() -> None:
    # Offline partition: every live broker reports the same PartitionLeaderEpoch (6). Broker 2
    # is a deposed leader with a longer acks=1 suffix written at epoch 3; broker 1 holds the
    # epoch-5 leader's writes. Length alone would pick 2 and drop epoch 5's writes.
    answers = [answer(1, 90, epoch=6, written=5), answer(2, 120, epoch=6, written=3)]
    for rank_by in RankBy:
        winner = select_leader(answers, rank_by)
        assert winner is not None and winner.broker_id == 1
    # Same written epoch: the longest log wins, whatever order the answers came in.
    same = [answer(3, 70, epoch=6, written=5), answer(1, 90, epoch=6, written=5)]
    best = select_leader(same, RankBy.PARTITION_LEADER_EPOCH)
    assert best is not None and best.broker_id == 1


def test_usable_answers_drop_errors_non_replicas_and_stale_epochs() -> None:
    answers = [
        answer(1, 500, error=Errors.NOT_LEADER_OR_FOLLOWER),
        answer(2, 400, broker_epoch=3),  # the broker re-registered with epoch 4 since
        answer(3, 300, epoch=4),  # stale partition leader epoch
        answer(9, 900),  # not a replica
        answer(4, 10),
    ]
    kept = usable_answers(answers, (1, 2, 3, 4), {1: 0, 2: 4, 3: 0, 4: 0}, 5)
    assert [a.broker_id for a in kept] == [4]
    without_epoch_check = usable_answers(answers, (1, 2, 3, 4), {1: 0, 2: 4, 3: 0, 4: 0})
    assert [a.broker_id for a in without_epoch_check] == [3, 4]
    best = select_leader(answers, RankBy.PARTITION_LEADER_EPOCH)
    assert best is not None and best.broker_id == 9  # why callers filter first


# -- rule 14's decision order ------------------------------------------------------------------


def reg(
    isr: tuple[int, ...] = (),
    elr: tuple[int, ...] = (),
    last_known_elr: tuple[int, ...] = (),
    leader: int = -1,
) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=(1, 2, 3), isr=isr, elr=elr, last_known_elr=last_known_elr, leader=leader
    )


def fenced(*ids: int) -> Callable[[int], bool]:
    return lambda b: b in ids


class FencedBrokers:
    """A BrokerView with the named brokers fenced."""

    def __init__(self, *ids: int) -> None:
        self.is_fenced = fenced(*ids)

    def is_in_controlled_shutdown(self, _broker_id: int) -> bool:
        return False


def decide(
    registration: PartitionRegistration, fenced_ids: tuple[int, ...], strategy: Strategy
) -> Decision:
    """recovery_decision with the builder's pending election under the manager's policy."""
    builder = PartitionChangeBuilder(
        registration, FOO, 0, FencedBrokers(*fenced_ids), 2, ElectionPolicy(recovery_manager=True)
    )
    pending = builder.build().election
    return recovery_decision(registration, fenced(*fenced_ids), strategy, pending)


def test_parse_strategy_and_mapping() -> None:
    assert parse_strategy(None, True) is Strategy.AGGRESSIVE
    assert parse_strategy(None, False) is Strategy.BALANCED
    assert parse_strategy("none", True) is Strategy.NONE
    assert parse_strategy("Aggressive", False) is Strategy.AGGRESSIVE
    with pytest.raises(ValueError, match=r"unclean\.recovery\.strategy"):
        parse_strategy("Random", False)


@pytest.mark.parametrize("strategy", list(Strategy))
def test_isr_or_unfenced_elr_member_needs_no_recovery(strategy: Strategy) -> None:
    assert decide(reg(leader=1, isr=(1,)), (), strategy) is Decision.NOT_NEEDED
    assert decide(reg(isr=(2,)), (1,), strategy) is Decision.NOT_NEEDED  # builder: CLEAN
    assert decide(reg(elr=(1, 2)), (1,), strategy) is Decision.NOT_NEEDED  # builder: ELR


def test_fenced_elr_members_only_aggressive_recovers() -> None:
    offline = reg(elr=(1, 2))
    assert decide(offline, (1, 2), Strategy.AGGRESSIVE) is Decision.RECOVER
    assert decide(offline, (1, 2), Strategy.BALANCED) is Decision.WAIT
    assert decide(offline, (1, 2), Strategy.NONE) is Decision.WAIT


def test_no_elr_balanced_waits_for_every_last_known_elr_member() -> None:
    offline = reg(last_known_elr=(1, 2))
    assert decide(offline, (2, 3), Strategy.BALANCED) is Decision.WAIT
    assert decide(offline, (3,), Strategy.BALANCED) is Decision.RECOVER
    assert decide(offline, (2, 3), Strategy.AGGRESSIVE) is Decision.RECOVER
    assert decide(offline, (), Strategy.NONE) is Decision.WAIT


def test_ready_to_elect_timing() -> None:
    offline = reg(last_known_elr=(1,))
    # Balanced: LastKnownELR member 1 must have answered, even after the timeout.
    assert not ready_to_elect(Strategy.BALANCED, offline, [2], 0, 10_000, 1000)
    assert ready_to_elect(Strategy.BALANCED, offline, [1], 0, 1000, 1000)
    assert not ready_to_elect(Strategy.BALANCED, offline, [1], 0, 999, 1000)
    # Aggressive: the answers within the timeout, early only once every replica answered.
    assert not ready_to_elect(Strategy.AGGRESSIVE, offline, [2], 0, 500, 1000)
    assert ready_to_elect(Strategy.AGGRESSIVE, offline, [2], 0, 1000, 1000)
    assert ready_to_elect(Strategy.AGGRESSIVE, offline, [1, 2, 3], 0, 1, 1000)
    assert not ready_to_elect(Strategy.AGGRESSIVE, offline, [], 0, 5000, 1000)
    assert not ready_to_elect(Strategy.NONE, offline, [1, 2, 3], 0, 5000, 1000)


# -- the builder leaves LastKnownLeader / unclean steps to the manager (rule 14) ---------------


def cluster_image(
    partition: PartitionRecord, fenced_ids: Iterable[int] = (), unclean: bool = False
) -> MetadataImage:
    records: list[MetadataRecord] = []
    for b in (1, 2, 3):
        endpoint = Endpoint("PLAINTEXT", "127.0.0.1", 9000 + b)
        records.append(RegisterBrokerRecord(b, uuid.UUID(int=b), 10 + b, (endpoint,)))
        if b not in set(fenced_ids):
            records.append(UnfenceBrokerRecord(b, 10 + b))
    records += [TopicRecord("foo", FOO), partition]
    if unclean:
        records.append(
            ConfigRecord(CONFIG_RESOURCE_TOPIC, "foo", UNCLEAN_LEADER_ELECTION_ENABLE, "true")
        )
    return apply(MetadataImage(), records)


def offline_record(**fields: Any) -> PartitionRecord:
    return PartitionRecord(0, FOO, (1, 2, 3), (), leader=-1, leader_epoch=5, **fields)


def test_unfenced_last_known_leader_waits_for_the_manager() -> None:
    image = cluster_image(offline_record(last_known_leader=1), fenced_ids=(1,))
    image = apply(image, [UnfenceBrokerRecord(1, 11)])
    [elected] = rc.broker_unfenced_changes(image, 1)  # rule 13: LastKnownLeader elected
    assert elected.election is ElectionKind.LAST_KNOWN_LEADER
    manager = ElectionPolicy(recovery_manager=True)
    assert rc.broker_unfenced_changes(image, 1, manager) == []  # rule 14: the manager decides


# -- the RecoveryManager, with fake brokers ----------------------------------------------------


class FakeController:
    """Image, single writer and brokers for a RecoveryManager under test."""

    def __init__(self, image: MetadataImage, props: dict[str, str]) -> None:
        self.image = image
        self.active = True
        self.epoch = 1
        self.now_ms = 0
        self.logs: dict[int, grli.PartitionLogInfo] = {}
        self.broker_epochs = {1: 11, 2: 12, 3: 13}
        self.asked: list[int] = []
        self.elections: list[ElectionKind] = []
        self.manager = RecoveryManager(
            NodeConfig(props),
            image=lambda: self.image,
            is_active=lambda: self.active,
            active_epoch=lambda: self.epoch,
            write=self.write,
            policy=lambda _image: ElectionPolicy(recovery_manager=True),
            ask=self.ask,
            clock_ms=lambda: self.now_ms,
        )

    async def write(self, compute: Callable[[MetadataImage], ControllerResult[Any]], _: str) -> Any:
        result = compute(self.image)
        self.image = apply(self.image, result.records)
        self.elections += [c.election for c in result.changes]  # what the controller counts
        return result.response

    async def ask(
        self, address: str, request: grli.GetReplicaLogInfoRequest
    ) -> grli.GetReplicaLogInfoResponse:
        broker = int(address.rsplit(":", 1)[1]) - 9000
        self.asked.append(broker)
        if broker not in self.logs:
            raise KafkaError(Errors.NETWORK_EXCEPTION, "down")
        assert request.topic_partitions is not None
        return grli.GetReplicaLogInfoResponse(
            throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
            broker_epoch=i64(self.broker_epochs[broker]),
            truncated=False,
            topic_partition_log_info_list=(
                grli.TopicPartitionLogInfo(topic_id=FOO, partition_log_info=(self.logs[broker],)),
            ),
        )

    def partition(self) -> PartitionRegistration:
        return self.image.topics[FOO].partitions[0]


def log_info(leo: int, written: int = 4, current: int = 5) -> grli.PartitionLogInfo:
    return grli.PartitionLogInfo(
        partition=i32(0),
        last_written_leader_epoch=i32(written),
        current_leader_epoch=i32(current),
        log_end_offset=i64(leo),
        error_code=ErrorCode.none,
    )


async def test_manager_balanced_waits_for_fenced_last_known_elr_then_recovers() -> None:
    image = cluster_image(offline_record(last_known_elr=(1,)), fenced_ids=(1,))
    fake = FakeController(image, {"unclean.recovery.timeout.ms": "1000"})
    fake.logs = {2: log_info(40), 3: log_info(90)}
    assert await fake.manager.tick() == []
    assert fake.manager.partitions_count() == 1 and fake.asked == []  # waiting, not asking
    fake.image = apply(fake.image, [UnfenceBrokerRecord(1, 11)])
    fake.logs[1] = log_info(60)
    fake.now_ms = 100
    elections = await fake.manager.tick()  # every replica answered: no need to wait
    assert [(e.leader, e.error) for e in elections] == [(3, None)]
    after = fake.partition()
    assert after.leader == 3 and after.isr == (3,)
    assert after.leader_recovery_state == LeaderRecoveryState.RECOVERING
    assert fake.manager.finished_count == 1
    assert fake.elections == [ElectionKind.DESIGNATED]  # logged and counted as unclean


async def test_manager_none_never_elects() -> None:
    image = cluster_image(offline_record())
    fake = FakeController(image, {"unclean.recovery.strategy": "None"})
    fake.logs = {1: log_info(10), 2: log_info(20), 3: log_info(30)}
    for now in (0, 400_000, 800_000):
        fake.now_ms = now
        assert await fake.manager.tick() == []
    assert fake.partition().leader == -1 and fake.asked == []
    assert fake.manager.partitions_count() == 0


async def test_manager_aggressive_elects_within_the_timeout() -> None:
    # unclean.leader.election.enable=true maps to Aggressive; ELR member 1 stays fenced.
    image = cluster_image(
        offline_record(eligible_leader_replicas=(1,)), fenced_ids=(1,), unclean=True
    )
    fake = FakeController(image, {"unclean.recovery.timeout.ms": "1000"})
    fake.logs = {2: log_info(20), 3: log_info(30, written=3)}
    assert await fake.manager.tick() == []  # 1 cannot answer: wait for the timeout
    assert fake.manager.partitions_count() == 1
    fake.now_ms = 1000
    elections = await fake.manager.tick()
    assert [(e.leader, e.error) for e in elections] == [(2, None)]  # last written epoch 4 > 3
    assert fake.partition().leader == 2 and fake.partition().isr == (2,)


async def test_manager_drops_stale_answers() -> None:
    image = cluster_image(offline_record())
    fake = FakeController(image, {"unclean.recovery.strategy": "Aggressive",
                                  "unclean.recovery.timeout.ms": "1000"})
    fake.logs = {2: log_info(99), 3: log_info(10)}
    assert await fake.manager.tick() == []
    # Broker 2 restarts after answering: a new registration epoch makes its answer stale.
    fake.image = apply(
        fake.image,
        [
            RegisterBrokerRecord(2, uuid.UUID(int=22), 30, (Endpoint("PLAINTEXT", "127.0.0.1", 9002),)),
            UnfenceBrokerRecord(2, 30),
        ],
    )
    del fake.logs[2]  # and has not answered again
    fake.now_ms = 1000
    elections = await fake.manager.tick()
    assert [(e.leader, e.error) for e in elections] == [(3, None)]
    # An answer with an old partition leader epoch is never used either.
    stale = cluster_image(offline_record())
    other = FakeController(stale, {"unclean.recovery.strategy": "Aggressive",
                                   "unclean.recovery.timeout.ms": "0"})
    other.logs = {1: log_info(99, current=4)}
    assert await other.manager.tick() == []
    assert other.partition().leader == -1


async def test_manager_restarts_after_failover_and_stops_on_standby() -> None:
    image = cluster_image(offline_record())
    fake = FakeController(image, {"unclean.recovery.strategy": "Aggressive",
                                  "unclean.recovery.timeout.ms": "1000"})
    fake.logs = {1: log_info(5)}
    await fake.manager.tick()
    fake.active = False
    assert await fake.manager.tick() == [] and fake.manager.partitions_count() == 0
    fake.active, fake.epoch, fake.now_ms = True, 2, 900
    assert await fake.manager.tick() == []  # a new session: the timeout starts again at 900
    fake.now_ms = 1500
    assert await fake.manager.tick() == []
    fake.now_ms = 1900
    assert [e.leader for e in await fake.manager.tick()] == [1]


def test_manager_enabled_flag() -> None:
    assert not manager_enabled(NodeConfig({}))
    assert manager_enabled(NodeConfig({"unclean.recovery.manager.enabled": "true"}))
    assert manager_enabled(NodeConfig({"unclean.recovery.manager.enabled": "TRUE"}))
    # A garbled value is a clear start-up error (NodeConfig.get_bool), not a silent "off".
    with pytest.raises(ConfigError, match="must be true or false"):
        manager_enabled(NodeConfig({"unclean.recovery.manager.enabled": "yes"}))


# -- the tool's pure helpers (CLI.md) ----------------------------------------------------------


def test_partition_file_and_plan_document(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"partitions": [{"topic": "foo", "partitions": [0, 3, 0]}]}))
    assert parse_partition_file(str(path)) == [("foo", 0), ("foo", 3)]
    path.write_text(json.dumps({"partitions": [{"topic": "foo", "partitions": ["x"]}]}))
    with pytest.raises(ValueError, match="not an integer"):
        parse_partition_file(str(path))
    planned = Target("foo", 1, FOO, (1, 2), -1, designated_leader=2, result="planned")
    online = Target("foo", 2, FOO, (1, 2), 1, result="already_online")
    assert plan_document([planned, online]) == {
        "partitions": [{"topic": "foo", "partition": 1, "designatedLeader": 2}]
    }


def test_exit_codes() -> None:
    elected = Target("foo", 0, FOO, result="elected")
    online = Target("foo", 1, FOO, leader=2, result="already_online")
    failed = Target("foo", 2, FOO, result="failed", error="REQUEST_TIMED_OUT")
    assert exit_code([elected, online], automated=True) == 0
    assert exit_code([elected, failed], automated=True) == 1
    assert exit_code([Target("foo", 0, FOO, result="planned")], automated=False) == 0
    assert exit_code([Target("foo", 0, FOO, result="planned")], automated=True) == 1
    assert exit_code([failed], automated=False) == 1
