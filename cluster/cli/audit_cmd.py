"""`minikraft audit --dir D [--master local[2]|spark://H:P] [--report OUT] [--output json]`.

Runs the PySpark audit over every metadata log and snapshot under D (analytics.audit), shows a
progress line on stderr while Spark runs, writes OUT/audit.json and OUT/index.html, and exits 1
unless the verdict is clean: `violations` (an INVARIANTS rule broken) or `corrupt` (a CRC or
framing error with valid data after it: bit rot); 0 when clean (a torn last batch after a crash
is listed, not a finding); 2 on a usage error or nothing to audit.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import click

from cluster.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, emit_table, fail
from cluster.output import stderr as stderr_console

_POLL_S = 0.5


class _SparkProgress:
    """Keeps one rich status line on stderr: the audit's phase and the running stage's tasks."""

    def __init__(self) -> None:
        self.phase = "starting Spark"
        self._stop = threading.Event()
        self._status = stderr_console.status(self.phase)
        self._thread: threading.Thread | None = None
        self._spark: Any = None

    def __enter__(self) -> _SparkProgress:
        self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._status.__exit__(None, None, None)

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self._status.update(phase)

    def watch(self, spark: Any) -> None:
        self._spark = spark
        self._thread = threading.Thread(target=self._poll, name="audit-progress", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        tracker = self._spark.sparkContext.statusTracker()
        while not self._stop.wait(_POLL_S):
            try:
                stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            except Exception:  # the session is shutting down
                return
            done = sum(s.numCompletedTasks for s in stages if s)
            total = sum(s.numTasks for s in stages if s)
            suffix = f"  [Spark: {done}/{total} tasks]" if total else ""
            self._status.update(f"{self.phase}{suffix}")


@click.command("audit")
@click.option("--dir", "directory", required=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="cluster directory: every node's metadata log and snapshots under it")
@click.option("--master", default="local[2]", show_default=True,
              help="Spark master: local[N] or spark://host:port")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="write OUT/audit.json and OUT/index.html here")
@click.option("--output", type=click.Choice(["json", "text"]), default="text",
              show_default=True, help="json: the audit.json document on stdout")
def audit(directory: Path, master: str, report_dir: Path | None, output: str) -> None:
    """Check the rules of INVARIANTS.md on the files a cluster wrote (exit 1 on a violation)."""
    from analytics.audit import AuditInputError, run_audit
    from analytics.read.datasource import discover_files

    if not discover_files(directory):
        fail(f"no metadata log segments or snapshots under {directory}", EXIT_USAGE)
    with _SparkProgress() as progress:
        try:
            # run_audit starts Spark while it decodes the files, and stops it.
            result = run_audit(directory, master=master, report_dir=report_dir,
                               progress=progress.set_phase, on_session=progress.watch)
        except AuditInputError as exc:
            fail(str(exc), EXIT_USAGE)
    if output == "json":
        emit_json(result.to_json())
    else:
        emit_table(
            f"audit of {directory}: {result.verdict}",
            ["rule", "what", "checked", "violations"],
            [[r.rule, r.name, r.checked, r.violation_count] for r in result.rules],
        )
        for damage in result.corruption[:10]:
            stderr_console.print(f"[red]corrupt[/red] {damage['message']}", highlight=False)
        for damage in result.torn_tails[:10]:
            stderr_console.print(f"torn tail (not a finding): {damage['message']}",
                                 highlight=False)
        for rule in result.rules:
            for violation in rule.violations[:10]:
                stderr_console.print(
                    f"[red]rule {rule.rule}[/red] {violation.get('message')} "
                    f"(file {violation.get('file')}, offset {violation.get('offset')})",
                    highlight=False)
        if result.report_dir is not None:
            stderr_console.print(f"report: {result.report_dir / 'index.html'}", highlight=False)
    sys.exit(EXIT_OK if result.clean else EXIT_FAILED)


if __name__ == "__main__":
    audit(prog_name="minikraft audit")
