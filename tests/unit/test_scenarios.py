"""Datadriven transcripts in tests/scenarios/*.txt over controller.core (STYLE.md).

Each line is a command; `expect` lines assert partition state and `-> ERROR` suffixes assert the
error a command returned. A tiny in-test controller turns commands into records with
PartitionChangeBuilder / alter_partition and replays them, checking rules 8-13 and 19 after
every record. Commands:

    register 1 2 3                    new brokers, registered then unfenced
    restart 2 clean|unclean           re-register with a new epoch (fenced until `unfence`)
    fence 2 / unfence 2 / shutdown 2  broker state changes (shutdown = controlled shutdown)
    create foo rf=3 min_isr=2 [replicas=1,2,3] [partitions=1]
    config foo min_isr=3              min.insync.replicas change (rule 15)
    set elr=false unclean=true        controller policy
    alter foo-0 isr=1,2@stale [from=1] [broker_epoch=stale] [leader_epoch=stale|future|N]
          [partition_epoch=...] [recovery=RECOVERING] [topic=unknown] -> ERROR
    elect foo-0 preferred|unclean|designated=2 -> ERROR
    expect foo-0 leader=1 isr=[1,3] elr=[] lkelr=[] lkl=-1 leader_epoch=1 partition_epoch=2
          state=RECOVERED
    expect-records 0                  how many records the previous command wrote
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from controller.core.alter_partition import (
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    alter_partition,
)
from controller.core.invariants import check_epochs_bumped, check_partition
from controller.core.metadata_image import MetadataDelta, MetadataImage
from controller.core.partition_change import (
    ElectionKind,
    ElectionType,
    PartitionChangeBuilder,
    designated_election_error,
)
from controller.core.partition_registration import LeaderRecoveryState, PartitionRegistration
from controller.core.records import (
    BROKER_FLAG_TRUE,
    CONFIG_RESOURCE_TOPIC,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    decode_record,
    encode_record,
)
from kafkawire.errors import Errors

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"


class ScenarioController:
    """A minimal active controller: commands -> records -> replay, invariants checked."""

    def __init__(self, elr_enabled: bool = True, unclean_allowed: bool = False) -> None:
        self.image = MetadataImage()
        self.next_offset = 0
        self.elr_enabled = elr_enabled
        self.unclean_allowed = unclean_allowed
        self.last_records: tuple[MetadataRecord, ...] = ()

    # -- writing ------------------------------------------------------------------------------

    def write(self, records: list[MetadataRecord]) -> None:
        delta = MetadataDelta(self.image)
        for record in records:
            # Every record goes through the real encoding, as it would through the log.
            decoded = decode_record(encode_record(record))
            before = None
            if isinstance(decoded, PartitionChangeRecord):
                before = self.image.partition(decoded.topic_id, decoded.partition_id)
            delta.replay(decoded, self.next_offset)
            self.next_offset += 1
            self.image = delta.image()
            if isinstance(decoded, PartitionChangeRecord):
                after = self.image.partition(decoded.topic_id, decoded.partition_id)
                assert before is not None and after is not None
                violations = check_epochs_bumped(before, after)
                assert not violations, violations
        self.last_records = self.last_records + tuple(records)

    def check_invariants(self) -> None:
        """After a whole command: a broker record and its partition changes share one batch."""
        for topic_id, topic in self.image.topics.items():
            for pid, reg in topic.partitions.items():
                min_isr = self.image.effective_min_isr(topic_id, pid)
                violations = check_partition(reg, self.image, min_isr, self.elr_enabled)
                assert not violations, f"{topic.name}-{pid}: {violations} in {reg}"

    def _builder(self, topic_id: uuid.UUID, pid: int) -> PartitionChangeBuilder:
        reg = self.image.topics[topic_id].partitions[pid]
        return PartitionChangeBuilder(
            reg,
            topic_id,
            pid,
            self.image,
            self.image.effective_min_isr(topic_id, pid),
            elr_enabled=self.elr_enabled,
            unclean_allowed=self.unclean_allowed,
        )

    def _partitions_with(self, broker_id: int) -> list[tuple[uuid.UUID, int]]:
        return [
            (topic_id, pid)
            for topic_id, topic in sorted(self.image.topics.items(), key=lambda t: t[1].name)
            for pid, reg in sorted(topic.partitions.items())
            if broker_id in reg.replicas
        ]

    def _change_partitions(self, broker_id: int, op: str) -> None:
        changes: list[MetadataRecord] = []
        for topic_id, pid in self._partitions_with(broker_id):
            builder = self._builder(topic_id, pid)
            getattr(builder, op)(broker_id)
            change = builder.build()
            if change is not None:
                changes.append(change)
        self.write(changes)

    # -- commands -----------------------------------------------------------------------------

    def register(self, broker_id: int) -> None:
        self.write([self._registration(broker_id)])
        self.unfence(broker_id)

    def _registration(self, broker_id: int) -> RegisterBrokerRecord:
        return RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=uuid.UUID(int=(broker_id << 32) + self.next_offset),
            broker_epoch=self.next_offset,  # broker epoch = offset of the registration
            fenced=True,
        )

    def restart(self, broker_id: int, clean: bool) -> None:
        self.write([self._registration(broker_id)])
        self._change_partitions(broker_id, "clean_restart" if clean else "unclean_restart")

    def fence(self, broker_id: int) -> None:
        epoch = self.image.brokers[broker_id].epoch
        self.write([FenceBrokerRecord(broker_id, epoch)])
        self._change_partitions(broker_id, "fence_broker")

    def unfence(self, broker_id: int) -> None:
        epoch = self.image.brokers[broker_id].epoch
        self.write([UnfenceBrokerRecord(broker_id, epoch)])
        self._change_partitions(broker_id, "unfence_broker")  # rule 16

    def shutdown(self, broker_id: int) -> None:
        epoch = self.image.brokers[broker_id].epoch
        self.write(
            [
                BrokerRegistrationChangeRecord(
                    broker_id, epoch, in_controlled_shutdown=BROKER_FLAG_TRUE
                )
            ]
        )
        self._change_partitions(broker_id, "controlled_shutdown")

    def create(
        self, name: str, rf: int, min_isr: int | None, replicas: list[int] | None, partitions: int
    ) -> None:
        topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, name)
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        if min_isr is not None:
            records.append(
                ConfigRecord(CONFIG_RESOURCE_TOPIC, name, "min.insync.replicas", str(min_isr))
            )
        brokers = sorted(self.image.brokers)
        for pid in range(partitions):
            chosen = replicas or [brokers[(pid + i) % len(brokers)] for i in range(rf)]
            isr = tuple(r for r in chosen if not self.image.is_fenced(r))
            records.append(
                PartitionRecord(pid, topic_id, tuple(chosen), isr, leader=isr[0] if isr else -1)
            )
        self.write(records)

    def set_min_isr(self, name: str, min_isr: int) -> None:
        self.write([ConfigRecord(CONFIG_RESOURCE_TOPIC, name, "min.insync.replicas", str(min_isr))])
        topic = self.image.topics_by_name[name]
        changes: list[MetadataRecord] = []
        for pid in sorted(topic.partitions):
            change = self._builder(topic.topic_id, pid).build()  # rule 15
            if change is not None:
                changes.append(change)
        self.write(changes)

    def elect(self, topic_name: str, pid: int, election: str) -> Errors:
        topic = self.image.topics_by_name[topic_name]
        reg = topic.partitions[pid]
        builder = self._builder(topic.topic_id, pid)
        if election.startswith("designated="):
            target = int(election.split("=")[1])
            error = designated_election_error(reg, target, self.image)
            if error is not None:
                return error
            builder.set_election_type(ElectionType.DESIGNATED, target)
        elif election == "preferred":
            if reg.replicas[0] == reg.leader:
                return Errors.ELECTION_NOT_NEEDED
            builder.set_election_type(ElectionType.PREFERRED)
        elif election == "unclean":
            if reg.leader != -1:
                return Errors.ELECTION_NOT_NEEDED
            builder.set_election_type(ElectionType.UNCLEAN)
        else:
            raise ValueError(f"unknown election {election}")
        change = builder.build()
        if change is None or builder.election_kind == ElectionKind.NONE:
            if election == "preferred":
                return Errors.PREFERRED_LEADER_NOT_AVAILABLE
            return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
        self.write([change])
        return Errors.NONE

    def alter(self, topic_name: str, pid: int, args: dict[str, str]) -> Errors:
        topic = self.image.topics_by_name[topic_name]
        reg = topic.partitions[pid]
        sender = int(args.get("from", reg.leader))
        sender_epoch = self.image.brokers[sender].epoch
        members = []
        for item in args["isr"].split(","):
            broker, _, epoch_text = item.partition("@")
            broker_id = int(broker)
            current = self.image.broker_epoch(broker_id)
            current = -1 if current is None else current
            members.append(BrokerState(broker_id, _relative(epoch_text or "current", current)))
        recovery = LeaderRecoveryState[args.get("recovery", "RECOVERED")]
        request = AlterPartitionRequest(
            broker_id=sender,
            broker_epoch=_relative(args.get("broker_epoch", "current"), sender_epoch),
            topics=(
                AlterPartitionTopic(
                    uuid.uuid4() if args.get("topic") == "unknown" else topic.topic_id,
                    (
                        AlterPartitionPartition(
                            partition_index=pid,
                            leader_epoch=_relative(
                                args.get("leader_epoch", "current"), reg.leader_epoch
                            ),
                            new_isr_with_epochs=tuple(members),
                            leader_recovery_state=int(recovery),
                            partition_epoch=_relative(
                                args.get("partition_epoch", "current"), reg.partition_epoch
                            ),
                        ),
                    ),
                ),
            ),
        )
        result = alter_partition(self.image, request, elr_enabled=self.elr_enabled)
        self.write(list(result.records))
        if result.response.error != Errors.NONE:
            return result.response.error
        partition_result = result.response.topics[0].partitions[0]
        if partition_result.error == Errors.NONE:
            # The response reports the state the controller committed.
            after = self.image.topics[topic.topic_id].partitions[pid]
            assert partition_result.isr == after.isr
            assert partition_result.partition_epoch == after.partition_epoch
        return partition_result.error


def _relative(text: str, current: int) -> int:
    if text == "current":
        return current
    if text == "stale":
        return current - 1
    if text == "future":
        return current + 1
    return int(text)


def _ints(text: str) -> tuple[int, ...]:
    text = text.strip("[]")
    return tuple(int(x) for x in text.split(",") if x)


def _partition_key(text: str) -> tuple[str, int]:
    name, _, pid = text.rpartition("-")
    return name, int(pid)


def _describe(reg: PartitionRegistration, key: str) -> str:
    values = {
        "leader": str(reg.leader),
        "isr": _list(reg.isr),
        "elr": _list(reg.elr),
        "lkelr": _list(reg.last_known_elr),
        "lkl": str(reg.last_known_leader),
        "leader_epoch": str(reg.leader_epoch),
        "partition_epoch": str(reg.partition_epoch),
        "state": reg.leader_recovery_state.name,
        "replicas": _list(reg.replicas),
    }
    return values[key]


def _list(values: tuple[int, ...]) -> str:
    return "[" + ",".join(str(v) for v in values) + "]"


def run_scenario(text: str, source: str) -> int:
    """Run a transcript; returns the number of lines checked. Fails with file:line context."""
    controller = ScenarioController()
    checked = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{lineno}: {line}"
        command, _, expected_error = line.partition("->")
        words = command.split()
        verb, rest = words[0], words[1:]
        kv = dict(w.split("=", 1) for w in rest if "=" in w)
        got_error: Errors | None = None
        if verb != "expect" and verb != "expect-records":
            controller.last_records = ()
        if verb == "register":
            for broker in rest:
                controller.register(int(broker))
        elif verb == "restart":
            controller.restart(int(rest[0]), clean=rest[1] == "clean")
        elif verb == "fence":
            controller.fence(int(rest[0]))
        elif verb == "unfence":
            controller.unfence(int(rest[0]))
        elif verb == "shutdown":
            controller.shutdown(int(rest[0]))
        elif verb == "create":
            controller.create(
                rest[0],
                int(kv.get("rf", "3")),
                int(kv["min_isr"]) if "min_isr" in kv else None,
                list(_ints(kv["replicas"])) if "replicas" in kv else None,
                int(kv.get("partitions", "1")),
            )
        elif verb == "config":
            controller.set_min_isr(rest[0], int(kv["min_isr"]))
        elif verb == "set":
            controller.elr_enabled = kv.get("elr", str(controller.elr_enabled)).lower() == "true"
            controller.unclean_allowed = (
                kv.get("unclean", str(controller.unclean_allowed)).lower() == "true"
            )
        elif verb == "alter":
            name, pid = _partition_key(rest[0])
            got_error = controller.alter(name, pid, kv)
        elif verb == "elect":
            name, pid = _partition_key(rest[0])
            got_error = controller.elect(name, pid, rest[1])
        elif verb == "expect":
            name, pid = _partition_key(rest[0])
            reg = controller.image.topics_by_name[name].partitions[pid]
            for key, want in kv.items():
                got = _describe(reg, key)
                assert got == want, f"{where}\n  {key}: got {got}, want {want}\n  {reg}"
                checked += 1
        elif verb == "expect-records":
            got_count = len(controller.last_records)
            assert got_count == int(rest[0]), f"{where}\n  records: {controller.last_records}"
            checked += 1
        else:
            raise AssertionError(f"{where}: unknown command {verb}")
        controller.check_invariants()
        if expected_error.strip():
            assert got_error is not None, f"{where}: command returns no error to check"
            assert got_error.name == expected_error.strip(), f"{where}: got {got_error.name}"
            checked += 1
        elif got_error is not None and got_error != Errors.NONE:
            raise AssertionError(f"{where}: unexpected {got_error.name}")
    return checked


SCENARIOS = sorted(SCENARIO_DIR.glob("*.txt"))


def test_scenarios_exist() -> None:
    assert len(SCENARIOS) >= 8


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario(path: Path) -> None:
    checked = run_scenario(path.read_text(), path.name)
    assert checked > 0, f"{path.name} checks nothing"


def test_runner_reports_a_wrong_expectation() -> None:
    with pytest.raises(AssertionError, match="leader: got 1, want 2"):
        run_scenario("register 1 2 3\ncreate foo rf=3\nexpect foo-0 leader=2\n", "inline")
