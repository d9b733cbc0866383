"""The simulator with brokers' partition cores under the active controller: broker rules.

BrokerSim keeps ControllerSim (raft cores, the active controller's production code, the
controller rules on the committed metadata) and adds, for each broker of controller_sim.BROKERS,
a broker.core.partition_state.PartitionState for the partition it hosts, fed as
broker/runtime/replica_manager.py feeds it: the committed image (each broker learns it late, at
its own seeded moment), `update_local_log` after appends and flushes, produce on the leader
(acks=1 and acks=all), follower fetches (truncation with the leader epoch cache first,
`on_follower_fetch` on the leader, `on_fetch_response` on the follower) and ISR shrink ticks.
The ISR changes come from these cores: their AlterPartition proposals go to the controller
(replication_control.alter_partition) and the answer goes back once its records commit.

A broker restart (the controller registering a known broker) builds a new core from the log;
the log survives whole (the OS kept the page cache): losing an unflushed tail is not simulated.

Checked from the cores' outputs after every input (INVARIANTS numbers), with the audit's own
checkers where the rule is one the audit judges (analytics.rules.replication.pure: 20-23):
- 17: an ISR expansion names the new member with the broker epoch the leader's image has for it
  (our followers always send theirs), and the member is unfenced there;
- 20: a leader's HWM never goes back and never passes its log end, nor its flushed offset
  while an acks=all append is not flushed; an HwmAdvanced event comes
  only with the committed ISR >= min ISR, and (for the current leader) every maximal-ISR member's
  log holds the leader's entries below the new HWM; a completed acks=all produce is below the
  HWM and (current leader) on at least min ISR replicas' logs;
- 21: a RECOVERING partition refuses produce and fetch, its HWM does not move, and RECOVERED is
  proposed only with the log flushed to its end;
- 22: a follower that fetches holds a prefix of its leader's log;
- 23: a leader of the committed image, once not RECOVERING, holds every acked acks=all entry
  acked since the last unclean election (RECOVERING, rule 13) of the partition, except entries
  acked by a leader that had not yet learned a raised min.insync.replicas (Kafka's window too;
  found by this simulator, counted in `stale_min_isr_acks`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import repeat

from analytics.rules.replication import pure as dr
from broker.core.high_watermark import hwm_may_advance
from broker.core.journal_events import HwmAdvanced, RecoveryStateChanged, RoleChanged, event_to_dict
from broker.core.partition_state import (
    CONSUMER_REPLICA_ID,
    IsrProposal,
    PartitionReady,
    PartitionState,
    ProposalKind,
    Role,
)
from broker.runtime.alter_partition_manager import _partition_data
from controller.core import replication_control as rc
from controller.core.controller_result import ControllerResult
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.constants import ACKS_ALL
from kafkawire.errors import Errors
from metadata.metadata_image import MetadataImage
from metadata.partition_registration import LeaderRecoveryState, PartitionRegistration
from tests.sim.cluster_sim import SimNode, SimOptions
from tests.sim.controller_sim import BROKERS, TOPIC, ControllerSim
from tests.sim.replica_log import ReplicaLog, truncate_against

LAG_MS = 400  # replica.lag.time.max.ms: short, so ISR shrinks happen within a run
BROKER_INTERVAL_MS = 15  # one data-plane step every ~15 ms
MAX_FETCH = 4  # entries per fetch


@dataclass
class SimBroker:
    broker_id: int
    log: ReplicaLog = field(default_factory=ReplicaLog)
    state: PartitionState | None = None
    incarnation: int = 0
    image: MetadataImage = field(default_factory=MetadataImage)  # the image it applied
    registration: PartitionRegistration | None = None  # the registration it applied


@dataclass(frozen=True)
class _Proposal:
    broker_id: int
    incarnation: int
    proposal: IsrProposal
    request: lifecycle.AlterPartitionRequest


class BrokerSim(ControllerSim):
    def __init__(self, seed: int, options: SimOptions | None = None) -> None:
        super().__init__(seed, options)
        self.data = random.Random(seed * 104_729 + 3)  # the data plane's own stream
        self.brokers = {b: SimBroker(b) for b in BROKERS}
        self.alter_queue: list[_Proposal] = []
        self._answering: _Proposal | None = None
        self._response = lifecycle.alter_partition_response()
        # (offset, epoch) of a committed-on-replay answer -> (proposal, response)
        self.awaiting_commit: dict[tuple[int, int], tuple[_Proposal, lifecycle.AlterPartitionResponse]] = {}
        self.acks: dict[int, tuple[int, int, int]] = {}  # ack id -> (broker, incarnation, last)
        self.next_ack = 1
        # Rule 23: offset -> leader epoch of each acked acks=all entry since the last unclean
        # election, whose leader epoch is `unclean_epoch`.
        self.acked_entries: dict[int, int] = {}
        self.unclean_epoch = -1
        self.broker_hwm: dict[tuple[int, int, int], int] = {}  # (broker, inc, epoch) -> HWM
        # broker -> end of its last acks=all append: under the HWM only once flushed (rule 20)
        self.flush_first: dict[int, int] = {}
        # What the run did, for the test to assert it was not vacuous.
        self.produced = 0
        self.acked = 0
        self.hwm_advances = 0
        self.isr_commits = 0
        self.fetches = 0
        self.stale_min_isr_acks = 0  # acks rule 23 cannot vouch for (see _check_acked)
        # Each broker's journal as the audit reads it (rule 21's checker runs over it at the end).
        self.journals: dict[int, list[dict[str, object]]] = {b: [] for b in BROKERS}
        self.recovery_judged = 0

    def run(self) -> None:
        self._push(self.data.randrange(1, 200), "broker", self.opt.fault_phase_ms)
        super().run()
        for rows in self.journals.values():
            # Rule 21 with the audit's own checker: no HWM moved, no produce acked, by a broker
            # leading the partition RECOVERING (the checks in _handle see the core's state).
            for row, bad in dr.recovering_serves(rows):
                self.recovery_judged += 1
                if bad:
                    self.fail(dr.recovering_message(row))

    # -- the controller answers the brokers' AlterPartition --------------------------------------
    def _alter_isr(self, image: MetadataImage, broker: int) -> ControllerResult[object]:
        return ControllerResult((), None)  # ISR changes come from the brokers' cores here

    def _compute(self, image: MetadataImage) -> ControllerResult[object]:
        if not self.alter_queue:
            return super()._compute(image)
        self._answering = self.alter_queue.pop(0)
        result = rc.alter_partition(image, self._answering.request, self.policy)
        self._response = result.response
        return result  # type: ignore[return-value]

    def _write(self, node: SimNode) -> None:
        operations = self.operations
        super()._write(node)
        answering, self._answering = self._answering, None
        if answering is None:
            return
        if self.operations == operations:  # an error: no records, answered at once
            self._deliver(answering, Errors.NONE, self._response)
            return
        # QuorumController answers once the records committed (rule 2: then they stay).
        self.awaiting_commit[next(reversed(self.appended_records))] = (answering, self._response)

    def _check_leader_hwm(self, node: SimNode) -> None:
        super()._check_leader_hwm(node)
        for key in [k for k in self.awaiting_commit if k[0] < self.replayed]:
            answering, response = self.awaiting_commit.pop(key)
            offset, epoch = key
            if self.committed[offset][0] == epoch:
                self._deliver(answering, Errors.NONE, response)
            else:  # the batch was lost in a failover: the request fails and is retried
                self._deliver(answering, Errors.NOT_CONTROLLER, None)

    def _deliver(
        self, answering: _Proposal, error: Errors, response: lifecycle.AlterPartitionResponse | None
    ) -> None:
        broker = self.brokers[answering.broker_id]
        state = broker.state
        if state is None or broker.incarnation != answering.incarnation:
            return  # the process that asked is gone
        result = None
        if response is not None:
            error = Errors.of(response.error_code)
            if error is Errors.NONE:
                result = response.topics[0].partitions[0]
                if Errors.of(result.error_code) is Errors.NONE:
                    self.isr_commits += 1
        self._handle(broker, state.on_alter_partition_response(
            answering.proposal.proposal_id, error, result, self.now_ms))

    def _replay(self, record: object, offset: int, batch_end: bool) -> None:
        super()._replay(record, offset, batch_end)
        topic = self.image.topics_by_name.get(TOPIC)
        registration = None if topic is None else topic.partitions.get(0)
        if registration is not None and registration.leader_recovery_state is LeaderRecoveryState.RECOVERING:
            # Rule 23: an unclean election may lose acked writes; the audit attributes them.
            self.unclean_epoch = max(self.unclean_epoch, registration.leader_epoch)
            self.acked_entries.clear()

    # -- the brokers ---------------------------------------------------------------------------
    def _register(
        self, image: MetadataImage, broker: int, restart_clean: bool | None
    ) -> ControllerResult[object]:
        if broker in image.brokers:
            self._restart(self.brokers[broker])
        return super()._register(image, broker, restart_clean)

    def _restart(self, broker: SimBroker) -> None:
        """A new process: a new core from the log and the last HWM (its checkpoint)."""
        old = broker.state
        broker.incarnation += 1
        # A new process counts its whole log (storage.runtime.disk_log opens with flushed = end).
        self.flush_first.pop(broker.broker_id, None)
        broker.registration = None
        broker.state = None
        if old is not None:
            broker.state = PartitionState(
                TOPIC, 0, broker.broker_id, replica_lag_time_max_ms=LAG_MS,
                log_end_offset=broker.log.end_offset, flushed_offset=broker.log.flushed,
                high_watermark=old.high_watermark,
            )

    def _on_broker(self, until_ms: int) -> None:
        if self.now_ms >= until_ms:
            return
        broker = self.brokers[self.data.choice(BROKERS)]
        choice = self.data.random()
        if choice < 0.2:
            self._learn_metadata(broker)
        elif choice < 0.45:
            self._produce(self._some(Role.LEADER, broker))
        elif choice < 0.85:
            self._fetch(self._some(Role.FOLLOWER, broker))
        elif choice < 0.93:
            broker.log.flushed = broker.log.end_offset
            self._sync_log(broker)
        elif broker.state is not None:
            self._handle(broker, broker.state.maybe_shrink_isr(self.now_ms))
        if self.now_ms + BROKER_INTERVAL_MS < until_ms:
            self._push(self.now_ms + self.data.randrange(1, 2 * BROKER_INTERVAL_MS), "broker",
                       until_ms)

    def _some(self, role: Role, default: SimBroker) -> SimBroker:
        """A broker whose core has `role` (several may think they lead), else `default`."""
        having = [b for b in self.brokers.values() if b.state is not None and b.state.role is role]
        return self.data.choice(having) if having else default

    def _learn_metadata(self, broker: SimBroker) -> None:
        """ReplicaManager applying a published image: a new registration, else the rest."""
        image = self.image
        broker.image = image
        topic = image.topics_by_name.get(TOPIC)
        if topic is None:
            return
        registration = topic.partitions[0]
        if broker.state is None:
            if broker.broker_id not in registration.replicas:
                return
            broker.state = PartitionState(TOPIC, 0, broker.broker_id, replica_lag_time_max_ms=LAG_MS)
        state = broker.state
        min_isr = image.effective_min_isr(topic.topic_id, 0)
        if registration != broker.registration:
            broker.registration = registration
            self._sync_log(broker)
            self._handle(broker, state.apply_registration(registration, min_isr, image, self.now_ms))
        else:
            self._handle(broker, state.update_metadata(min_isr, image, self.now_ms))

    def _sync_log(self, broker: SimBroker, *, flush_first: bool = False) -> None:
        if broker.state is not None:
            self._handle(broker, broker.state.update_local_log(
                broker.log.end_offset, broker.log.flushed, self.now_ms, flush_first=flush_first))

    def _produce(self, broker: SimBroker) -> None:
        state = broker.state
        if state is None or state.role is not Role.LEADER:
            return
        acks = self.data.choice((1, ACKS_ALL))
        error = state.check_produce(acks, state.leader_epoch)
        if state.is_recovering and error is Errors.NONE:
            self.fail(f"rule 21: broker {broker.broker_id} RECOVERING took a produce")
        if error is not Errors.NONE:
            return
        base = broker.log.end_offset
        for _ in range(self.data.randint(1, 3)):
            broker.log.append(state.leader_epoch)
        self.produced += 1
        # acks=all is fsync'd before it counts (the runtime's flush_due); the fsync comes later,
        # at a flush step of its own, so followers may fetch the records first.
        self._sync_log(broker, flush_first=acks == ACKS_ALL)
        if acks == ACKS_ALL:
            self.flush_first[broker.broker_id] = broker.log.end_offset
            ack_id = self.next_ack
            self.next_ack += 1
            last = broker.log.end_offset - 1
            self.acks[ack_id] = (broker.broker_id, broker.incarnation, last)
            self._handle(broker, state.await_high_watermark(ack_id, base, last, self.now_ms))

    def _fetch(self, follower: SimBroker) -> None:
        """ReplicaFetcher: truncate first if asked (rule 22), then fetch from the leader."""
        state = follower.state
        # Its epoch came in its registration response, at the commit: others learn it later.
        epoch = self.image.broker_epoch(follower.broker_id)
        if state is None or state.role is not Role.FOLLOWER or epoch is None:
            return
        leader = self.brokers.get(state.leader_id)
        if leader is None or leader.state is None:
            return
        leader_state = leader.state
        error = leader_state.check_fetch(follower.broker_id, state.leader_epoch)
        if leader_state.is_recovering and error is Errors.NONE:
            self.fail(f"rule 21: broker {leader.broker_id} RECOVERING served a fetch")
        if error is not Errors.NONE:
            return
        if state.truncation_pending:
            before = follower.log.end_offset
            truncate_against(follower.log, leader.log, state.high_watermark)
            self.flush_first[follower.broker_id] = min(
                self.flush_first.get(follower.broker_id, 0), follower.log.end_offset)
            self._handle(follower, state.on_truncated(
                before, follower.log.end_offset, follower.log.flushed, "sim", self.now_ms))
        end = follower.log.end_offset  # the simulator's records have no keys
        lacked = dr.entries_the_leader_lacks(
            dict(enumerate(zip(leader.log.entries[:end], repeat(None)))),
            zip(range(end), follower.log.entries, repeat(None), repeat(None)),
        )
        if lacked:
            self.fail(f"rule 22: follower {follower.broker_id} fetches from leader "
                      f"{leader.broker_id} with entries the leader lacks: "
                      f"{_describe(follower.log)} vs {_describe(leader.log)}")
        self.fetches += 1
        self._handle(leader, leader_state.on_follower_fetch(
            follower.broker_id, follower.log.end_offset, epoch, self.now_ms))
        end = min(leader.log.end_offset, follower.log.end_offset + self.data.randint(0, MAX_FETCH))
        for offset in range(follower.log.end_offset, end):
            follower.log.append(leader.log.entries[offset])
        self._handle(follower, state.on_fetch_response(
            leader_state.high_watermark, follower.log.end_offset, follower.log.flushed,
            self.now_ms))

    # -- acting on a core's answer, and the broker rules -----------------------------------------
    def _handle(self, broker: SimBroker, ready: PartitionReady) -> None:
        """The runtime's order (replica_manager.apply_ready), checking each output."""
        state = broker.state
        assert state is not None
        log = broker.log
        if ready.assign_leader_epoch is not None:
            entry = ready.assign_leader_epoch
            log.cache.assign(entry.epoch, entry.start_offset)
        current = self._is_current_leader(state)
        self.journals[broker.broker_id].extend(event_to_dict(e) for e in ready.events)
        for event in ready.events:
            if isinstance(event, HwmAdvanced):
                self.hwm_advances += 1
                self._check_hwm_advanced(broker, event, current)
        for ack_id in ready.completed_acks:
            self._check_acked(broker, ack_id, current)
        if current and not state.is_recovering and state.leader_epoch >= self.unclean_epoch and any(
            isinstance(e, (RoleChanged, RecoveryStateChanged))
            for e in ready.events
        ):
            self._check_acked_kept(broker)
        for ack_id, _error in ready.failed_acks:
            self.acks.pop(ack_id, None)
        if ready.alter_partition is not None:
            self._propose(broker, ready.alter_partition)
        self._check_leader(broker)
        if ready.flush_wanted:
            log.flushed = log.end_offset  # recovery waits for the flush (rule 21)
            self._sync_log(broker)

    def _is_current_leader(self, state: PartitionState) -> bool:
        """The committed image names this core's leadership: its followers fetch from it."""
        topic = self.image.topics_by_name.get(TOPIC)
        if topic is None or state.role is not Role.LEADER:
            return False
        registration = topic.partitions[0]
        return (registration.leader, registration.leader_epoch) == (
            state.local_broker_id, state.leader_epoch)

    def _check_hwm_advanced(self, broker: SimBroker, event: HwmAdvanced, current: bool) -> None:
        state = broker.state
        assert state is not None
        if state.is_recovering:
            self.fail(f"rule 21: broker {broker.broker_id} advanced the HWM while RECOVERING")
        row = event_to_dict(event)  # as journaled, and as the audit judges it
        if dr.hwm_violation(row["event"], event.old, event.new, event.isr_size, event.min_isr):
            self.fail(dr.hwm_message(row))
        if event.new <= event.old:
            self.fail(f"rule 20: broker {broker.broker_id} {event}")
        unflushed = self.flush_first.get(broker.broker_id, 0)
        if broker.log.flushed < unflushed and event.new > broker.log.flushed:
            self.fail(f"rule 20: HWM {event.new} on leader {broker.broker_id} past its flushed "
                      f"offset {broker.log.flushed} under an acks=all append to {unflushed}")
        if not current:
            return  # a deposed leader's view of its followers is stale: Kafka's too
        for member in state.committed_isr:  # within the maximal ISR the HWM is computed on
            if not self.brokers[member].log.holds(broker.log, event.new):
                self.fail(f"rule 20: HWM {event.new} on leader {broker.broker_id} but ISR member "
                          f"{member} has {_describe(self.brokers[member].log)} of "
                          f"{_describe(broker.log)}")

    def _check_acked(self, broker: SimBroker, ack_id: int, current: bool) -> None:
        state = broker.state
        assert state is not None
        _broker, _inc, last = self.acks.pop(ack_id)
        self.acked += 1
        if last >= state.high_watermark:
            self.fail(f"rule 20: ack of offset {last} at HWM {state.high_watermark}")
        if state.leader_epoch < self.unclean_epoch:
            return
        topic = self.image.topics_by_name[TOPIC]
        if state.effective_min_isr < self.image.effective_min_isr(topic.topic_id, 0):
            # A raised min.insync.replicas the leader has not learned yet: it advanced the HWM
            # under the old one while the controller moved the leavers to the ELR under the new
            # one, so an ELR election may lack this entry. Kafka has the same window; counted.
            self.stale_min_isr_acks += 1
            return
        self.acked_entries[last] = broker.log.entries[last]
        if not current:
            return
        holders = [b for b in self.brokers.values() if b.log.holds(broker.log, last + 1)]
        # An acked acks=all write is on enough replicas to have moved the HWM (rule 20).
        if not hwm_may_advance(len(holders), min(state.effective_min_isr, len(state.replicas))):
            self.fail(f"rule 20: acked offset {last} on {[b.broker_id for b in holders]} only, "
                      f"min ISR {state.effective_min_isr}")

    def _check_acked_kept(self, broker: SimBroker) -> None:
        entries = broker.log.entries
        for offset, epoch in self.acked_entries.items():
            held = int(offset < len(entries) and entries[offset] == epoch)
            # No RECOVERING since it was acked: acked_entries is cleared at an unclean election.
            if dr.classify_acked(held, recovered=False) == dr.LOST:
                self.fail(f"rule 23: leader {broker.broker_id} lacks acked offset {offset} of "
                          f"epoch {epoch} with no unclean election: {_describe(broker.log)}")

    def _check_leader(self, broker: SimBroker) -> None:
        state = broker.state
        assert state is not None
        if state.role is Role.FOLLOWER and state.high_watermark > broker.log.end_offset:
            self.fail(f"rule 20: follower {broker.broker_id} HWM past its log end")
        if state.role is not Role.LEADER:
            return
        hwm = state.high_watermark
        if hwm > broker.log.end_offset:
            self.fail(f"rule 20: leader {broker.broker_id} HWM {hwm} past its log end")
        key = (broker.broker_id, broker.incarnation, state.leader_epoch)
        if hwm < self.broker_hwm.get(key, 0):
            self.fail(f"rule 20: leader {broker.broker_id} HWM went back to {hwm}")
        self.broker_hwm[key] = hwm
        if state.is_recovering and state.check_fetch(CONSUMER_REPLICA_ID) is Errors.NONE:
            self.fail(f"rule 21: RECOVERING leader {broker.broker_id} serves consumers")

    def _propose(self, broker: SimBroker, proposal: IsrProposal) -> None:
        """AlterPartitionManager: checked (rules 17, 21), then queued for the controller."""
        state = broker.state
        assert state is not None
        view = broker.image
        if proposal.kind is ProposalKind.EXPAND:
            for member in proposal.new_isr_with_epochs:
                if member.broker_id in state.committed_isr:
                    continue
                if member.broker_epoch != view.broker_epoch(member.broker_id) or view.is_fenced(
                    member.broker_id
                ):
                    self.fail(f"rule 17: broker {broker.broker_id} proposes {member} with "
                              f"image epoch {view.broker_epoch(member.broker_id)}")
        if proposal.kind is ProposalKind.RECOVERED and broker.log.flushed < broker.log.end_offset:
            self.fail(f"rule 21: RECOVERED proposed by {broker.broker_id} before the flush")
        topic = view.topics_by_name.get(TOPIC)
        broker_epoch = view.broker_epoch(broker.broker_id)
        if topic is None or broker_epoch is None:
            return
        request = lifecycle.alter_partition_request(
            broker.broker_id, broker_epoch, [(topic.topic_id, [_partition_data(0, proposal)])]
        )
        self.alter_queue.append(_Proposal(broker.broker_id, broker.incarnation, proposal, request))


def _describe(log: ReplicaLog) -> str:
    """A log in a failure message: its end and where each leader epoch starts."""
    starts = ", ".join(f"{e.epoch}@{e.start_offset}" for e in log.cache.entries())
    return f"end {log.end_offset} epochs [{starts}]"
