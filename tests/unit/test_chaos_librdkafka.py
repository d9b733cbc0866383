"""The chaos workload's librdkafka producer reports delivery outcomes in Kafka's error names:
broker errors keep their code, librdkafka's local errors become a timeout or a transport
failure (what minikraft's own producer journals for the same cases)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.chaos.librdkafka_producer import librdkafka_error
from cluster.chaos.workload import ChaosWorkload
from kafkawire.errors import Errors


def test_delivery_errors_map_to_kafkas_names() -> None:
    assert librdkafka_error(None) is Errors.NONE
    assert librdkafka_error(6) is Errors.NOT_LEADER_OR_FOLLOWER
    assert librdkafka_error(19) is Errors.NOT_ENOUGH_REPLICAS
    assert librdkafka_error(-1) is Errors.UNKNOWN_SERVER_ERROR
    assert librdkafka_error(-192) is Errors.REQUEST_TIMED_OUT  # _MSG_TIMED_OUT
    assert librdkafka_error(-195) is Errors.NETWORK_EXCEPTION  # _TRANSPORT


def test_an_unknown_client_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown client 'kcat'"):
        ChaosWorkload(
            bootstrap_server="127.0.0.1:1", bootstrap_controller="127.0.0.1:2", topic="t",
            journal_path=tmp_path / "j", run_id="r", client="kcat",
        )
