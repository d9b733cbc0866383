"""The class-data archive of Spark's JVM (analytics.engine.spark_session.cds_java_options): written by
a JVM to a file of its own, taken into use only once whole, then mapped by later starts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from analytics.engine import spark_session

DEAD_PID = 2**22 + 1  # above Linux's pid_max default: no such process


def test_archive_written_then_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "spark.jsa"
    monkeypatch.setattr(spark_session, "_cds_archive", lambda: archive)
    first = spark_session.cds_java_options()
    assert f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}" in first
    assert "-Xlog:disable" in first  # a CDS warning must not reach the CLI's stdout

    fresh = Path(f"{archive}.{DEAD_PID}")
    fresh.write_bytes(b"being written")
    assert "ArchiveClassesAtExit" in spark_session.cds_java_options()  # not settled yet
    assert fresh.exists() and not archive.exists()

    old = time.time() - spark_session.CDS_SETTLED_S - 5
    os.utime(fresh, (old, old))
    alive = Path(f"{archive}.{os.getpid()}")  # this process's JVM may still be writing it
    alive.write_bytes(b"x")
    os.utime(alive, (old, old))
    used = spark_session.cds_java_options()
    assert used.startswith(f"-XX:SharedArchiveFile={archive} ")
    assert archive.read_bytes() == b"being written" and not fresh.exists() and alive.exists()
