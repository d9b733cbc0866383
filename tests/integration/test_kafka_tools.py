"""Apache Kafka's own command-line tools (the jars of `make kafka-deps`, Kafka 4.4.0) against
`minikraft up` (3 controllers + 3 brokers), issue 32: broker addresses for --bootstrap-server,
controller addresses for --bootstrap-controller, each tool's output parsed and checked against
what minikraft itself reports (DescribeTopicPartitions, DescribeQuorum, the segment files).

One module-scoped cluster; each tool run is a JVM start (seconds on two shared cores), so every
run here checks as much as it can. The tests run in file order and leave the cluster as they
found it, except the last ones (a controller's disk replaced; a broker stopped for dump-log).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import struct
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cluster.apache_kafka import tools
from cluster.client.topics import describe_all, partition_rows
from cluster.launch.local_cluster import LocalCluster, NodeSpec
from raft.core.replica_key import ReplicaKey, uuid_to_str
from storage.core.record_batch import iter_segment_batches
from tests.integration.conftest import minikraft, quorum, wait_for
from tests.integration.membership_helpers import (
    directory_id,
    format_observer,
    keys,
    wipe_metadata,
)
from tests.integration.test_kafka_clients import start_up

pytestmark = pytest.mark.skipif(tools.skip_reason() is not None,
                                reason=tools.skip_reason() or "")

WAIT_S = 30  # two cores shared with other test runs


@dataclass(frozen=True)
class Up:
    cluster: LocalCluster
    bootstrap_server: str  # broker addresses
    bootstrap_controller: str  # controller addresses


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    # test_kafka_clients' `minikraft up` (a paused broker is fenced in 3 s there too).
    started = start_up(tmp_path_factory)
    cluster = next(started).cluster
    try:
        yield Up(cluster, ",".join(b.address for b in cluster.brokers),
                 cluster.bootstrap_controller)
    finally:
        for spec in cluster.all_nodes():  # a test that failed while a broker was paused
            cluster.kill(spec, signal.SIGCONT)
        next(started, None)  # resumes start_up past its yield: it stops every node by pid


def run(main_class: str, *args: str, stdin: str | None = None,
        timeout: float = 90) -> tools.ToolResult:
    return tools.run_tool(main_class, list(args), timeout=timeout, stdin=stdin)


def at_once(*runs: tuple[Any, ...]) -> list[tools.ToolResult]:
    """Independent tool runs side by side, (main class, *args) each: a JVM start is the cost."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda r: run(*r), runs))


def ok(result: tools.ToolResult) -> str:
    assert result.rc == 0, f"rc {result.rc}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def partitions(up: Up, topic: str) -> list[dict[str, Any]]:
    """minikraft's own view (DescribeTopicPartitions through its CLI code, in process)."""
    return partition_rows(asyncio.run(describe_all(up.bootstrap_controller, [topic])))


def wait_partitions(up: Up, topic: str, predicate: Callable[[list[dict[str, Any]]], bool],
                    timeout_s: float = WAIT_S) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            rows = partitions(up, topic)
            if rows and predicate(rows):
                return rows
        except Exception:  # a controller moving: ask again
            pass
        time.sleep(0.2)
    raise AssertionError(f"{topic} never matched; last {rows}")


def create_topic(up: Up, topic: str, partitions_: int, rf: int, *configs: str,
                 assignment: str | None = None) -> None:
    args = ["topics", "--bootstrap-server", up.bootstrap_server, "create", "--topic", topic]
    if assignment is None:
        args += ["--partitions", str(partitions_), "--replication-factor", str(rf)]
    for config in configs:
        args += ["--config", config]
    created = minikraft(*args)
    assert created.returncode == 0, created.stderr
    wait_partitions(up, topic, lambda rows: all(r["leader"] >= 0 for r in rows)
                    and len(rows) == partitions_)


def pause(up: Up, broker_id: int) -> NodeSpec:
    spec = up.cluster.node(f"broker-{broker_id}")
    up.cluster.kill(spec, signal.SIGSTOP)
    return spec


def live_brokers(up: Up, *paused: int) -> str:
    """--bootstrap-server without paused brokers: a stopped process still accepts TCP
    connections (the kernel's backlog) and never answers, so a client that picks it waits out
    its request timeout, with Kafka as with minikraft."""
    return ",".join(b.address for b in up.cluster.brokers if b.node_id not in paused)


def resume(up: Up, broker_id: int) -> None:
    up.cluster.kill(up.cluster.node(f"broker-{broker_id}"), signal.SIGCONT)


