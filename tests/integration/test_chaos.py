"""`minikraft chaos` against a real local cluster (3 controllers, 3 brokers, each a process):
every scenario with a fixed seed and a short duration ends healed, recovered, with every acked
acks=all write read back or, after a forced unclean recovery only, attributed to the committed
RECOVERING record of that election (rule 23), with the metadata log's committed prefix intact
(rule 2), and with its faults aimed at pids from cluster.json. Every node runs on the disk that
loses what was not fsync'd on kill -9 (minikraft.disk.mode=power-loss-sim), so every kill is a
power cut. The long versions are behind the `slow` marker. The cluster is stopped with `minikraft down`, which
must leave no process behind."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from cluster.launch.local_cluster import CLUSTER_FILE, LocalCluster, is_running
from cluster.launch.readiness import wait_until_ready
from tests.integration.conftest import minikraft

# Short timeouts so a paused broker is fenced, and a stuck follower leaves the ISR, in seconds.
FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "minikraft.disk.mode": "power-loss-sim",
}
SEED = 7
SHORT_S = "3"


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("chaos")
    cluster = LocalCluster.plan(directory, controllers=3, brokers=3, base_port=0, overrides=FAST)
    cluster.format()
    cluster.start()
    try:
        asyncio.run(wait_until_ready(cluster, 60))
        yield directory
    finally:
        down = minikraft("down", "--dir", str(directory), "--output", "json", timeout=60)
        final = LocalCluster.load(directory)  # chaos restarts nodes: the pids are in the file
        assert json.loads(down.stdout)["still_running"] == []
        assert not any(is_running(s) for s in final.all_nodes())


def pids(directory: Path) -> dict[str, int]:
    data = json.loads((directory / CLUSTER_FILE).read_text())
    return {
        f"{'controller' if n in data['controllers'] else 'broker'}-{n['node_id']}": n["pid"]
        for n in data["controllers"] + data["brokers"]
    }


def run_chaos(directory: Path, scenario: str, duration_s: str = SHORT_S, seed: int = SEED,
              attributed_ok: bool = False, client: str = "minikraft") -> dict[str, Any]:
    before = pids(directory)
    done = minikraft(
        "chaos", "--dir", str(directory), "--scenario", scenario, "--seed", str(seed),
        "--duration-s", duration_s, "--recovery-timeout-s", "60", "--client", client,
        "--output", "json", timeout=240,
    )
    summary: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == 0, (
        summary["unattributed_values"], summary["recovery_problem"], summary["checks"],
        done.stderr[-3000:],
    )
    assert summary["ok"] is True and summary["recovered"] is True
    assert summary["client"] == client and summary["acked"] > 0
    assert summary["lost_unattributed"] == 0 and summary["unattributed_values"] == []
    assert all(check["ok"] for check in summary["checks"].values())
    assert summary["checks"]["metadata_committed_prefix"]["offsets"] > 0
    if not attributed_ok:
        assert summary["lost"] == 0 and summary["lost_values"] == []
        assert summary["attributed_losses"] == {}
    assert summary["read_back_distinct"] >= summary["acked"] - summary["lost_attributed"]
    # Signals only ever went to a pid cluster.json recorded for that node (before or after a
    # restart in this run); never to anything found by name.
    known = set(before.values()) | set(summary["pids"].values())
    for event in summary["faults"]:
        if event["action"] in ("kill", "pause", "terminate", "resume"):
            assert event["pid"] in known, event
    after = LocalCluster.load(directory)
    assert all(is_running(s) for s in after.all_nodes())
    assert pids(directory) == summary["pids"]
    return summary


def actions(summary: dict[str, Any]) -> list[str]:
    return [e["action"] for e in summary["faults"]]


def test_kill_leader_controller(cluster_dir: Path) -> None:
    summary = run_chaos(cluster_dir, "kill-leader-controller")
    killed = [e for e in summary["faults"] if e["action"] == "kill"]
    assert killed and all(e["node"].startswith("controller-") for e in killed)
    assert "restart" in actions(summary)


def test_kill_broker(cluster_dir: Path) -> None:
    before = pids(cluster_dir)
    summary = run_chaos(cluster_dir, "kill-broker")
    killed = {e["node"] for e in summary["faults"] if e["action"] == "kill"}
    assert killed and all(n.startswith("broker-") for n in killed)
    assert all(summary["pids"][n] != before[n] for n in killed)


def test_kill_broker_under_a_librdkafka_producer_loses_nothing_acked(cluster_dir: Path) -> None:
    """The same kill -9 of a broker with librdkafka (confluent-kafka) producing: it rides out
    the leader change by itself, and every value it saw acked is read back (rule 23), journaled
    as minikraft's producer journals for the audit."""
    pytest.importorskip("confluent_kafka", reason="dev extra: confluent-kafka")
    summary = run_chaos(cluster_dir, "kill-broker", client="confluent-kafka")
    assert "kill" in actions(summary) and "restart" in actions(summary)
    with Path(summary["journal"]).open("rb") as journal:
        entries = [
            e for e in msgpack.Unpacker(journal, raw=False) if e.get("run_id") == summary["run_id"]
        ]
    acked = [e for e in entries if e["event"] == "ack" and e["error"] == "NONE"]
    assert len(acked) == summary["acked"] and all(e["offset"] >= 0 for e in acked)


