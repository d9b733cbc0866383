"""Datadriven broker transcripts (tests/scenarios/broker/*.txt) over real PartitionState cores:
the HWM (rule 20), ISR shrink and expand with broker epochs (17, 18), leader recovery (KIP-704,
rule 21) and truncation on a leader change (22).

One partition on brokers 1, 2, 3, each a broker.core.partition_state.PartitionState with a log
of leader epochs (tests/sim/replica_log.ReplicaLog). The transcript plays the runtime
(broker/runtime/replica_manager.py's order: persist the epoch entry, flush, journal, send) and
the controller (it commits or refuses the AlterPartition in flight and publishes registrations).
After each step it prints the journal events and acks the step produced and every broker's state
(tests/datadriven.py; MINIKRAFT_REWRITE=1 rewrites the expected outputs). Commands:

    partition isr=1,2,3 [leader=1] [min_isr=2] [epoch=E] [recovering]
                         the controller publishes a registration (replicas 1,2,3, leader epoch
                         E, default one more than the last) to every broker that is up
    min_isr 3            a new effective min ISR reaches every broker, nothing else changes
    produce acks=all n=2 the leader appends n records (acks=all: fsync'd before they count)
    flush 1              broker 1 fsyncs its log
    fetch 2 [max=N]      follower 2 fetches once from its leader (truncating first when its core
                         asks), appends up to N records (default all) and fsyncs them
    tick ms=N            the clock moves N ms and every leader checks for lagging followers
    commit               the controller commits the AlterPartition in flight (answer to the
                         leader, the new registration to the others)
    refuse ERROR         the controller answers the AlterPartition in flight with ERROR
    fence 3 / unfence 3  broker 3 is fenced / unfenced (with a new broker epoch) in the images
    down 3 / up 3        broker 3 stops (its core is gone, its log stays) / starts again with a
                         new core from its log and its last HWM (the checkpoint)
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields, replace
from pathlib import Path
from types import MappingProxyType

import pytest

from broker.core import journal_events as events
from broker.core.partition_state import IsrProposal, PartitionReady, PartitionState
from kafkawire.broker_lifecycle import alter_partition_result
from kafkawire.constants import ACKS_ALL
from kafkawire.errors import Errors
from metadata.metadata_image import BrokerRegistration, MetadataImage
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from tests.datadriven import run_transcript
from tests.sim.replica_log import ReplicaLog, truncate_against

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "broker"
BROKERS = (1, 2, 3)
LAG_MS = 10_000  # replica.lag.time.max.ms


@dataclass
class Broker:
    broker_id: int
    log: ReplicaLog
    state: PartitionState | None
    epoch: int  # its registration's broker epoch
    fenced: bool = False
    up: bool = True
    last_hwm: int = 0  # what its checkpoint file would hold


class BrokerCluster:
    def __init__(self) -> None:
        self.now_ms = 0
        self.brokers = {b: Broker(b, ReplicaLog(), None, epoch=100 * b) for b in BROKERS}
        self.registration: PartitionRegistration | None = None
        self.min_isr = 2
        self.next_ack = 1
        self.acks: dict[int, int] = {}  # ack id -> last offset
        self.inflight: tuple[int, IsrProposal] | None = None  # (leader, proposal)
        self.trace: list[str] = []

    # ---- the controller's side ----

    def image(self) -> MetadataImage:
        return MetadataImage(brokers=MappingProxyType({
            b.broker_id: BrokerRegistration(b.broker_id, b.epoch, uuid.UUID(int=b.broker_id),
                                            fenced=b.fenced, in_controlled_shutdown=False)
            for b in self.brokers.values()
        }))

    def publish(self, registration: PartitionRegistration, skip: int | None = None) -> None:
        self.registration = registration
        for broker in self.brokers.values():
            if broker.up and broker.broker_id != skip:
                self.learn(broker)

    def learn(self, broker: Broker) -> None:
        """ReplicaManager applying the registration (the log's end first, as _sync_log)."""
        if self.registration is None or broker.broker_id not in self.registration.replicas:
            return
        if broker.state is None:
            broker.state = PartitionState("t", 0, broker.broker_id, replica_lag_time_max_ms=LAG_MS,
                                          log_end_offset=broker.log.end_offset,
                                          flushed_offset=broker.log.flushed,
                                          high_watermark=broker.last_hwm)
        self.sync_log(broker)
        self.absorb(broker, broker.state.apply_registration(
            self.registration, self.min_isr, self.image(), self.now_ms))

    def answer(self, error: Errors) -> None:
        assert self.inflight is not None, "no AlterPartition in flight"
        leader_id, proposal = self.inflight
        self.inflight = None
        leader = self.brokers[leader_id]
        assert leader.state is not None and self.registration is not None
        if error is not Errors.NONE:
            self.absorb(leader, leader.state.on_alter_partition_response(
                proposal.proposal_id, error, None, self.now_ms))
            return
        committed = replace(self.registration, isr=proposal.isr,
                            partition_epoch=self.registration.partition_epoch + 1,
                            leader_recovery_state=proposal.leader_recovery_state)
        result = alter_partition_result(
            partition_index=0, error=Errors.NONE, leader_id=leader_id,
            leader_epoch=committed.leader_epoch, isr=committed.isr,
            leader_recovery_state=int(committed.leader_recovery_state),
            partition_epoch=committed.partition_epoch)
        self.absorb(leader, leader.state.on_alter_partition_response(
            proposal.proposal_id, Errors.NONE, result, self.now_ms))
        self.publish(committed)

    # ---- the runtime's side ----

    def sync_log(self, broker: Broker, *, flush_first: bool = False) -> None:
        assert broker.state is not None
        self.absorb(broker, broker.state.update_local_log(
            broker.log.end_offset, broker.log.flushed, self.now_ms, flush_first=flush_first))

    def absorb(self, broker: Broker, ready: PartitionReady) -> None:
        """replica_manager.apply_ready's order: epoch entry, flush, journal, acks, send."""
        if ready.assign_leader_epoch is not None:
            entry = ready.assign_leader_epoch
            broker.log.cache.assign(entry.epoch, entry.start_offset)
        if ready.flush_wanted:
            broker.log.flushed = broker.log.end_offset
        self.trace += [f"{broker.broker_id}: {describe_event(e)}" for e in ready.events]
        for ack_id in ready.completed_acks:
            self.trace.append(f"{broker.broker_id}: ack {ack_id} done "
                              f"(offset {self.acks.pop(ack_id)})")
        for ack_id, error in ready.failed_acks:
            self.acks.pop(ack_id, None)
            self.trace.append(f"{broker.broker_id}: ack {ack_id} failed {error.name}")
        if ready.alter_partition is not None:
            self.inflight = (broker.broker_id, ready.alter_partition)
        assert broker.state is not None
        broker.last_hwm = broker.state.high_watermark
        if ready.flush_wanted:
            self.sync_log(broker)

    def produce(self, acks: int, count: int) -> None:
        leader = self.leader()
        state = leader.state
        assert state is not None
        error = state.check_produce(acks)
        if error is not Errors.NONE:
            self.trace.append(f"{leader.broker_id}: produce refused {error.name}")
            return
        base = leader.log.end_offset
        for _ in range(count):
            leader.log.append(state.leader_epoch)
        self.sync_log(leader, flush_first=acks == ACKS_ALL)
        if acks == ACKS_ALL:
            ack_id, self.next_ack = self.next_ack, self.next_ack + 1
            self.acks[ack_id] = leader.log.end_offset - 1
            self.trace.append(f"{leader.broker_id}: ack {ack_id} waits (offsets {base}-"
                              f"{leader.log.end_offset - 1})")
            self.absorb(leader, state.await_high_watermark(
                ack_id, base, leader.log.end_offset - 1, self.now_ms))

    def fetch(self, follower: Broker, max_records: int | None) -> None:
        state = follower.state
        assert state is not None, f"broker {follower.broker_id} hosts nothing"
        leader = self.brokers[state.leader_id]
        assert leader.state is not None and leader.up, f"leader {state.leader_id} is down"
        error = leader.state.check_fetch(follower.broker_id, state.leader_epoch)
        if error is not Errors.NONE:
            self.trace.append(f"{follower.broker_id}: fetch refused {error.name}")
            return
        if state.truncation_pending:
            before = follower.log.end_offset
            truncate_against(follower.log, leader.log, state.high_watermark)
            self.absorb(follower, state.on_truncated(
                before, follower.log.end_offset, follower.log.flushed, "leader epoch",
                self.now_ms))
        self.absorb(leader, leader.state.on_follower_fetch(
            follower.broker_id, follower.log.end_offset, follower.epoch, self.now_ms))
        end = leader.log.end_offset
        if max_records is not None:
            end = min(end, follower.log.end_offset + max_records)
        for offset in range(follower.log.end_offset, end):
            follower.log.append(leader.log.entries[offset])
        follower.log.flushed = follower.log.end_offset  # a follower fsyncs before it fetches
        self.absorb(follower, state.on_fetch_response(
            leader.state.high_watermark, follower.log.end_offset, follower.log.flushed,
            self.now_ms))

    def leader(self) -> Broker:
        assert self.registration is not None
        return self.brokers[self.registration.leader]

    # ---- commands ----

    def run(self, command: str) -> str:
        words = command.split()
        verb, rest = words[0], words[1:]
        kv = dict(w.split("=", 1) for w in rest if "=" in w)
        args = [w for w in rest if "=" not in w]
        self.trace = []
        if verb == "partition":
            epoch = self.registration.leader_epoch + 1 if self.registration else 1
            partition_epoch = self.registration.partition_epoch + 1 if self.registration else 1
            self.min_isr = int(kv.get("min_isr", str(self.min_isr)))
            self.inflight = None  # a new leader epoch: the old leader's proposal is moot
            self.publish(PartitionRegistration(
                replicas=BROKERS, isr=tuple(int(b) for b in kv["isr"].split(",")),
                leader=int(kv.get("leader", "1")), leader_epoch=int(kv.get("epoch", str(epoch))),
                partition_epoch=partition_epoch,
                leader_recovery_state=(LeaderRecoveryState.RECOVERING if "recovering" in args
                                       else LeaderRecoveryState.RECOVERED)))
        elif verb == "min_isr":
            self.min_isr = int(args[0])
            for broker in self.up_brokers():
                self.absorb(broker, broker.state.update_metadata(  # type: ignore[union-attr]
                    self.min_isr, self.image(), self.now_ms))
        elif verb == "produce":
            acks = ACKS_ALL if kv.get("acks", "all") == "all" else int(kv["acks"])
            self.produce(acks, int(kv.get("n", "1")))
        elif verb == "flush":
            broker = self.brokers[int(args[0])]
            broker.log.flushed = broker.log.end_offset
            self.sync_log(broker)
        elif verb == "fetch":
            self.fetch(self.brokers[int(args[0])], int(kv["max"]) if "max" in kv else None)
        elif verb == "tick":
            self.now_ms += int(kv["ms"])
            for broker in self.up_brokers():
                self.absorb(broker, broker.state.maybe_shrink_isr(self.now_ms))  # type: ignore[union-attr]
        elif verb == "commit":
            self.answer(Errors.NONE)
        elif verb == "refuse":
            self.answer(Errors[args[0]])
        elif verb in ("fence", "unfence"):
            broker = self.brokers[int(args[0])]
            broker.fenced = verb == "fence"
            if not broker.fenced:
                broker.epoch += 1  # a new registration
            for other in self.up_brokers():
                self.absorb(other, other.state.update_metadata(  # type: ignore[union-attr]
                    self.min_isr, self.image(), self.now_ms))
        elif verb == "down":
            broker = self.brokers[int(args[0])]
            broker.up, broker.state = False, None
        elif verb == "up":
            broker = self.brokers[int(args[0])]
            broker.up = True
            self.learn(broker)
        else:
            raise AssertionError(f"unknown command {verb!r}")
        return "\n".join(self.trace + self.describe())

    def up_brokers(self) -> list[Broker]:
        return [b for b in self.brokers.values() if b.up and b.state is not None]

    def describe(self) -> list[str]:
        out = []
        for broker in self.brokers.values():
            log = f"log={describe_log(broker.log)} flushed={broker.log.flushed}"
            state = broker.state
            if not broker.up or state is None:
                out.append(f"broker {broker.broker_id}: {'down' if not broker.up else 'none'} {log}")
                continue
            line = (f"broker {broker.broker_id}: {state.role.value} epoch={state.leader_epoch} "
                    f"hwm={state.high_watermark} isr={_ids(state.committed_isr)} {log}")
            if state.is_recovering:
                line += " RECOVERING"
            if state.inflight is not None:
                line += f" inflight={state.inflight.kind.value}:{_ids(state.inflight.isr)}"
            out.append(line)
        return out


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids) or "-"


