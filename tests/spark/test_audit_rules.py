"""The audit, rule by rule: a clean generated log audits clean, and each hand-made log (bad records
written with the project's own encoders) is reported as exactly the rule it breaks, with its
file, offset, node and partition as evidence. The CLI's exit codes run in subprocesses."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from analytics.audit import AuditResult, run_audit
from analytics.baseline import run_baseline
from analytics.generate import NodeLog, generate_cluster_dir, partition_dir, write_node
from analytics.rules.result import RuleResult
from kafkawire.constants import ZERO_UUID
from metadata.records import (
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
    encode_record,
)
from raft.core.control_records import (
    LeaderChangeRecord,
    Voter,
    VotersRecord,
    bootstrap_snapshot,
    encode_control,
)
from raft.core.replica_key import uuid_to_str
from storage.core.record_batch import encode_batch

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
TOPIC_ID = uuid.UUID(int=0xA11CE)
TOPIC = uuid_to_str(TOPIC_ID)
DIRECTORY_IDS = {n: uuid.UUID(int=1000 + n) for n in (1, 2, 3, 4, 5, 6)}
VOTERS = tuple(Voter(n, DIRECTORY_IDS[n]) for n in (1, 2, 3))
ALL_RULES = {1, 2, 5, 8, 10, 11, 13, 19, 20, 21, 22, 23, 24, 25}


class Log:
    """A metadata log as a list of encoded batches, offsets assigned in order."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, bytes, int]] = []
        self.next_offset = 0

    def control(self, epoch: int, *records: LeaderChangeRecord | VotersRecord) -> int:
        return self._add(epoch, [encode_control(r) for r in records], True)

    def data(self, epoch: int, *records: MetadataRecord) -> int:
        return self._add(epoch, [encode_record(r) for r in records], False)

    def _add(self, epoch: int, values: list[bytes], is_control: bool) -> int:
        base = self.next_offset
        self.batches.append((base, encode_batch(base, epoch, 1_000 + base, values, is_control),
                             len(values)))
        self.next_offset += len(values)
        return base

    def copy(self, upto_offset: int | None = None) -> Log:
        out = Log()
        for base, raw, count in self.batches:
            if upto_offset is None or base < upto_offset:
                out.batches.append((base, raw, count))
                out.next_offset = base + count
        return out


def write_cluster(root: Path, logs: dict[int, Log]) -> dict[int, Path]:
    """Each node's log as one segment, with the bootstrap checkpoint 0-0 and meta.properties."""
    segments = {}
    for node, log in logs.items():
        node_log = NodeLog(node, DIRECTORY_IDS[node], segment_records=10**6)
        for base, raw, count in log.batches:
            node_log.append_raw(base, raw, count)
        write_node(root, node_log, [(0, 0, bootstrap_snapshot(VOTERS))])
        segments[node] = partition_dir(root, node) / f"{0:020d}.log"
    return segments


def partition_log() -> tuple[Log, int]:
    """Epoch 1 led by node 1: voters, a topic with partition 0 on replicas 1, 2, 3."""
    log = Log()
    log.control(1, LeaderChangeRecord(1, tuple(v.key for v in VOTERS)))
    log.control(1, VotersRecord(VOTERS))
    log.data(1, TopicRecord("orders", TOPIC_ID),
             PartitionRecord(0, TOPIC_ID, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1))
    return log, log.next_offset


def audit(spark: SparkSession, root: Path) -> AuditResult:
    return run_audit(root, spark=spark)


def assert_only(result: AuditResult, rule: int) -> list[dict[str, object]]:
    flagged = {r.rule for r in result.rules if r.violation_count}
    assert flagged == {rule}, [v["message"] for r in result.rules for v in r.violations]
    assert {r.rule for r in result.rules} == ALL_RULES
    assert result.verdict == "violations"
    return result.rule(rule).violations


