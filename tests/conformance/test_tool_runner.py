"""Kafka's tools run from the jars of `make kafka-deps` (cluster/apache_kafka/tools.py): the
pinned release answers, its logging stays off stdout, and a hung tool is killed at its timeout."""

from __future__ import annotations

import socket

import pytest

from cluster.apache_kafka import deps, tools

pytestmark = pytest.mark.skipif(tools.skip_reason() is not None, reason=str(tools.skip_reason()))


def test_tool_prints_the_pinned_release_on_stdout_only() -> None:
    rc, out, err = tools.run_tool(tools.TOPICS, ["--version"], timeout=60)
    assert rc == 0, err
    assert out.strip() == deps.kafka_version()
    assert "SLF4J" not in err  # the binding is on the classpath: no NOP-logger warning


def test_a_tool_that_outlives_its_timeout_is_killed_with_its_warnings_on_stderr() -> None:
    # A port nobody listens on: the admin client retries until the runner kills it.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # 15 s: the JVM's start and the admin client's first refused connection took over 6 s at
    # load 12, and the tool was killed before it had warned anything.
    result = tools.run_tool(tools.TOPICS, ["--bootstrap-server", f"127.0.0.1:{port}", "--list"],
                            timeout=15)
    assert result.rc == -9
    assert result.stdout == ""
    assert "WARN" in result.stderr and "killed after 15" in result.stderr
