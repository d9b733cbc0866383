"""The simulator with the active controller on top (tests/sim/controller_sim.py): the partition
rules (INVARIANTS 8, 10-13, 19) hold on the committed metadata log while leaders change, batches
are lost and replicas crash; raft's rules 1-3 are checked as in test_sim_raft.py. A failure names
its seed: `SIM_SEED=<n> .venv/bin/python -m pytest tests/sim/test_sim_controller.py -q`."""

from __future__ import annotations

import os

import pytest

from tests.sim.cluster_sim import SimOptions
from tests.sim.controller_sim import ControllerSim

CI_SEEDS = 100
# A controller request every ~50 ms (ClusterSim's plain appends come every ~150 ms).
OPTIONS = SimOptions(append_interval_ms=50)


def _seeds() -> list[int]:
    if "SIM_SEED" in os.environ:
        return [int(os.environ["SIM_SEED"])]
    return list(range(CI_SEEDS))


@pytest.mark.parametrize("seed", _seeds())
def test_controller_sim_seed(seed: int) -> None:
    sim = ControllerSim(seed, OPTIONS)
    sim.run()
    # The controller did real work through failovers: brokers, the topic, partition changes.
    assert sim.metadata_records > 20, f"SIM_SEED={seed}: {sim.metadata_records} records"
    assert "foo" in sim.image.topics_by_name, f"SIM_SEED={seed}: no topic created"
    assert sim.image.topics_by_name["foo"].partitions[0].partition_epoch > 0


def test_controller_sim_catches_a_broken_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks can fail: an election that forgets RECOVERING is caught as rule 13."""
    from controller.core import partition_change

    monkeypatch.setattr(partition_change, "UNCLEAN_KINDS", frozenset())
    found = []
    for seed in range(CI_SEEDS):
        try:
            ControllerSim(seed, OPTIONS).run()
        except AssertionError as exc:
            found.append(str(exc))
            break
    assert found and "rule 13" in found[0], found
