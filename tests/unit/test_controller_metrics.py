"""The seeds' metrics from their pure sources: KIP-966's manual_leader_election_required and
electable leaders (ISR + ELR) per partition, seed 003's number-of-possible-voters and
pending-add-voter / pending-remove-voter (the /metrics exposition is checked on a real process
in tests/integration/test_seed003_replacement_processes.py)."""

from __future__ import annotations

from controller.core import replication_control as rc
from controller.core.partition_change import written_records
from controller.core.unclean_recovery import Strategy, manual_election_required
from raft.core.membership_metrics import MembershipMetrics, membership_metrics
from raft.core.replica_key import ReplicaKey
from tests.unit.test_membership import NEW_DISK, add, committed_leader, fetch, flush, remove
from tests.unit.test_raft_replica import DIRS, key
from tests.unit.test_replication_control import apply, brokers, fence, foo0, with_foo


def test_manual_election_required_only_when_nothing_automatic_will_elect() -> None:
    # The sole ISR member restarts uncleanly (rule 11): leaderless, ISR and ELR empty,
    # LastKnownLeader 1: rule 13 elects 1 once it is unfenced, so no operator is needed.
    image = with_foo(brokers(3, fenced=[2, 3]), (1,), min_isr=2)
    image = apply(image, written_records(rc.broker_restart_changes(image, 1, clean=False)))
    reg = foo0(image)
    assert reg.leader == -1 and reg.isr == () and reg.elr == () and reg.last_known_leader == 1
    assert not manual_election_required(reg, unclean_allowed=False, strategy=None)
    # Without a LastKnownLeader and with unclean election refused, only the operator can.
    image = with_foo(brokers(3, fenced=[1, 2, 3]), (), leader=-1)
    reg = foo0(image)
    assert manual_election_required(reg, unclean_allowed=False, strategy=None)
    assert not manual_election_required(reg, unclean_allowed=True, strategy=None)
    # With the recovery manager (rule 14) only the None strategy waits for the operator.
    assert manual_election_required(reg, unclean_allowed=False, strategy=Strategy.NONE)
    assert not manual_election_required(reg, unclean_allowed=False, strategy=Strategy.BALANCED)
    assert rc.partition_counts(image)["manual_leader_election_required_partitions"] == 1
    counts = rc.partition_counts(image, lambda _topic: Strategy.AGGRESSIVE)
    assert counts["manual_leader_election_required_partitions"] == 0


def test_electable_leaders_counts_isr_plus_elr_per_partition() -> None:
    image = with_foo(brokers(4), (1, 2, 3, 4), min_isr=4, replicas=(1, 2, 3, 4))
    assert rc.electable_leaders(image) == [("foo", 0, 4)]
    image = fence(image, 3)  # ISR [1, 2, 4], ELR [3]
    assert rc.electable_leaders(image) == [("foo", 0, 4)]
    image = fence(fence(image, 1), 2)
    reg = foo0(image)
    assert rc.electable_leaders(image) == [("foo", 0, len(reg.isr) + len(reg.elr))]


def test_possible_voters_are_observers_with_an_endpoint_and_pending_changes_until_commit() -> None:
    leader = committed_leader()
    end = leader._log.end_offset()
    assert membership_metrics(leader) == MembershipMetrics(0, 0, 0)
    fetch(leader, 9, DIRS[4], end, 2099)  # a broker: fetches without an endpoint
    fetch(leader, 2, NEW_DISK, end, 2100)  # a replaced controller disk: where 2 listens
    assert membership_metrics(leader) == MembershipMetrics(1, 0, 0)
    response, _ = add(leader, ReplicaKey(2, NEW_DISK), 2101)
    assert response.error_code == 0
    assert membership_metrics(leader) == MembershipMetrics(0, 1, 0)
    flush(leader, 2102)
    fetch(leader, 3, DIRS[3], end + 1, 2103)
    fetch(leader, 2, NEW_DISK, end + 1, 2104)
    assert leader.high_watermark == end + 1
    assert membership_metrics(leader) == MembershipMetrics(0, 0, 0)
    removal, _ = remove(leader, key(2), 2105)
    assert removal.error_code == 0
    # The removed old disk of 2 fetched where node 2 listens (Kafka's Fetch names no endpoint:
    # the leader knows one per voter id), so it is an observer the leader could add again.
    assert membership_metrics(leader) == MembershipMetrics(1, 0, 1)
