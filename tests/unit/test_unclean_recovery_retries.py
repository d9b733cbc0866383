"""Seed 004's --recovery-election-attempts counts retries of transient failures: N retries allow
N + 1 ElectLeaders sends for a partition that keeps failing with a retriable error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.static.primitive import i32

from cluster.client import unclean_recovery as tool
from kafkawire import elect_leaders_v3 as el3
from kafkawire.entities import NO_THROTTLE
from kafkawire.errors import Errors
from kafkawire.messages import error_code


def _run_elect(monkeypatch: pytest.MonkeyPatch, retries: int, error: Errors) -> tuple[int, str]:
    """The tool's elect step against a controller answer that is always `error`."""
    sent: list[el3.ElectLeadersRequest] = []

    async def answer(_bootstrap: str, request: Any) -> el3.ElectLeadersResponse:
        assert isinstance(request, el3.ElectLeadersRequest)  # v3: DesignatedLeaders
        assert request.topic_partitions is not None
        assert request.topic_partitions[0].designated_leaders == (2,)
        sent.append(request)
        return el3.ElectLeadersResponse(
            throttle_time=NO_THROTTLE,  # type: ignore[arg-type]
            error_code=error_code(Errors.NONE),
            replica_election_results=(
                el3.ReplicaElectionResult(
                    topic="foo",
                    partition_result=(
                        el3.PartitionResult(
                            partition_id=i32(0), error_code=error_code(error), error_message="busy"
                        ),
                    ),
                ),
            ),
        )

    monkeypatch.setattr(tool, "admin_request", answer)
    monkeypatch.setattr(tool, "ELECTION_BACKOFF_S", 0.0)

    async def main() -> str:
        run = tool.RecoveryRun("127.0.0.1:1", 0, retries)
        target = tool.Target("foo", 0, designated_leader=2, result="planned")
        try:
            await run.elect([target])
        finally:
            await run.client.close()
        return target.result

    result = asyncio.run(main())
    return len(sent), result


def test_election_attempts_count_retries_of_transient_failures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Errors.NOT_CONTROLLER.retriable
    assert _run_elect(monkeypatch, 0, Errors.NOT_CONTROLLER) == (1, "failed")
    assert _run_elect(monkeypatch, 3, Errors.NOT_CONTROLLER) == (4, "failed")


def test_a_non_transient_failure_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not Errors.INVALID_REQUEST.retriable
    assert _run_elect(monkeypatch, 3, Errors.INVALID_REQUEST) == (1, "failed")
