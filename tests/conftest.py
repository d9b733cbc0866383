"""Suite-wide: LocalCluster forks node processes from one warm interpreter
(cluster/launch/fork_server.py) instead of exec'ing each, saving the 1.1-1.5 s of imports per
node that most integration tests would otherwise pay six times per cluster start. The exec path
stays covered: `minikraft up`, the demo, compose and network-namespace clusters always exec."""

from __future__ import annotations

import os

import pytest

from cluster.launch import fork_server
from cluster.launch.local_cluster import PORT_RANGE_ENV

# Test clusters take their ports from below the kernel's ephemeral range (32768 up), so no
# client connection's source port can take one before its node binds it; each pytest-xdist
# worker picks from its own slice, so two workers never pick the same port at once.
TEST_PORTS = (20000, 32767)


def pytest_configure(config: pytest.Config) -> None:
    fork_server.enable()
    index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    width = (TEST_PORTS[1] - TEST_PORTS[0] + 1) // workers
    low = TEST_PORTS[0] + index * width
    os.environ.setdefault(PORT_RANGE_ENV, f"{low}-{low + width - 1}")


def pytest_unconfigure(config: pytest.Config) -> None:
    fork_server.disable()

