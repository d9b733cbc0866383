"""`make kafka-deps` (cluster/apache_kafka/deps.py): the pinned release, the idempotent cache, and
the one line a user gets when Maven cannot reach its repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster.apache_kafka import deps, tools


def _fake_mvn(bin_dir: Path, script: str) -> None:
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text("#!/bin/sh\n" + script)
    mvn.chmod(0o755)


def test_the_pom_pins_one_kafka_4_release() -> None:
    major, minor, patch = (int(p) for p in deps.kafka_version().split("."))
    assert major == 4 and minor >= 1 and patch >= 0


def test_unreachable_repository_is_one_line_and_leaves_no_lib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_mvn(
        tmp_path / "bin",
        'echo "[INFO] Scanning for projects..."\n'
        'echo "[ERROR] Failed to execute goal on project apache-kafka-beside: Could not transfer '
        'artifact org.apache.kafka:kafka_2.13:pom:4.4.0 from/to central: '
        'java.net.UnknownHostException: central" >&2\n'
        'echo "[ERROR] -> [Help 1]" >&2\nexit 1\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(deps.CACHE_ENV, str(tmp_path / "cache"))
    ok, line = deps.ensure()
    assert not ok
    assert "\n" not in line
    assert line.startswith(f"Maven Central unreachable, Apache Kafka {deps.kafka_version()}")
    assert "UnknownHostException" in line
    assert not deps.lib_dir().exists() and not deps.is_complete()
    assert "make kafka-deps" in (tools.skip_reason() or "")


def test_a_complete_copy_is_not_fetched_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fake mvn that copies one jar and counts its runs: the second ensure() must not run it.
    counter = tmp_path / "runs"
    _fake_mvn(
        tmp_path / "bin",
        f'echo run >> {counter}\n'
        'for a in "$@"; do case "$a" in -DoutputDirectory=*) d="${a#-DoutputDirectory=}";; esac; done\n'
        'touch "$d/kafka_2.13.jar"\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(deps.CACHE_ENV, str(tmp_path / "cache"))
    assert deps.ensure()[0] and deps.is_complete()
    ok, line = deps.ensure()
    assert ok and "already" in line
    assert counter.read_text().count("run") == 1
    assert (deps.lib_dir() / "kafka_2.13.jar").exists()
    assert tools.classpath() == f"{deps.lib_dir()}/*"
