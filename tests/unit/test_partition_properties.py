"""Hypothesis: random fence/unfence/restart/AlterPartition/min-ISR sequences keep rules 8-13, 19.

ScenarioController (test_scenarios.py) checks rule 8 on every PartitionChangeRecord it replays;
check_invariants covers rules 10-13 and 19 after every step.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.core.invariants import check_partition
from kafkawire.errors import Errors
from tests.unit.test_scenarios import ScenarioController

BROKERS = (1, 2, 3, 4)

step = st.one_of(
    st.tuples(st.just("fence"), st.sampled_from(BROKERS)),
    st.tuples(st.just("unfence"), st.sampled_from(BROKERS)),
    st.tuples(st.just("restart_clean"), st.sampled_from(BROKERS)),
    st.tuples(st.just("restart_unclean"), st.sampled_from(BROKERS)),
    st.tuples(st.just("shrink"), st.sampled_from(BROKERS)),
    st.tuples(st.just("expand"), st.sampled_from(BROKERS)),
    st.tuples(st.just("min_isr"), st.integers(min_value=1, max_value=5)),
    st.tuples(st.just("recovered"), st.just(0)),
)


def run_step(controller: ScenarioController, op: str, arg: int) -> None:
    topic = controller.image.topics_by_name["foo"]
    reg = topic.partitions[0]
    if op == "fence":
        controller.fence(arg)
    elif op == "unfence":
        controller.unfence(arg)
    elif op in ("restart_clean", "restart_unclean"):
        controller.restart(arg, clean=op == "restart_clean")
    elif op == "min_isr":
        controller.set_min_isr("foo", arg)
    elif op == "recovered":
        if reg.leader != -1 and reg.leader_recovery_state == 1:
            # KIP-704: the new leader reports RECOVERED once its log is recovered.
            error = controller.alter("foo", 0, {"isr": str(reg.leader), "recovery": "RECOVERED"})
            assert error in (Errors.NONE, Errors.INELIGIBLE_REPLICA)
    elif reg.leader != -1:
        if op == "shrink" and arg in reg.isr and arg != reg.leader:
            isr = [r for r in reg.isr if r != arg]
        elif op == "expand" and arg in reg.replicas and arg not in reg.isr:
            if reg.leader_recovery_state != 0:
                return  # rule 21: a RECOVERING leader expands only after RECOVERED
            isr = [*reg.isr, arg]
        else:
            return
        error = controller.alter("foo", 0, {"isr": ",".join(str(r) for r in isr)})
        assert error in (Errors.NONE, Errors.INELIGIBLE_REPLICA)
        if error == Errors.INELIGIBLE_REPLICA:
            assert controller.image.is_fenced(arg)
    controller.check_invariants()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step, min_size=10, max_size=40),
    elr_enabled=st.booleans(),
    unclean_allowed=st.booleans(),
    min_isr=st.integers(min_value=1, max_value=4),
)
def test_random_histories_keep_the_partition_rules(
    steps: list[tuple[str, int]], elr_enabled: bool, unclean_allowed: bool, min_isr: int
) -> None:
    controller = ScenarioController(elr_enabled=elr_enabled, unclean_allowed=unclean_allowed)
    for broker in BROKERS:
        controller.register(broker)
    controller.create("foo", rf=3, min_isr=min_isr, replicas=[1, 2, 3], partitions=1)
    for op, arg in steps:
        run_step(controller, op, arg)
    reg = controller.image.topics_by_name["foo"].partitions[0]
    topic_id = controller.image.topics_by_name["foo"].topic_id
    assert not check_partition(
        reg, controller.image, controller.image.effective_min_isr(topic_id, 0), elr_enabled
    )
    assert reg.replicas == (1, 2, 3)
