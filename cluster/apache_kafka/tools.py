"""Apache Kafka's command-line tools (and its JVMs) run from the jars of `make kafka-deps`.

A tool is its main class run as bin/kafka-run-class.sh would, with the repository's quiet log4j2
config (WARN to stderr, so stdout is the tool's output alone) and a small heap: this machine's
two cores are shared by six Kafka JVMs and the minikraft nodes beside them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

from cluster.apache_kafka import deps

# bin/*.sh of apache/kafka 4.x: the class each script runs.
KAFKA_SERVER = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
E2E_LATENCY = "org.apache.kafka.tools.EndToEndLatency"
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"

# A tool's JVM: small heap, C1 only and the serial collector start a short-lived JVM fastest on
# two shared cores (a tool's run is seconds; C2 and G1's threads would only compete).
TOOL_JVM_OPTS = ("-Xmx256m", "-Xms32m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


class ToolResult(NamedTuple):
    """(rc, stdout, stderr) of one tool run."""

    rc: int
    stdout: str
    stderr: str


def java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def skip_reason() -> str | None:
    """Why Kafka's jars cannot run here (None when they can): for pytest.skip."""
    if java() is None:
        return "no java on PATH (Apache Kafka needs Java 17): install OpenJDK 17"
    if not deps.is_complete():
        return (
            f"Apache Kafka {deps.kafka_version()} jars missing in {deps.lib_dir()}: "
            "run `make kafka-deps` (needs Maven Central)"
        )
    return None


def classpath() -> str:
    """Every jar of the pinned release (a java -cp wildcard)."""
    return str(deps.lib_dir() / "*")


def java_command(main_class: str, args: list[str], jvm_opts: tuple[str, ...] = TOOL_JVM_OPTS,
                 ) -> list[str]:
    return [
        java() or "java",
        *jvm_opts,
        f"-Dlog4j2.configurationFile={deps.LOG4J2_CONFIG}",
        "-cp", classpath(),
        main_class,
        *args,
    ]


def run_tool(main_class: str, args: list[str], timeout: float = 60.0,
             stdin: str | None = None) -> ToolResult:
    """Run one of Kafka's tools to completion: (rc, stdout, stderr).

    Killed (and its output so far returned with rc -9) when it outlives the timeout, so a tool
    that hangs fails its test instead of the suite."""
    try:
        proc = subprocess.run(
            java_command(main_class, args), input=stdin, capture_output=True, text=True,
            timeout=timeout, stdin=None if stdin is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return ToolResult(-9, out, err + f"\n(killed after {timeout} s)")
    return ToolResult(proc.returncode, proc.stdout, proc.stderr)
