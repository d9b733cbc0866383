"""Corruption is a finding (CLI.md: audit): one test per shape of damage.

- a flipped byte in the middle of a controller's log (CRC mismatch, valid batches after it):
  verdict `corrupt`, evidence (node, file, byte, offsets) in audit.json (and exit 1: see
  test_audit_rules.test_cli_exit_codes);
- a torn last batch after a crash: verdict `clean`, the tail reported as a note;
- one replica's committed batch with other content (valid CRC): rule 2 names that replica.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from analytics.audit import run_audit
from analytics.baseline import run_baseline
from metadata.records import NoOpRecord, PartitionChangeRecord
from storage.core.record_batch import encode_batch, read_header
from tests.spark.test_audit_rules import TOPIC_ID, Log, partition_log, write_cluster

pytestmark = pytest.mark.spark


def _cluster(root: Path) -> tuple[Log, dict[int, Path]]:
    """Three controllers with the same eight-batch log."""
    log, _ = partition_log()
    for isr in ((1, 2), (1, 2, 3), (1, 3), (1, 2, 3)):
        log.data(1, PartitionChangeRecord(0, TOPIC_ID, isr=isr), NoOpRecord())
    return log, write_cluster(root, {1: log, 2: log.copy(), 3: log.copy()})


def _positions(log: Log) -> dict[int, int]:
    """Byte position of each batch (by base offset) in a one-segment file of that log."""
    out, position = {}, 0
    for base, raw, _count in log.batches:
        out[base] = position
        position += len(raw)
    return out


def test_mid_log_flipped_byte_is_corruption(spark: SparkSession, tmp_path: Path) -> None:
    log, files = _cluster(tmp_path / "cluster")
    base, raw, count = log.batches[4]  # a batch in the middle, valid ones after it
    position = _positions(log)[base]
    data = bytearray(files[2].read_bytes())
    data[position + len(raw) // 2 + 10] ^= 0x20
    files[2].write_bytes(bytes(data))
    result = run_audit(tmp_path / "cluster", spark=spark, report_dir=tmp_path / "report")
    assert result.verdict == "corrupt" and not result.clean
    (evidence,) = result.corruption
    assert (evidence["node"], evidence["file"], evidence["byte"]) == (2, str(files[2]), position)
    assert evidence["reason"] == "CRC32C mismatch"
    assert evidence["offsets"] == [base, base + count - 1]
    assert evidence["claimed_offsets"] == [base, base + count - 1]
    document = json.loads((tmp_path / "report" / "audit.json").read_text())
    assert document["verdict"] == "corrupt"
    assert document["corruption"][0]["byte"] == position
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Corruption" in page and str(files[2]) in page
    # The rest of node 2's log was still read: rule 2 compared its later batches too.
    assert result.rule(2).violation_count == 0
    assert result.rule(2).notes["batches_compared"] == 3 * len(log.batches) - 2
    assert run_baseline(tmp_path / "cluster").verdict == "corrupt"


def test_torn_tail_is_noted_not_a_finding(spark: SparkSession, tmp_path: Path) -> None:
    log, files = _cluster(tmp_path / "cluster")
    # Node 3 crashed while writing: a new batch half on disk at the end of its last segment.
    torn = encode_batch(log.next_offset, 1, 9_999, [b"half-written"])
    files[3].write_bytes(files[3].read_bytes() + torn[: len(torn) // 2])
    # Node 2 crashed after its last batch's length reached the disk but not all its pages.
    data = files[2].read_bytes()
    last = read_header(data, _positions(log)[log.batches[-1][0]])
    files[2].write_bytes(data[: last.position + 30] + bytes(last.size - 30))
    result = run_audit(tmp_path / "cluster", spark=spark)
    assert result.verdict == "clean", result.corruption
    assert sorted((t["node"], t["reason"]) for t in result.torn_tails) == [
        (2, "CRC32C mismatch"), (3, "batch cut off (torn write)")]
    assert result.inputs["damaged_regions"] == 2
    assert run_baseline(tmp_path / "cluster").verdict == "clean"


def test_divergent_committed_batch_is_named_by_rule_2(spark: SparkSession,
                                                      tmp_path: Path) -> None:
    log, _ = partition_log()
    for isr in ((1, 2), (1, 2, 3), (1, 3)):
        log.data(1, PartitionChangeRecord(0, TOPIC_ID, isr=isr))
    divergent = log.copy()
    index = 3  # the first PartitionChangeRecord batch: committed (every node has later ones)
    base, _raw, _count = divergent.batches[index]
    other = encode_batch(base, 1, 1_000 + base, [encode_noop()])  # valid CRC, other content
    divergent.batches[index] = (base, other, 1)
    write_cluster(tmp_path / "cluster", {1: log, 2: log.copy(), 3: divergent})
    result = run_audit(tmp_path / "cluster", spark=spark)
    assert result.verdict == "violations" and result.corruption == []
    violations = result.rule(2).violations
    assert {(v["offset"], v["node"], v["other_node"]) for v in violations} == {
        (base, 1, 3), (base, 2, 3)}
    assert all(v["divergent_nodes"] == [3] for v in violations)
    assert "divergent: node(s) [3]" in str(violations[0]["message"])


def encode_noop() -> bytes:
    from metadata.records import encode_record

    return encode_record(NoOpRecord())
