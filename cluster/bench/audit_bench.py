"""`minikraft bench audit`: the PySpark audit (analytics/audit.py) against the single-process
Python baseline (analytics/baseline.py) over the same generated metadata logs, in one run, at
1M records (`--quick`: 100k). The peer here is the single-process pass, not another system."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from cluster.bench.report import make_report, row

NOTE = "same generated files; Spark local[2] vs one Python process; wall time incl. start-up"


def run_audit_bench(
    *, records: int = 1_000_000, quick: bool = False, master: str = "local[2]"
) -> dict[str, Any]:
    from analytics.audit import run_audit
    from analytics.baseline import run_baseline
    from analytics.generate import generate_cluster_dir

    if quick:
        records = 100_000
    workdir = Path(tempfile.mkdtemp(prefix="minikraft-audit-bench-"))
    try:
        generate_cluster_dir(workdir / "cluster", records)
        started = time.perf_counter()
        audit = run_audit(workdir / "cluster", master=master)
        audit_s = time.perf_counter() - started
        started = time.perf_counter()
        baseline = run_baseline(workdir / "cluster")
        baseline_s = time.perf_counter() - started
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if audit.verdict != baseline.verdict:
        raise RuntimeError(
            f"audit ({audit.verdict}) and baseline ({baseline.verdict}) disagree on the same files"
        )
    return make_report(
        "audit",
        "single-process baseline",
        [row(f"audit wall time, {records:,} records", "s", "lower", audit_s, baseline_s)],
        [NOTE],
        records=records,
        verdict=audit.verdict,
    )
