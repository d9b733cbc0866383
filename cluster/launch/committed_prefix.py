"""INVARIANTS rule 2 on real files: entries below the high watermark are byte-identical on
every controller that has them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cluster.launch.local_cluster import LocalCluster
from raft.runtime.raft_manager import METADATA_PARTITION_DIR
from storage.runtime.log_reader import read_batches


@dataclass
class PrefixReport:
    checked_offsets: int
    nodes: list[str]
    mismatches: list[str] = field(default_factory=list)
    entries_compared: int = 0

    @property
    def agree(self) -> bool:
        return not self.mismatches


def committed_entries(directory: Path, below: int) -> dict[int, tuple[int, bytes]]:
    entries: dict[int, tuple[int, bytes]] = {}
    for _path, batch in read_batches(directory):
        if batch.base_offset >= below:
            break
        for index, record in enumerate(batch.records):
            offset = batch.offset_of(index)
            if offset < below:
                entries[offset] = (batch.leader_epoch, record.value or b"")
    return entries


def compare_committed_prefixes(cluster: LocalCluster, high_watermark: int) -> PrefixReport:
    logs = {
        spec.name: committed_entries(
            Path(spec.dir) / "metadata" / METADATA_PARTITION_DIR, high_watermark
        )
        for spec in cluster.controllers
    }
    report = PrefixReport(high_watermark, sorted(logs))
    reference: dict[int, tuple[str, tuple[int, bytes]]] = {}
    for name, entries in sorted(logs.items()):
        for offset, entry in entries.items():
            seen = reference.get(offset)
            if seen is None:
                reference[offset] = (name, entry)
            else:
                report.entries_compared += 1
                if seen[1] != entry:
                    report.mismatches.append(
                        f"offset {offset}: {seen[0]} has epoch {seen[1][0]}, {name} has epoch {entry[0]}"
                    )
    return report
