"""Write a realistic metadata log for the audit: `python -m analytics.generate --dir D --records N`.

Drives controller.core the way the active controller does: brokers register and are unfenced,
topics and partitions are created, brokers are fenced, unfenced and restarted, leaders shrink and
expand ISRs, min.insync.replicas changes; every partition change comes from
PartitionChangeBuilder and is applied with PartitionRegistration.merge. Raft leadership moves now
and then (a LeaderChange control batch opens each epoch). The bytes are the project's own
encoders' (encode_batch, encode_record, encode_control), laid out as `minikraft up` does:
`D/controller-N/metadata/{meta.properties, __cluster_metadata-0/<offset>.log, 0-0 checkpoint}`.
Followers may lag the leader by a few batches, as after a crash.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from controller.core.invariants import effective_min_isr
from controller.core.partition_change import PartitionChangeBuilder
from metadata.partition_registration import PartitionRegistration
from metadata.records import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    NO_LEADER,
    AbortTransactionRecord,
    BeginTransactionRecord,
    ConfigRecord,
    Endpoint,
    EndTransactionRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    encode_record,
)
from raft.core.control_records import (
    LeaderChangeRecord,
    Voter,
    VotersRecord,
    bootstrap_snapshot,
    encode_control,
    snapshot_batches,
)
from raft.core.replica_key import ReplicaKey, uuid_to_str
from storage.core.record_batch import Record, encode_batch

MIN_INSYNC_REPLICAS = "min.insync.replicas"
METADATA_PARTITION_DIR_NAME = "__cluster_metadata-0"
CLUSTER_ID = "minikraft-audit-demo00"
# The active controller writes a change of more than this many records as a KIP-868 transaction
# in batches of at most this many (controller.runtime.quorum_controller's, which analytics may
# not import: tests/unit/test_audit_transactions.py holds the two equal).
TRANSACTION_BATCH_RECORDS = 1000


@dataclass
class NodeLog:
    """One node's metadata directory being written: batches rolled into segments."""

    node_id: int
    directory_id: uuid.UUID
    segment_records: int = 50_000
    segments: list[tuple[int, bytearray]] = field(default_factory=list)
    _segment_count: int = 0

    def append_raw(self, base_offset: int, raw: bytes, record_count: int) -> None:
        if not self.segments or self._segment_count >= self.segment_records:
            self.segments.append((base_offset, bytearray()))
            self._segment_count = 0
        self.segments[-1][1].extend(raw)
        self._segment_count += record_count


def write_meta_properties(metadata_dir: Path, node_id: int, directory_id: uuid.UUID,
                          cluster_id: str = CLUSTER_ID) -> None:
    metadata_dir.mkdir(parents=True, exist_ok=True)
    text = (f"cluster.id={cluster_id}\ndirectory.id={uuid_to_str(directory_id)}\n"
            f"node.id={node_id}\nversion=1\n")
    (metadata_dir / "meta.properties").write_text(text, encoding="utf-8")


def partition_dir(root: Path, node_id: int, role: str = "controller") -> Path:
    return root / f"{role}-{node_id}" / "metadata" / METADATA_PARTITION_DIR_NAME


def write_node(root: Path, log: NodeLog, snapshots: Sequence[tuple[int, int, bytes]] = (),
               role: str = "controller") -> list[Path]:
    """meta.properties, the segments and snapshots `(end_offset, epoch, raw)` of one node."""
    directory = partition_dir(root, log.node_id, role)
    directory.mkdir(parents=True, exist_ok=True)
    write_meta_properties(directory.parent, log.node_id, log.directory_id)
    written = []
    for base_offset, data in log.segments:
        path = directory / f"{base_offset:020d}.log"
        path.write_bytes(bytes(data))
        written.append(path)
    for end_offset, epoch, raw in snapshots:
        path = directory / f"{end_offset:020d}-{epoch:010d}.checkpoint"
        path.write_bytes(raw)
        written.append(path)
    return written


class BrokerTable:
    """The broker view PartitionChangeBuilder asks (fenced, controlled shutdown)."""

    def __init__(self) -> None:
        self.epochs: dict[int, int] = {}
        self.fenced: dict[int, bool] = {}

    def is_fenced(self, broker_id: int) -> bool:
        return self.fenced.get(broker_id, True)

    def is_in_controlled_shutdown(self, broker_id: int) -> bool:
        return False


