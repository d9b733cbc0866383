"""Deterministic simulation of the Raft core (TigerBeetle's VOPR, in small).

Real RaftReplica cores over MemoryLogs, a fake clock (an event queue ordered by time), a fake
network that drops, delays, reorders, duplicates and partitions requests and responses, and a
fake disk (crash = lose what was not flushed; the quorum-state file survives). The runtime's
order is kept: persist -> flush -> handle_flushed -> send, except that a flush may be delayed
(sends go out first) to exercise unflushed loss. INVARIANTS rules 1-3 are checked after every
event, and with membership changes on (AddRaftVoter/RemoveRaftVoter at random, the leader
included, sometimes crashing the leader between the append and the commit of the VotersRecord)
rules 4-6 too; any failure names its seed:
`SIM_SEED=<n> .venv/bin/python -m pytest tests/sim -q`.
"""

from __future__ import annotations

import heapq
import itertools
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from raft.core.control_records import Voter, bootstrap_snapshot, snapshot_data_records
from raft.core.leader_state import LeaderState
from raft.core.memory_log import MemoryLog
from raft.core.messages import (
    AddRaftVoterRequest,
    FetchRequest,
    FetchResponse,
    RemoveRaftVoterRequest,
    VoteRequest,
    VoteResponse,
    add_raft_voter_request,
    answered_partition,
    directory_id,
    error_of,
    remove_raft_voter_request,
    the_partition,
    to_ms,
)
from raft.core.quorum_state import ElectionState
from raft.core.raft_replica import Outbound, RaftConfig, RaftReplica, RaftResult
from raft.core.replica_key import ReplicaKey
from storage.core.offset_and_epoch import SnapshotId

_NEVER = 1 << 62


class SimInvariantError(AssertionError):
    pass


@dataclass(frozen=True, slots=True)
class SimOptions:
    voters: int = 3
    observers: int = 1
    fault_phase_ms: int = 20_000
    settle_limit_ms: int = 30_000
    drop_prob: float = 0.05
    dup_prob: float = 0.03
    max_delay_ms: int = 30
    delayed_flush_prob: float = 0.5
    max_flush_delay_ms: int = 100
    append_interval_ms: int = 150
    fault_interval_ms: int = 1_500
    snapshot_interval_ms: int = 2_500
    max_events: int = 200_000
    membership_interval_ms: int = 0  # 0: off; else AddRaftVoter/RemoveRaftVoter at random
    max_voters: int = 5
    crash_after_voter_change_prob: float = 0.3


@dataclass
class SimNode:
    node_id: int
    directory_id: uuid.UUID
    address: str
    log: MemoryLog
    is_voter: bool
    persisted: ElectionState | None = None
    replica: RaftReplica | None = None
    incarnation: int = 0
    scheduled_tick_ms: int = _NEVER
    flush_pending: bool = False
    parked: list[tuple[int, int, FetchRequest, int]] = field(default_factory=list)
    parked_view: tuple[int, int, int] = (0, 0, 0)
    verified: tuple[int, int] = (-1, 0)  # (log generation, batches checked against committed)
    verified_snapshot: SnapshotId | None = None