def test_clean_generated_log_audits_clean(spark: SparkSession, tmp_path: Path) -> None:
    generate_cluster_dir(tmp_path / "cluster", 1500, seed=7, topics=3, partitions_per_topic=3,
                         segment_records=600, snapshot_at=700)
    result = run_audit(tmp_path / "cluster", spark=spark, report_dir=tmp_path / "report")
    assert result.verdict == "clean", [v for r in result.rules for v in r.violations]
    assert all(r.checked > 0 for r in result.rules if r.rule < 20)  # no broker files here
    assert result.inputs["corrupt"] == 0 and result.inputs["nodes"] == 3
    document = json.loads((tmp_path / "report" / "audit.json").read_text())
    assert document["verdict"] == "clean"
    assert [r["rule"] for r in document["rules"]] == sorted(ALL_RULES)
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<svg" in page and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    # The index, worst first: violations, time without a leader, time under min ISR, leader
    # changes; every partition that changed leader is listed (a clean log's notable ones).
    def worst(p: dict[str, Any]) -> tuple[int, ...]:
        return (-p["violations"], -p["unavailable_ms"], -p["under_min_isr_ms"],
                -p["leader_changes"])
    assert len(result.partitions) == 9
    assert [worst(p) for p in result.partitions] == sorted(worst(p) for p in result.partitions)
    index = page[page.index("<table id=index>"):].split("</table>", 1)[0]
    moved = [p["partition"] for p in result.partitions if p["leader_changes"]]
    assert moved and all(f">{name}<" in index for name in moved)


def test_rule_1_two_leaders_in_one_epoch(spark: SparkSession, tmp_path: Path) -> None:
    log, _ = partition_log()
    log.data(1, NoOpRecord())
    split = log.next_offset
    leader_1 = log.copy()
    leader_1.control(2, LeaderChangeRecord(1, tuple(v.key for v in VOTERS)))
    leader_3 = log.copy()
    leader_3.data(1, NoOpRecord())  # node 3's own tail: it diverges from here on
    claim = leader_3.control(2, LeaderChangeRecord(3, tuple(v.key for v in VOTERS)))
    files = write_cluster(tmp_path, {1: leader_1, 2: log.copy(split), 3: leader_3})
    violations = assert_only(audit(spark, tmp_path), 1)
    assert len(violations) == 1
    assert violations[0]["epoch"] == 2 and violations[0]["leaders"] == [1, 3]
    records = violations[0]["records"]
    assert isinstance(records, list)
    claims = {(r["node"], r["file"], r["offset"]) for r in records}
    assert claims == {(1, str(files[1]), split), (3, str(files[3]), claim)}


def test_rule_2_committed_entry_differs(spark: SparkSession, tmp_path: Path) -> None:
    good, _ = partition_log()
    changed_at = good.data(1, NoOpRecord())
    good.data(1, NoOpRecord(), NoOpRecord())
    bad, _ = partition_log()
    bad.data(2, NoOpRecord())  # same offset, another epoch, yet the logs agree after it
    for base, raw, count in good.batches[-1:]:
        bad.batches.append((base, raw, count))
        bad.next_offset = base + count
    tail = good.copy()
    tail.data(3, NoOpRecord())  # an uncommitted suffix only node 3 has: not a violation
    files = write_cluster(tmp_path, {1: good, 2: bad, 3: tail})
    violations = assert_only(audit(spark, tmp_path), 2)
    assert {(v["offset"], v["node"], v["other_node"]) for v in violations} == {
        (changed_at, 1, 2), (changed_at, 2, 3)}
    by_pair = {(v["node"], v["other_node"]): v for v in violations}
    assert by_pair[(1, 2)]["file"] == str(files[1]) and by_pair[(1, 2)]["other_file"] == str(
        files[2])
    assert (by_pair[(1, 2)]["epoch"], by_pair[(1, 2)]["other_epoch"]) == (1, 2)
    assert by_pair[(1, 2)]["partition"] == "__cluster_metadata-0"


PARTITION_CASES: dict[int, PartitionChangeRecord] = {
    # Rule 8: names the same leader again: the leader epoch bumps without a leader change.
    8: PartitionChangeRecord(0, TOPIC_ID, isr=(1, 2), leader=1),
    # Rule 10: ELR overlapping the ISR, and non-empty while ISR >= min ISR.
    10: PartitionChangeRecord(0, TOPIC_ID, isr=(1, 2), eligible_leader_replicas=(2,)),
    # Rule 11: a LastKnownLeader kept although the partition has a leader.
    11: PartitionChangeRecord(0, TOPIC_ID, last_known_leader=2),
    # Rule 13: the leader left out of the ISR without RECOVERING.
    13: PartitionChangeRecord(0, TOPIC_ID, isr=(2, 3)),
    # Rule 19: RECOVERING with more than the leader in the ISR.
    19: PartitionChangeRecord(0, TOPIC_ID, leader_recovery_state=1),
}


@dataclass
class BrokenLog:
    """One hand-made log breaking rules 5, 8, 10, 11, 13 and 19, each in its own place: the
    voter set at two offsets, and partition `rule` of the topic for each partition rule. Each
    rule must report exactly its own place (one Spark audit serves all these tests)."""

    result: AuditResult
    root: Path
    files: dict[int, Path]
    offsets: dict[object, int]


