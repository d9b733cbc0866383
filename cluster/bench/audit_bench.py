"""`minikraft bench audit`: the PySpark audit (analytics/audit.py) against the single-process
Python baseline (analytics/baseline.py) over the same metadata logs, in one run: generated at
`records` (1M by default, `--quick` 100k) in a temporary directory, or the files already under
`--dir` (generated there first if it holds none, and kept). The peer here is the single-process
pass, not another system."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from cluster.bench.report import make_report, row

NOTE = ("same files, same run; Spark local[2] (decodes the replay source's records outside "
        "Spark into Parquet, batch by batch into Arrow columns, while the JVM starts; compares "
        "the other replicas batch by batch: base offset, epoch, CRC) vs one Python process "
        "(decodes every replica's records); wall time incl. Spark start-up; on a shared "
        "machine both sides compete with whatever else runs: the CPU line (the audit's whole "
        "process tree against the baseline's process) is the one to compare")


def log_length(directory: Path) -> int:
    """The longest controller log's end offset, read from batch headers of each node's last
    segment (what `generate --records N` wrote, about N)."""
    from analytics.read.datasource import KIND_SEGMENT, discover_files
    from storage.core.record_batch import CorruptBatchError, read_header

    last_segment: dict[int, str] = {}
    for spec in discover_files(directory):
        if spec.kind == KIND_SEGMENT:
            last_segment[spec.node] = spec.file  # discover_files sorts by offset within a node
    end = 0
    for file in last_segment.values():
        data = Path(file).read_bytes()
        position = 0
        while position < len(data):
            try:
                header = read_header(data, position)
            except CorruptBatchError:
                break
            end = max(end, header.last_offset + 1)
            position += header.size
    return end


def run_audit_bench(
    *, records: int = 1_000_000, quick: bool = False, master: str = "local[2]",
    directory: Path | None = None, spark: Any = None,
) -> dict[str, Any]:
    from analytics.audit import run_audit
    from analytics.baseline import run_baseline
    from analytics.generate import generate_cluster_dir
    from analytics.read.datasource import discover_files
    from cluster.bench.phase_clock import PhaseClock

    if quick:
        records = 100_000
    workdir = None
    if directory is None:
        workdir = Path(tempfile.mkdtemp(prefix="minikraft-audit-bench-"))
        directory = workdir / "cluster"
    try:
        if not discover_files(directory):
            generate_cluster_dir(directory, records)
        records = log_length(directory)
        load_before = os.getloadavg()
        clock = PhaseClock()
        started = time.perf_counter()
        clock("start")
        audit = run_audit(directory, master=master, spark=spark, progress=clock)
        clock.finish()
        audit_s = time.perf_counter() - started
        audit_cpu = clock.total()[1]
        started, cpu_started = time.perf_counter(), time.process_time()
        baseline = run_baseline(directory)
        baseline_s = time.perf_counter() - started
        baseline_cpu = time.process_time() - cpu_started
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    if audit.verdict != baseline.verdict:
        raise RuntimeError(
            f"audit ({audit.verdict}) and baseline ({baseline.verdict}) disagree on the same files"
        )
    phases = "; ".join(f"{p['phase'] or 'end'}: {p['wall_s']} s wall, {p['cpu_s']} s CPU"
                       for p in clock.to_json())
    return make_report(
        "audit",
        "single-process baseline",
        [row(f"audit wall time, {records:,} records", "s", "lower", audit_s, baseline_s),
         row("audit CPU time (process tree)", "s", "lower", audit_cpu, baseline_cpu)],
        [NOTE, f"{audit.inputs['records']:,} rows read from {audit.inputs['files']} files "
               f"of {audit.inputs['nodes']} nodes",
         "load average before the audit: " + ", ".join(f"{v:.2f}" for v in load_before),
         f"audit phases (CPU of the audit's process tree: driver, staging pool, JVM, Python "
         f"workers): {phases}"],
        records=records,
        rows=audit.inputs["records"],
        verdict=audit.verdict,
        phases=clock.to_json(),
        load_average_before=[round(v, 2) for v in load_before],
    )
