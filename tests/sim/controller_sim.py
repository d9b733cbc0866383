"""The simulator with an active controller on top of the raft cores: controller rules under faults.

ControllerSim keeps ClusterSim's network, disk and raft checks, and replaces its workload with
the active controller's (QuorumController's discipline): only a leader whose committed prefix is
the whole committed log and which has committed in its own epoch computes the next operation,
with the production functions (cluster_control, replication_control) against the image of the
committed metadata records, and appends the records as one batch; it computes again only once
that batch committed. Every committed metadata record is replayed onto one image (rule 2 makes
the committed log the same for every replica) and checked with controller.core.invariants:
rule 8 and rule 13's change check per PartitionChangeRecord, rules 10-13 and 19 at every batch
end. Leader changes, lost uncommitted batches and crashes thus meet the election rules.
"""

from __future__ import annotations

import random
import uuid

from controller.core import cluster_control
from controller.core import replication_control as rc
from controller.core.controller_result import ControllerResult
from controller.core.election_policy import ElectionPolicy
from controller.core.invariants import check_epochs_bumped, check_leader_election, check_partition
from kafkawire import admin_messages as am
from kafkawire import broker_lifecycle as lifecycle
from kafkawire import constants
from kafkawire.config import NodeConfig
from metadata.metadata_image import MetadataImage, replay
from metadata.records import PartitionChangeRecord, decode_record, encode_record
from tests.sim.cluster_sim import ClusterSim, SimNode, SimOptions

BROKERS = (1, 2, 3, 4)
TOPIC = "foo"
# Broker sessions are not simulated: a re-registration is a restart (its session lapsed).
NO_SESSION_MS = -1


