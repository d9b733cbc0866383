"""Processes the peer benches start: free loopback ports, spawn with a log file, stop by pid."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Self

from cluster.launch.local_cluster import free_ports, send_signal, wait_exit

__all__ = ["PeerCluster", "PeerMissing", "free_ports", "require_binary", "spawn", "stop_pid"]


class PeerMissing(RuntimeError):
    """The peer is not installed; `make bench-deps` installs it."""


class PeerCluster(ABC):
    """A peer's three processes as a context manager: `start()` spawns them, recording each pid
    in `pids`; `stop()` ends them by pid, also when a start fails midway."""

    pids: list[int]

    @abstractmethod
    def start(self) -> None:
        """Spawn the peer's processes, each pid into `pids` as it starts."""

    def stop(self) -> None:
        for pid in self.pids:
            stop_pid(pid)
        self.pids = []

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def require_binary(name: str, package: str) -> str:
    found = shutil.which(name) or next(
        (p for p in (f"/usr/bin/{name}", f"/usr/sbin/{name}") if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise PeerMissing(f"{package} not installed: make bench-deps")
    return found


def spawn(command: list[str], log_file: Path) -> int:
    """Start a peer process in its own session (so a kill reaches only it); returns its pid."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc.pid


def stop_pid(pid: int | None, sig: int = signal.SIGTERM, timeout_s: float = 5.0) -> None:
    """Signal one recorded pid, then SIGKILL it if it outlives timeout_s; reap it."""
    if pid is None:
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        _reap(pid)
        return
    if not wait_exit(pid, timeout_s) and sig != signal.SIGKILL:
        send_signal(pid, signal.SIGKILL)
        wait_exit(pid, 5.0)
    _reap(pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
