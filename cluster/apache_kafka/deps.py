"""`make kafka-deps`: the pinned Apache Kafka release's jars, copied once into a cached folder.

apache-kafka/pom.xml pins the release (kafka_2.13 for kafka.Kafka and kafka.tools.StorageTool,
kafka-tools for the command-line tools) and adds the SLF4J binding Kafka's POMs leave out;
`mvn dependency:copy-dependencies` copies every runtime jar into
~/.cache/minikraft/kafka-<version>/lib (MINIKRAFT_KAFKA_CACHE moves the parent). A `.complete`
file holding the pom's hash marks a finished copy, so a second run does nothing and an edited pom
(a new release) copies again. Failures print one line and exit 1; the tests that need the jars
then skip with tools.skip_reason().
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
POM = REPO_ROOT / "apache-kafka" / "pom.xml"
LOG4J2_CONFIG = REPO_ROOT / "apache-kafka" / "log4j2.xml"
CACHE_ENV = "MINIKRAFT_KAFKA_CACHE"
COMPLETE = ".complete"
MVN_TIMEOUT_S = 900.0

# What Maven prints when it cannot reach the repository (no network, DNS, proxy, TLS).
_UNREACHABLE = re.compile(
    r"Could not transfer|UnknownHost|Connection refused|Connect to .* failed|"
    r"Network is unreachable|timed out|No route to host|PKIX path",
)


def kafka_version() -> str:
    """The pinned release, read from the pom's <kafka.version> property."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if match is None:
        raise RuntimeError(f"{POM} names no <kafka.version>")
    return match.group(1).strip()


def cache_root() -> Path:
    base = os.environ.get(CACHE_ENV)
    return Path(base) if base else Path.home() / ".cache" / "minikraft"


def kafka_home() -> Path:
    return cache_root() / f"kafka-{kafka_version()}"


def lib_dir() -> Path:
    return kafka_home() / "lib"


def _pom_hash() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def is_complete() -> bool:
    marker = kafka_home() / COMPLETE
    try:
        return marker.read_text().strip() == _pom_hash()
    except OSError:
        return False


def _one_line(output: str) -> str:
    """The first line of Maven's output that says why, without its [ERROR] prefix."""
    for line in output.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if line.startswith("[ERROR]") and len(line) > len("[ERROR] "):
            return line.removeprefix("[ERROR]").strip()[:300]
    return output.strip().splitlines()[-1][:300] if output.strip() else "no output"


def ensure() -> tuple[bool, str]:
    """Copy the jars if they are not there yet: (ok, one line saying what happened)."""
    version = kafka_version()
    if is_complete():
        return True, f"Apache Kafka {version}: jars already in {lib_dir()}"
    mvn = shutil.which("mvn")
    if mvn is None:
        return False, "mvn not found: install Maven (apt-get install maven) and Java 17"
    home = kafka_home()
    home.mkdir(parents=True, exist_ok=True)
    # Copy into a fresh folder and rename it into place: an interrupted run leaves no half lib.
    staging = Path(tempfile.mkdtemp(prefix="lib-", dir=home))
    try:
        proc = subprocess.run(
            [mvn, "-B", "-q", "-f", str(POM), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=MVN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        return False, f"mvn did not finish in {MVN_TIMEOUT_S:.0f} s (Maven Central slow or unreachable)"
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        output = proc.stdout + proc.stderr
        why = _one_line(output)
        if _UNREACHABLE.search(output):
            return False, f"Maven Central unreachable, Apache Kafka {version} not fetched: {why}"
        return False, f"mvn failed fetching Apache Kafka {version}: {why}"
    shutil.rmtree(home / "lib", ignore_errors=True)
    staging.rename(home / "lib")
    (home / COMPLETE).write_text(_pom_hash() + "\n")
    jars = len(list(lib_dir().glob("*.jar")))
    return True, f"Apache Kafka {version}: {jars} jars copied into {lib_dir()}"


def main() -> int:
    ok, line = ensure()
    print(f"make kafka-deps: {line}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