def describe_log(log: ReplicaLog) -> str:
    """Runs of offsets by leader epoch, e.g. `[0-2@1 3-4@2]`; `[-]` when empty."""
    runs: list[list[int]] = []  # [first, last, epoch]
    for offset, epoch in enumerate(log.entries):
        if runs and runs[-1][2] == epoch:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset, epoch])
    return "[" + (" ".join(f"{a}-{b}@{e}" for a, b, e in runs) or "-") + "]"


# How a transcript shows each journal event after its class name (its fields by name; tuples
# as `1,2,3`); an event not named here shows as its class name alone.
_EVENT_FORMATS: dict[type, str] = {
    events.HwmAdvanced: "{old}->{new} isr={isr} min_isr={min_isr}",
    events.IsrProposed: "{kind} isr={proposed_isr} broker_epochs={broker_epochs}",
    events.IsrResult: "{outcome} {error} isr={isr}",
    events.RoleChanged: "{role} leader={leader_id} epoch={leader_epoch}",
    events.RecoveryStateChanged: "{old_state}->{new_state} ({reason})",
    events.Truncated: "{from_offset}->{to_offset} hwm={high_watermark}",
    events.ProduceAcked: "{base_offset}-{last_offset} hwm={high_watermark}",
}


def describe_event(event: events.JournalEvent) -> str:
    values = {
        f.name: _ids(value) if isinstance(value, tuple) else value
        for f in fields(event)
        for value in (getattr(event, f.name),)
    }
    if isinstance(event, events.RecoveryStateChanged):
        values["old_state"] = LeaderRecoveryState(event.old_state).name
        values["new_state"] = LeaderRecoveryState(event.new_state).name
    name, shown = type(event).__name__, _EVENT_FORMATS.get(type(event))
    return name if shown is None else f"{name} {shown.format(**values)}"


def _transcripts() -> list[Path]:
    return sorted(SCENARIO_DIR.glob("*.txt"))


@pytest.mark.parametrize("path", _transcripts(), ids=lambda p: p.stem)
def test_broker_transcript(path: Path) -> None:
    assert run_transcript(path, BrokerCluster().run) > 0


def test_there_are_broker_transcripts() -> None:
    stems = {p.stem for p in _transcripts()}
    assert {"hwm", "isr_shrink_expand", "leader_recovery", "truncation"} <= stems
