"""free_ports with MINIKRAFT_PORT_RANGE (how the suite's workers keep their clusters' ports
apart, and out of the kernel's ephemeral range): only that range, never a port in use, distinct,
and a clear error when the range cannot supply enough."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from cluster.launch.local_cluster import PORT_RANGE_ENV, free_ports


def test_ports_come_from_the_range_and_skip_a_port_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as taken:
        # A port below the kernel's ephemeral range and the suite's (20000 up), so no client
        # connection's source port or other test cluster sits among the 11 the test needs.
        port = _bind_below_the_suites_ports(taken)
        taken.listen()
        low, high = port - 5, port + 5
        monkeypatch.setenv(PORT_RANGE_ENV, f"{low}-{high}")
        for _ in range(5):  # the pick is random: several draws
            picked = free_ports(10)
            assert len(set(picked)) == 10
            assert all(low <= p <= high for p in picked)
            assert port not in picked
        with pytest.raises(OSError, match=PORT_RANGE_ENV):
            free_ports(11)


def _bind_below_the_suites_ports(sock: socket.socket) -> int:
    for port in range(12005, 15000, 11):
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return port
    raise AssertionError("no free port in 12005-14999")


def test_the_suite_gives_this_process_a_range_below_the_ephemeral_ports() -> None:
    span = os.environ[PORT_RANGE_ENV]  # tests/conftest.py
    low, high = (int(p) for p in span.split("-"))
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert 1024 < low <= high < ephemeral_low
    assert all(low <= p <= high for p in free_ports(4))