class ControllerSim(ClusterSim):
    def __init__(self, seed: int, options: SimOptions | None = None) -> None:
        super().__init__(seed, options)
        self.ops = random.Random(seed * 7_919 + 17)  # the controller's own stream
        self.policy = ElectionPolicy(elr_enabled=self.ops.random() < 0.8)
        self.tracker = cluster_control.BrokerHeartbeatTracker()
        self.image = MetadataImage()
        self.replayed = 0  # committed offsets looked at
        # (offset, epoch) -> (encoded record, last of its batch) for every controller append
        self.appended_records: dict[tuple[int, int], tuple[bytes, bool]] = {}
        self.metadata_records = 0  # committed and replayed
        self.operations = 0  # batches appended

    # -- the active controller -----------------------------------------------------------------
    def _on_append(self) -> None:
        for node in self.leaders():
            if self._ready(node):
                self._write(node)

    def _ready(self, node: SimNode) -> bool:
        """QuorumController._ensure_active and its single writer: the leader's committed prefix
        is the replayed log, it committed in its epoch, and nothing of it is uncommitted."""
        replica = node.replica
        assert replica is not None
        hwm = replica.high_watermark
        return (
            hwm == len(self.committed) == self.replayed
            and hwm > 0
            and self.committed[hwm - 1][0] == replica.epoch
            and node.log.end_offset() == hwm
        )

    def _write(self, node: SimNode) -> None:
        assert node.replica is not None
        result = self._compute(self.image)
        if not result.records:
            return
        values = [encode_record(r) for r in result.records]
        raft_result, last = node.replica.append(values, self.now_ms)
        epoch = node.replica.epoch
        for index, value in enumerate(values):
            offset = last - len(values) + 1 + index
            self.appended_records[(offset, epoch)] = (value, index == len(values) - 1)
        self.operations += 1
        self._apply(node, raft_result)
        self._after(node)

    def _compute(self, image: MetadataImage) -> ControllerResult[object]:
        """The next controller request, answered by production code against `image`."""
        registered = sorted(image.brokers)
        missing = [b for b in BROKERS if b not in image.brokers]
        if missing:
            return self._register(image, missing[0], restart_clean=None)
        fenced = [b for b in registered if image.is_fenced(b)]
        if TOPIC not in image.topics_by_name and fenced:
            return self._heartbeat(image, fenced[0])  # caught up: unfenced (rule 16)
        if TOPIC not in image.topics_by_name:
            min_isr = str(self.ops.randint(1, 3))
            topic = am.creatable_topic(TOPIC, 1, 3, {"min.insync.replicas": min_isr})
            request = am.create_topics_request([topic])
            return rc.create_topics(
                image, request, lambda: uuid.UUID(int=self.seed + 1), NodeConfig({"node.id": "1"})
            )
        broker = self.ops.choice(BROKERS)
        choice = self.ops.random()
        if choice < 0.25:
            return self._heartbeat(image, broker)  # unfences a caught-up fenced broker
        if choice < 0.45:
            return self._heartbeat(image, broker, want_fence=True)
        if choice < 0.55:
            return self._register(image, broker, restart_clean=self.ops.random() < 0.5)
        if choice < 0.65 and TOPIC in image.topics_by_name:
            value = str(self.ops.randint(1, 4))
            config = am.alterable_config("min.insync.replicas", value=value)
            resource = am.config_resource(constants.CONFIG_RESOURCE_TOPIC, TOPIC, [config])
            request = am.incremental_alter_configs_request([resource])
            return rc.incremental_alter_configs(image, request, self.policy)
        if choice < 0.7 and TOPIC in image.topics_by_name:
            election = self.ops.choice((constants.ELECTION_PREFERRED, constants.ELECTION_UNCLEAN))
            elect = am.elect_leaders_request(election, [am.election_topic(TOPIC, [0])])
            return rc.elect_leaders(image, elect, self.policy)
        if TOPIC in image.topics_by_name:
            return self._alter_isr(image, broker)
        return ControllerResult((), None)

    def _register(
        self, image: MetadataImage, broker: int, restart_clean: bool | None
    ) -> ControllerResult[object]:
        existing = image.brokers.get(broker)
        previous = constants.NO_BROKER_EPOCH
        if existing is not None and restart_clean:
            previous = existing.epoch  # rule 12: its clean-shutdown file names the old epoch
        request = lifecycle.registration_request(
            broker,
            "sim",
            uuid.UUID(int=(broker << 64) + self.operations + 1),
            previous_broker_epoch=previous,
        )
        return cluster_control.register_broker(  # type: ignore[return-value]
            image, request, "sim", self.tracker, self.now_ms, NO_SESSION_MS, self.policy
        )

    def _heartbeat(
        self, image: MetadataImage, broker: int, want_fence: bool = False
    ) -> ControllerResult[object]:
        registration = image.brokers[broker]
        request = lifecycle.heartbeat_request(
            broker, registration.epoch, image.offset, want_fence=want_fence
        )
        return cluster_control.process_heartbeat(  # type: ignore[return-value]
            image, request, self.tracker, self.now_ms, self.policy
        )

    def _alter_isr(self, image: MetadataImage, broker: int) -> ControllerResult[object]:
        """The partition leader shrinks the ISR by `broker`, or adds it (rule 17's epochs)."""
        topic = image.topics_by_name[TOPIC]
        reg = topic.partitions[0]
        if reg.leader == -1 or broker == reg.leader or broker not in reg.replicas:
            return ControllerResult((), None)
        if broker in reg.isr:
            isr = [r for r in reg.isr if r != broker]
        elif reg.leader_recovery_state == 0:
            isr = [*reg.isr, broker]
        else:
            isr = [reg.leader]  # KIP-704: the leader reports RECOVERED first
        members = [lifecycle.broker_state(b, image.brokers[b].epoch) for b in isr]
        data = lifecycle.alter_partition_partition(0, reg.leader_epoch, members, 0, reg.partition_epoch)
        request = lifecycle.alter_partition_request(
            reg.leader, image.brokers[reg.leader].epoch, [(topic.topic_id, [data])]
        )
        return rc.alter_partition(image, request, self.policy)  # type: ignore[return-value]

    # -- replay and the controller rules -------------------------------------------------------
    def _check_leader_hwm(self, node: SimNode) -> None:
        super()._check_leader_hwm(node)
        while self.replayed < len(self.committed):
            offset = self.replayed
            epoch, value = self.committed[offset]
            self.replayed += 1
            appended = self.appended_records.get((offset, epoch))
            if appended is None or appended[0] != value:
                continue  # a raft control record or a plain append
            self._replay(decode_record(value), offset, batch_end=appended[1])

    def _replay(self, record: object, offset: int, batch_end: bool) -> None:
        before = None
        if isinstance(record, PartitionChangeRecord):
            before = self.image.partition(record.topic_id, record.partition_id)
        self.image = replay(self.image, record, offset)  # type: ignore[arg-type]
        self.metadata_records += 1
        if isinstance(record, PartitionChangeRecord):
            after = self.image.partition(record.topic_id, record.partition_id)
            assert before is not None and after is not None
            violations = check_epochs_bumped(before, after) + check_leader_election(
                after, before=before
            )
            if violations:
                self.fail(f"controller: {violations} after {record}")
        if not batch_end:
            return  # a fencing's partition changes precede its broker record: whole batches
        for topic_id, topic in self.image.topics.items():
            for pid, reg in topic.partitions.items():
                min_isr = self.image.effective_min_isr(topic_id, pid)
                violations = check_partition(reg, self.image, min_isr, self.policy.elr_enabled)
                if violations:
                    self.fail(f"controller: {topic.name}-{pid}: {violations} in {reg}")