def test_pause_broker_past_the_session_timeout(cluster_dir: Path) -> None:
    summary = run_chaos(cluster_dir, "pause-broker")
    events = summary["faults"]
    pause = next(e for e in events if e["action"] == "pause")
    resume = next(e for e in events if e["action"] == "resume" and e["node"] == pause["node"])
    assert resume["ts_ms"] - pause["ts_ms"] > int(FAST["broker.session.timeout.ms"])
    assert summary["pids"][pause["node"]] == pause["pid"]  # paused, never restarted
    broker_id = pause["node"].removeprefix("broker-")
    logs = "".join(p.read_text() for p in (cluster_dir / "logs").glob("controller-*.log"))
    assert f"Fenced broker {broker_id} " in logs  # the pause outlived the session


def test_partition_cuts_a_node_off_and_heals(cluster_dir: Path) -> None:
    summary = run_chaos(cluster_dir, "partition")
    cut = next(e for e in summary["faults"] if e["action"] == "partition")
    assert len(cut["peers"]) == 5
    assert "heal-network" in actions(summary)
    cluster = LocalCluster.load(cluster_dir)
    for spec in cluster.all_nodes():
        with urllib.request.urlopen(f"http://{spec.host}:{spec.http_port}/v1/faults") as r:
            assert json.loads(r.read())["partition"] == []


def test_rolling_restart_is_clean(cluster_dir: Path) -> None:
    summary = run_chaos(cluster_dir, "rolling-restart")
    terminated = [e["node"] for e in summary["faults"] if e["action"] == "terminate"]
    assert terminated and terminated[0].startswith("broker-")
    assert "kill-after-terminate-timeout" not in actions(summary)
    assert summary["notes"] == []


def test_min_isr_change_ends_at_the_starting_min_isr(cluster_dir: Path) -> None:
    summary = run_chaos(cluster_dir, "min-isr-change")
    changes = [e["config"] for e in summary["faults"] if e["action"] == "alter-config"]
    assert len(changes) >= 2 and changes[-1] == "min.insync.replicas=2"
    assert summary["notes"] == []


def test_mixed_journals_every_send_and_ack(cluster_dir: Path) -> None:
    summary = run_chaos(cluster_dir, "mixed")
    assert "mixed-round" in actions(summary)
    journal = Path(summary["journal"])
    assert journal == cluster_dir / "journal" / "chaos-acks.journal"
    entries = [
        e for e in msgpack.Unpacker(journal.open("rb"), raw=False)
        if e.get("run_id") == summary["run_id"]
    ]
    sends = [e for e in entries if e["event"] == "send"]
    acks = [e for e in entries if e["event"] == "ack"]
    assert len(sends) == summary["sent"] and len(acks) == summary["sent"]
    assert sum(1 for e in acks if e["error"] == "NONE") == summary["acked"]
    assert all(e["acks"] == -1 for e in entries)


