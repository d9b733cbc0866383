"""Deterministic simulation of the Raft core: INVARIANTS rules 1-3 after every event, and
liveness once the faults heal. A failure names its seed; replay one with
`SIM_SEED=<n> .venv/bin/python -m pytest tests/sim -q`; run many with
`SIM_SEEDS=5000 .venv/bin/python -m pytest tests/sim -q -m slow`."""

from __future__ import annotations

import os

import pytest

from raft.core.record_batch import encode_batch
from tests.sim.cluster_sim import ClusterSim, SimInvariantError, SimOptions, run_seed

CI_SEEDS = 200


def _seeds() -> list[int]:
    if "SIM_SEED" in os.environ:
        return [int(os.environ["SIM_SEED"])]
    return list(range(CI_SEEDS))


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("seed", _seeds())
def test_sim_seed(seed: int, voters: int) -> None:
    sim = run_seed(seed, SimOptions(voters=voters))
    # The run did real work, and every replica (the observer too) has the final append.
    assert len(sim.committed) > sim.final_offset > 0, f"SIM_SEED={seed}: nothing committed"
    for node in sim.nodes.values():
        assert node.replica is not None
        assert node.replica.high_watermark > sim.final_offset, f"SIM_SEED={seed}: {node.node_id}"


@pytest.mark.slow
def test_sim_many_seeds() -> None:
    count = int(os.environ.get("SIM_SEEDS", "3000"))
    first = int(os.environ.get("SIM_SEED_START", "10000"))
    for seed in range(first, first + count):
        for voters in (3, 5):
            run_seed(seed, SimOptions(voters=voters))  # raises with SIM_SEED=<seed> in the text


def test_checker_catches_a_changed_committed_entry() -> None:
    """The rule 2 checker is live: rewrite a committed entry on one replica and it fails."""
    sim = ClusterSim(1, SimOptions(voters=3))
    sim._push(1, "workload", 3_000)
    sim.run_until(3_000)
    assert len(sim.committed) >= 3
    victim = next(n for n in sim.nodes.values() if n.replica is not None
                  and n.replica.role != "Leader" and n.is_voter and n.log.end_offset() >= 3)
    victim.log.truncate_to(victim.log.start_offset())
    epoch, _value = sim.committed[victim.log.start_offset()]
    victim.log.append_as_follower(encode_batch(victim.log.start_offset(), epoch, 0, [b"forged"]))
    with pytest.raises(SimInvariantError, match=r"SIM_SEED=1 .*rule 2"):
        sim._check_log(victim)


def test_checker_catches_two_leaders_in_one_epoch() -> None:
    sim = ClusterSim(2, SimOptions(voters=3))
    sim.run_until(3_000, lambda: bool(sim.leaders()))
    leader = sim.leaders()[0]
    assert leader.replica is not None
    other = next(n for n in sim.nodes.values() if n is not leader)
    sim.leader_of_epoch[leader.replica.epoch + 1] = other.node_id
    sim.leader_of_epoch[leader.replica.epoch] = other.node_id
    from raft.core.raft_replica import RaftResult

    with pytest.raises(SimInvariantError, match="rule 1"):
        sim._apply(leader, RaftResult(became_leader=True))
