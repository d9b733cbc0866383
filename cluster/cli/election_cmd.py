"""`minikraft leader-election (--bootstrap-server B | --bootstrap-controller C) --election-type
PREFERRED|UNCLEAN|DESIGNATED (--topic T --partition P [--designated-leader N] |
--all-topic-partitions | --path-to-json-file F)` (CLI.md, Kafka's kafka-leader-election.sh;
DESIGNATED is seed 004's), sent as ElectLeaders v3 (kafkawire.elect_leaders_v3: DesignatedLeaders,
and each partition's new leader in minikraft's tagged LeaderId).

ElectLeaders serves at most 1000 partitions per request (REQUEST_LIMIT_REACHED for the rest), so
the tool sends larger sets in slices and resends what came back over the limit."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cluster.cli.bootstrap_options import bootstrap_options, chosen_bootstrap
from cluster.client.elections import Target, run_elections
from cluster.output import EXIT_USAGE, emit_json, fail, output_option, stderr
from kafkawire import constants

_TYPES = {
    "PREFERRED": constants.ELECTION_PREFERRED,
    "UNCLEAN": constants.ELECTION_UNCLEAN,
    "DESIGNATED": constants.ELECTION_DESIGNATED,
}


def _plan_from_file(path: str, designated: bool) -> list[Target]:
    try:
        data = json.loads(Path(path).read_text())
        entries = data["partitions"]
        targets: list[Target] = []
        for entry in entries:
            leader = entry.get("designatedLeader", entry.get("desiredLeader"))
            if designated and leader is None:
                fail(f"{path}: {entry} has no designatedLeader", EXIT_USAGE)
            targets.append(
                (
                    str(entry["topic"]),
                    int(entry["partition"]),
                    None if leader is None else int(leader),
                )
            )
        return targets
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(f"cannot read {path}: {exc}", EXIT_USAGE)


@click.command("leader-election")
@bootstrap_options
@click.option(
    "--election-type", type=click.Choice(sorted(_TYPES), case_sensitive=False), required=True
)
@click.option("--topic", default=None)
@click.option("--partition", type=int, default=None)
@click.option("--designated-leader", type=int, default=None, help="DESIGNATED: the new leader")
@click.option("--all-topic-partitions", is_flag=True)
@click.option("--path-to-json-file", default=None, help='{"partitions":[{"topic","partition"}]}')
@output_option
def leader_election(
    bootstrap_server: str | None,
    bootstrap_controller: str | None,
    election_type: str,
    topic: str | None,
    partition: int | None,
    designated_leader: int | None,
    all_topic_partitions: bool,
    path_to_json_file: str | None,
    output: str,
) -> None:
    """Elect leaders: PREFERRED, UNCLEAN or DESIGNATED (a named replica, seed 004)."""
    bootstrap = chosen_bootstrap(bootstrap_server, bootstrap_controller)
    chosen = sum([topic is not None, all_topic_partitions, path_to_json_file is not None])
    if chosen != 1:
        fail(
            "exactly one of --topic/--partition, --all-topic-partitions, --path-to-json-file",
            EXIT_USAGE,
        )
    designated = election_type == "DESIGNATED"
    if all_topic_partitions and designated:
        fail("DESIGNATED elections name their partitions: not --all-topic-partitions", EXIT_USAGE)
    if designated_leader is not None and not designated:
        fail("--designated-leader is only for --election-type DESIGNATED", EXIT_USAGE)
    targets: list[Target] | None = None
    if topic is not None:
        if partition is None:
            fail("--topic needs --partition", EXIT_USAGE)
        if designated and designated_leader is None:
            fail("DESIGNATED with --topic needs --designated-leader", EXIT_USAGE)
        targets = [(topic, partition, designated_leader)]
    elif path_to_json_file is not None:
        targets = _plan_from_file(path_to_json_file, designated)
    rows = run_elections(bootstrap, _TYPES[election_type], targets)
    failed = [r for r in rows if r["error"] not in (None, "ELECTION_NOT_NEEDED")]
    if output == "json":
        emit_json(rows)
    else:
        done = [f"{r['topic']}-{r['partition']}" for r in rows if r["error"] is None]
        if done:
            click.echo(
                f"Successfully completed leader election ({election_type}) for partitions "
                + ", ".join(done)
            )
        skipped = [
            f"{r['topic']}-{r['partition']}" for r in rows if r["error"] == "ELECTION_NOT_NEEDED"
        ]
        if skipped:
            click.echo("Valid replica already elected for partitions " + ", ".join(skipped))
    for r in failed:
        stderr.print(f"{r['topic']}-{r['partition']}: {r['error']}", highlight=False)
    if failed:
        fail(f"{len(failed)} election(s) failed")