class ClusterSim:
    def __init__(self, seed: int, options: SimOptions | None = None) -> None:
        self.seed = seed
        self.opt = options or SimOptions()
        self.rng = random.Random(seed)
        self.now_ms = 0
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        self.events = 0
        self.config = RaftConfig(cluster_id="sim", request_timeout_ms=1000)
        self.drop_prob = self.opt.drop_prob
        self.dup_prob = self.opt.dup_prob
        self.delayed_flush_prob = self.opt.delayed_flush_prob
        self.partitioned: set[frozenset[int]] = set()  # node pairs that cannot talk
        self.leader_of_epoch: dict[int, int] = {}
        self.committed: list[tuple[int, bytes]] = []  # offset -> (epoch, value), rule 2
        self.leader_hwm: dict[tuple[int, int], int] = {}  # (node, epoch) -> last HWM seen
        self.appended = 0
        self.final_offset = -1  # the offset of the append that proved liveness
        self.voter_changes = 0  # VotersRecords appended by AddRaftVoter/RemoveRaftVoter
        self.leader_removals = 0  # of which removed the leader itself (rule 6)
        self.healed = False
        self.nodes: dict[int, SimNode] = {}
        total = self.opt.voters + self.opt.observers
        for node_id in range(1, total + 1):
            directory_id = uuid.UUID(int=self.rng.getrandbits(128))
            self.nodes[node_id] = SimNode(node_id, directory_id, f"n{node_id}:9093", MemoryLog(),
                                          node_id <= self.opt.voters)
        voters = [Voter(n.node_id, n.directory_id, {"CONTROLLER": n.address})
                  for n in self.nodes.values() if n.is_voter]
        snapshot = bootstrap_snapshot(voters)
        for node in self.nodes.values():
            if node.is_voter:  # storage format --initial-controllers; observers have none
                node.log.create_snapshot(SnapshotId(0, 0), snapshot)
        self.by_address = {n.address: n.node_id for n in self.nodes.values()}
        bootstrap = [n.address for n in self.nodes.values() if n.is_voter]
        self.observer_config = RaftConfig(cluster_id="sim", request_timeout_ms=1000,
                                          bootstrap_servers=bootstrap)
        # With membership changes any node may become an observer: each knows every other node
        # as a bootstrap server (controller.quorum.bootstrap.servers).
        self.member_configs = {
            n.node_id: RaftConfig(cluster_id="sim", request_timeout_ms=1000, bootstrap_servers=[
                o.address for o in self.nodes.values() if o is not n])
            for n in self.nodes.values()}
        for node in self.nodes.values():
            self._start(node)

    # -- failure reporting ---------------------------------------------------------------------
    def fail(self, message: str) -> None:
        raise SimInvariantError(
            f"SIM_SEED={self.seed} ({self.opt.voters} voters) at t={self.now_ms}ms after "
            f"{self.events} events: {message}\n"
            f"replay: SIM_SEED={self.seed} .venv/bin/python -m pytest tests/sim -q")

    # -- event queue ---------------------------------------------------------------------------
    def _push(self, at_ms: int, kind: str, *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at_ms, self._seq, kind, args))

    def _delay(self) -> int:
        return 1 + self.rng.randrange(self.opt.max_delay_ms)

    def run_until(self, end_ms: int, stop: Callable[[], bool] | None = None) -> bool:
        while self._queue and self._queue[0][0] <= end_ms:
            if stop is not None and stop():
                return True
            at_ms, _seq, kind, args = heapq.heappop(self._queue)
            self.now_ms = max(self.now_ms, at_ms)
            self.events += 1
            if self.events > self.opt.max_events:
                self.fail("event budget exhausted (a livelock?)")
            getattr(self, "_on_" + kind)(*args)
            self._wake_parked()
        self.now_ms = max(self.now_ms, end_ms)
        return stop() if stop is not None else False

    # -- nodes ---------------------------------------------------------------------------------
    def _start(self, node: SimNode) -> None:
        node.incarnation += 1
        node.scheduled_tick_ms = _NEVER
        node.flush_pending = False
        node.parked = []
        if self.opt.membership_interval_ms:
            config = self.member_configs[node.node_id]
        else:
            config = self.config if node.is_voter else self.observer_config
        node.replica = RaftReplica(
            node.node_id, node.directory_id, node.log, node.persisted, config, self.rng.random,
            self.now_ms, node.address)
        self._after(node)

    def crash(self, node: SimNode) -> None:
        if node.replica is None:
            return
        node.replica = None
        node.log.crash()
        for src, src_inc, req, _deadline in node.parked:
            # The process died: the OS resets its connections, so a parked fetch fails at once.
            self._push(self.now_ms + self._delay(), "reset", src, src_inc, node.node_id, req)
        node.parked = []
        self._check_log(node)

    def _after(self, node: SimNode) -> None:
        """Reschedule the node's timer and check the invariants touching it."""
        replica = node.replica
        if replica is not None:
            deadline = max(replica.next_deadline_ms(), self.now_ms + 1)
            if deadline < node.scheduled_tick_ms:
                node.scheduled_tick_ms = deadline
                self._push(deadline, "tick", node.node_id, node.incarnation, deadline)
        self._check_node(node)

    def _apply(self, node: SimNode, result: RaftResult) -> None:
        """The runtime's order: persist, flush (maybe later), handle_flushed, then send."""
        replica = node.replica
        assert replica is not None
        if result.persist is not None:
            old = node.persisted
            if old is not None and result.persist.epoch < old.epoch:
                self.fail(f"rule 1: node {node.node_id} persisted epoch went back "
                          f"{old.epoch} -> {result.persist.epoch}")
            node.persisted = result.persist
        if result.became_leader:
            epoch = replica.epoch
            other = self.leader_of_epoch.setdefault(epoch, node.node_id)
            if other != node.node_id:
                self.fail(f"rule 1: nodes {other} and {node.node_id} both led epoch {epoch}")
            if node.persisted is None or node.persisted.leader_id != node.node_id or (
                    node.persisted.epoch != epoch):
                self.fail(f"rule 1: node {node.node_id} leads epoch {epoch} before persisting it")
            changes = replica.voter_set_changes()
            # Rule 4, with the one exception: a voter whose removal is still uncommitted in its
            # log may win a joint majority of the old and new sets (then resigns, rule 6).
            removal_pending = len(changes) > 1 and changes[-1][0] >= replica.high_watermark and (
                replica.key in changes[-2][1])
            if not replica.is_voter and not removal_pending:
                self.fail(f"rule 4: node {node.node_id} leads epoch {epoch} but is not a voter "
                          f"of {list(map(str, replica.voters))}")
        if result.flush:
            if self.rng.random() < self.delayed_flush_prob:
                if not node.flush_pending:
                    node.flush_pending = True
                    self._push(self.now_ms + self.rng.randrange(1, self.opt.max_flush_delay_ms),
                               "flush", node.node_id, node.incarnation)
            else:
                self._flush(node)
        for out in result.send:
            self._send_request(node, out)

    def _flush(self, node: SimNode) -> None:
        assert node.replica is not None
        node.log.flush()
        node.flush_pending = False
        self._apply(node, node.replica.handle_flushed(self.now_ms))

    # -- network -------------------------------------------------------------------------------
    def _cut(self, a: int, b: int) -> bool:
        return frozenset((a, b)) in self.partitioned

    def _send_request(self, src: SimNode, out: Outbound) -> None:
        dst = out.dest_node_id
        if dst < 0:
            if out.address is None or out.address not in self.by_address:
                self.fail(f"node {src.node_id} sent to unknown address {out.address}")
            dst = self.by_address[out.address or ""]
        elif out.address is not None and self.by_address.get(out.address) != dst:
            self.fail(f"node {src.node_id} addressed {dst} at {out.address}")
        timeout_at = self.now_ms + self.config.request_timeout_ms
        if self.rng.random() < self.drop_prob or self._cut(src.node_id, dst):
            self._push(timeout_at, "response", src.node_id, src.incarnation, dst, out.request,
                       None)
            return
        copies = 2 if self.rng.random() < self.dup_prob else 1
        for _ in range(copies):
            self._push(self.now_ms + self._delay(), "request", src.node_id, src.incarnation, dst,
                       out.request)

    def _on_request(self, src_id: int, src_inc: int, dst_id: int, request: object) -> None:
        dst = self.nodes[dst_id]
        if self._cut(src_id, dst_id):
            self._push(self.now_ms + self.config.request_timeout_ms, "response", src_id, src_inc,
                       dst_id, request, None)
            return
        if dst.replica is None:  # nothing listens: the connection is refused at once
            self._push(self.now_ms + self._delay(), "reset", src_id, src_inc, dst_id, request)
            return
        result = dst.replica.handle_request(src_id, request, self.now_ms)
        self._apply(dst, result)
        response = result.response
        answer = answered_partition(response)
        if (isinstance(request, VoteRequest) and not the_partition(request).pre_vote
                and isinstance(response, VoteResponse) and answer is not None
                and answer.vote_granted):
            persisted = dst.persisted
            vote = the_partition(request)
            candidate = ReplicaKey(vote.replica_id, directory_id(vote.replica_directory_id))
            if persisted is None or (persisted.epoch, persisted.voted_key) != (
                    vote.replica_epoch, candidate):
                self.fail(f"rule 1: node {dst_id} granted a vote to {candidate} in epoch "
                          f"{vote.replica_epoch} without persisting it ({persisted})")
        if (isinstance(request, FetchRequest) and isinstance(response, FetchResponse)
                and answer is not None and error_of(response) == 0 and not answer.records
                and answer.diverging_epoch.end_offset < 0 and answer.snapshot_id.end_offset < 0
                and the_partition(request).fetch_offset == dst.log.end_offset()
                and to_ms(request.max_wait) > 0):
            # The runtime's long poll: hold the fetch until new data or the max wait.
            deadline = self.now_ms + to_ms(request.max_wait)
            dst.parked.append((src_id, src_inc, request, deadline))
            dst.parked_view = self._view(dst)
            self._push(deadline, "parked", dst_id, dst.incarnation, deadline)
        else:
            self._respond(src_id, src_inc, dst_id, request, response)
        self._after(dst)

    def _respond(self, src_id: int, src_inc: int, dst_id: int, request: object,
                 response: object) -> None:
        if self.rng.random() < self.drop_prob or self._cut(src_id, dst_id):
            self._push(self.now_ms + self.config.request_timeout_ms, "response", src_id, src_inc,
                       dst_id, request, None)
            return
        copies = 2 if self.rng.random() < self.dup_prob else 1
        for _ in range(copies):
            self._push(self.now_ms + self._delay(), "response", src_id, src_inc, dst_id, request,
                       response)

    def _view(self, node: SimNode) -> tuple[int, int, int]:
        replica = node.replica
        assert replica is not None
        return node.log.end_offset(), replica.high_watermark, replica.epoch

    def _release_parked(self, node: SimNode, only_expired: bool) -> None:
        replica = node.replica
        assert replica is not None
        keep = []
        for src_id, src_inc, request, deadline in node.parked:
            if only_expired and deadline > self.now_ms:
                keep.append((src_id, src_inc, request, deadline))
                continue
            result = replica.handle_request(src_id, request, self.now_ms)  # idempotent re-handle
            self._apply(node, result)
            self._respond(src_id, src_inc, node.node_id, request, result.response)
        node.parked = keep
        self._after(node)

    def _wake_parked(self) -> None:
        for node in self.nodes.values():
            if node.parked and node.replica is not None and self._view(node) != node.parked_view:
                self._release_parked(node, only_expired=False)

    def _on_parked(self, node_id: int, incarnation: int, _deadline: int) -> None:
        node = self.nodes[node_id]
        if node.replica is not None and node.incarnation == incarnation:
            self._release_parked(node, only_expired=True)

    def _on_response(self, src_id: int, src_inc: int, dst_id: int, request: object,
                     response: object | None) -> None:
        node = self.nodes[src_id]
        if node.replica is None or node.incarnation != src_inc:
            return  # the connection died with the process
        self._apply(node, node.replica.handle_response(dst_id, request, response, self.now_ms))
        self._after(node)

    def _on_reset(self, src_id: int, src_inc: int, dst_id: int, request: object) -> None:
        """The runtime saw the connection to dst reset or refused (NETWORK_EXCEPTION): it tells
        the core, then fails the request."""
        node = self.nodes[src_id]
        if node.replica is None or node.incarnation != src_inc:
            return
        self._apply(node, node.replica.handle_connection_lost(dst_id, self.now_ms))
        if node.replica is not None:
            self._apply(node, node.replica.handle_response(dst_id, request, None, self.now_ms))
        self._after(node)

    def _on_tick(self, node_id: int, incarnation: int, at_ms: int) -> None:
        node = self.nodes[node_id]
        if node.replica is None or node.incarnation != incarnation or (
                node.scheduled_tick_ms != at_ms):
            return
        node.scheduled_tick_ms = _NEVER
        self._apply(node, node.replica.tick(self.now_ms))
        self._after(node)

    def _on_flush(self, node_id: int, incarnation: int) -> None:
        node = self.nodes[node_id]
        if node.replica is None or node.incarnation != incarnation or not node.flush_pending:
            return
        self._flush(node)
        self._after(node)

    # -- workload and faults -------------------------------------------------------------------
    def leaders(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.replica is not None
                and n.replica.role == "Leader"]

    def _on_append(self) -> None:
        for node in self.leaders():
            assert node.replica is not None
            self.appended += 1
            value = f"s{self.seed}-v{self.appended}".encode()
            result, _offset = node.replica.append([value], self.now_ms)
            self._apply(node, result)
            self._after(node)

    def _again(self, kind: str, interval_ms: int, until_ms: int) -> None:
        """The fault phase's next `kind` event, a seeded 1 to 2 x interval_ms away, unless the
        phase ends before interval_ms has passed."""
        if self.now_ms + interval_ms < until_ms:
            self._push(self.now_ms + self.rng.randrange(1, 2 * interval_ms), kind, until_ms)

    def _crash_for_a_while(self, node: SimNode, max_down_ms: int) -> None:
        """Crash `node` and restart it a seeded 50 ms to max_down_ms later."""
        self.crash(node)
        self._push(self.now_ms + self.rng.randrange(50, max_down_ms), "restart", node.node_id)

    def _on_workload(self, until_ms: int) -> None:
        if self.now_ms >= until_ms:
            return  # the fault phase is over
        self._on_append()
        self._again("workload", self.opt.append_interval_ms, until_ms)

    def _on_fault(self, until_ms: int) -> None:
        if self.now_ms >= until_ms:
            return
        choice = self.rng.random()
        ids = list(self.nodes)
        if choice < 0.35:
            self._crash_for_a_while(self.nodes[self.rng.choice(ids)], 3000)
        elif choice < 0.65:
            victim = self.rng.choice(ids)  # isolate one node for a while
            pairs = {frozenset((victim, o)) for o in ids if o != victim}
            self.partitioned |= pairs
            self._push(self.now_ms + self.rng.randrange(200, 4000), "heal_pairs", pairs)
        elif choice < 0.8:
            leaders = self.leaders()
            if leaders:  # crash the leader, the hardest case for rule 2
                self._crash_for_a_while(leaders[0], 2000)
        else:
            a, b = self.rng.sample(ids, 2)
            pair = {frozenset((a, b))}
            self.partitioned |= pair
            self._push(self.now_ms + self.rng.randrange(200, 4000), "heal_pairs", pair)
        self._again("fault", self.opt.fault_interval_ms, until_ms)

    def _on_member(self, until_ms: int) -> None:
        """An operator's AddRaftVoter/RemoveRaftVoter to the current leader (rules 4-6)."""
        if self.now_ms >= until_ms:
            return
        leaders = self.leaders()
        if leaders:
            leader = leaders[0]
            replica = leader.replica
            assert replica is not None
            voters = replica.voters
            outside = [n for n in self.nodes.values()
                       if ReplicaKey(n.node_id, n.directory_id) not in voters]
            request: AddRaftVoterRequest | RemoveRaftVoterRequest
            if outside and len(voters) < self.opt.max_voters and self.rng.random() < 0.5:
                node = self.rng.choice(outside)
                request = add_raft_voter_request(node.node_id, node.directory_id,
                                                 {"CONTROLLER": node.address}, cluster_id="sim")
            else:  # any voter, the leader itself and the last voter included
                keys = voters.keys()
                if len(keys) == 2:
                    # Known limit (report): a 2-voter set removing its leader can deadlock if the
                    # other voter misses the record, so the sim removes only the follower there.
                    keys = [k for k in keys if k.id != leader.node_id]
                target = self.rng.choice(keys)
                request = remove_raft_voter_request(target.id, target.directory_id,
                                                    cluster_id="sim")
            result = replica.handle_request(-1, request, self.now_ms)
            self._apply(leader, result)
            self._after(leader)
            if result.voters_record_offset >= 0:
                self.voter_changes += 1
                if isinstance(request, RemoveRaftVoterRequest) and request.voter_id == (
                        leader.node_id):
                    self.leader_removals += 1
                if leader.replica is not None and (
                        self.rng.random() < self.opt.crash_after_voter_change_prob):
                    # Between the append and the commit of the VotersRecord (rule 5).
                    self._crash_for_a_while(leader, 2000)
        self._again("member", self.opt.membership_interval_ms, until_ms)

    def _on_heal_pairs(self, pairs: set[frozenset[int]]) -> None:
        self.partitioned -= pairs

    def _on_restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.replica is None and not self.healed:
            self._start(node)

    def _on_snapshot(self, until_ms: int) -> None:
        if self.now_ms >= until_ms:
            return
        up = [n for n in self.nodes.values() if n.replica is not None]
        node = self.rng.choice(up) if up else None
        if node is not None and node.replica is not None:
            hwm = node.replica.high_watermark
            end = 0
            for index in range(node.log.batch_count()):
                _base, last, _epoch, _values = node.log.batch_at(index)
                if last + 1 <= hwm:
                    end = last + 1
            if end > node.log.start_offset():
                data = [value for _epoch, value in self.committed[:end]]
                node.replica.create_snapshot(end, data, self.now_ms)
                if self.rng.random() < 0.7:
                    node.log.delete_before_snapshot()
                self._after(node)
        self._again("snapshot", self.opt.snapshot_interval_ms, until_ms)

    def heal(self) -> None:
        self.healed = True
        self.partitioned.clear()
        self.drop_prob = 0.0
        self.dup_prob = 0.0
        self.delayed_flush_prob = 0.0
        for node in self.nodes.values():
            if node.replica is None:
                self._start(node)
            elif node.flush_pending:
                self._flush(node)
                self._after(node)

    # -- invariants ----------------------------------------------------------------------------
    def _check_node(self, node: SimNode) -> None:
        replica = node.replica
        if replica is None:
            return
        # A leader resigns in the very step its own removal commits (rule 6): check it too.
        leads = replica.role == "Leader" or (
            replica.role == "Resigned" and not replica.is_voter
            and replica.high_watermark > len(self.committed))
        if replica.high_watermark > len(self.committed) and not leads:
            self.fail(f"rule 3: follower {node.node_id} HWM {replica.high_watermark} is past "
                      f"every leader's HWM {len(self.committed)}")
        if leads:
            self._check_leader_hwm(node)
        if self.opt.membership_interval_ms:
            self._check_voter_changes(node)
        self._check_log(node)

    def _check_voter_changes(self, node: SimNode) -> None:
        """Rules 5-6: one voter at a time, at most one uncommitted change on a leader, and a
        leader whose removal committed does not stay leader."""
        replica = node.replica
        assert replica is not None
        changes = replica.voter_set_changes()
        for (_o1, before), (offset, after) in itertools.pairwise(changes):
            if before and len(set(before) ^ set(after)) > 1:  # empty: an observer learning it
                self.fail(f"rule 5: node {node.node_id} voter set at {offset} changes more than "
                          f"one voter: {list(map(str, before))} -> {list(map(str, after))}")
        if replica.role != "Leader":
            return
        hwm = replica.high_watermark
        state = replica.state
        assert isinstance(state, LeaderState)
        # Changes this leader appended (a new leader may not know older ones are committed).
        pending = [offset for offset, _set in changes[1:]
                   if offset >= hwm and offset > state.epoch_start_offset]
        if len(pending) > 1:
            self.fail(f"rule 5: leader {node.node_id} has {len(pending)} uncommitted voter "
                      f"changes at {pending} (HWM {hwm})")
        if not replica.is_voter and hwm > changes[-1][0]:
            self.fail(f"rule 6: leader {node.node_id} was removed at {changes[-1][0]}, committed "
                      f"(HWM {hwm}), and still leads")

    def _check_leader_hwm(self, node: SimNode) -> None:
        replica = node.replica
        assert replica is not None
        key = (node.node_id, replica.epoch)
        old = self.leader_hwm.get(key, 0)
        new = replica.high_watermark
        if new < old:
            self.fail(f"rule 3: leader {node.node_id} HWM went back {old} -> {new} in epoch "
                      f"{replica.epoch}")
        self.leader_hwm[key] = new
        if new <= len(self.committed):
            return
        log = node.log
        for offset in range(len(self.committed), new):
            entry = log.entry(offset)
            if entry is None:
                self.fail(f"rule 2: leader {node.node_id} commits offset {offset} it does not hold")
            assert entry is not None
            self.committed.append(entry)
        # Rule 2/3: everything below the HWM is durably on a majority of the voter set.
        holders = 0
        for voter in replica.voters:
            other = self.nodes.get(voter.id)
            if other is None or other.directory_id != voter.directory_id:
                continue
            olog = other.log
            if olog.start_offset() >= new or (olog.flushed_offset() >= new
                                              and olog.entry(new - 1) == self.committed[new - 1]):
                holders += 1
        if holders < replica.voters.majority_size:
            self.fail(f"rule 3: leader {node.node_id} moved the HWM to {new} in epoch "
                      f"{replica.epoch} but only {holders} voters hold it durably")

    def _check_log(self, node: SimNode) -> None:
        """Rule 2: an entry with a committed entry's epoch at its offset is byte-identical, and
        below the replica's own HWM every entry is the committed one. (A replica may still hold
        stale entries of an older epoch above its HWM until it truncates.)"""
        log = node.log
        generation, count = node.verified
        if generation != log.generation:
            count = 0
        committed = self.committed
        hwm = node.replica.high_watermark if node.replica is not None else 0
        index = count
        while index < log.batch_count():
            base, last, epoch, values = log.batch_at(index)
            if base >= len(committed):
                break
            for position, value in enumerate(values):
                offset = base + position
                if offset >= len(committed):
                    break
                committed_epoch, committed_value = committed[offset]
                if (epoch == committed_epoch or offset < hwm) and (
                        (epoch, value) != (committed_epoch, committed_value)):
                    self.fail(f"rule 2: node {node.node_id} (HWM {hwm}) has {(epoch, value)!r} "
                              f"at committed offset {offset}, committed was {committed[offset]!r}")
            if index == count and last < min(len(committed), hwm):
                count += 1  # wholly committed and below its HWM: it cannot change any more
            index += 1
        node.verified = (log.generation, count)
        snapshot_id = log.latest_snapshot_id()
        if snapshot_id is not None and snapshot_id != node.verified_snapshot:
            data, _size = log.read_snapshot(snapshot_id, 0, 1 << 30)
            values = tuple(snapshot_data_records(data))
            expected = tuple(value for _epoch, value in committed[:snapshot_id.end_offset])
            if len(committed) < snapshot_id.end_offset or values != expected:
                self.fail(f"rule 2: node {node.node_id} snapshot {snapshot_id} does not hold the "
                          f"committed entries below it")
            node.verified_snapshot = snapshot_id

    # -- a whole run ---------------------------------------------------------------------------
    def run(self) -> None:
        fault_end = self.opt.fault_phase_ms
        self._push(self.rng.randrange(1, 500), "workload", fault_end)
        self._push(self.rng.randrange(500, 3000), "fault", fault_end)
        self._push(self.rng.randrange(1000, 4000), "snapshot", fault_end)
        if self.opt.membership_interval_ms:
            self._push(self.rng.randrange(500, 3000), "member", fault_end)
        self.run_until(fault_end)
        self.heal()
        self.check_liveness()

    def stable_leader(self) -> bool:
        """One leader, and every live replica follows it in its epoch."""
        leaders = self.leaders()
        if len(leaders) != 1:
            return False
        leader = leaders[0].replica
        assert leader is not None
        return all(n.replica is None or (n.replica.epoch == leader.epoch
                                         and n.replica.leader_id == leader.node_id)
                   for n in self.nodes.values())

    def check_liveness(self) -> None:
        """After healing, a leader is elected and a final append commits on every replica."""
        limit = self.now_ms + self.opt.settle_limit_ms
        value = f"s{self.seed}-final".encode()
        stable_leader = self.stable_leader

        def committed_everywhere(offset: int) -> bool:
            return len(self.committed) > offset and self.committed[offset][1] == value and all(
                n.replica is not None and n.replica.high_watermark > offset
                for n in self.nodes.values())

        done = False
        while not done and self.now_ms < limit:
            if not self.run_until(limit, stable_leader):
                self.fail("liveness: no stable leader within the settle limit after healing")
            leader = self.leaders()[0]
            assert leader.replica is not None
            result, offset = leader.replica.append([value], self.now_ms)
            self._apply(leader, result)
            self._after(leader)
            self.final_offset = offset
            done = self.run_until(min(limit, self.now_ms + 5_000),
                                  lambda: committed_everywhere(self.final_offset))
        if not done:
            states = {n.node_id: (n.replica.role, n.replica.epoch, n.replica.high_watermark)
                      for n in self.nodes.values() if n.replica is not None}
            self.fail(f"liveness: the final append did not commit on every replica within the "
                      f"limit: {states}")
        final = max(self.leaders(), key=lambda n: n.replica.epoch if n.replica else -1)
        log = final.log
        start = log.start_offset()
        if log.end_offset() < len(self.committed):
            self.fail(f"rule 2: final leader {final.node_id} ends at {log.end_offset()} below "
                      f"the committed end {len(self.committed)}")
        for offset in range(start, len(self.committed)):
            if log.entry(offset) != self.committed[offset]:
                self.fail(f"rule 2: committed offset {offset} lost on final leader")
        if start > 0:
            snapshot_id = log.latest_snapshot_id()
            if snapshot_id is None or snapshot_id.end_offset < start:
                self.fail(f"rule 2: final leader lost offsets below {start} without a snapshot")