# -- output parsers: Kafka's formats ---------------------------------------------------------


def parse_topic_describe(stdout: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """kafka-topics --describe of one topic: the header's fields and one dict per partition
    line (`Key: value` cells split by tabs)."""
    header: dict[str, str] = {}
    rows: list[dict[str, str]] = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        cells = {}
        for cell in line.strip("\n").split("\t"):
            if cell.strip():
                key, _, value = cell.partition(":")
                cells[key.strip()] = value.strip()
        if line.startswith("\t"):
            rows.append(cells)
        else:
            header = cells
    return header, rows


def ids(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_table(stdout: str, first_column: str) -> list[dict[str, str]]:
    """A whitespace-aligned table under a header line starting with `first_column`
    (kafka-consumer-groups, describe --replication)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.split()[0] == first_column)
    header = lines[start].split()
    return [dict(zip(header, line.split(), strict=False)) for line in lines[start + 1:]]


# -- kafka-topics ------------------------------------------------------------------------------


def test_topics_create_with_configs_describe_alter_delete(up: Up) -> None:
    topic = "tools-topic"
    created = ok(run(tools.TOPICS, "--bootstrap-server", up.bootstrap_server, "--create",
                     "--topic", topic, "--partitions", "2", "--replication-factor", "3",
                     "--config", "min.insync.replicas=2",
                     "--config", "max.message.bytes=2000000"))
    assert created.strip() == f"Created topic {topic}."
    altered = run(tools.TOPICS, "--bootstrap-server", up.bootstrap_server, "--alter",
                  "--topic", topic, "--partitions", "3")
    ok(altered)
    mine = wait_partitions(up, topic, lambda rows: len(rows) == 3
                           and all(r["leader"] >= 0 and len(r["isr"]) == 3 for r in rows))
    # (Kafka's kafka-topics has no --bootstrap-controller: KIP-919 left it out.)
    header, rows = parse_topic_describe(ok(run(
        tools.TOPICS, "--bootstrap-server", up.bootstrap_server, "--describe",
        "--topic", topic)))
    assert header["Topic"] == topic and header["PartitionCount"] == "3"
    assert header["ReplicationFactor"] == "3"
    assert header["TopicId"] == mine[0]["topic_id"]
    assert set(header["Configs"].split(",")) == {
        "min.insync.replicas=2", "max.message.bytes=2000000"}
    assert [int(r["Partition"]) for r in rows] == [0, 1, 2]
    for row, own in zip(rows, mine, strict=True):
        assert int(row["Leader"]) == own["leader"]
        assert ids(row["Replicas"]) == own["replicas"]
        assert ids(row["Isr"]) == own["isr"]
        assert ids(row["Elr"]) == own["elr"] == []
        assert ids(row["LastKnownElr"]) == own["last_known_elr"] == []
    deleted = ok(run(tools.TOPICS, "--bootstrap-server", up.bootstrap_server, "--delete",
                     "--topic", topic))
    assert deleted == ""
    # The tool returns once the active controller committed the deletion; the controller that
    # answers the describe may be a standby whose committed image learns it a fetch later.
    deadline = time.monotonic() + 10
    gone = asyncio.run(describe_all(up.bootstrap_controller, [topic]))
    while [t.error_code for t in gone] != [3] and time.monotonic() < deadline:
        time.sleep(0.2)
        gone = asyncio.run(describe_all(up.bootstrap_controller, [topic]))
    assert [t.error_code for t in gone] == [3]  # UNKNOWN_TOPIC_OR_PARTITION


# -- kafka-metadata-quorum describe --------------------------------------------------------------


def test_metadata_quorum_describe_status_and_replication(up: Up) -> None:
    status = quorum(up.cluster)
    before_ms = int(time.time() * 1000)
    status_run, replication_run = at_once(
        (tools.METADATA_QUORUM, "--bootstrap-server", up.bootstrap_server, "describe",
         "--status"),
        (tools.METADATA_QUORUM, "--bootstrap-controller", up.bootstrap_controller, "describe",
         "--replication"),
    )
    described = ok(status_run)
    fields = {key: value.strip() for key, value in
              (line.split(":", 1) for line in described.splitlines() if ":" in line)}
    assert fields["ClusterId"] == up.cluster.cluster_id
    assert int(fields["LeaderId"]) == status.leader_id
    assert int(fields["LeaderEpoch"]) >= status.leader_epoch
    assert int(fields["HighWatermark"]) >= status.high_watermark
    voters = json.loads(fields["CurrentVoters"])
    assert {(v["id"], v["directoryId"]) for v in voters} == {
        (c.node_id, uuid_to_str(directory_id(c))) for c in up.cluster.controllers}
    for voter in voters:
        spec = up.cluster.node(f"controller-{voter['id']}")
        assert voter["endpoints"] == [f"CONTROLLER://{spec.address}"]
    observers = json.loads(fields["CurrentObservers"])
    assert {o["id"] for o in observers} == {b.node_id for b in up.cluster.brokers}

    table = parse_table(ok(replication_run), "NodeId")
    by_status: dict[str, set[int]] = {}
    for row in table:
        by_status.setdefault(row["Status"], set()).add(int(row["NodeId"]))
        assert int(row["Lag"]) >= 0
    assert len(by_status["Leader"]) == 1
    assert by_status["Leader"] | by_status["Follower"] == {c.node_id for c in up.cluster.controllers}
    assert by_status["Observer"] == {b.node_id for b in up.cluster.brokers}
    leader_row = next(r for r in table if r["Status"] == "Leader")
    # Kafka's RaftUtil.toReplicaState: the leader's own fetch and caught-up times are "now".
    assert int(leader_row["LastFetchTimestamp"]) >= before_ms - 60_000
    assert int(leader_row["LastCaughtUpTimestamp"]) >= before_ms - 60_000


# -- kafka-features: eligible.leader.replicas.version turns ELR on and off --------------------


def parse_features(stdout: str) -> dict[str, dict[str, str]]:
    features = {}
    for line in stdout.splitlines():
        if line.startswith("Feature:"):
            cells = dict(re.findall(r"(\w+): (\S+)", line))
            features[cells["Feature"]] = cells
    return features


def test_features_describe_and_elr_downgrade_upgrade(up: Up) -> None:
    features = parse_features(ok(run(tools.FEATURES, "--bootstrap-server", up.bootstrap_server,
                                     "describe")))
    assert features["eligible.leader.replicas.version"]["FinalizedVersionLevel"] == "1"
    assert features["eligible.leader.replicas.version"]["SupportedMaxVersion"] == "1"
    assert features["metadata.version"]["FinalizedVersionLevel"] == "4.4-IV2"
    assert features["kraft.version"]["FinalizedVersionLevel"] == "1"
    assert int(features["metadata.version"]["Epoch"]) > 0

    topic = "tools-elr"
    create_topic(up, topic, 1, 3, "min.insync.replicas=3")
    leader = partitions(up, topic)[0]["leader"]
    follower = next(b for b in partitions(up, topic)[0]["replicas"] if b != leader)
    try:
        # ELR on: the fenced follower leaves the ISR for the ELR (ISR 2 < min ISR 3, rule 10).
        pause(up, follower)
        wait_partitions(up, topic, lambda rows: rows[0]["elr"] == [follower])
        header, rows = parse_topic_describe(ok(run(
            tools.TOPICS, "--bootstrap-server", live_brokers(up, follower), "--describe",
            "--topic", topic)))
        assert ids(rows[0]["Elr"]) == [follower]
        assert follower not in ids(rows[0]["Isr"]) and ids(rows[0]["LastKnownElr"]) == []
        assert "min.insync.replicas=3" in header["Configs"]

        downgraded = ok(run(tools.FEATURES, "--bootstrap-controller", up.bootstrap_controller,
                            "downgrade", "--feature", "eligible.leader.replicas.version=0"))
        assert downgraded.strip() == "eligible.leader.replicas.version was downgraded to 0."
        resume(up, follower)
        wait_partitions(up, topic, lambda rows: len(rows[0]["isr"]) == 3 and not rows[0]["elr"])
        # ELR off: the same fencing leaves no ELR behind.
        pause(up, follower)
        off = wait_partitions(up, topic, lambda rows: follower not in rows[0]["isr"])
        time.sleep(1)  # nothing more is written for it
        off = partitions(up, topic)
        assert off[0]["elr"] == [] and off[0]["last_known_elr"] == []

        upgraded = ok(run(tools.FEATURES, "--bootstrap-server", live_brokers(up, follower),
                          "upgrade", "--feature", "eligible.leader.replicas.version=1"))
        assert upgraded.strip() == "eligible.leader.replicas.version was upgraded to 1."
        too_far = run(tools.FEATURES, "--bootstrap-server", live_brokers(up, follower), "upgrade",
                      "--feature", "eligible.leader.replicas.version=2")
        assert too_far.rc == 1
        assert ("Could not upgrade eligible.leader.replicas.version to 2. Invalid update "
                "version 2 for feature eligible.leader.replicas.version." in too_far.stdout)
        assert "1 out of 1 operation(s) failed." in too_far.stdout + too_far.stderr
    finally:
        resume(up, follower)
    wait_partitions(up, topic, lambda rows: len(rows[0]["isr"]) == 3)


# -- kafka-leader-election -------------------------------------------------------------------


def test_leader_election_unclean_then_preferred(up: Up) -> None:
    topic = "tools-election"
    create_topic(up, topic, 1, 2, "min.insync.replicas=1")
    preferred, other = partitions(up, topic)[0]["replicas"]
    try:
        # `other` leaves the ISR, then the leader is fenced too: no ISR or unfenced ELR member
        # is left to lead, so only an UNCLEAN election brings the partition back.
        pause(up, other)
        wait_partitions(up, topic, lambda rows: rows[0]["isr"] == [preferred])
        pause(up, preferred)
        resume(up, other)
        wait_partitions(up, topic, lambda rows: rows[0]["leader"] == -1)
        time.sleep(1)  # `other` unfenced; still no leader without an unclean election
        assert partitions(up, topic)[0]["leader"] == -1
        unclean = ok(run(tools.LEADER_ELECTION, "--bootstrap-server", live_brokers(up, preferred),
                         "--election-type", "UNCLEAN", "--topic", topic, "--partition", "0"))
        assert unclean.strip() == (
            f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0")
        wait_partitions(up, topic, lambda rows: rows[0]["leader"] == other, 10)
    finally:
        resume(up, preferred)
        resume(up, other)
    wait_partitions(up, topic, lambda rows: len(rows[0]["isr"]) == 2
                    and rows[0]["leader_recovery_state"] == "RECOVERED")

    # PREFERRED from a JSON file moves the leadership back to the first replica.
    json_file = Path(up.cluster.dir) / "election.json"
    json_file.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0}]}))
    moved = ok(run(tools.LEADER_ELECTION, "--bootstrap-server", up.bootstrap_server,
                   "--election-type", "PREFERRED", "--path-to-json-file", str(json_file)))
    assert moved.strip() == (
        f"Successfully completed leader election (PREFERRED) for partitions {topic}-0")
    # (a standby controller may answer the describe a moment before it replayed the change)
    wait_partitions(up, topic, lambda rows: rows[0]["leader"] == preferred, 10)
    # Every partition already has its preferred leader: Kafka lists none (ELECTION_NOT_NEEDED
    # results are left out for --all-topic-partitions); the same partition by name says so.
    all_preferred, again = at_once(
        (tools.LEADER_ELECTION, "--bootstrap-server", up.bootstrap_server,
         "--election-type", "PREFERRED", "--all-topic-partitions"),
        (tools.LEADER_ELECTION, "--bootstrap-server", up.bootstrap_server,
         "--election-type", "UNCLEAN", "--topic", topic, "--partition", "0"),
    )
    assert ok(all_preferred) == ""
    assert ok(again).strip() == f"Valid replica already elected for partitions {topic}-0"


# -- console producer and consumer, consumer groups, get-offsets --------------------------------


def test_console_round_trip_consumer_groups_and_offsets(up: Up) -> None:
    topic, group = "tools-console", "tools-group"
    create_topic(up, topic, 1, 3)
    lines = "h1:a,h2:b\tk1\tv1\nh1:c\tk2\tv2\nh3:\tk3\tv3\n"
    ok(run(tools.CONSOLE_PRODUCER, "--bootstrap-server", up.bootstrap_server, "--topic", topic,
           "--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
           stdin=lines))
    consumed = ok(run(
        tools.CONSOLE_CONSUMER, "--bootstrap-server", up.bootstrap_server, "--topic", topic,
        "--group", group, "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000",
        "--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
        "--formatter-property", "print.offset=true"))
    assert consumed.splitlines() == [
        "Offset:0\th1:a,h2:b\tk1\tv1",
        "Offset:1\th1:c\tk2\tv2",
        "Offset:2\th3:\tk3\tv3",
    ]

    CG = tools.CONSUMER_GROUPS
    offsets, listed, described_run = at_once(
        (tools.GET_OFFSETS, "--bootstrap-server", up.bootstrap_server,
         "--topic-partitions", f"{topic}:0", "--time", "-1"),
        (CG, "--bootstrap-server", up.bootstrap_server, "--list"),
        (CG, "--bootstrap-server", up.bootstrap_server, "--describe", "--group", group),
    )
    assert ok(offsets).split() == [f"{topic}:0:3"]
    assert group in ok(listed).split()
    described = parse_table(ok(described_run), "GROUP")
    assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"])
            for r in described] == [(topic, "0", "3", "3", "0")]
    reset = parse_table(ok(run(CG, "--bootstrap-server", up.bootstrap_server, "--reset-offsets",
                               "--group", group, "--topic", topic, "--to-offset", "1",
                               "--execute")), "GROUP")
    assert [(r["TOPIC"], r["PARTITION"], r["NEW-OFFSET"]) for r in reset] == [(topic, "0", "1")]
    deleted = ok(run(CG, "--bootstrap-server", up.bootstrap_server, "--delete", "--group", group))
    assert deleted.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    gone = run(CG, "--bootstrap-server", up.bootstrap_server, "--describe", "--group", group)
    # Kafka 4.x answers DescribeGroups for an unknown group GROUP_ID_NOT_FOUND (KIP-1043).
    assert f"GroupIdNotFoundException: Group {group} not found." in gone.stdout


# -- kafka-log-dirs, kafka-producer-perf-test, kafka-e2e-latency -------------------------------


def segment_batches_bytes(path: Path) -> int:
    data = path.read_bytes()
    return sum(size for _, _, size in iter_segment_batches(data))


def test_perf_test_e2e_latency_and_log_dirs(up: Up) -> None:
    topic = "tools-perf"
    create_topic(up, topic, 1, 3)
    perf = ok(run(tools.PRODUCER_PERF, "--topic", topic, "--num-records", "500",
                  "--record-size", "100", "--throughput", "-1", "--command-property",
                  f"bootstrap.servers={up.bootstrap_server}", "acks=all"))
    summary = perf.strip().splitlines()[-1]
    assert re.match(r"500 records sent, [\d.]+ records/sec .* [\d.]+ ms avg latency", summary)
    e2e = ok(run(tools.E2E_LATENCY, "--bootstrap-server", up.bootstrap_server, "--topic", topic,
                 "--num-records", "30", "--producer-acks", "all", "--record-size", "50"))
    assert re.search(r"Avg latency: [\d.]+ ms", e2e)
    assert re.search(r"Percentiles: 50th = \d+, 99th = \d+, 99.9th = \d+", e2e)
    end = 500 + 30
    wait_partitions(up, topic, lambda rows: len(rows[0]["isr"]) == 3)

    out = ok(run(tools.LOG_DIRS, "--bootstrap-server", up.bootstrap_server, "--describe",
                 "--topic-list", topic))
    assert f"Received log directory information from brokers "\
           f"{','.join(str(b.node_id) for b in up.cluster.brokers)}" in out
    report = json.loads(out.strip().splitlines()[-1])
    assert {b["broker"] for b in report["brokers"]} == {b.node_id for b in up.cluster.brokers}
    for broker in report["brokers"]:
        spec = up.cluster.node(f"broker-{broker['broker']}")
        (log_dir,) = broker["logDirs"]
        assert log_dir["error"] is None
        assert Path(log_dir["logDir"]) == Path(spec.dir) / "data"
        (partition,) = log_dir["partitions"]
        assert partition["partition"] == f"{topic}-0" and partition["isFuture"] is False
        assert partition["offsetLag"] == 0
        segment = Path(log_dir["logDir"]) / f"{topic}-0" / f"{0:020d}.log"
        # The batches' bytes, not the preallocated file length (Kafka's log.size).
        assert partition["size"] == segment_batches_bytes(segment)
        assert partition["size"] < os.path.getsize(segment)
    *_, (_, last, _) = iter_segment_batches(segment.read_bytes())
    assert last.next_offset == end


# -- kafka-metadata-quorum add-controller / remove-controller: seed 003's disk replacement ------


def test_metadata_quorum_add_and_remove_controller_for_a_replaced_disk(up: Up) -> None:
    cluster = up.cluster
    status = quorum(cluster)
    spec = next(c for c in cluster.controllers if c.node_id != status.leader_id)
    old_dir = directory_id(spec)
    cluster.kill(spec, signal.SIGKILL)
    wipe_metadata(spec)  # the failed disk
    new_dir = format_observer(cluster, spec)  # storage format --no-initial-controllers
    assert new_dir != old_dir
    cluster.start_node(spec)
    new_key, old_key = ReplicaKey(spec.node_id, new_dir), ReplicaKey(spec.node_id, old_dir)
    wait_for(lambda s: new_key in keys(s)[1] and next(
        o.log_end_offset for o in s.observers if o.replica_directory_id == new_dir)
        >= s.high_watermark - 1, cluster, WAIT_S)

    # The new controller's own properties file: Kafka's tool reads node.id, the controller
    # listener and metadata.log.dir's meta.properties (its directory id) from it.
    added = ok(run(tools.METADATA_QUORUM, "--bootstrap-controller", up.bootstrap_controller,
                   "--command-config", spec.config, "add-controller"))
    assert added.strip() == (f"Added controller {spec.node_id} with directory id "
                             f"{uuid_to_str(new_dir)} and endpoints: CONTROLLER://{spec.address}")
    voters, _ = keys(quorum(cluster))
    assert {new_key, old_key} <= voters and len(voters) == 4
    # `--opt=value`: a directory id is base64url and one in 64 starts with '-', which Kafka's
    # argparse4j would read as an option ("expected one argument") if it came separately.
    removed = ok(run(tools.METADATA_QUORUM, "--bootstrap-server", up.bootstrap_server,
                     "remove-controller", "--controller-id", str(spec.node_id),
                     f"--controller-directory-id={uuid_to_str(old_dir)}"))
    assert removed.strip() == (f"Removed KRaft controller {spec.node_id} with directory id "
                               f"{uuid_to_str(old_dir)}")
    voters, _ = keys(wait_for(lambda s: len(keys(s)[0]) == 3, cluster, WAIT_S))
    assert new_key in voters and old_key not in voters
    # The old key again: Kafka's VOTER_NOT_FOUND, as the tool shows it.
    gone = run(tools.METADATA_QUORUM, "--bootstrap-controller", up.bootstrap_controller,
               "remove-controller", "--controller-id", str(spec.node_id),
               f"--controller-directory-id={uuid_to_str(old_dir)}")
    assert gone.rc == 1
    assert "VoterNotFoundException" in gone.stderr or "VOTER_NOT_FOUND" in gone.stderr + gone.stdout


# -- kafka-dump-log over a minikraft segment ---------------------------------------------------


CRC_AT = 8 + 4 + 4 + 1  # baseOffset, batchLength, partitionLeaderEpoch, magic (batch v2)


def dump_batches(stdout: str) -> list[dict[str, str]]:
    batches = []
    for line in stdout.splitlines():
        if line.startswith("baseOffset:"):
            tokens = re.findall(r"(\w+): (\S+)", line)
            batches.append(dict(tokens))
    return batches


def test_dump_log_reads_a_partition_segment_byte_for_byte(up: Up) -> None:
    topic = "tools-perf"  # written by test_perf_test_e2e_latency_and_log_dirs
    leader = partitions(up, topic)[0]["leader"]
    broker = next(b for b in up.cluster.brokers if b.node_id != leader)
    segment = Path(broker.dir) / "data" / f"{topic}-0" / f"{0:020d}.log"
    # The active segment is preallocated (log.preallocate, on by default here): Kafka's reader
    # meets the zeros past the last batch as a batch of size 0, as it would on a preallocated
    # segment of its own (FileLogInputStream).
    active = run(tools.DUMP_LOG, "--files", str(segment))
    assert active.rc == 1
    assert "Found record size 0 smaller than minimum record overhead (14)" in active.stderr
    assert len(dump_batches(active.stdout)) > 0

    # A clean shutdown trims the free space (Kafka does the same to its preallocated
    # segments): then the whole file is batches, and Kafka's tool reads every byte of it.
    up.cluster.kill(broker, signal.SIGTERM)
    deadline = time.monotonic() + WAIT_S
    while broker in up.cluster.running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert broker not in up.cluster.running()
    data = segment.read_bytes()
    mine = list(iter_segment_batches(data))
    assert sum(size for _, _, size in mine) == len(data)
    dumped = ok(run(tools.DUMP_LOG, "--files", str(segment), "--deep-iteration"))
    assert "invalid bytes" not in dumped
    theirs = dump_batches(dumped)
    assert [(int(b["baseOffset"]), int(b["lastOffset"]), int(b["position"]), int(b["size"]),
             int(b["crc"]), b["isvalid"], int(b["count"]))
            for b in theirs] == [
        (batch.base_offset, batch.last_offset, position, size,
         struct.unpack_from(">I", data, position + CRC_AT)[0], "true", len(batch.records))
        for position, batch, size in mine]
