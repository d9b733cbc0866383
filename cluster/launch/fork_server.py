"""A fork server for node processes: one interpreter imports the node code once, then forks a
child per node, which runs `minikraft controller|broker --config F` as a fresh exec would.

Why: importing a node's code (kio's schemas, aiohttp, our cores) costs 1.1-1.5 s of CPU per
process on a 2-core machine, six processes per cluster, and the test suite starts a cluster in
most of its integration tests. Forking a warm interpreter costs milliseconds. A forked node is
a real OS process like an exec'd one: its own pid, session, sockets, files and fsyncs, signalled
and stopped by pid. Only its command line differs (the server's), so LocalCluster knows it by its
pid and start time instead (is_running).

LocalCluster uses it only after `enable()` (the test suite does); `minikraft up`, `make demo` and
network-namespace clusters (whose nodes start under `ip netns exec`) always exec.

The server speaks JSON lines on its stdin and stdout: a request {"args", "log_file", "env",
"cwd"} answered by {"pid"} or {"error"}. It exits when its stdin closes (its parent is gone);
children live on in their own sessions, and the server never waits for them (SIGCHLD is ignored,
so the kernel reaps them and a stopped node leaves no zombie behind).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import traceback
from typing import IO, Any

# What a node process imports, loaded once in the server (the exec path's `__main__` guard in
# cluster/cli/main.py keeps Hypothesis out of node processes; the server does the same first).
MINIKRAFT_MAIN = "cluster.cli.main"
_PRELOAD = (
    "uvloop",
    MINIKRAFT_MAIN,
    "cluster.cli.node_cmds",
    "cluster.launch.node_entrypoint",
    "cluster.bench.raft_workload",
    "controller.runtime.controller_node",
    "broker.runtime.broker_node",
)


class ForkServerError(RuntimeError):
    pass


class ForkServer:
    """The parent's handle on a running server: spawn() forks one node and returns its pid."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cluster.launch.fork_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        ready = proc.stdout.readline() if proc.stdout else b""
        if json.loads(ready or b"{}").get("ready") is not True:
            proc.kill()
            proc.wait()
            raise ForkServerError(f"fork server did not start: {ready!r}")
        return proc

    def spawn(self, args: list[str], log_file: str, env: dict[str, str], cwd: str) -> int:
        request = {"args": args, "log_file": log_file, "env": env, "cwd": cwd}
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            stdin, stdout = self._proc.stdin, self._proc.stdout
            assert stdin is not None and stdout is not None
            stdin.write(json.dumps(request).encode() + b"\n")
            stdin.flush()
            reply = json.loads(stdout.readline() or b'{"error": "fork server exited"}')
        if "pid" not in reply:
            raise ForkServerError(str(reply.get("error")))
        return int(reply["pid"])

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()  # EOF: the server exits; its children live on
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


_server: ForkServer | None = None


def enable() -> ForkServer:
    """Route LocalCluster's loopback node starts in this process through one fork server."""
    global _server
    if _server is None:
        _server = ForkServer()
        atexit.register(_server.close)
    return _server


def disable() -> None:
    global _server
    if _server is not None:
        _server.close()
        _server = None


def active() -> ForkServer | None:
    return _server


# -- the server process ----------------------------------------------------------------------


def _open_fds() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 256))


def _text_stream(fd: int) -> IO[str]:
    # PYTHONUNBUFFERED, as LocalCluster's exec path sets: every line reaches the log at once.
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), write_through=True)


def _run_child(request: dict[str, Any]) -> None:
    """In the forked child: become the node process, then exit with its code (never returns)."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log_fd = os.open(request["log_file"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        # Nothing of the server's (its request pipe) leaks into a node.
        for fd in _open_fds():
            if fd > 2:
                with contextlib.suppress(OSError):
                    os.close(fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = _text_stream(1)
        sys.stderr = _text_stream(2)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = ["minikraft", *request["args"]]
        # The `minikraft` program, named as the exec path names it (`python -m cluster.cli.main`)
        # and loaded once in the server (_PRELOAD): the launcher starts the command, it does
        # not build on the CLI's code.
        importlib.import_module(MINIKRAFT_MAIN).main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    for name in _PRELOAD:
        importlib.import_module(name)
    # fork() copies only the calling thread: a thread started by an import would be missing,
    # with whatever lock it held still held, in every node.
    if threading.active_count() != 1:
        raise SystemExit(f"fork server: {threading.active_count()} threads after imports")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    replies.write(b'{"ready": true}\n')
    replies.flush()
    for line in requests:
        try:
            request = json.loads(line)
            pid = os.fork()
        except (ValueError, OSError) as exc:
            replies.write(json.dumps({"error": repr(exc)}).encode() + b"\n")
            replies.flush()
            continue
        if pid == 0:
            _run_child(request)
        replies.write(json.dumps({"pid": pid}).encode() + b"\n")
        replies.flush()


if __name__ == "__main__":
    serve()
