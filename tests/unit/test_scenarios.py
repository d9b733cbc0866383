"""Datadriven transcripts in tests/scenarios/*.txt over the production controller code.

Every command is a controller request answered by the functions the QuorumController calls
(cluster_control, replication_control; config_control through it), and the returned
ControllerResult's records are encoded, decoded and replayed onto the image with
metadata.metadata_image.replay, as the metadata log does. After each step the transcript
prints the errors, the records written, the builder's elections and the full state of every
broker and partition (tests/datadriven.py; MINIKRAFT_REWRITE=1 rewrites the expected outputs).
The partition rules are checked after every record (rule 8, rule 13's change check) and every
command (rules 10-13, 19) with controller.core.invariants. Commands:

    register 1 2 3                    BrokerRegistration, then a caught-up heartbeat (unfenced)
    restart 2 clean|unclean           the session lapses, the broker registers again with its
                                      previous epoch (clean) or none (unclean); fenced until
                                      `unfence` (rule 12)
    fence 2 / unfence 2 / shutdown 2  heartbeats: want_fence / caught up / want_shut_down
    create foo rf=3 min_isr=2 [replicas=1,2,3] [partitions=1]      CreateTopics
    config foo min_isr=3              IncrementalAlterConfigs of the topic (rule 15)
    set elr=false                     the controller's eligible.leader.replicas.enabled
    set unclean=true                  cluster-level unclean.leader.election.enable
    alter foo-0 isr=1,2@stale [from=1] [broker_epoch=stale|future] [leader_epoch=stale|future|N]
          [partition_epoch=...] [recovery=RECOVERING] [topic=unknown]       AlterPartition
    elect foo-0 preferred|unclean|designated=2                              ElectLeaders
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controller.core import cluster_control, config_control
from controller.core import replication_control as rc
from controller.core.controller_result import ControllerResult
from controller.core.election_policy import ElectionPolicy
from controller.core.invariants import check_epochs_bumped, check_leader_election, check_partition
from controller.core.partition_change import ElectionKind, PartitionChange
from kafkawire import admin_messages as am
from kafkawire import broker_lifecycle as lifecycle
from kafkawire import constants
from kafkawire.config import NodeConfig
from kafkawire.errors import Errors
from metadata.metadata_image import CLUSTER_DEFAULT_RESOURCE, MetadataImage, replay
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from metadata.records import (
    MetadataRecord,
    PartitionChangeRecord,
    decode_record,
    encode_record,
)
from tests.datadriven import REWRITE_ENV, run_transcript

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"
CLUSTER_ID = "scenario-cluster"
SESSION_TIMEOUT_MS = 9_000


class ScenarioCluster:
    """The active controller's write path for transcripts: compute with production code against
    the committed image, then replay the records (QuorumController._write_result's order)."""

    def __init__(self, elr_default: bool = True) -> None:
        self.image = MetadataImage()
        self.offset = -1  # the last record's offset: broker epochs are registration offsets
        self.now_ms = 1_000
        self.tracker = cluster_control.BrokerHeartbeatTracker()
        self.elr_default = elr_default
        self.written: list[MetadataRecord] = []
        self.changes: list[PartitionChange] = []

    @property
    def policy(self) -> ElectionPolicy:
        return config_control.election_policy(self.image, self.elr_default, False)

    def write(self, compute: Callable[[MetadataImage], ControllerResult[Any]]) -> Any:
        result = compute(self.image)
        for record in result.records:
            decoded = decode_record(encode_record(record))  # through the log's encoding
            before = None
            if isinstance(decoded, PartitionChangeRecord):
                before = self.image.partition(decoded.topic_id, decoded.partition_id)
            self.offset += 1
            self.image = replay(self.image, decoded, self.offset)
            if isinstance(decoded, PartitionChangeRecord):
                after = self.image.partition(decoded.topic_id, decoded.partition_id)
                assert before is not None and after is not None
                # Rule 8 and rule 13's change check hold per record; the state rules only
                # once the batch is whole (a fencing's partition changes precede its record).
                violations = check_epochs_bumped(before, after) + check_leader_election(
                    after, before=before
                )
                assert not violations, f"{violations} after {decoded}"
        self.written += result.records
        self.changes += result.changes
        return result.response

    def check_partitions(self) -> None:
        elr = self.policy.elr_enabled
        for topic_id, topic in self.image.topics.items():
            for pid, reg in topic.partitions.items():
                min_isr = self.image.effective_min_isr(topic_id, pid)
                violations = check_partition(reg, self.image, min_isr, elr)
                assert not violations, f"{topic.name}-{pid}: {violations} in {reg}"

    # -- brokers ------------------------------------------------------------------------------

    def register(self, broker_id: int, previous_epoch: int = constants.NO_BROKER_EPOCH) -> None:
        request = lifecycle.registration_request(
            broker_id,
            CLUSTER_ID,
            uuid.UUID(int=(broker_id << 32) + self.offset + 1),  # a new incarnation
            previous_broker_epoch=previous_epoch,
        )
        response = self.write(
            lambda image: cluster_control.register_broker(
                image,
                request,
                CLUSTER_ID,
                self.tracker,
                self.now_ms,
                SESSION_TIMEOUT_MS,
                self.policy,
            )
        )
        assert response.error_code == Errors.NONE, response

    def restart(self, broker_id: int, clean: bool) -> None:
        previous = self.image.brokers[broker_id].epoch
        self.now_ms += SESSION_TIMEOUT_MS + 1  # the old process's session lapses
        self.register(broker_id, previous if clean else constants.NO_BROKER_EPOCH)

    def heartbeat(self, broker_id: int, **flags: bool) -> None:
        request = lifecycle.heartbeat_request(
            broker_id, self.image.brokers[broker_id].epoch, self.offset, **flags
        )
        response = self.write(
            lambda image: cluster_control.process_heartbeat(
                image, request, self.tracker, self.now_ms, self.policy
            )
        )
        assert response.error_code == Errors.NONE, response

    # -- topics and configs -------------------------------------------------------------------

    def create(self, name: str, kv: dict[str, str]) -> int:
        configs = {"min.insync.replicas": kv["min_isr"]} if "min_isr" in kv else {}
        partitions = int(kv.get("partitions", "1"))
        assignments = [list(_ints(kv["replicas"]))] * partitions if "replicas" in kv else []
        topic = am.creatable_topic(name, partitions, int(kv.get("rf", "3")), configs, assignments)
        response = self.write(
            lambda image: rc.create_topics(
                image,
                am.create_topics_request([topic]),
                lambda: uuid.uuid5(uuid.NAMESPACE_DNS, name),
                NodeConfig({"node.id": "3000"}),
            )
        )
        return int(response.topics[0].error_code)

    def alter_configs(self, resource_type: int, name: str, key: str, value: str) -> int:
        resource = am.config_resource(
            resource_type, name, [am.alterable_config(key, value=value)]
        )
        response = self.write(
            lambda image: rc.incremental_alter_configs(
                image, am.incremental_alter_configs_request([resource]), self.policy
            )
        )
        return int(response.responses[0].error_code)

    # -- partitions ---------------------------------------------------------------------------

    def alter(self, topic_name: str, pid: int, args: dict[str, str]) -> Errors:
        topic = self.image.topics_by_name[topic_name]
        reg = topic.partitions[pid]
        sender = int(args.get("from", reg.leader))
        members = []
        for item in args["isr"].split(","):
            broker, _, epoch_text = item.partition("@")
            current = self.image.broker_epoch(int(broker))
            current = -1 if current is None else current
            members.append(
                lifecycle.broker_state(int(broker), _relative(epoch_text or "current", current))
            )
        data = lifecycle.alter_partition_partition(
            pid,
            _relative(args.get("leader_epoch", "current"), reg.leader_epoch),
            members,
            int(LeaderRecoveryState[args.get("recovery", "RECOVERED")]),
            _relative(args.get("partition_epoch", "current"), reg.partition_epoch),
        )
        topic_id = uuid.UUID(int=1) if args.get("topic") == "unknown" else topic.topic_id
        sender_epoch = self.image.brokers[sender].epoch
        request = lifecycle.alter_partition_request(
            sender,
            _relative(args.get("broker_epoch", "current"), sender_epoch),
            [(topic_id, [data])],
        )
        response = self.write(lambda image: rc.alter_partition(image, request, self.policy))
        if response.error_code != Errors.NONE:
            return Errors.of(response.error_code)
        result = response.topics[0].partitions[0]
        if result.error_code == Errors.NONE:
            # The response reports the state the controller committed.
            after = self.image.topics[topic.topic_id].partitions[pid]
            assert (tuple(result.isr), result.partition_epoch) == (
                after.isr,
                after.partition_epoch,
            )
        return Errors.of(result.error_code)

    def elect(self, topic_name: str, pid: int, election: str) -> Errors:
        designated = None
        if election.startswith("designated="):
            election_type = constants.ELECTION_DESIGNATED
            designated = [int(election.split("=")[1])]
        else:
            election_type = {"preferred": constants.ELECTION_PREFERRED, "unclean": constants.ELECTION_UNCLEAN}[
                election
            ]
        request = am.elect_leaders_request(
            election_type, [am.election_topic(topic_name, [pid], designated)]
        )
        response = self.write(lambda image: rc.elect_leaders(image, request, self.policy))
        if response.error_code != Errors.NONE:
            return Errors.of(response.error_code)
        return Errors.of(response.replica_election_results[0].partition_result[0].error_code)

    # -- one transcript command ---------------------------------------------------------------

    def run(self, command: str) -> str:
        words = command.split()
        verb, rest = words[0], words[1:]
        kv = dict(w.split("=", 1) for w in rest if "=" in w)
        self.written, self.changes = [], []
        self.now_ms += 1
        error: int | None = None
        if verb == "register":
            for broker in rest:
                self.register(int(broker))
                self.heartbeat(int(broker))
        elif verb == "restart":
            self.restart(int(rest[0]), clean=rest[1] == "clean")
        elif verb == "fence":
            self.heartbeat(int(rest[0]), want_fence=True)
        elif verb == "unfence":
            self.heartbeat(int(rest[0]))
        elif verb == "shutdown":
            self.heartbeat(int(rest[0]), want_shut_down=True)
        elif verb == "create":
            error = self.create(rest[0], kv)
        elif verb == "config":
            value = kv["min_isr"]
            error = self.alter_configs(
                constants.CONFIG_RESOURCE_TOPIC, rest[0], "min.insync.replicas", value
            )
        elif verb == "set" and "elr" in kv:
            self.elr_default = kv["elr"] == "true"
        elif verb == "set" and "unclean" in kv:
            error = self.alter_configs(
                constants.CONFIG_RESOURCE_BROKER,
                CLUSTER_DEFAULT_RESOURCE,
                config_control.UNCLEAN_LEADER_ELECTION_ENABLE,
                kv["unclean"],
            )
        elif verb == "alter":
            name, pid = _partition_key(rest[0])
            error = self.alter(name, pid, kv)
        elif verb == "elect":
            name, pid = _partition_key(rest[0])
            error = self.elect(name, pid, rest[1])
        else:
            raise AssertionError(f"unknown command {verb!r}")
        self.check_partitions()
        return "\n".join(self.describe(error))

    def describe(self, error: int | None) -> list[str]:
        out = []
        if error is not None:
            out.append(f"error: {Errors.of(error).name}")
        kinds = [type(r).__name__.removesuffix("Record") for r in self.written]
        out.append("records: " + (" ".join(kinds) if kinds else "none"))
        for change in self.changes:
            if change.election is not ElectionKind.NONE and change.record is not None:
                name = self.image.topics[change.record.topic_id].name
                out.append(f"election: {name}-{change.record.partition_id} {change.election.name}")
        brokers = self.image.brokers
        out.append(
            "brokers: "
            + " ".join(f"{b}@{brokers[b].epoch}" for b in sorted(brokers))
            + f" fenced={_list(tuple(b for b in sorted(brokers) if brokers[b].fenced))}"
            + " shutdown="
            + _list(tuple(b for b in sorted(brokers) if brokers[b].in_controlled_shutdown))
        )
        for name in sorted(self.image.topics_by_name):
            topic = self.image.topics_by_name[name]
            for pid in sorted(topic.partitions):
                out.append(f"{name}-{pid} {describe_partition(topic.partitions[pid])}")
        return out


def describe_partition(reg: PartitionRegistration) -> str:
    return (
        f"leader={reg.leader} leader_epoch={reg.leader_epoch} "
        f"partition_epoch={reg.partition_epoch} replicas={_list(reg.replicas)} "
        f"isr={_list(reg.isr)} elr={_list(reg.elr)} lkelr={_list(reg.last_known_elr)} "
        f"lkl={reg.last_known_leader} state={reg.leader_recovery_state.name}"
    )


def _relative(text: str, current: int) -> int:
    if text == "current":
        return current
    if text == "stale":
        return current - 1
    if text == "future":
        return current + 1
    return int(text)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.strip("[]").split(",") if x)