def test_power_loss_kills_lose_nothing_acked_or_committed(cluster_dir: Path) -> None:
    summary = run_chaos(cluster_dir, "power-loss")
    killed = [e["node"] for e in summary["faults"] if e["action"] == "kill"]
    assert killed and "restart" in actions(summary)
    config = LocalCluster.load(cluster_dir).node(killed[0]).config
    assert "minikraft.disk.mode=power-loss-sim" in Path(config).read_text()


def test_disk_replace_controller_swaps_the_voter_key(cluster_dir: Path) -> None:
    before = json.loads((cluster_dir / CLUSTER_FILE).read_text())["controllers"]
    summary = run_chaos(cluster_dir, "disk-replace-controller")
    check = summary["checks"]["disk_replace"]
    assert check["old_directory_id"] != check["new_directory_id"]
    node_id = int(check["node"].removeprefix("controller-"))
    assert f"{node_id}:{check['new_directory_id']}" in check["voters"]
    assert f"{node_id}:{check['old_directory_id']}" not in check["voters"]
    assert len(check["voters"]) == 3
    assert "wipe-metadata" in actions(summary)
    after = {c["node_id"]: c["directory_id"] for c in
             json.loads((cluster_dir / CLUSTER_FILE).read_text())["controllers"]}
    assert after[node_id] == check["new_directory_id"]
    assert {c["node_id"]: c["directory_id"] for c in before}[node_id] == check["old_directory_id"]


def test_voter_churn_ends_with_the_starting_voters(cluster_dir: Path) -> None:
    summary = run_chaos(cluster_dir, "voter-churn")
    assert summary["checks"]["voter_churn"]["rounds"] >= 1
    commands = [e["command"] for e in summary["faults"] if e["action"] == "cli"]
    assert "metadata-quorum --bootstrap-controller" in commands
    assert summary["notes"] == []


def test_last_replica_standing_attributes_losses_to_the_unclean_election(
    cluster_dir: Path,
) -> None:
    summary = run_chaos(cluster_dir, "last-replica-standing", attributed_ok=True)
    check = summary["checks"]["unclean_recovery"]
    assert check["tool_exit_code"] == 0 and check["tool_result"]["result"] == "elected"
    partition = check["partition"]
    # The committed metadata log shows the election: RECOVERING, led by the stale replica.
    elections = [e for e in summary["recovering_elections"] if e["partition"] == partition]
    assert elections and elections[0]["leader"] == check["designated_leader"]
    assert summary["metadata_offsets"]["start"] <= elections[0]["offset"]
    assert elections[0]["offset"] < summary["metadata_offsets"]["end"]
    # Every loss, if any, is attributed to that partition's election with its offset.
    for lost_partition, loss in summary["attributed_losses"].items():
        assert loss["metadata_offsets"]
        assert int(lost_partition) in {e["partition"] for e in summary["recovering_elections"]}
    assert summary["lost"] == summary["lost_attributed"]


def test_chaos_without_a_cluster_is_a_usage_error(tmp_path: Path) -> None:
    done = minikraft("chaos", "--dir", str(tmp_path), "--scenario", "kill-broker")
    assert done.returncode == 2
    assert CLUSTER_FILE in done.stderr
    unknown = minikraft("chaos", "--dir", str(tmp_path), "--scenario", "meteor-strike")
    assert unknown.returncode == 2


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    "scenario",
    ["kill-leader-controller", "kill-broker", "pause-broker", "partition", "rolling-restart",
     "min-isr-change", "mixed", "power-loss", "disk-replace-controller", "voter-churn",
     "last-replica-standing"],
)
def test_long_chaos(cluster_dir: Path, scenario: str, seed: int) -> None:
    summary = run_chaos(cluster_dir, scenario, duration_s=os.environ.get("CHAOS_LONG_S", "30"),
                        seed=seed, attributed_ok=scenario == "last-replica-standing")
    assert summary["duplicated"] == 0
