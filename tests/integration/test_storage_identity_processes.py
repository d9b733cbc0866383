"""Seed 003's storage identity with a real broker process: it checks every meta.properties it
opens (metadata directory and each log directory) and refuses to start on another cluster's or
another node's directory, naming the directory and both ids in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.integration.conftest import minikraft
from tests.integration.test_storage_cli import _config

START_TIMEOUT_S = 30  # the refusal comes before any network: well under this


def _format(config: Path, cluster_id: str) -> None:
    result = minikraft("storage", "format", "--config", str(config), "--cluster-id", cluster_id)
    assert result.returncode == 0, result.stderr


def _refused(config: Path) -> str:
    """Start the broker; it must exit at once with one line on stderr (CLI.md)."""
    result = minikraft("broker", "--config", str(config), timeout=START_TIMEOUT_S)
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_broker_refuses_a_log_dir_of_another_cluster(tmp_path: Path) -> None:
    ours, theirs = (minikraft("storage", "random-uuid").stdout.strip() for _ in range(2))
    config = _config(tmp_path, 7, roles="broker")
    _format(config, ours)
    (tmp_path / "other").mkdir()
    other = _config(tmp_path / "other", 7, roles="broker")
    _format(other, theirs)
    # Data directory b is swapped for another cluster's disk (same node id).
    foreign = tmp_path / "data-7-b"
    shutil.rmtree(foreign)
    shutil.copytree(tmp_path / "other" / "data-7-a", foreign)
    line = _refused(config)
    assert str(foreign / "meta.properties") in line
    assert f"cluster id {theirs}" in line and f"cluster id {ours}" in line
    assert str(tmp_path / "meta-7" / "meta.properties") in line


def test_broker_refuses_a_log_dir_of_another_node(tmp_path: Path) -> None:
    cluster_id = minikraft("storage", "random-uuid").stdout.strip()
    config = _config(tmp_path, 7, roles="broker")
    _format(config, cluster_id)
    _format(_config(tmp_path, 8, roles="broker"), cluster_id)
    foreign = tmp_path / "data-7-a"
    shutil.rmtree(foreign)
    shutil.copytree(tmp_path / "data-8-a", foreign)  # node 8's disk in node 7's slot
    line = _refused(config)
    assert str(foreign / "meta.properties") in line
    assert "node id 8" in line and "this node is 7" in line