class LogBuilder:
    """The leader's log as a list of encoded batches, with the state the records build."""

    def __init__(self, controllers: Sequence[int], seed: int) -> None:
        self.rng = random.Random(seed)
        self.controllers = list(controllers)
        self.batches: list[tuple[int, bytes, int]] = []  # (base_offset, raw, count)
        self.next_offset = 0
        self.epoch = 0
        self.timestamp_ms = 1_700_000_000_000
        self.brokers = BrokerTable()
        self.partitions: dict[tuple[uuid.UUID, int], PartitionRegistration] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self.topic_min_isr: dict[uuid.UUID, int] = {}
        self.cluster_min_isr = 1
        self.voter_keys: tuple[ReplicaKey, ...] = ()
        self._leader_fails = False  # leave the transactions written without their End

    # -- appending ---------------------------------------------------------------------------

    def append(self, values: Sequence[bytes] | Sequence[Record], is_control: bool = False) -> int:
        self.timestamp_ms += self.rng.randint(1, 20)
        base = self.next_offset
        raw = encode_batch(base, self.epoch, self.timestamp_ms, values, is_control)
        self.batches.append((base, raw, len(values)))
        self.next_offset += len(values)
        return base

    def append_records(self, records: Sequence[MetadataRecord], name: str = "change") -> int:
        """One change's records, as the active controller commits them
        (quorum_controller._commit): more than TRANSACTION_BATCH_RECORDS go in a KIP-868
        transaction, Begin ... End, in batches of at most that many."""
        if len(records) <= TRANSACTION_BATCH_RECORDS:
            return self.append([encode_record(r) for r in records])
        framed = [BeginTransactionRecord(name=name), *records]
        if not self._leader_fails:
            framed.append(EndTransactionRecord())
        base = self.next_offset
        for start in range(0, len(framed), TRANSACTION_BATCH_RECORDS):
            self.append([encode_record(r) for r in framed[start:start + TRANSACTION_BATCH_RECORDS]])
        return base

    @contextlib.contextmanager
    def leader_fails_mid_transaction(self, next_leader: int | None) -> Iterator[None]:
        """The changes made inside are written, and the leader fails before their
        EndTransactionRecord: the state goes back to before them, and `next_leader`, elected
        in a new epoch, aborts the transaction at its activation (a NoOpRecord, then an
        AbortTransactionRecord: quorum_controller._ensure_active, Kafka's
        ActivationRecordsGenerator). None: the log ends with the transaction open."""
        saved = (dict(self.partitions), dict(self.brokers.epochs), dict(self.brokers.fenced),
                 dict(self.topic_names), dict(self.topic_min_isr), self.cluster_min_isr)
        self._leader_fails = True
        try:
            yield
        finally:
            self._leader_fails = False
        (self.partitions, self.brokers.epochs, self.brokers.fenced, self.topic_names,
         self.topic_min_isr, self.cluster_min_isr) = saved
        if next_leader is not None:
            self.new_leader(next_leader, self.voter_keys)
            self.append_records([NoOpRecord()])
            self.append_records([AbortTransactionRecord(reason="Controller failover")])

    def new_leader(self, leader_id: int, voters: Sequence[ReplicaKey]) -> None:
        """Rule 1: a new epoch per election, opened by the winner's LeaderChange record."""
        self.voter_keys = tuple(voters)
        self.epoch += 1
        self.append([encode_control(LeaderChangeRecord(leader_id, tuple(voters),
                                                       tuple(voters)))], is_control=True)

    # -- controller operations, through controller.core --------------------------------------

    def min_isr(self, topic_id: uuid.UUID, reg: PartitionRegistration) -> int:
        configured = self.topic_min_isr.get(topic_id, self.cluster_min_isr)
        return effective_min_isr(configured, len(reg.replicas))  # rule 9

    def builder(self, key: tuple[uuid.UUID, int]) -> PartitionChangeBuilder:
        reg = self.partitions[key]
        return PartitionChangeBuilder(reg, key[0], key[1], self.brokers, self.min_isr(key[0], reg))

    def apply(self, builders: Sequence[tuple[tuple[uuid.UUID, int], PartitionChangeBuilder]],
              head: Sequence[MetadataRecord] = ()) -> None:
        records: list[MetadataRecord] = list(head)
        for key, builder in builders:
            change = builder.build().record
            if change is not None:
                self.partitions[key] = self.partitions[key].merge(change)
                records.append(change)
        if records:
            self.append_records(records)

    def register_broker(self, broker_id: int) -> None:
        epoch = self.next_offset  # the broker epoch is the offset of its registration
        record = RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=uuid.UUID(int=self.rng.getrandbits(128)),
            broker_epoch=epoch, endpoints=(Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),),
            fenced=True)
        restarted = broker_id in self.brokers.epochs
        self.brokers.epochs[broker_id] = epoch
        self.brokers.fenced[broker_id] = True
        builders = []
        if restarted:
            clean = self.rng.random() < 0.5
            for key, reg in self.partitions.items():
                if broker_id in reg.replicas:
                    b = self.builder(key)
                    builders.append((key, b.clean_restart(broker_id) if clean
                                     else b.unclean_restart(broker_id)))
        self.apply(builders, head=[record])

    def fence(self, broker_id: int) -> None:
        self.brokers.fenced[broker_id] = True
        head = [FenceBrokerRecord(broker_id, self.brokers.epochs[broker_id])]
        builders = [(key, self.builder(key).fence_broker(broker_id))
                    for key, reg in self.partitions.items() if broker_id in reg.replicas]
        self.apply(builders, head)

    def unfence(self, broker_id: int) -> None:
        self.brokers.fenced[broker_id] = False
        head = [UnfenceBrokerRecord(broker_id, self.brokers.epochs[broker_id])]
        builders = [(key, self.builder(key).unfence_broker(broker_id))
                    for key, reg in self.partitions.items()
                    if broker_id in reg.replicas and reg.leader == NO_LEADER]  # rule 16
        self.apply(builders, head)

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     broker_ids: Sequence[int]) -> uuid.UUID:
        topic_id = uuid.UUID(int=self.rng.getrandbits(128))
        self.topic_names[topic_id] = name
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        for p in range(partitions):
            start = self.rng.randrange(len(broker_ids))
            replicas = tuple(broker_ids[(start + i) % len(broker_ids)]
                             for i in range(replication_factor))
            isr = tuple(r for r in replicas if not self.brokers.is_fenced(r))
            leader = isr[0] if isr else NO_LEADER
            reg = PartitionRegistration(replicas=replicas, isr=isr, leader=leader)
            self.partitions[(topic_id, p)] = reg
            records.append(reg.to_record(topic_id, p))
        self.append_records(records, "CreateTopics")
        return topic_id

    def alter_isr(self, key: tuple[uuid.UUID, int]) -> None:
        """The leader shrinks a lagging follower out, or expands a caught-up one in (rule 17)."""
        reg = self.partitions[key]
        if reg.leader == NO_LEADER or reg.leader_recovery_state != 0:
            return
        followers_out = [r for r in reg.replicas if r not in reg.isr
                         and not self.brokers.is_fenced(r)]
        followers_in = [r for r in reg.isr if r != reg.leader]
        if followers_out and (not followers_in or self.rng.random() < 0.6):
            target = (*reg.isr, self.rng.choice(followers_out))
        elif followers_in:
            drop = self.rng.choice(followers_in)
            target = tuple(r for r in reg.isr if r != drop)
        else:
            return
        self.apply([(key, self.builder(key).set_target_isr(target))])

    def recover(self, key: tuple[uuid.UUID, int]) -> None:
        """KIP-704: the leader of a RECOVERING partition reports RECOVERED."""
        from metadata.partition_registration import LeaderRecoveryState

        reg = self.partitions[key]
        if reg.leader_recovery_state == LeaderRecoveryState.RECOVERING and reg.leader != NO_LEADER:
            self.apply([(key, self.builder(key).set_target_leader_recovery_state(
                LeaderRecoveryState.RECOVERED))])

    def set_min_isr(self, topic_id: uuid.UUID, value: int) -> None:
        """Rule 15: a min ISR change clears the ELR where the ISR now reaches it."""
        self.topic_min_isr[topic_id] = value
        head = [ConfigRecord(CONFIG_RESOURCE_TOPIC, self.topic_names[topic_id],
                             MIN_INSYNC_REPLICAS, str(value))]
        builders = [(key, self.builder(key)) for key in self.partitions if key[0] == topic_id]
        self.apply(builders, head)

    def snapshot_records(self) -> list[bytes]:
        """The state as a snapshot holds it (image records)."""
        records: list[MetadataRecord] = []
        for broker_id, epoch in sorted(self.brokers.epochs.items()):
            records.append(RegisterBrokerRecord(
                broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id), broker_epoch=epoch,
                fenced=self.brokers.is_fenced(broker_id)))
        records.append(ConfigRecord(CONFIG_RESOURCE_BROKER, "", MIN_INSYNC_REPLICAS,
                                    str(self.cluster_min_isr)))
        for topic_id, name in self.topic_names.items():
            records.append(TopicRecord(name, topic_id))
            if topic_id in self.topic_min_isr:
                records.append(ConfigRecord(CONFIG_RESOURCE_TOPIC, name, MIN_INSYNC_REPLICAS,
                                            str(self.topic_min_isr[topic_id])))
        for (topic_id, p), reg in self.partitions.items():
            records.append(reg.to_record(topic_id, p))
        return [encode_record(r) for r in records]


