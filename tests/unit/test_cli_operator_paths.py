"""Operator paths of issue 14 that need no cluster: `--election-type` in any case, and the
quorum status's CouldBeVoters (seed 003) in text and JSON, controllers only."""

from __future__ import annotations

import uuid

import click
import pytest
from click.testing import CliRunner

from cluster.cli.election_cmd import leader_election
from cluster.client.admin_client import QuorumStatus
from raft.core.messages import describe_quorum_response, replica_state
from raft.core.replica_key import uuid_to_str


def test_election_type_accepts_any_case() -> None:
    option = next(p for p in leader_election.params if p.name == "election_type")
    for spelling, expected in (
        ("unclean", "UNCLEAN"),
        ("Preferred", "PREFERRED"),
        ("DESIGNATED", "DESIGNATED"),
    ):
        assert option.type.convert(spelling, option, None) == expected
    with pytest.raises(click.BadParameter):
        option.type.convert("longest_log", option, None)


def test_could_be_voters_lists_observers_with_an_endpoint_only() -> None:
    voter, new_disk, broker = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
    response = describe_quorum_response(
        leader_id=1,
        leader_epoch=4,
        high_watermark=10,
        current_voters=[replica_state(1, voter, 10)],
        observers=[replica_state(2, new_disk, 10), replica_state(101, broker, 10)],
        # Kafka's Nodes: a controller's listeners are known; a broker (101) has none.
        endpoints=[(1, {"CONTROLLER": "127.0.0.1:9093"}), (2, {"CONTROLLER": "127.0.0.1:9094"})],
    )
    data = QuorumStatus(response, "127.0.0.1:9093").status_json(None)
    assert data["could_be_voters"] == [{"id": 2, "directory_id": uuid_to_str(new_disk)}]
    assert [o["id"] for o in data["current_observers"]] == [2, 101]


def test_a_failed_bench_is_one_line_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    from cluster.cli import bench_cmd

    def failing(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("bench produce: acks=all errors {'UNKNOWN_TOPIC_OR_PARTITION': 100}")

    monkeypatch.setattr(bench_cmd, "_run", failing)
    result = CliRunner().invoke(bench_cmd.bench, ["produce", "--quick"])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in lines[0], result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "describe"],
        ["topics", "--bootstrap-server", "b:1", "--bootstrap-controller", "c:1", "describe"],
        ["configs", "alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "a=b"],
        ["leader-election", "--election-type", "PREFERRED", "--all-topic-partitions"],
        ["unclean-recovery", "--bootstrap-controller", "c:1", "--show-replica-info",
         "--all-offline-partitions"],
    ],
)
def test_admin_commands_take_one_bootstrap_kind_as_kafkas_tools(args: list[str]) -> None:
    """KIP-919: `--bootstrap-server` (brokers) or `--bootstrap-controller`, exactly one (the
    unclean-recovery tool asks brokers, so it needs --bootstrap-server): a usage error, one line."""
    from cluster.cli.main import cli

    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "bootstrap" in result.output and "Traceback" not in result.output

