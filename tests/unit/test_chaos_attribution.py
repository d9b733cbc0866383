"""Rule 23's evidence from the metadata log (cluster/chaos/attribution.py): only a committed
record of this run that set a partition RECOVERING excuses a lost acked write, and the summary
names that record's offset."""

from __future__ import annotations

import uuid
from pathlib import Path

from cluster.chaos.attribution import (
    METADATA_PARTITION_DIR,
    attribute_losses,
    metadata_log_dirs,
    scan_recovering_elections,
)
from metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    PartitionChangeRecord,
    TopicRecord,
    encode_record,
)
from storage.runtime.disk_log import DiskLog

TOPIC_ID = uuid.uuid4()


def write_log(controller_dir: Path) -> None:
    with DiskLog(controller_dir / "metadata" / METADATA_PARTITION_DIR) as log:
        log.append_as_leader([encode_record(TopicRecord("t", TOPIC_ID))], 1, 0)  # offset 0
        log.append_as_leader(
            [encode_record(PartitionChangeRecord(0, TOPIC_ID, leader=2, leader_recovery_state=1)),
             encode_record(PartitionChangeRecord(1, TOPIC_ID, leader=3))], 1, 0,
        )  # offsets 1, 2
        log.append_as_leader(
            [encode_record(PartitionChangeRecord(2, TOPIC_ID, leader=1, leader_recovery_state=1))],
            1, 0,
        )  # offset 3: not committed below
        log.flush()


def test_only_committed_recovering_records_of_the_run_count(tmp_path: Path) -> None:
    write_log(tmp_path / "controller-1")
    dirs = metadata_log_dirs([tmp_path / "controller-1", tmp_path / "controller-2"])
    scan = scan_recovering_elections(dirs, high_watermark=3)
    assert [(e.topic, e.partition, e.offset, e.leader) for e in scan.elections] == [("t", 0, 1, 2)]
    assert scan.end_offset_read == 3
    assert scan_recovering_elections(dirs, high_watermark=4).elections[-1].partition == 2
    assert scan_recovering_elections(dirs, high_watermark=3, since_offset=2).elections == []


def test_losses_are_attributed_per_partition_or_reported(tmp_path: Path) -> None:
    write_log(tmp_path / "c")
    elections = scan_recovering_elections(metadata_log_dirs([tmp_path / "c"]), 3).elections
    attributed, unexplained = attribute_losses(
        {0: ["p0-1", "p0-2"], 1: ["p1-7"], 2: []}, "t", elections
    )
    assert attributed[0]["lost"] == 2 and attributed[0]["metadata_offsets"] == [1]
    assert attributed[0]["elections"][0]["record"] == "PartitionChangeRecord"
    assert unexplained == {1: ["p1-7"]}
    other_topic, still_unexplained = attribute_losses({0: ["x"]}, "other", elections)
    assert other_topic == {} and still_unexplained == {0: ["x"]}


def test_recovering_records_count_as_their_transaction_applies_them(tmp_path: Path) -> None:
    """KIP-868: a committed transaction's RECOVERING change counts, an aborted one's and one
    still open at the high watermark do not (as the nodes' loader applies them)."""
    def recovering(partition: int) -> bytes:
        return encode_record(PartitionChangeRecord(partition, TOPIC_ID, leader=2,
                                                   leader_recovery_state=1))

    with DiskLog(tmp_path / "c" / "metadata" / METADATA_PARTITION_DIR) as log:
        for values in ([encode_record(TopicRecord("t", TOPIC_ID))],  # offset 0
                       [encode_record(BeginTransactionRecord("ElectLeaders")), recovering(0)],
                       [encode_record(EndTransactionRecord())],  # offset 3: p0 applied
                       [encode_record(BeginTransactionRecord("ElectLeaders")), recovering(1)],
                       [encode_record(AbortTransactionRecord("Controller failover"))],
                       [encode_record(BeginTransactionRecord("ElectLeaders")), recovering(2)]):
            log.append_as_leader(values, 1, 0)
        log.flush()
    scan = scan_recovering_elections(metadata_log_dirs([tmp_path / "c"]), high_watermark=9)
    assert [(e.partition, e.offset) for e in scan.elections] == [(0, 2)]
    assert scan.end_offset_read == 9
