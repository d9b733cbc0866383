"""`minikraft audit --master spark://...` on a local standalone Spark master and worker (started
with the pyspark wheel's bin/spark-class on 127.0.0.1, free ports), on a small generated log.
Both JVMs are always killed by pid. Slow: two JVMs plus an application."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from analytics.generate import generate_cluster_dir

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"process exited with {proc.returncode}"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise AssertionError(f"port {port} not open after {timeout_s} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the JVM and its launcher
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(tmp_path / "work"), "SPARK_LOG_DIR": str(tmp_path / "logs"),
           "PYTHONPATH": str(REPO)}
    master_port, worker_port = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{master_port}"
    logs = tmp_path / "jvm"
    logs.mkdir()
    started: list[subprocess.Popen[bytes]] = []
    try:
        master = subprocess.Popen(
            [str(_spark_class()), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(master_port), "--webui-port", str(_free_port())],
            env=env, stdout=(logs / "master.out").open("wb"), stderr=subprocess.STDOUT,
            start_new_session=True)
        started.append(master)
        _wait_port(master_port, master, START_TIMEOUT_S)
        worker = subprocess.Popen(
            [str(_spark_class()), "org.apache.spark.deploy.worker.Worker", master_url,
             "--host", "127.0.0.1", "--port", str(worker_port), "--webui-port",
             str(_free_port()), "--cores", "2", "--memory", "1g",
             "--work-dir", str(tmp_path / "work")],
            env=env, stdout=(logs / "worker.out").open("wb"), stderr=subprocess.STDOUT,
            start_new_session=True)
        started.append(worker)
        _wait_port(worker_port, worker, START_TIMEOUT_S)
        yield master_url
    finally:
        for proc in reversed(started):
            _stop(proc)


def test_audit_runs_on_standalone_master(standalone: str, tmp_path: Path) -> None:
    generate_cluster_dir(tmp_path / "cluster", 400, seed=3, topics=2, partitions_per_topic=2,
                         segment_records=10**6, snapshot_at=None)
    report = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "cluster.cli.main", "audit", "--dir", str(tmp_path / "cluster"),
         "--master", standalone, "--report", str(report)],
        capture_output=True, text=True, timeout=400, cwd=REPO,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"verdict": "clean"' in (report / "audit.json").read_text()
