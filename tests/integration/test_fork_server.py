"""The fork server LocalCluster uses in this suite (cluster/launch/fork_server.py, enabled by
tests/conftest.py): a forked node is a real process of its own session whose output reaches its
log as an exec'd node's does, known by pid and start time, stopped by pid with nothing left."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

from cluster.launch import fork_server
from cluster.launch.local_cluster import LocalCluster, is_running, wait_exit
from cluster.launch.readiness import wait_until_ready
from tests.integration.conftest import REPO


def test_forked_node_is_its_own_process_known_by_pid_and_start_time(tmp_path: Path) -> None:
    assert fork_server.active() is not None, "tests/conftest.py enables the fork server"
    cluster = LocalCluster.plan(tmp_path / "c", controllers=1, base_port=0)
    cluster.format()
    cluster.start()
    try:
        asyncio.run(wait_until_ready(cluster, 60))
        spec = cluster.controllers[0]
        assert spec.pid is not None and spec.start_time is not None
        # Forked, not exec'd: the command line is the server's, the session its own.
        assert b"cluster.launch.fork_server" in Path(f"/proc/{spec.pid}/cmdline").read_bytes()
        assert os.getsid(spec.pid) == spec.pid
        assert os.readlink(f"/proc/{spec.pid}/fd/0") == os.devnull
        assert os.readlink(f"/proc/{spec.pid}/fd/1") == spec.log_file
        assert os.readlink(f"/proc/{spec.pid}/fd/2") == spec.log_file
        assert is_running(spec)
        # The same pid with another start time is another process (a recycled pid): not ours.
        assert not is_running(dataclasses.replace(spec, start_time=spec.start_time + 1))
        pid = spec.pid
    finally:
        killed = cluster.stop()
    assert killed == []  # SIGTERM was enough: the clean-shutdown path ran
    assert wait_exit(pid, 5)
    # Reaped, not left a zombie: the server ignores SIGCHLD, so the kernel releases the pid
    # (a moment after the exit, in which /proc shows "X (dead)").
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not Path(f"/proc/{pid}").exists()
    assert "shutting down" in Path(spec.log_file).read_text()
    assert not is_running(spec)


def test_a_forked_node_that_fails_prints_what_an_execd_one_prints(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.properties")
    execd = subprocess.run(
        [sys.executable, "-m", "cluster.cli.main", "controller", "--config", missing],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert execd.returncode != 0 and execd.stderr
    server = fork_server.ForkServer()
    try:
        # A child that dies before running the command leaves the server serving.
        bad_log = tmp_path / "bad-cwd.log"
        server.spawn(["controller"], str(bad_log), dict(os.environ), str(tmp_path / "no-dir"))
        log = tmp_path / "forked.log"
        pid = server.spawn(["controller", "--config", missing], str(log), dict(os.environ), str(REPO))
        assert wait_exit(pid, 30)
    finally:
        server.close()
    deadline = time.monotonic() + 5
    while "FileNotFoundError" not in bad_log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "FileNotFoundError" in bad_log.read_text()
    assert log.read_text() == execd.stdout + execd.stderr
