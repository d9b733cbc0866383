"""A Docker engine and a Python base image for the compose cluster, wherever the machine has none.

`engine()` answers with the engine to use: the one DOCKER_HOST or the default socket names when it
answers `docker info`; else, as root with Debian's `dockerd` installed, a private one this module
starts: `dockerd --iptables=false --data-root D -H unix://S` (its own data root, socket and exec
root, so it never meets another engine, and it leaves the host's firewall alone: containers on a
compose network still reach each other and published ports work through the userland proxy).

`base_image()` answers with the image the Dockerfile builds FROM: the official `python:3.11-slim`
when it is present or can be pulled, else a stand-in made from Debian's own packages (Debian 12's
Python is 3.11): `debootstrap --variant=minbase` with python3, venv, pip and ca-certificates, then
`docker import`, with `EXTERNALLY-MANAGED` dropped and `python`/`pip` links added so it behaves as
the official image does. Either is built once per engine data root.

`python -m cluster.launch.docker_engine [--stop]` prints `DOCKER_HOST=...` and
`MINIKRAFT_BASE_IMAGE=...` (make docker-engine; the compose tests call the functions).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

OFFICIAL_BASE = "python:3.11-slim"
STANDIN_BASE = "minikraft/python-standin:3.11-bookworm"
PRIVATE_ROOT = Path(os.environ.get("MINIKRAFT_DOCKER_ROOT", "/var/lib/minikraft-docker"))
PRIVATE_RUN = Path(os.environ.get("MINIKRAFT_DOCKER_RUN", "/run/minikraft-docker"))
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
ENGINE_START_S = 60.0
PULL_TIMEOUT_S = 60.0
# The stand-in's pip trusts the machine's CA bundle (a proxy that re-signs TLS is trusted there,
# and pip's own certifi bundle would refuse it); the official image keeps its defaults.
STANDIN_ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
    "PIP_CERT=/etc/ssl/certs/ca-certificates.crt",
)


class EngineError(RuntimeError):
    """No engine can be used or started here; the message says why (the tests skip with it)."""


@dataclass(frozen=True)
class Engine:
    host: str  # a DOCKER_HOST value
    pid: int | None  # dockerd's pid when this module started it, else None

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host}


def docker_cli() -> str | None:
    return shutil.which("docker")


def answers(host: str | None, timeout_s: float = 10.0) -> bool:
    """Whether the engine at host (None: the CLI's default) answers `docker info`."""
    cli = docker_cli()
    if cli is None:
        return False
    env = dict(os.environ)
    if host is not None:
        env["DOCKER_HOST"] = host
    try:
        done = subprocess.run([cli, "info", "--format", "{{.ServerVersion}}"], env=env,
                              capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def private_socket() -> Path:
    return PRIVATE_RUN / "docker.sock"


def private_pidfile() -> Path:
    return PRIVATE_RUN / "docker.pid"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _private_pid() -> int | None:
    try:
        pid = int(private_pidfile().read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _pid_alive(pid) and "dockerd" in _cmdline(pid) else None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """One process at a time starts the engine or builds the base (CI runs `make docker-engine`
    in the background while the suite starts: the compose tests then wait for it here)."""
    with open(Path(tempfile.gettempdir()) / f"minikraft-docker-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def engine(start: bool = True) -> Engine:
    """The engine to use (see the module doc); EngineError says why there is none."""
    if docker_cli() is None:
        raise EngineError("no docker CLI (sudo make system-deps installs docker.io)")
    configured = os.environ.get("DOCKER_HOST")
    if answers(configured):
        return Engine(configured or "unix:///var/run/docker.sock", None)
    private = f"unix://{private_socket()}"
    if private_socket().exists() and answers(private):
        return Engine(private, None)
    if not start:
        raise EngineError("no Docker engine answers (make docker-engine starts one)")
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise EngineError("no Docker engine answers and dockerd is not installed "
                          "(sudo make system-deps installs docker.io)")
    if os.geteuid() != 0:
        raise EngineError("no Docker engine answers and starting dockerd needs root")
    with _locked("engine"):
        if private_socket().exists() and answers(private):
            return Engine(private, None)  # another process started it meanwhile
        return Engine(private, start_private(dockerd))


def start_private(dockerd: str) -> int:
    """Start the private dockerd (see the module doc) and wait for it to answer; its pid."""
    PRIVATE_RUN.mkdir(parents=True, exist_ok=True)
    PRIVATE_ROOT.mkdir(parents=True, exist_ok=True)
    stale = _private_pid()
    if stale is not None:  # running but not answering yet: wait for it below
        pid = stale
    else:
        with contextlib.suppress(FileNotFoundError):
            private_socket().unlink()
        with open(PRIVATE_ROOT / "dockerd.log", "ab") as out:
            pid = subprocess.Popen(
                [dockerd, "--iptables=false", "--ip-masq=false",
                 "--data-root", str(PRIVATE_ROOT / "data"),
                 "--exec-root", str(PRIVATE_RUN / "exec"),
                 "--pidfile", str(private_pidfile()),
                 "-H", f"unix://{private_socket()}"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            ).pid
    deadline = time.monotonic() + ENGINE_START_S
    while time.monotonic() < deadline:
        if private_socket().exists() and answers(f"unix://{private_socket()}", 5.0):
            return pid
        if not _pid_alive(pid):
            break
        time.sleep(0.5)
    raise EngineError(f"dockerd did not answer within {ENGINE_START_S:.0f}s "
                      f"(log: {PRIVATE_ROOT / 'dockerd.log'})")


def stop_private(pid: int | None = None, timeout_s: float = 30.0) -> bool:
    """SIGTERM the private dockerd by its pid (the one given, else its pidfile's); True once it
    exited. Its containers are stopped by dockerd itself."""
    pid = pid if pid is not None else _private_pid()
    if pid is None or not _pid_alive(pid):
        return True
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not _pid_alive(pid):
            return True
        time.sleep(0.2)
    return False


def docker(
    engine_: Engine, *args: str, timeout_s: float = 120.0, check: bool = True
) -> subprocess.CompletedProcess[str]:
    cli = docker_cli()
    assert cli is not None
    done = subprocess.run([cli, *args], env=engine_.env(), capture_output=True, text=True,
                          timeout=timeout_s)
    if check and done.returncode != 0:
        raise EngineError(f"docker {' '.join(args)}: {done.stderr.strip() or done.stdout}")
    return done


def has_image(engine_: Engine, tag: str) -> bool:
    return docker(engine_, "image", "inspect", tag, check=False, timeout_s=30).returncode == 0


def base_image(engine_: Engine) -> str:
    """The official base when present or pullable, else the Debian stand-in (built once)."""
    if has_image(engine_, OFFICIAL_BASE):
        return OFFICIAL_BASE
    if has_image(engine_, STANDIN_BASE):
        return STANDIN_BASE
    with _locked("base"):
        return _pull_or_build_base(engine_)


def _pull_or_build_base(engine_: Engine) -> str:
    if has_image(engine_, STANDIN_BASE):  # built by another process while this one waited
        return STANDIN_BASE
    try:
        if docker(engine_, "pull", OFFICIAL_BASE, check=False,
                  timeout_s=PULL_TIMEOUT_S).returncode == 0:
            return OFFICIAL_BASE
    except subprocess.TimeoutExpired:
        pass
    build_standin(engine_)
    return STANDIN_BASE


def build_standin(engine_: Engine) -> None:
    """debootstrap Debian 12 with Python 3.11 and import it as STANDIN_BASE (about a minute)."""
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise EngineError(f"{OFFICIAL_BASE} cannot be pulled and debootstrap is not installed "
                          "(sudo make system-deps installs it)")
    with tempfile.TemporaryDirectory(prefix="mk-standin-") as tmp:
        root = Path(tmp) / "rootfs"
        done = subprocess.run(
            [debootstrap, "--variant=minbase",
             "--include=python3,python3-venv,python3-pip,ca-certificates",
             DEBIAN_SUITE, str(root), DEBIAN_MIRROR],
            capture_output=True, text=True, timeout=900,
        )
        if done.returncode != 0:
            raise EngineError(f"debootstrap failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        (root / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)
        for name, target in (("python", "python3"), ("pip", "pip3")):
            link = root / "usr/local/bin" / name
            link.parent.mkdir(parents=True, exist_ok=True)
            link.unlink(missing_ok=True)
            link.symlink_to(f"/usr/bin/{target}")
        host_bundle = Path("/etc/ssl/certs/ca-certificates.crt")
        if host_bundle.exists():  # the machine's trust (see STANDIN_ENV)
            shutil.copyfile(host_bundle, root / "etc/ssl/certs/ca-certificates.crt")
        # What a running system needs, not an image: apt's lists and caches, docs, man pages.
        for junk in ("var/lib/apt/lists", "var/cache/apt", "usr/share/doc", "usr/share/man",
                     "usr/share/locale"):
            shutil.rmtree(root / junk, ignore_errors=True)
        changes = [arg for env in STANDIN_ENV for arg in ("--change", f"ENV {env}")]
        changes += ["--change", 'CMD ["python3"]']
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        cli = docker_cli()
        assert cli is not None
        imported = subprocess.run([cli, "import", *changes, "-", STANDIN_BASE],
                                  stdin=tar.stdout, env=engine_.env(), capture_output=True,
                                  text=True, timeout=600)
        tar.stdout.close()
        tar.wait(60)
        if imported.returncode != 0:
            raise EngineError(f"docker import failed: {imported.stderr.strip()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster.launch.docker_engine",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--stop", action="store_true",
                        help="stop the private dockerd this module started (by its pidfile)")
    args = parser.parse_args(argv)
    if args.stop:
        return 0 if stop_private() else 1
    try:
        found = engine()
        base = base_image(found)
    except EngineError as exc:
        print(f"docker-engine: {exc}", file=sys.stderr)
        return 1
    print(f"DOCKER_HOST={found.host}")
    print(f"MINIKRAFT_BASE_IMAGE={base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
