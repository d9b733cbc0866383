"""Issue 4 with real processes: a controller formatted with --no-initial-controllers joins as an
observer and is added; another is removed; a controller's wiped disk is replaced by
RemoveVoter(old key) + AddVoter(new key) without losing a committed record (INVARIANTS 4-7)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

from cluster.client.admin_client import change_voters, describe_quorum
from cluster.launch.committed_prefix import committed_entries, compare_committed_prefixes
from cluster.launch.local_cluster import free_ports
from kafkawire.config import render_properties
from raft.core.messages import add_raft_voter_request
from raft.core.replica_key import ReplicaKey, uuid_to_str
from raft.runtime.raft_manager import METADATA_PARTITION_DIR
from tests.integration.conftest import quorum, start_cluster, wait_for
from tests.integration.membership_helpers import (
    directory_id,
    format_observer,
    keys,
    metadata_dir,
    new_controller_spec,
    quorum_cli,
    wipe_metadata,
)

WAIT_S = 30  # generous: two cores shared with other test runs


def test_observer_joins_is_added_then_another_voter_is_removed(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    try:
        spec4 = new_controller_spec(cluster, 4)
        dir4 = format_observer(cluster, spec4)
        cluster.start_node(spec4)
        key4 = ReplicaKey(4, dir4)
        status = wait_for(lambda s: key4 in keys(s)[1], cluster, WAIT_S)
        data = status.status_json(cluster.cluster_id)
        # Kafka's Fetch carries no endpoint, so the leader knows none for a new controller id:
        # it is an observer, not yet listed as could-be-voter; add-controller gives its
        # listeners from its config (KIP-853), as Kafka's tool does.
        assert [o["endpoints"] for o in data["current_observers"] if o["id"] == 4] == [{}]
        assert {"id": 4, "directory_id": uuid_to_str(dir4)} not in data["could_be_voters"]
        hwm_before_add = status.high_watermark
        leader = cluster.node(str(status.leader_id)).address
        wait_for(lambda s: next(o.log_end_offset for o in s.observers
                                if o.replica_id == 4) >= s.high_watermark,
                 cluster, WAIT_S)

        # AddRaftVoter v1 with AckWhenCommitted=false (KIP-1186) is answered once the new voter
        # set is appended: with another voter and the new one paused, {1,2,3,4} cannot commit
        # (2 of 4 fetch), yet the answer is NONE at once and 4 is a voter (rule 5).
        other = next(c for c in cluster.controllers[:3] if c.node_id != status.leader_id)
        paused = [other, spec4]
        try:
            for spec in paused:
                cluster.kill(spec, signal.SIGSTOP)
            started = time.monotonic()
            response = asyncio.run(change_voters(leader, add_raft_voter_request(
                4, dir4, {"CONTROLLER": spec4.address}, 10_000, ack_when_committed=False)))
            assert response.error_code == 0
            assert time.monotonic() - started < 5  # not the 10 s a commit wait would take
            pending = asyncio.run(describe_quorum(leader))
            assert key4 in keys(pending)[0] and len(pending.voters) == 4
            leader_end = next(v.log_end_offset for v in pending.voters
                              if v.replica_id == pending.leader_id)
            assert pending.high_watermark < leader_end  # the new set is not committed
        finally:
            for spec in paused:
                cluster.kill(spec, signal.SIGCONT)
        status = wait_for(lambda s: s.high_watermark > leader_end, cluster, WAIT_S)
        assert key4 in keys(status)[0] and len(status.voters) == 4
        assert {"id": 4, "directory_id": uuid_to_str(dir4),
                "endpoints": {"CONTROLLER": spec4.address}} in status.status_json(
            None)["current_voters"]
        assert status.high_watermark > hwm_before_add
        again = quorum_cli(cluster, "add-controller", "--config", spec4.config)
        assert again.returncode == 1 and "DUPLICATE_VOTER" in again.stderr

        victim = next(v for v in status.voters if v.replica_id not in (status.leader_id, 4))
        victim_dir = uuid_to_str(victim.replica_directory_id)
        removed = quorum_cli(cluster, "remove-controller", "--controller-id",
                             str(victim.replica_id), "--controller-directory-id", victim_dir,
                             "--output", "json")
        assert removed.returncode == 0, removed.stderr
        assert json.loads(removed.stdout)["result"] == "removed"
        status = quorum(cluster)
        voters, _observers = keys(status)
        assert len(voters) == 3 and key4 in voters
        assert ReplicaKey(victim.replica_id, victim.replica_directory_id) not in voters
        # The removed controller keeps running and fetching: DescribeQuorum lists it as an
        # observer, as Kafka's leader moves a removed voter's state to its observers.
        victim_key = ReplicaKey(victim.replica_id, victim.replica_directory_id)
        wait_for(lambda s: victim_key in keys(s)[1], cluster, WAIT_S)
        gone = quorum_cli(cluster, "remove-voter", "--replica-id", str(victim.replica_id),
                          "--replica-uuid", victim_dir)
        assert gone.returncode == 1 and "VOTER_NOT_FOUND" in gone.stderr
        # The quorum keeps committing NoOpRecords with the new set (rule 5).
        hwm = status.high_watermark
        later = wait_for(lambda s: s.high_watermark > hwm + 2, cluster, WAIT_S)
        report = compare_committed_prefixes(cluster, later.high_watermark)
        assert report.agree, report.mismatches
    finally:
        cluster.stop()
        assert not cluster.running(), "processes left behind"


def test_disk_replacement_remove_old_key_then_add_new_key(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    try:
        spec2 = cluster.node("controller-2")
        old_dir = directory_id(spec2)
        before = wait_for(lambda s: s.high_watermark > 5, cluster, WAIT_S)
        cluster.kill(spec2, signal.SIGKILL)
        after_kill = wait_for(
            lambda s: s.leader_id not in (None, 2)
            and s.high_watermark > before.high_watermark + 2,
            cluster, WAIT_S)
        hwm = after_kill.high_watermark
        survivors = [cluster.node("controller-1"), cluster.node("controller-3")]

        def committed_of_survivors() -> dict[str, dict[int, tuple[int, bytes]]]:
            return {s.name: committed_entries(metadata_dir(s) / METADATA_PARTITION_DIR, hwm)
                    for s in survivors}

        committed_before = committed_of_survivors()
        assert all(len(entries) == hwm for entries in committed_before.values())

        wipe_metadata(spec2)
        new_dir = format_observer(cluster, spec2)
        assert new_dir != old_dir
        cluster.start_node(spec2)
        new_key, old_key = ReplicaKey(2, new_dir), ReplicaKey(2, old_dir)
        status = wait_for(lambda s: new_key in keys(s)[1], cluster, WAIT_S)
        # Rule 4: the new disk is an observer; the old key is still the voter and nothing of
        # the new disk counts for it (its fetch progress stays where the old disk stopped).
        voters, _ = keys(status)
        assert old_key in voters and new_key not in voters
        old_progress = next(v for v in status.voters if v.replica_directory_id == old_dir)
        observed = wait_for(lambda s: next(
            o.log_end_offset for o in s.observers if o.replica_directory_id == new_dir
        ) >= hwm, cluster, WAIT_S)
        assert next(v.log_end_offset for v in observed.voters
                    if v.replica_directory_id == old_dir) == old_progress.log_end_offset
        assert {"id": 2, "directory_id": uuid_to_str(new_dir)} in observed.status_json(
            None)["could_be_voters"]

        removed = quorum_cli(cluster, "remove-controller", "--controller-id", "2",
                             "--controller-directory-id", uuid_to_str(old_dir))
        assert removed.returncode == 0, removed.stderr
        added = quorum_cli(cluster, "add-controller", "--config", spec2.config)
        assert added.returncode == 0, added.stderr
        final = quorum(cluster)
        voters, _ = keys(final)
        assert voters == {ReplicaKey(1, directory_id(cluster.node("controller-1"))),
                          new_key, ReplicaKey(3, directory_id(cluster.node("controller-3")))}
        described = final.status_json(None)
        assert {"id": 2, "directory_id": uuid_to_str(new_dir),
                "endpoints": {"CONTROLLER": spec2.address}} in described["current_voters"]
        # Rule 2: no committed record was lost or changed on the survivors, and the new disk
        # holds the same committed prefix.
        assert committed_of_survivors() == committed_before
        grown = wait_for(lambda s: s.high_watermark > final.high_watermark + 2
                         and next(v.log_end_offset for v in s.voters if v.replica_id == 2)
                         >= final.high_watermark, cluster, WAIT_S)
        report = compare_committed_prefixes(cluster, grown.high_watermark)
        assert report.agree, report.mismatches
        assert report.entries_compared >= 2 * hwm
    finally:
        cluster.stop()
        assert not cluster.running(), "processes left behind"


def test_a_controller_restarted_on_a_new_port_updates_its_voter_endpoint(tmp_path: Path) -> None:
    """KIP-853 UpdateRaftVoter: the voter set still names the old port; the restarted voter
    tells the leader its listener, and the quorum reaches it there."""
    cluster = start_cluster(tmp_path / "c")
    try:
        spec2 = cluster.node("controller-2")
        wait_for(lambda s: s.high_watermark > 3, cluster, WAIT_S)
        cluster.kill(spec2, signal.SIGKILL)
        old_address = spec2.address
        (spec2.port,) = free_ports(1)
        Path(spec2.config).write_text(render_properties(cluster.node_properties(spec2)))
        cluster.start_node(spec2)
        status = wait_for(lambda s: s.endpoints().get(2) == {"CONTROLLER": spec2.address},
                          cluster, WAIT_S)
        assert spec2.address != old_address
        assert len(status.voters) == 3 and directory_id(spec2) in {
            v.replica_directory_id for v in status.voters}
        # Rule 5: the change committed and node 2 keeps replicating at its new address.
        hwm = status.high_watermark
        wait_for(lambda s: s.high_watermark > hwm + 2
                 and next(v.log_end_offset for v in s.voters if v.replica_id == 2) > hwm,
                 cluster, WAIT_S)
    finally:
        cluster.stop()
        assert not cluster.running(), "processes left behind"
