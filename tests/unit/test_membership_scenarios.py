"""Datadriven membership transcripts (tests/scenarios/raft/*.txt) over one leader RaftReplica
core, INVARIANTS rules 4-6. Keys are `N` (node N's first disk) or `N'` (its replacement).

    cluster voters=1,2,3     a fresh quorum; node 1 leads epoch 1 and has committed in it
    append 30                the leader appends 30 records and flushes
    fetch 4 [behind=30]      replica 4 fetches at the log end (minus `behind`), as an observer
    add 4 -> ERROR           AddRaftVoter with its endpoint; ERROR is a Kafka name or NONE
    remove 2' -> ERROR       RemoveRaftVoter of the exact key
    commit                   the leader flushes; every other voter fetches to the log end
    expect voters=1,3,2' pending=0 role=Leader observers=4     (DescribeQuorum's observers)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafkawire.errors import Errors
from raft.core.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    FetchResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    add_raft_voter_request,
    answered_partition,
    directory_id,
    error_of,
    fetch_request,
    remove_raft_voter_request,
)
from raft.core.raft_replica import RaftConfig, RaftReplica
from raft.core.replica_key import ReplicaKey
from tests.unit.test_raft_replica import elect, formatted_log, replica

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "raft"
CONFIG = RaftConfig(cluster_id="c1", add_voter_max_lag_records=10)


def parse_key(text: str) -> ReplicaKey:
    node_id = int(text.rstrip("'"))
    return ReplicaKey(node_id, uuid.UUID(int=1000 * (1 + text.count("'")) + node_id))


def key_text(key: ReplicaKey) -> str:
    return str(key.id) + "'" * (key.directory_id.int // 1000 - 1)


class MembershipScenario:
    def __init__(self, voter_ids: list[int]) -> None:
        log = formatted_log(voter_ids)  # the first disks: directory ids 1000 + N
        self.leader: RaftReplica = replica(1, log, config=CONFIG)
        self.now_ms = 2000
        elect(self.leader, self.now_ms)
        self.commit()
        assert self.leader.high_watermark > 0, "the leader did not commit in its epoch"

    def tick(self) -> int:
        self.now_ms += 1
        return self.now_ms

    def flush(self) -> None:
        self.leader._log.flush()
        self.leader.handle_flushed(self.tick())

    def fetch(self, key: ReplicaKey, offset: int) -> None:
        leader = self.leader
        result = leader.handle_request(key.id, fetch_request(
            replica_id=key.id, replica_directory_id=key.directory_id, fetch_offset=offset,
            last_fetched_epoch=leader.epoch if offset > 0 else 0,
            current_leader_epoch=leader.epoch, cluster_id="c1"), self.tick())
        assert isinstance(result.response, FetchResponse) and error_of(result.response) == 0

    def commit(self) -> None:
        self.flush()
        for key in self.leader.voters:
            if self.leader.role != "Leader":
                break  # rule 6: it resigned the moment its own removal committed
            if key != self.leader.key:
                self.fetch(key, self.leader._log.end_offset())

    def change(self, verb: str, key: ReplicaKey) -> Errors:
        request: AddRaftVoterRequest | RemoveRaftVoterRequest
        if verb == "add":
            request = add_raft_voter_request(key.id, key.directory_id,
                                             {"CONTROLLER": f"h{key.id}:9093"}, cluster_id="c1")
        else:
            request = remove_raft_voter_request(key.id, key.directory_id, cluster_id="c1")
        before = (self.leader._log.end_offset(), self.leader.voters.keys())
        result = self.leader.handle_request(-1, request, self.tick())
        response = result.response
        assert isinstance(response, (AddRaftVoterResponse, RemoveRaftVoterResponse))
        error = Errors(int(response.error_code))
        if error != Errors.NONE:  # a refused change changes nothing
            assert (self.leader._log.end_offset(), self.leader.voters.keys()) == before
            assert result.voters_record_offset == -1
        return error

    def observed(self) -> dict[str, str]:
        leader = self.leader
        pending = sum(1 for offset, _ in leader.voter_set_changes()[1:]
                      if offset >= leader.high_watermark)
        described = answered_partition(leader.describe_quorum(self.now_ms))
        observers = ",".join(key_text(ReplicaKey(o.replica_id,
                                                 directory_id(o.replica_directory_id)))
                             for o in described.observers)
        return {"voters": ",".join(key_text(k) for k in leader.voters),
                "pending": str(pending), "role": leader.role, "observers": observers}


def run_scenario(text: str, name: str) -> int:
    """Run a transcript; returns how many expectations it checked."""
    scenario: MembershipScenario | None = None
    checked = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{name}:{number}: {line}"
        command, _arrow, want = (part.strip() for part in line.partition("->"))
        words = command.split()
        verb, args = words[0], words[1:]
        options = dict(a.split("=", 1) for a in args if "=" in a)
        if verb == "cluster":
            scenario = MembershipScenario([int(i) for i in options["voters"].split(",")])
            continue
        assert scenario is not None, f"{where}: `cluster` first"
        if verb == "append":
            scenario.leader.append([b"r%d" % i for i in range(int(args[0]))], scenario.tick())
            scenario.flush()
        elif verb == "fetch":
            end = scenario.leader._log.end_offset()
            scenario.fetch(parse_key(args[0]), end - int(options.get("behind", "0")))
        elif verb in ("add", "remove"):
            got = scenario.change(verb, parse_key(args[0]))
            assert got.name == want, f"{where}: got {got.name}, want {want}"
            checked += 1
        elif verb == "commit":
            scenario.commit()
        elif verb == "expect":
            seen = scenario.observed()
            for field, value in options.items():
                assert seen[field] == value, f"{where}: {field}: got {seen[field]}, want {value}"
                checked += 1
        else:
            raise AssertionError(f"{where}: unknown command {verb!r}")
    return checked


SCENARIOS = sorted(SCENARIO_DIR.glob("*.txt"))


def test_membership_scenarios_exist() -> None:
    assert [p.name for p in SCENARIOS] == ["membership.txt"]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_membership_scenario(path: Path) -> None:
    assert run_scenario(path.read_text(), path.name) >= 20


def test_runner_reports_a_wrong_expectation() -> None:
    with pytest.raises(AssertionError, match="got DUPLICATE_VOTER, want NONE"):
        run_scenario("cluster voters=1,2,3\nadd 2 -> NONE\n", "t")
    with pytest.raises(AssertionError, match="voters: got 1,2,3, want 1,2"):
        run_scenario("cluster voters=1,2,3\nexpect voters=1,2\n", "t")
