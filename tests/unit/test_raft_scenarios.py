"""Datadriven raft transcripts (tests/scenarios/raft_core/*.txt) over real RaftReplica cores:
elections, pre-vote and divergence truncation (INVARIANTS rules 1-3, 7).

A few voters share a clock and a hand-driven network; only the replica's public entry points
are used (tick, handle_request, handle_response, handle_flushed, append). The runtime's order is
kept: a result's flush is done (and handle_flushed called) before its requests are queued.
After each step the transcript prints the messages delivered and every node's state
(tests/datadriven.py; MINIKRAFT_REWRITE=1 rewrites the expected outputs). Commands:

    cluster voters=1,2,3     fresh voters on formatted logs, nobody has ticked
    tick 1 [ms=N]            the clock moves N ms (default: one election timeout), node 1 ticks
    deliver [rounds=N]       N rounds (default 1): every queued request is handled by its
                             destination and the response by its source; requests those send
                             wait for the next round
    isolate 3 / heal [3]     drop every message to or from 3 (its sender sees a timeout) / stop
                             (for 3 only, or for all)
    append 1 n=2             the leader appends n records and flushes
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from raft.core.memory_log import MemoryLog
from raft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
    answered_partition,
    error_of,
    leader_of,
    the_partition,
)
from raft.core.raft_replica import Outbound, RaftReplica, RaftResult
from tests.datadriven import run_transcript
from tests.unit.test_raft_replica import CONFIG, formatted_log, replica

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "raft_core"
MAX_MESSAGES_PER_ROUND = 100  # a bound: a round delivers what was queued before it started


@dataclass(frozen=True, slots=True)
class Queued:
    source: int
    out: Outbound


class RaftCluster:
    def __init__(self, voter_ids: list[int]) -> None:
        self.now_ms = 0
        self.logs: dict[int, MemoryLog] = {i: formatted_log(voter_ids) for i in voter_ids}
        self.nodes: dict[int, RaftReplica] = {i: replica(i, self.logs[i]) for i in voter_ids}
        self.queue: list[Queued] = []
        self.isolated: set[int] = set()
        self.trace: list[str] = []

    def absorb(self, node_id: int, result: RaftResult) -> None:
        """The runtime's order: flush (then handle_flushed), then send."""
        if result.flush:
            self.logs[node_id].flush()
            self.absorb(node_id, self.nodes[node_id].handle_flushed(self.now_ms))
        self.queue += [Queued(node_id, out) for out in result.send]

    def deliver_round(self) -> None:
        batch, self.queue = self.queue, []
        assert len(batch) <= MAX_MESSAGES_PER_ROUND, f"{len(batch)} messages in one round"
        for item in batch:
            dest = item.out.dest_node_id
            source = self.nodes[item.source]
            if item.source in self.isolated or dest in self.isolated:
                self.trace.append(f"{item.source}->{dest} {describe(item.out.request)} dropped")
                self.absorb(
                    item.source, source.handle_response(dest, item.out.request, None, self.now_ms)
                )
                continue
            result = self.nodes[dest].handle_request(item.source, item.out.request, self.now_ms)
            self.trace.append(
                f"{item.source}->{dest} {describe(item.out.request)} -> {describe(result.response)}"
            )
            self.absorb(dest, result)
            self.absorb(
                item.source,
                source.handle_response(dest, item.out.request, result.response, self.now_ms),
            )

    def run(self, command: str) -> str:
        words = command.split()
        verb, rest = words[0], words[1:]
        kv = dict(w.split("=", 1) for w in rest if "=" in w)
        self.trace = []
        if verb == "tick":
            self.now_ms += int(kv.get("ms", str(2 * CONFIG.election_timeout_ms)))
            node_id = int(rest[0])
            self.absorb(node_id, self.nodes[node_id].tick(self.now_ms))
        elif verb == "deliver":
            for _ in range(int(kv.get("rounds", "1"))):
                self.deliver_round()
        elif verb == "isolate":
            self.isolated.add(int(rest[0]))
        elif verb == "heal":
            self.isolated = self.isolated - {int(r) for r in rest} if rest else set()
        elif verb == "append":
            node_id = int(rest[0])
            records = [b"r%d" % i for i in range(int(kv.get("n", "1")))]
            result, _last = self.nodes[node_id].append(records, self.now_ms)
            self.absorb(node_id, result)
        else:
            raise AssertionError(f"unknown command {verb!r}")
        return "\n".join(self.trace + self.describe_nodes())

    def describe_nodes(self) -> list[str]:
        out = []
        for node_id in sorted(self.nodes):
            node = self.nodes[node_id]
            voted = node.election_state.voted_key
            out.append(
                f"node {node_id}: {node.role} epoch={node.epoch} leader={node.leader_id} "
                f"voted={voted.id if voted is not None else None} hwm={node.high_watermark} "
                f"log={describe_log(self.logs[node_id])}"
                + (" isolated" if node_id in self.isolated else "")
            )
        queued = sorted(
            {f"{q.source}->{q.out.dest_node_id} {describe(q.out.request)}" for q in self.queue}
        )
        out += [f"queued: {q}" for q in queued]
        return out


