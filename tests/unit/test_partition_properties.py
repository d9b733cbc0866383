"""Hypothesis: random fence/unfence/restart/AlterPartition/min-ISR/unclean histories keep rules
8-13 and 19, through the production controller code.

ScenarioCluster (test_scenarios.py) answers each step with cluster_control/replication_control
and replays the returned records, checking rule 8 and rule 13's change check on every
PartitionChangeRecord; check_partitions covers rules 10-13 and 19 after every step.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.core import config_control
from controller.core.invariants import check_partition
from kafkawire import constants
from kafkawire.errors import Errors
from metadata.metadata_image import CLUSTER_DEFAULT_RESOURCE
from metadata.partition_registration import LeaderRecoveryState
from tests.unit.test_scenarios import ScenarioCluster

BROKERS = (1, 2, 3, 4)

step = st.one_of(
    st.tuples(st.just("fence"), st.sampled_from(BROKERS)),
    st.tuples(st.just("unfence"), st.sampled_from(BROKERS)),
    st.tuples(st.just("shutdown"), st.sampled_from(BROKERS)),
    st.tuples(st.just("restart_clean"), st.sampled_from(BROKERS)),
    st.tuples(st.just("restart_unclean"), st.sampled_from(BROKERS)),
    st.tuples(st.just("shrink"), st.sampled_from(BROKERS)),
    st.tuples(st.just("expand"), st.sampled_from(BROKERS)),
    st.tuples(st.just("min_isr"), st.integers(min_value=1, max_value=5)),
    st.tuples(st.just("recovered"), st.just(0)),
)


def run_step(cluster: ScenarioCluster, op: str, arg: int) -> None:
    reg = cluster.image.topics_by_name["foo"].partitions[0]
    if op == "fence":
        cluster.heartbeat(arg, want_fence=True)
    elif op == "unfence":
        cluster.heartbeat(arg)
    elif op == "shutdown":
        cluster.heartbeat(arg, want_shut_down=True)
    elif op in ("restart_clean", "restart_unclean"):
        cluster.restart(arg, clean=op == "restart_clean")
    elif op == "min_isr":
        error = cluster.alter_configs(
            constants.CONFIG_RESOURCE_TOPIC, "foo", "min.insync.replicas", str(arg)
        )
        assert error == Errors.NONE
    elif op == "recovered":
        if reg.leader != -1 and reg.leader_recovery_state == LeaderRecoveryState.RECOVERING:
            # KIP-704: the new leader reports RECOVERED once its log is recovered.
            error = cluster.alter("foo", 0, {"isr": str(reg.leader), "recovery": "RECOVERED"})
            assert error in (Errors.NONE, Errors.INELIGIBLE_REPLICA)
    elif reg.leader != -1:
        if op == "shrink" and arg in reg.isr and arg != reg.leader:
            isr = [r for r in reg.isr if r != arg]
        elif op == "expand" and arg in reg.replicas and arg not in reg.isr:
            if reg.leader_recovery_state != LeaderRecoveryState.RECOVERED:
                return  # rule 21: a RECOVERING leader expands only after RECOVERED
            isr = [*reg.isr, arg]
        else:
            return
        error = cluster.alter("foo", 0, {"isr": ",".join(str(r) for r in isr)})
        assert error in (Errors.NONE, Errors.INELIGIBLE_REPLICA)
        if error == Errors.INELIGIBLE_REPLICA:
            # Rule 18: only a fenced or shutting-down member is refused here.
            assert cluster.image.is_fenced(arg) or cluster.image.is_in_controlled_shutdown(arg)
    cluster.check_partitions()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step, min_size=10, max_size=40),
    elr_enabled=st.booleans(),
    unclean_allowed=st.booleans(),
    min_isr=st.integers(min_value=1, max_value=4),
)
def test_random_histories_keep_the_partition_rules(
    steps: list[tuple[str, int]], elr_enabled: bool, unclean_allowed: bool, min_isr: int
) -> None:
    cluster = ScenarioCluster(elr_default=elr_enabled)
    for broker in BROKERS:
        cluster.register(broker)
        cluster.heartbeat(broker)
    if unclean_allowed:
        cluster.alter_configs(
            constants.CONFIG_RESOURCE_BROKER,
            CLUSTER_DEFAULT_RESOURCE,
            config_control.UNCLEAN_LEADER_ELECTION_ENABLE,
            "true",
        )
    assert cluster.create("foo", {"min_isr": str(min_isr), "replicas": "1,2,3"}) == Errors.NONE
    for op, arg in steps:
        run_step(cluster, op, arg)
    reg = cluster.image.topics_by_name["foo"].partitions[0]
    topic_id = cluster.image.topics_by_name["foo"].topic_id
    assert not check_partition(
        reg, cluster.image, cluster.image.effective_min_isr(topic_id, 0), elr_enabled
    )
    assert reg.replicas == (1, 2, 3)