def run_seed(seed: int, options: SimOptions | None = None) -> ClusterSim:
    sim = ClusterSim(seed, options)
    sim.run()
    return sim


# -- failover: kill -9 of the leader, elections until a successor commits ----------------------
FAILOVER = SimOptions(voters=3, observers=1, drop_prob=0.0, dup_prob=0.0, max_delay_ms=3,
                      delayed_flush_prob=0.0)
"""A healthy localhost-like cluster (no drops, 1-3 ms per message, as on one machine) where
only the leader's process dies: the case `bench failover` measures on real processes."""


@dataclass(frozen=True, slots=True)
class FailoverOutcome:
    rounds: int  # election epochs it took: the successor's epoch minus the dead leader's
    elapsed_ms: int  # from the kill to the successor's first commit in its own epoch

    @property
    def split(self) -> bool:
        """More than one round: the first election (at dead epoch + 1) elected nobody."""
        return self.rounds > 1


def run_failover(seed: int, options: SimOptions = FAILOVER, limit_ms: int = 30_000
                 ) -> FailoverOutcome:
    """Elect a leader, commit on every replica, wait a random part of a fetch cycle, crash the
    leader (its connections reset), and run until a successor commits in its own epoch."""
    sim = ClusterSim(seed, options)
    if not sim.run_until(limit_ms, sim.stable_leader):
        sim.fail("failover: no first leader")
    leader = sim.leaders()[0]
    assert leader.replica is not None
    result, offset = leader.replica.append([f"s{seed}-before".encode()], sim.now_ms)
    sim._apply(leader, result)
    sim._after(leader)
    if not sim.run_until(sim.now_ms + limit_ms, lambda: all(
            n.replica is not None and n.replica.high_watermark > offset
            for n in sim.nodes.values())):
        sim.fail("failover: the first append did not commit everywhere")
    sim.run_until(sim.now_ms + sim.rng.randrange(1, sim.config.fetch_max_wait_ms))
    old_epoch = leader.replica.epoch
    killed_at = sim.now_ms
    sim.crash(leader)

    def successor_committed() -> bool:
        for node in sim.leaders():
            state = node.replica.state if node.replica is not None else None
            if isinstance(state, LeaderState) and node.replica is not None and (
                    node.replica.high_watermark > state.epoch_start_offset):
                return True
        return False

    if not sim.run_until(killed_at + limit_ms, successor_committed):
        sim.fail(f"failover: no successor committed within {limit_ms} ms of the kill")
    new = sim.leaders()[0].replica
    assert new is not None
    return FailoverOutcome(new.epoch - old_epoch, sim.now_ms - killed_at)