@dataclass(frozen=True)
class GeneratedCluster:
    root: Path
    files: list[Path]
    records: int  # records in the longest log
    log_end_offset: int
    voters: tuple[Voter, ...]


def generate_cluster_dir(
    root: str | Path,
    records: int,
    seed: int = 0,
    controllers: Sequence[int] = (1, 2, 3),
    brokers: Sequence[int] = (4, 5, 6, 7, 8),
    topics: int = 20,
    partitions_per_topic: int = 10,
    segment_records: int = 50_000,
    follower_lag_batches: int = 2,
    snapshot_at: int | None = None,
    then: Callable[[LogBuilder], None] | None = None,
) -> GeneratedCluster:
    """A clean log of about `records` records, written for every controller under root;
    `then` writes more changes after those (a test's story)."""
    root = Path(root)
    rng = random.Random(seed)
    directory_ids = {c: uuid.UUID(int=rng.getrandbits(128) | 1) for c in controllers}
    voters = tuple(Voter(c, directory_ids[c], {"CONTROLLER": f"127.0.0.1:{19000 + c}"})
                   for c in controllers)
    keys = [v.key for v in voters]
    log = LogBuilder(controllers, seed)
    log.new_leader(controllers[0], keys)
    log.append([encode_control(VotersRecord(voters))], is_control=True)  # rule 7
    log.cluster_min_isr = 2
    log.append_records([ConfigRecord(CONFIG_RESOURCE_BROKER, "", MIN_INSYNC_REPLICAS, "2")])
    for b in brokers:
        log.register_broker(b)
        log.unfence(b)
    topic_ids = [log.create_topic(f"topic-{t}", partitions_per_topic, min(3, len(brokers)),
                                  list(brokers)) for t in range(topics)]
    snapshot: tuple[int, int, bytes] | None = None
    partition_keys = list(log.partitions)
    while log.next_offset < records:
        if snapshot_at is not None and snapshot is None and log.next_offset >= snapshot_at:
            raw = snapshot_batches(voters, log.snapshot_records(), log.timestamp_ms, log.epoch)
            snapshot = (log.next_offset, log.epoch, raw)
        draw = rng.random()
        unfenced = [b for b in brokers if not log.brokers.is_fenced(b)]
        fenced = [b for b in brokers if log.brokers.is_fenced(b)]
        if draw < 0.55:
            log.alter_isr(rng.choice(partition_keys))
        elif draw < 0.60 and len(unfenced) > 2:
            log.fence(rng.choice(unfenced))
        elif draw < 0.68 and fenced:
            log.unfence(rng.choice(fenced))
        elif draw < 0.70 and len(unfenced) > 2:
            log.register_broker(rng.choice(unfenced))
        elif draw < 0.72:
            log.set_min_isr(rng.choice(topic_ids), rng.choice((1, 2, 2, 3)))
        elif draw < 0.80:
            log.recover(rng.choice(partition_keys))
        elif draw < 0.805:
            log.new_leader(rng.choice(controllers), keys)
        else:
            log.append_records([NoOpRecord()] * rng.randint(1, 4))
    if then is not None:
        then(log)
    files: list[Path] = []
    for index, controller in enumerate(controllers):
        node = NodeLog(controller, directory_ids[controller], segment_records)
        lag = 0 if index == 0 else min(follower_lag_batches, len(log.batches) - 1)
        for base, raw, count in log.batches[: len(log.batches) - lag]:
            node.append_raw(base, raw, count)
        snapshots = [(0, 0, bootstrap_snapshot(voters))]
        if snapshot is not None:
            snapshots.append(snapshot)
        files += write_node(root, node, snapshots)
    return GeneratedCluster(root, files, log.next_offset, log.next_offset, voters)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--segment-records", type=int, default=50_000)
    parser.add_argument("--snapshot-at", type=int, default=None)
    args = parser.parse_args(argv)
    result = generate_cluster_dir(args.dir, args.records, seed=args.seed, topics=args.topics,
                                  partitions_per_topic=args.partitions,
                                  segment_records=args.segment_records,
                                  snapshot_at=args.snapshot_at)
    print(f"wrote {result.records} records in {len(result.files)} files under {result.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
