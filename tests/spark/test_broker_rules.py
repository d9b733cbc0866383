"""Rules 20, 22 and 23 and the consumer-group checks on a hand-made cluster directory written
with the project's own encoders (encode_batch for partition logs, encode_event for broker
journals, the producer's msgpack ack entries, the chaos group's read and commit entries): each
bad partition is reported as exactly its rule with its evidence, a loss on a RECOVERING partition
is attributed, not a violation, and the single-process baseline agrees. Torn and garbled inputs
become flagged rows, never a crash."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import msgpack
import pytest
from pyspark.sql import SparkSession

from analytics.audit import run_audit
from analytics.baseline import run_baseline
from analytics.generate import NodeLog, write_node
from analytics.read.broker_inputs import (
    discover_journals,
    discover_partition_logs,
    iter_ack_rows,
    iter_journal_rows,
    iter_partition_log_rows,
)
from analytics.rules.groups.pure import COMMITS_MONOTONIC, NO_SKIPPED
from broker.core.journal_events import (
    HwmAdvanced,
    JournalEvent,
    RecoveryStateChanged,
    RoleChanged,
    encode_event,
)
from metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from raft.core.control_records import LeaderChangeRecord, Voter, VotersRecord, bootstrap_snapshot
from raft.core.replica_key import uuid_to_str
from storage.core.record_batch import Record, encode_batch
from tests.spark.test_audit_rules import Log

pytestmark = pytest.mark.spark

TOPIC = "orders"
TOPIC_ID = uuid.UUID(int=0xB0B)
BROKERS = (101, 102, 103)
VOTER = Voter(1, uuid.UUID(int=1001))


def write_metadata(root: Path, aborted_election: bool = False) -> None:
    """Partitions 0-3 of `orders` on 101, 102, 103; partition 3 has an unclean election
    (RECOVERING with ISR = [102], rules 13 and 19). aborted_election: its record is in a
    KIP-868 transaction that the next leader aborts (a controller failover)."""
    log = Log()
    log.control(1, LeaderChangeRecord(1, (VOTER.key,)))
    log.control(1, VotersRecord((VOTER,)))
    log.data(1, TopicRecord(TOPIC, TOPIC_ID), *(
        PartitionRecord(p, TOPIC_ID, replicas=BROKERS, isr=BROKERS, leader=101)
        for p in range(4)))
    election = PartitionChangeRecord(3, TOPIC_ID, isr=(102,), leader=102,
                                     leader_recovery_state=1)
    if aborted_election:
        log.data(1, BeginTransactionRecord("ElectLeaders"), election)
        log.control(2, LeaderChangeRecord(1, (VOTER.key,)))
        log.data(2, NoOpRecord(), AbortTransactionRecord("Controller failover"))
    else:
        log.data(1, election)
    node_log = NodeLog(1, VOTER.voter_directory_id, segment_records=10**6)
    for base, raw, count in log.batches:
        node_log.append_raw(base, raw, count)
    write_node(root, node_log, [(0, 0, bootstrap_snapshot((VOTER,)))])


def write_partition(root: Path, broker: int, partition: int,
                    entries: list[tuple[int, str]]) -> Path:
    """A data segment of (leader epoch, key) entries from offset 0, one batch per entry."""
    directory = root / f"broker-{broker}" / "data" / f"{TOPIC}-{partition}"
    directory.mkdir(parents=True, exist_ok=True)
    raw = b"".join(encode_batch(offset, epoch, 5_000 + offset, [f"{key}:payload".encode()])
                   for offset, (epoch, key) in enumerate(entries))
    path = directory / f"{0:020d}.log"
    path.write_bytes(raw)
    return path


def role(broker: int, partition: int, kind: str, leader: int, epoch: int, ts: int) -> RoleChanged:
    return RoleChanged(broker, TOPIC, partition, kind, leader, epoch, epoch, BROKERS, 0, 0, 0, ts)


def write_journals(root: Path, events: dict[int, list[JournalEvent]],
                   acked: list[tuple[int, str, int, int]],
                   non_idempotent: frozenset[str] = frozenset()) -> None:
    """Broker journals and the chaos producer's ack journal; a key in non_idempotent was sent
    by a producer that says it is not idempotent."""
    journal = root / "journal"
    journal.mkdir(parents=True, exist_ok=True)
    for broker, items in events.items():
        (journal / f"broker-{broker}.journal").write_bytes(
            b"".join(encode_event(e) for e in items))
    entries = []
    for partition, key, offset, epoch in acked:
        producer, _, seq = key.rpartition("-")
        common = {"producer_id": producer, "seq": int(seq), "topic": TOPIC,
                  "partition": partition, "acks": -1, "ts": 7_000}
        if key in non_idempotent:
            common["idempotent"] = False
        entries.append({"event": "send", **common, "value": f"{key}:payload"})
        entries.append({"event": "ack", **common, "error": "NONE", "offset": offset,
                        "leader_epoch": epoch})
    (journal / "chaos-acks.journal").write_bytes(
        b"".join(msgpack.packb(e, use_bin_type=True) for e in entries))


def write_consumer_journal(root: Path) -> Path:
    """Two groups on partition 0 (offsets 0-2): `skipper` committed 3 but nobody read offset 1;
    `rewinder` read everything and its committed offset went 3 -> 1 with no reset."""
    entries: list[dict[str, Any]] = []

    def read(group: str, *offsets: int) -> None:
        entries.extend({"event": "read", "group": group, "member": f"{group}-m0", "topic": TOPIC,
                        "partition": 0, "offset": o, "value": f"p-{o}", "ts": 8_000}
                       for o in offsets)

    def commit(group: str, offset: int) -> None:
        entries.append({"event": "commit", "group": group, "topic": TOPIC, "partition": 0,
                        "offset": offset, "source": "offset-fetch", "ts": 8_000})

    read("skipper", 0, 2)
    commit("skipper", 3)
    read("rewinder", 0, 1, 2)
    commit("rewinder", 3)
    commit("rewinder", 1)
    path = root / "journal" / "chaos-consumers.journal"
    path.write_bytes(b"".join(msgpack.packb(e, use_bin_type=True) for e in entries))
    return path


def build_cluster(root: Path) -> dict[str, Path]:
    write_metadata(root)
    files: dict[str, Path] = {}
    clean = [(0, "p-0"), (0, "p-1"), (0, "p-2")]
    for broker in BROKERS:
        write_partition(root, broker, 0, clean)
    # Partition 1: 102 followed leader 101 at epoch 1 yet kept its epoch-0 tail (rule 22);
    # 103 never followed epoch 1 (down until the end): unchecked, not a violation.
    write_partition(root, 101, 1, [(0, "p-10"), (1, "p-12")])
    files["bad_follower"] = write_partition(root, 102, 1, [(0, "p-10"), (0, "p-11"), (0, "p-13")])
    write_partition(root, 103, 1, [(0, "p-10"), (0, "p-11")])
    # Partition 2: an acked write twice, another missing, no election to explain it (rule 23);
    # q-22 twice too, from a producer that is not idempotent: counted, not a violation.
    write_partition(root, 101, 2, [(0, "p-20"), (0, "p-20"), (0, "q-22"), (0, "q-22")])
    # Partition 3: the unclean election lost p-30 (attributed); p-31 is there.
    write_partition(root, 102, 3, [(1, "p-31")])
    events: dict[int, list[JournalEvent]] = {b: [] for b in BROKERS}
    for partition in range(3):
        events[101].append(role(101, partition, "leader", 101, 0, 1_000))
        for follower in (102, 103):
            events[follower].append(role(follower, partition, "follower", 101, 0, 1_000))
    events[101].append(role(101, 1, "leader", 101, 1, 2_000))
    events[102].append(role(102, 1, "follower", 101, 1, 2_000))
    events[102].append(role(102, 3, "leader", 102, 1, 2_000))
    events[101].append(HwmAdvanced(101, TOPIC, 0, 0, 3, 3, 2, 0, 1_500, BROKERS))
    # Rule 20: the HWM of partition 1 moved while only the leader was in the ISR (min ISR 2).
    events[101].append(HwmAdvanced(101, TOPIC, 1, 1, 2, 1, 2, 1, 2_500, (101,)))
    write_journals(root, events, [(0, "p-0", 0, 0), (0, "p-1", 1, 0), (0, "p-2", 2, 0),
                                  (1, "p-10", 0, 0), (1, "p-12", 1, 1), (2, "p-20", 0, 0),
                                  (2, "p-21", 1, 0), (2, "q-22", 2, 0), (3, "p-30", 0, 0),
                                  (3, "p-31", 0, 1)], non_idempotent=frozenset({"q-22"}))
    files["consumers"] = write_consumer_journal(root)
    return files


def check(rules: dict[int | str, Any], files: dict[str, Path]) -> None:
    flagged = {n for n, r in rules.items() if r.violation_count}
    assert flagged == {20, 22, 23, COMMITS_MONOTONIC, NO_SKIPPED}, {
        n: r.violations for n, r in rules.items()}
    rule20 = rules[20]
    assert (rule20.checked, rule20.violation_count) == (2, 1)
    assert rule20.violations[0]["partition"] == f"{TOPIC}-1"
    assert (rule20.violations[0]["old"], rule20.violations[0]["new"]) == (1, 2)
    assert rule20.violations[0]["isr_size"] == 1 and rule20.violations[0]["min_isr"] == 2
    rule22 = rules[22]
    assert rule22.violation_count == 1 and rule22.notes["unchecked_replicas"] == 1
    bad = rule22.violations[0]
    assert (bad["partition"], bad["node"], bad["offset"], bad["count"]) == (f"{TOPIC}-1", 102,
                                                                            1, 2)
    assert bad["file"] == str(files["bad_follower"])
    assert rule22.checked == 3 + 3 + 3  # partition 0's two followers and 102 on partition 1
    rule23 = rules[23]
    assert rule23.checked == 10 and rule23.violation_count == 2
    outcomes = {(v["key"], v["outcome"]) for v in rule23.violations}
    assert outcomes == {("p-20", "duplicated"), ("p-21", "lost")}
    assert all(v["partition"] == f"{TOPIC}-2" for v in rule23.violations)
    assert rule23.attributed_count == 1
    assert rule23.attributed[0]["key"] == "p-30"
    assert rule23.attributed[0]["partition"] == f"{TOPIC}-3"
    # p-20's producer did not say (judged idempotent: a violation); q-22's said it is not.
    assert rule23.notes == {"duplicates_counted": 1, "removed_by_retention_or_compaction": 0}
    monotonic = rules[COMMITS_MONOTONIC]
    assert (monotonic.checked, monotonic.violation_count) == (3, 1)
    back = monotonic.violations[0]
    assert (back["group_id"], back["partition"], back["offset"]) == ("rewinder", f"{TOPIC}-0", 1)
    assert back["file"] == str(files["consumers"])
    skipped = rules[NO_SKIPPED]
    # Checked: rewinder's last commit is 1 (offset 0 below it), skipper's 3 (offsets 0-2).
    assert (skipped.checked, skipped.violation_count) == (1 + 3, 1)
    assert skipped.notes == {"skipped_records": 1}
    assert (skipped.violations[0]["group_id"], skipped.violations[0]["offset"]) == ("skipper", 1)


@pytest.mark.parametrize("python_in_driver", [True, False], ids=["in-driver", "workers"])
def test_rules_20_22_23_on_hand_made_cluster(spark: SparkSession, tmp_path: Path,
                                             python_in_driver: bool) -> None:
    """The rules' Python in Python workers (mapInArrow, cogroup applyInArrow) and in the
    driver (a small input's way, analytics.engine.spark_session.cogroup_in_arrow): the same results."""
    files = build_cluster(tmp_path / "cluster")
    result = run_audit(tmp_path / "cluster", spark=spark, report_dir=tmp_path / "report",
                       python_in_driver=python_in_driver)
    check({r.rule: r for r in result.rules}, files)
    assert result.verdict == "violations"
    assert result.inputs["broker_journals"] == 3 and result.inputs["ack_journals"] == 1
    assert result.inputs["consumer_journals"] == 1
    assert set(result.hwm_timelines) == {f"{TOPIC}-0", f"{TOPIC}-1", f"{TOPIC}-2", f"{TOPIC}-3"}
    page = (tmp_path / "report" / "index.html").read_text()
    assert "high watermark" in page and "attributed" in page and "rule 22: follower 102" in page


def test_baseline_agrees_on_rules_20_22_23(tmp_path: Path) -> None:
    files = build_cluster(tmp_path / "cluster")
    result = run_baseline(tmp_path / "cluster")
    check({r.rule: r for r in result.rules}, files)


def test_an_aborted_unclean_election_excuses_no_loss(spark: SparkSession, tmp_path: Path
                                                     ) -> None:
    """KIP-868: partition 3's unclean election written in a transaction a controller failover
    aborted never happened (no node applied it): p-30's loss is a violation, not attributed,
    in the baseline and in the Spark audit."""
    root = tmp_path / "cluster"
    build_cluster(root)
    write_metadata(root, aborted_election=True)
    for rules in (run_baseline(root).rules, run_audit(root, spark=spark).rules):
        rule23 = next(r for r in rules if r.rule == 23)
        assert {(v["key"], v["outcome"]) for v in rule23.violations} == {
            ("p-20", "duplicated"), ("p-21", "lost"), ("p-30", "lost")}
        assert rule23.attributed_count == 0


def test_baseline_reads_rule_21_from_the_journals_recovery_state(tmp_path: Path) -> None:
    """Rule 21 from journal files as brokers write them: RoleChanged carries the recovery state
    it was led in, so the HWM moved before RECOVERED was committed is flagged, after it not."""
    root = tmp_path / "cluster"
    write_metadata(root)
    recovering = RoleChanged(101, TOPIC, 0, "leader", 101, 2, 2, (101,), 1, 3, 0, 1_000)
    write_journals(root, {101: [
        recovering,
        HwmAdvanced(101, TOPIC, 0, 0, 3, 1, 1, 2, 1_100, (101,)),
        RecoveryStateChanged(101, TOPIC, 0, 2, 1, 0, "AlterPartition committed", 1_200),
        HwmAdvanced(101, TOPIC, 0, 3, 4, 1, 1, 2, 1_300, (101,)),
    ]}, [])
    rule21 = next(r for r in run_baseline(root).rules if r.rule == 21)
    assert (rule21.checked, rule21.violation_count) == (2, 1), rule21.violations
    assert rule21.violations[0]["ts"] == 1_100 and rule21.violations[0]["node"] == 101


def test_torn_and_garbled_inputs_become_flagged_rows(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    build_cluster(root)
    journal = root / "journal" / "broker-101.journal"
    journal.write_bytes(journal.read_bytes()[:-5])  # a crash mid-append
    acks = root / "journal" / "chaos-acks.journal"
    acks.write_bytes(acks.read_bytes() + b"\xc1\xc1\xc1")  # 0xc1 is never valid msgpack
    segment = root / "broker-101" / "data" / f"{TOPIC}-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF  # CRC mismatch in the last batch
    segment.write_bytes(bytes(data))
    brokers, ack_files = discover_journals(root)
    journal_rows = [r for spec in brokers if spec.node == 101 for r in iter_journal_rows(spec)]
    assert journal_rows[-1][-2] is True and "torn" in journal_rows[-1][-1]
    ack_rows = list(iter_ack_rows(ack_files[0]))
    # build_cluster's 10 acked writes (a send and an ack each), then the garbled tail.
    assert ack_rows[-1][-2] is True and len(ack_rows) == 2 * 10 + 1
    log_spec = next(s for s in discover_partition_logs(root) if s.file == str(segment))
    log_rows = list(iter_partition_log_rows(log_spec))
    assert [r[5] for r in log_rows] == [0, 1, -1] and log_rows[-1][-2] is True
    result = run_baseline(root)  # still audits: the corrupt rows are skipped, not fatal
    assert {r.rule for r in result.rules} >= {20, 22, 23}


def build_recreated_topic(root: Path) -> Path:
    """`orders` deleted and created again under its name (issue 38). The deleted incarnation
    (another topic id, its logs gone) reached leader epoch 5 on 101; in the new one 102 leads
    at epoch 0 and its follower 101 holds an entry 102 does not have (rule 22). Merged by
    name, 101's epoch 5 would make it the reference and hide the violation."""
    write_metadata(root)
    old_id = uuid_to_str(uuid.UUID(int=0xDEAD))
    new_id = uuid_to_str(TOPIC_ID)
    write_partition(root, 102, 0, [(0, "n-0")])
    bad = write_partition(root, 101, 0, [(0, "n-0"), (0, "n-1")])
    for broker in (101, 102):
        (root / f"broker-{broker}" / "data" / f"{TOPIC}-0" / "partition.metadata").write_text(
            f"version: 0\ntopic_id: {new_id}\n")

    def role_of(broker: int, kind: str, leader: int, epoch: int, ts: int,
                topic_id: str) -> RoleChanged:
        return RoleChanged(broker, TOPIC, 0, kind, leader, epoch, epoch, (101, 102), 0, 0, 0,
                           ts, topic_id=topic_id)

    write_journals(root, {
        101: [role_of(101, "leader", 101, 5, 1_000, old_id),
              role_of(101, "follower", 102, 0, 3_000, new_id)],
        102: [role_of(102, "follower", 101, 5, 1_000, old_id),
              role_of(102, "leader", 102, 0, 3_000, new_id)],
    }, [])
    return bad


def check_recreated(rules: dict[int | str, Any], bad: Path) -> None:
    rule22 = rules[22]
    assert rule22.violation_count == 1, rule22.violations
    violation = rule22.violations[0]
    assert (violation["partition"], violation["node"], violation["offset"]) == (f"{TOPIC}-0",
                                                                               101, 1)
    assert violation["file"] == str(bad)
    # The deleted incarnation is a partition of its own (`orders@<id>`): its roles, no logs.
    assert rule22.notes["partitions"] == 2


def test_a_recreated_topic_is_not_merged_with_its_deleted_incarnation(tmp_path: Path) -> None:
    bad = build_recreated_topic(tmp_path / "cluster")
    check_recreated({r.rule: r for r in run_baseline(tmp_path / "cluster").rules}, bad)


@pytest.mark.slow  # a whole run_audit; the baseline above reads the same rows (iter_journal_rows)
def test_spark_keeps_a_recreated_topic_apart_from_its_deleted_incarnation(
    spark: SparkSession, tmp_path: Path
) -> None:
    bad = build_recreated_topic(tmp_path / "cluster")
    result = run_audit(tmp_path / "cluster", spark=spark, report_dir=tmp_path / "report")
    check_recreated({r.rule: r for r in result.rules}, bad)


# ---- rule 25: compaction ----

KEYED_PRODUCER = "kp"


def write_compacted(root: Path, broker: int, partition: int, epoch: int,
                    records: list[tuple[int, str, int | None]]) -> Path:
    """A data segment of (offset, record key, seq) records, one batch each, at their offsets
    (gaps where the cleaner removed records); seq None is a tombstone (null value). A value is
    the ack journal's write key (rule 23): `kp-<partition * 100 + seq>`."""
    directory = root / f"broker-{broker}" / "data" / f"{TOPIC}-{partition}"
    directory.mkdir(parents=True, exist_ok=True)
    raw = b"".join(
        encode_batch(offset, epoch, 5_000 + offset, [Record(
            key.encode(), None if seq is None else f"{KEYED_PRODUCER}-{partition * 100 + seq}:value".encode())])
        for offset, key, seq in records)
    path = directory / f"{0:020d}.log"
    path.write_bytes(raw)
    return path


def write_cleaner_checkpoint(root: Path, broker: int, offsets: dict[int, int]) -> None:
    """Kafka's checkpoint file format: version, count, then `topic partition offset` lines."""
    lines = ["0", str(len(offsets)), *(f"{TOPIC} {p} {o}" for p, o in sorted(offsets.items()))]
    (root / f"broker-{broker}" / "data" / "cleaner-offset-checkpoint").write_text(
        "\n".join(lines) + "\n")


# What the keyed producer wrote to partitions 0-3 (offset, record key, seq; seq None: a
# tombstone), every write acked with acks=all.
WRITES = [(0, "k1", 0), (1, "k2", 1), (2, "k1", 2), (3, "k3", 3), (4, "k2", None), (5, "k1", 5),
          (6, "k3", 6)]


def build_compacted(root: Path) -> None:
    """`orders` compacted, every replica cleaned up to offset 6 (the HWM is 7):
    - partition 0 as the cleaner leaves it: each key's latest record below 6 (k2's tombstone
      still there) and everything from 6 on;
    - partition 1 lost k1's latest record (offset 5) and kept nothing newer of k1: dropped;
      and broker 103 says it cleaned it up to 9, past the HWM;
    - partition 2 lost k1's record at 2 while the older one at 0 is still there: outlived;
    - partition 3 lost k1's latest too, but went RECOVERING (unclean election): attributed."""
    write_metadata(root)
    kept = [(3, "k3", 3), (4, "k2", None), (5, "k1", 5), (6, "k3", 6)]
    logs = {0: kept, 1: [(3, "k3", 3), (4, "k2", None), (6, "k3", 6)],
            2: [(0, "k1", 0), *kept]}
    for partition, records in logs.items():
        for broker in BROKERS:
            write_compacted(root, broker, partition, 0, records)
    write_compacted(root, 102, 3, 1, [(3, "k3", 3), (6, "k3", 6)])
    for broker in BROKERS:
        offsets = {0: 6, 1: 6, 2: 6} | ({3: 6} if broker == 102 else {})
        write_cleaner_checkpoint(root, broker, offsets | ({1: 9} if broker == 103 else {}))
    events: dict[int, list[JournalEvent]] = {b: [] for b in BROKERS}
    for partition in range(3):
        events[101].append(role(101, partition, "leader", 101, 0, 1_000))
        events[101].append(HwmAdvanced(101, TOPIC, partition, 0, 7, 3, 2, 0, 1_500, BROKERS))
        for follower in (102, 103):
            events[follower].append(role(follower, partition, "follower", 101, 0, 1_000))
    events[102].append(role(102, 3, "leader", 102, 1, 2_000))
    events[102].append(HwmAdvanced(102, TOPIC, 3, 0, 7, 1, 1, 1, 2_500, (102,)))
    write_journals(root, events, [])
    entries = []
    for partition in range(4):
        for offset, key, seq in WRITES:
            common = {"producer_id": KEYED_PRODUCER, "seq": partition * 100 + offset,
                      "topic": TOPIC, "partition": partition, "acks": -1, "ts": 7_000,
                      "idempotent": True, "record_key": key.encode(), "tombstone": seq is None}
            entries.append({"event": "ack", **common, "error": "NONE", "offset": offset,
                            "leader_epoch": 0})
    (root / "journal" / "keyed-acks.journal").write_bytes(
        b"".join(msgpack.packb(e, use_bin_type=True) for e in entries))


def check_compacted(rules: dict[int | str, Any]) -> None:
    rule25 = rules[25]
    found = sorted((v["partition"], v["kind"], v.get("record_key"), v["offset"],
                    v.get("held_offset")) for v in rule25.violations)
    k1 = b"k1".hex()
    assert found == [
        (f"{TOPIC}-1", "cleaned past the high watermark", None, 9, None),
        (f"{TOPIC}-1", "dropped", k1, 5, None),
        (f"{TOPIC}-2", "outlived", k1, 2, 0),
    ], rule25.violations
    assert rule25.violation_count == 3
    # Keys judged: k1, k2, k3 on partitions 0-2 and on partition 3; one checkpoint per
    # replica of partitions 0-2 and 102's of partition 3.
    assert rule25.notes == {"keys": 3 * 4, "cleaner_checkpoints": 3 * 3 + 1, "attributed": 1}
    assert rule25.checked == 12 + 10
    messages = " ".join(v["message"] for v in rule25.violations)
    assert "key 'k1'" in messages and "offset 5" in messages and "at offset 0" in messages
    # The records the cleaner took are removed, not lost (rule 23); nothing else is flagged.
    assert {n for n, r in rules.items() if r.violation_count} == {25}
    assert rules[23].notes["removed_by_retention_or_compaction"] > 0


def test_rule_25_on_a_hand_made_compacted_topic(spark: SparkSession, tmp_path: Path) -> None:
    """Rule 25's Spark form (check_compacted_partition per partition, cogroup) finds the dropped
    latest value, the older value outliving a newer one and the checkpoint past the HWM, and
    the baseline (the pure form) finds exactly the same."""
    build_compacted(tmp_path / "cluster")
    result = run_audit(tmp_path / "cluster", spark=spark)
    check_compacted({r.rule: r for r in result.rules})
    baseline = {r.rule: r for r in run_baseline(tmp_path / "cluster").rules}
    check_compacted(baseline)
    assert baseline[25].to_json() == result.rule(25).to_json()