def _partition_key(text: str) -> tuple[str, int]:
    name, _, pid = text.rpartition("-")
    return name, int(pid)


def _list(values: tuple[int, ...]) -> str:
    return "[" + ",".join(str(v) for v in values) + "]"


SCENARIOS = sorted(SCENARIO_DIR.glob("*.txt"))


def test_scenarios_exist() -> None:
    assert len(SCENARIOS) >= 8


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario(path: Path) -> None:
    cluster = ScenarioCluster()
    assert run_transcript(path, cluster.run) > 0, f"{path.name} has no cases"


def test_runner_reports_a_wrong_expectation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REWRITE_ENV, raising=False)
    path = tmp_path / "wrong.txt"
    path.write_text("register 1\n----\nrecords: none\n")
    with pytest.raises(AssertionError, match=r"wrong.txt:1: register 1\n--- expected"):
        run_transcript(path, ScenarioCluster().run)


def test_rewrite_mode_writes_the_actual_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REWRITE_ENV, "1")
    path = tmp_path / "new.txt"
    path.write_text("# a comment stays\nregister 1\n----\n\nfence 1  # so does this\n----\n")
    run_transcript(path, ScenarioCluster().run)
    assert path.read_text() == (
        "# a comment stays\nregister 1\n----\n"
        "records: RegisterBroker BrokerRegistrationChange\n"
        "brokers: 1@0 fenced=[] shutdown=[]\n\n"
        "fence 1  # so does this\n----\n"
        "records: BrokerRegistrationChange\n"
        "brokers: 1@0 fenced=[1] shutdown=[]\n"
    )
    monkeypatch.delenv(REWRITE_ENV)
    assert run_transcript(path, ScenarioCluster().run) == 2  # and it now passes as written
