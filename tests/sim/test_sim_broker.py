"""The simulator with brokers' partition cores (tests/sim/broker_sim.py): the broker rules
(INVARIANTS 17, 20, 21, 22) hold on the cores' outputs while the controller fails over, brokers
restart and learn metadata late; the controller and raft rules are checked as in
test_sim_controller.py. A failure names its seed:
`SIM_SEED=<n> .venv/bin/python -m pytest tests/sim/test_sim_broker.py -q`."""

from __future__ import annotations

import os

import pytest

from tests.sim.broker_sim import BrokerSim
from tests.sim.cluster_sim import SimOptions

CI_SEEDS = 60
SLOW_SEEDS = range(CI_SEEDS, 600)
OPTIONS = SimOptions(append_interval_ms=50)


def _seeds() -> list[int]:
    if "SIM_SEED" in os.environ:
        return [int(os.environ["SIM_SEED"])]
    return list(range(CI_SEEDS))


def _run(seed: int) -> BrokerSim:
    sim = BrokerSim(seed, OPTIONS)
    sim.run()
    return sim


@pytest.mark.parametrize("seed", _seeds())
def test_broker_sim_seed(seed: int) -> None:
    sim = _run(seed)
    # Not vacuous: leaders took produces and followers fetched (whether the HWM moves depends
    # on the seed: min.insync.replicas=3 under frequent fencing may hold it for a whole run).
    assert sim.produced > 10, f"SIM_SEED={seed}: {sim.produced} produces"
    assert sim.fetches > 10, f"SIM_SEED={seed}: {sim.fetches} fetches"


def test_broker_sim_does_work_across_seeds() -> None:
    """Over ten seeds the HWM advances, acks=all produces complete and broker-proposed ISR
    changes commit."""
    sims = [_run(seed) for seed in range(10)]
    assert sum(s.hwm_advances for s in sims) > 100, [s.hwm_advances for s in sims]
    assert sum(s.acked for s in sims) > 50, [s.acked for s in sims]
    assert sum(s.isr_commits for s in sims) > 10, [s.isr_commits for s in sims]
    # Rule 21's journal checker judged the leaders' HWM advances and acks.
    assert sum(s.recovery_judged for s in sims) > 100, [s.recovery_judged for s in sims]


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_broker_sim_many_seeds(seed: int) -> None:
    _run(seed)


def _first_failure(seeds: range) -> str:
    for seed in seeds:
        try:
            _run(seed)
        except AssertionError as exc:
            return str(exc)
    return ""


def test_broker_sim_catches_a_hwm_past_the_isr(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks can fail: a leader computing its HWM over itself alone is caught (rule 20)."""
    from broker.core.partition_state import PartitionState

    monkeypatch.setattr(
        PartitionState, "maximal_isr", property(lambda self: (self.local_broker_id,))
    )
    assert "rule 20" in _first_failure(range(CI_SEEDS))


def test_broker_sim_catches_an_expansion_without_the_broker_epoch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A leader adding a follower whatever epoch it fetched with is caught (rule 17, KIP-903)."""
    from broker.core.partition_state import PartitionState

    monkeypatch.setattr(PartitionState, "_isr_eligible", lambda self, progress: True)
    assert "rule 17" in _first_failure(range(CI_SEEDS))


def test_broker_sim_catches_a_hwm_past_the_leaders_unflushed_acks_all_append(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A leader counting its whole log end, flushed or not, is caught (rule 20)."""
    from broker.core import partition_state

    monkeypatch.setattr(
        partition_state, "leader_counted_offset", lambda end, flushed, flush_first_to: end
    )
    assert "flushed offset" in _first_failure(range(CI_SEEDS))
