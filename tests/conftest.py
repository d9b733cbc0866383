"""Suite-wide: LocalCluster forks node processes from one warm interpreter
(cluster/launch/fork_server.py) instead of exec'ing each, saving the 1.1-1.5 s of imports per
node that most integration tests would otherwise pay six times per cluster start. The exec path
stays covered: `minikraft up`, the demo, compose and network-namespace clusters always exec."""

from __future__ import annotations

import pytest

from cluster.launch import fork_server


def pytest_configure(config: pytest.Config) -> None:
    fork_server.enable()


def pytest_unconfigure(config: pytest.Config) -> None:
    fork_server.disable()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under pytest-xdist's loadgroup: a file's tests stay on one worker (module-scoped clusters
    # start once), and every Spark test shares one worker and so one JVM (the session fixture).
    for item in items:
        path = item.path.as_posix()
        group = "spark" if "/tests/spark/" in path else path
        item.add_marker(pytest.mark.xdist_group(group))