def describe_log(log: MemoryLog) -> str:
    """Runs of offsets by epoch, e.g. `0-2@1 3-4@2`; `-` for an empty log after the snapshot."""
    runs: list[list[int]] = []  # [first, last, epoch]
    for offset, epoch, _value in log.entries():
        if runs and runs[-1][2] == epoch and runs[-1][1] == offset - 1:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset, epoch])
    text = " ".join(f"{a}-{b}@{e}" for a, b, e in runs) or "-"
    return f"[{text}] end={log.end_offset()}"


def describe(message: object) -> str:
    if isinstance(message, VoteRequest):
        p = the_partition(message)
        kind = "PreVote" if p.pre_vote else "Vote"
        return f"{kind}(epoch={p.replica_epoch} last={p.last_offset}@{p.last_offset_epoch})"
    if isinstance(message, VoteResponse):
        answer = answered_partition(message)
        return (
            f"VoteResponse(epoch={leader_of(message).epoch} "
            f"granted={answer is not None and answer.vote_granted})"
        )
    if isinstance(message, BeginQuorumEpochRequest):
        return f"BeginQuorumEpoch(epoch={the_partition(message).leader_epoch})"
    if isinstance(message, BeginQuorumEpochResponse):
        return f"BeginQuorumEpochResponse(error={error_of(message)})"
    if isinstance(message, EndQuorumEpochRequest):
        return f"EndQuorumEpoch(epoch={the_partition(message).leader_epoch})"
    if isinstance(message, FetchRequest):
        p = the_partition(message)
        return f"Fetch(offset={p.fetch_offset} last_epoch={p.last_fetched_epoch})"
    if isinstance(message, FetchResponse):
        answer = answered_partition(message)
        assert answer is not None
        diverging = (
            f" diverging={answer.diverging_epoch.end_offset}@{answer.diverging_epoch.epoch}"
            if answer.diverging_epoch.epoch >= 0
            else ""
        )
        return (
            f"FetchResponse(error={error_of(message)} hwm={answer.high_watermark} "
            f"bytes={len(answer.records or b'')}{diverging})"
        )
    return type(message).__name__ if message is not None else "timeout"


SCENARIOS = sorted(SCENARIO_DIR.glob("*.txt"))


def test_raft_transcripts_exist() -> None:
    assert [p.stem for p in SCENARIOS] == ["divergence", "elections", "prevote"]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_raft_transcript(path: Path) -> None:
    cluster: RaftCluster | None = None

    def handle(command: str) -> str:
        nonlocal cluster
        if command.startswith("cluster "):
            voters = [int(i) for i in command.split("voters=")[1].split(",")]
            cluster = RaftCluster(voters)
            return "\n".join(cluster.describe_nodes())
        assert cluster is not None, "`cluster` comes first"
        return cluster.run(command)

    assert run_transcript(path, handle) > 0