@pytest.fixture(scope="module")
def broken(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> BrokenLog:
    root = tmp_path_factory.mktemp("broken")
    log, _ = partition_log()
    offsets: dict[object, int] = {}
    for rule in PARTITION_CASES:
        log.data(1, PartitionRecord(rule, TOPIC_ID, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1))
        log.data(1, PartitionChangeRecord(rule, TOPIC_ID, isr=(1, 2)))  # a fine change first
    swapped = (Voter(1, DIRECTORY_IDS[1]), Voter(4, DIRECTORY_IDS[4]))
    offsets["voters_jump"] = log.control(1, VotersRecord(swapped))  # -2, -3, +4: three keys
    offsets["voter_no_id"] = log.control(1, VotersRecord((*swapped, Voter(5, ZERO_UUID))))
    for rule, change in PARTITION_CASES.items():
        offsets[rule] = log.data(1, dataclasses.replace(change, partition_id=rule))
    log.data(1, NoOpRecord())
    last_case = max(offsets[rule] for rule in PARTITION_CASES)
    files = write_cluster(root, {1: log, 2: log.copy(last_case), 3: log.copy()})
    return BrokenLog(audit(spark, root), root, files, offsets)


def test_broken_log_flags_exactly_its_rules(broken: BrokenLog) -> None:
    flagged = {r.rule for r in broken.result.rules if r.violation_count}
    assert flagged == {5, *PARTITION_CASES}
    assert broken.result.rule(1).violation_count == 0 and broken.result.rule(2).violation_count == 0


def test_rule_5_two_voters_changed_at_once_and_no_directory_id(broken: BrokenLog) -> None:
    violations = broken.result.rule(5).violations
    assert [(v["offset"], v["nodes"]) for v in violations] == [
        (broken.offsets["voters_jump"], [1, 2, 3]), (broken.offsets["voter_no_id"], [1, 2, 3])]
    assert "3 keys" in str(violations[0]["message"])
    assert "voter 5 has no directory id" in str(violations[1]["message"])
    assert violations[0]["file"] == str(broken.files[1])
    assert violations[0]["partition"] == "__cluster_metadata-0"


@pytest.mark.parametrize("rule", sorted(PARTITION_CASES), ids=lambda r: f"rule_{r}")
def test_partition_rule_violation(broken: BrokenLog, rule: int) -> None:
    partition = f"{TOPIC}-{rule}"
    expected = {(broken.offsets[rule], partition, 1, str(broken.files[1]))}
    found = {(v["offset"], v["partition"], v["node"], v["file"])
             for v in broken.result.rule(rule).violations}
    assert found == expected  # replayed once, from the longest log (node 1)
    for other in broken.result.rules:
        if other.rule != rule:
            assert all(v.get("partition") != partition for v in other.violations), other.rule


def _verdicts(rules: list[RuleResult]) -> dict[int, tuple[int, int, list[tuple[str, str]]]]:
    """Per rule: what was checked, how many violations, and where (offset, partition)."""
    return {r.rule: (r.checked, r.violation_count,
                     sorted((str(v.get("offset")), str(v.get("partition"))) for v in r.violations))
            for r in rules}


def test_baseline_agrees_with_the_spark_audit(spark: SparkSession, broken: BrokenLog,
                                              tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The single-process baseline (`bench audit`'s yardstick) and the Spark audit count the
    same things and flag the same places, on a clean log with a snapshot and on the broken one."""
    generate_cluster_dir(tmp_path / "clean", 2500, seed=11, topics=3, partitions_per_topic=4,
                         segment_records=700, snapshot_at=900)
    clean = audit(spark, tmp_path / "clean")
    for root, result in ((tmp_path / "clean", clean), (broken.root, broken.result)):
        expected = _verdicts(result.rules)
        assert _verdicts(run_baseline(root).rules) == expected, root
    # Large inputs are decoded by a pool of forked processes (PARALLEL_DECODE_BYTES) and
    # replayed in Python workers: same verdicts as a small input's decoding and replay in the
    # driver's own process.
    monkeypatch.setattr("analytics.audit.PARALLEL_DECODE_BYTES", 0)
    pooled = run_audit(broken.root, spark=spark, python_in_driver=False)
    assert _verdicts(pooled.rules) == _verdicts(broken.result.rules)
    assert clean.rule(8).checked > 100 and broken.result.rule(8).violation_count == 1


def test_bench_audit_on_existing_files(spark: SparkSession, tmp_path: Path) -> None:
    """`bench audit --dir`: audits the files already there, names the log's length, and keeps
    them; both sides measured, ratio = Spark / baseline."""
    from cluster.bench.audit_bench import log_length, run_audit_bench

    generated = generate_cluster_dir(tmp_path / "logs", 1200, seed=5, topics=2,
                                     partitions_per_topic=2, segment_records=500)
    report = run_audit_bench(directory=tmp_path / "logs", spark=spark)
    assert report["records"] == log_length(tmp_path / "logs") == generated.log_end_offset
    assert report["verdict"] == "clean" and report["rows"] > 2 * generated.log_end_offset
    wall, cpu = report["results"]
    for line in (wall, cpu):
        assert line["minikraft"] > 0 and line["peer"] > 0
        assert line["ratio"] == pytest.approx(line["minikraft"] / line["peer"], rel=0.01)
    assert cpu["metric"] == "audit CPU time (process tree)"
    phases = [p["phase"] for p in report["phases"]]
    assert phases[0] == "start" and any("(rules 8, 10, 11, 13, 19)" in p for p in phases)
    assert sum(p["cpu_s"] for p in report["phases"]) == pytest.approx(cpu["minikraft"], abs=0.1)
    assert len(report["load_average_before"]) == 3
    assert (tmp_path / "logs" / "controller-1").is_dir()


def _run_cli(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "cluster.cli.audit_cmd", *args], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _bad_cluster(root: Path) -> tuple[Log, int, dict[int, Path]]:
    log, _ = partition_log()
    bad_offset = log.data(1, PartitionChangeRecord(0, TOPIC_ID, isr=(2, 3)))
    files = write_cluster(root, {1: log, 2: log.copy(), 3: log.copy()})
    return log, bad_offset, files


def test_cli_exit_codes(tmp_path: Path) -> None:
    """Usage error 2; a violation exits 1 with audit.json alone on stdout (one JVM: the clean
    and corrupt verdicts through the CLI are in the slow test below)."""
    bad_root = tmp_path / "bad"
    _log, bad_offset, _files = _bad_cluster(bad_root)
    (tmp_path / "empty").mkdir()
    usage = subprocess.run([sys.executable, "-m", "cluster.cli.audit_cmd", "--dir",
                            str(tmp_path / "empty")], cwd=REPO, capture_output=True, text=True,
                           timeout=60)
    assert usage.returncode == 2
    bad = _run_cli("--dir", str(bad_root), "--output", "json")
    bad_out, bad_err = bad.communicate(timeout=400)
    assert bad.returncode == 1, bad_err
    document = json.loads(bad_out)  # stdout holds the audit.json document and nothing else
    assert document["verdict"] == "violations"
    rule_13 = next(r for r in document["rules"] if r["rule"] == 13)
    assert [(v["offset"], v["partition"]) for v in rule_13["violations"]] == [
        (bad_offset, f"{TOPIC}-0")]


@pytest.mark.slow
def test_cli_exit_codes_clean_and_corrupt(tmp_path: Path) -> None:
    clean_root = tmp_path / "clean"
    generate_cluster_dir(clean_root, 300, seed=1, topics=1, partitions_per_topic=2)
    # A controller's segment with one byte flipped mid-log (valid batches after it): bit rot.
    rot_root = tmp_path / "rot"
    log, _bad_offset, _ = _bad_cluster(tmp_path / "unused")
    rot_files = write_cluster(rot_root, {1: log, 2: log.copy(), 3: log.copy()})
    rot_base, rot_raw, _count = log.batches[2]
    rot_position = sum(len(raw) for _b, raw, _c in log.batches[:2])
    rotten = bytearray(rot_files[3].read_bytes())
    rotten[rot_position + len(rot_raw) - 5] ^= 0x04
    rot_files[3].write_bytes(bytes(rotten))
    clean = _run_cli("--dir", str(clean_root), "--report", str(tmp_path / "out"))
    rot = _run_cli("--dir", str(rot_root), "--output", "json")
    _clean_out, clean_err = clean.communicate(timeout=400)
    rot_out, rot_err = rot.communicate(timeout=400)
    assert rot.returncode == 1, rot_err
    rot_document = json.loads(rot_out)
    assert rot_document["verdict"] == "corrupt"
    assert [(c["node"], c["file"], c["byte"], c["offsets"][0]) for c in
            rot_document["corruption"]] == [(3, str(rot_files[3]), rot_position, rot_base)]
    assert clean.returncode == 0, clean_err
    assert json.loads((tmp_path / "out" / "audit.json").read_text())["verdict"] == "clean"
