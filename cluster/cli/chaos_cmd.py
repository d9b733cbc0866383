"""`minikraft chaos --dir D --scenario NAME --seed N --duration-s S [--output json]` (CLI.md):
an acks=all workload plus a seeded scenario of faults against the cluster under D; exit 1 when
an acked acks=all write is lost without an unclean or designated election to attribute it to
(rule 23), a scenario's own check fails, or the cluster did not recover in time.
`--client confluent-kafka|aiokafka` runs real clients' producers, idempotent unless
`--no-idempotence`; `--consumers N [--group G]` adds a consumer group of that client reading the
topic (cluster/chaos/group_consumers.py), whose reads and commits are journaled for the audit.
`--compose FILE [--project-name P]` runs against that docker compose project instead: --dir is its
data directory (MINIKRAFT_DATA_DIR, ./compose-data by default), where the cluster.json describing
its containers is written (cluster/launch/compose_project.py) and the faults go through the
engine (docker kill, stop, pause, start, network disconnect)."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import click

from cluster.chaos.compose_faults import ComposeFaultError
from cluster.chaos.group_consumers import group_client_problem
from cluster.chaos.netns_faults import NetworkFaultError
from cluster.chaos.runner import ALL_SCENARIOS, run_chaos
from cluster.chaos.workload import CLIENTS, MINIKRAFT
from cluster.launch.compose_project import (
    ComposeProjectError,
    describe_compose_cluster,
    recorded_compose,
)
from cluster.launch.local_cluster import CLUSTER_FILE
from cluster.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, fail, output_option
from cluster.output import stdout as console
from kafkawire.errors import KafkaError


@click.command()
@click.option("--dir", "directory", required=True, type=click.Path(file_okay=False))
@click.option(
    "--scenario", type=click.Choice(sorted(ALL_SCENARIOS)),
    help="required unless --nemesis is given (then: nemesis); netns-only: partition-*, netem-loss",
)
@click.option("--seed", default=1, show_default=True, type=int)
@click.option("--duration-s", default=10.0, show_default=True, type=click.FloatRange(0.5))
@click.option("--recovery-timeout-s", default=60.0, show_default=True, type=click.FloatRange(1))
@click.option(
    "--nemesis", "nemesis_list", default=None,
    help="comma-separated faults mixed over the run, e.g. kill,pause,partition-random-halves,netem",
)
@click.option(
    "--client", type=click.Choice(CLIENTS), default=MINIKRAFT, show_default=True,
    help="the workload's producers: minikraft's own Kafka client, librdkafka (confluent-kafka) "
    "or aiokafka",
)
@click.option(
    "--no-idempotence", "no_idempotence", is_flag=True, default=False,
    help="confluent-kafka/aiokafka producers without enable.idempotence (duplicates then are "
    "counted, not violations)",
)
@click.option(
    "--consumers", default=0, show_default=True, type=click.IntRange(0, 16),
    help="members of a consumer group (of --client's library) reading the topic during the run",
)
@click.option("--group", default=None, help="the consumer group's id (default chaos-<run id>)")
@click.option(
    "--compose", "compose_file", default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="a docker compose project's file: break its containers (--dir: its data directory)",
)
@click.option(
    "--project-name", default=None,
    help="the compose project (default: COMPOSE_PROJECT_NAME, else the file's directory name)",
)
@output_option
def chaos(
    directory: str, scenario: str | None, seed: int, duration_s: float,
    recovery_timeout_s: float, nemesis_list: str | None, client: str, no_idempotence: bool,
    consumers: int, group: str | None, compose_file: Path | None, project_name: str | None,
    output: str,
) -> None:
    """Break the cluster under --dir on purpose and check that no acked write was lost."""
    root = Path(directory)
    if compose_file is not None or recorded_compose(root) is not None:
        try:
            describe_compose_cluster(root, compose_file, project_name)
        except (ComposeProjectError, OSError) as exc:
            fail(f"compose project: {exc}", EXIT_USAGE)
    nemeses = [n.strip() for n in (nemesis_list or "").split(",") if n.strip()]
    if scenario is None:
        if not nemeses:
            fail("give --scenario NAME or --nemesis LIST", EXIT_USAGE)
        scenario = "nemesis"
    elif nemeses and scenario != "nemesis":
        fail(f"--nemesis goes with --scenario nemesis, not {scenario}", EXIT_USAGE)
    group_problem = group_client_problem(client, consumers)
    if group_problem is not None:
        fail(group_problem, EXIT_USAGE)
    if not (root / CLUSTER_FILE).exists():
        fail(f"no {CLUSTER_FILE} under {root} (minikraft up --dir {root} --brokers 3)", EXIT_USAGE)
    logging.getLogger("cluster.chaos").setLevel(logging.INFO)
    try:
        summary = asyncio.run(
            run_chaos(
                root, scenario, seed, duration_s, recovery_timeout_s=recovery_timeout_s,
                nemeses=nemeses, client=client, idempotence=not no_idempotence,
                consumers=consumers, group=group,
            )
        )
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    except (KafkaError, TimeoutError, NetworkFaultError, ComposeFaultError) as exc:
        fail(f"chaos run failed: {exc}", EXIT_FAILED)
    if output == "json":
        emit_json(summary)
    else:
        windows = summary["unavailability_windows"]
        longest = max((w["duration_ms"] for w in windows), default=0)
        console.print(
            f"{scenario} seed {seed}: sent {summary['sent']}, acked {summary['acked']}, "
            f"read back {summary['read_back']}, lost {summary['lost']}, "
            f"duplicated {summary['duplicated']}, {len(windows)} unavailability windows "
            f"(longest {longest} ms), recovered in {summary['recovery_s']} s"
        )
        after = [r for r in summary["recovery_after_faults"] if not r["interrupted"]]
        slowest = max(after, key=lambda r: r["recovered_after_ms"], default=None)
        console.print(
            f"time to recover after heal: {summary['recovery_s']} s (healthy after "
            f"{summary['recovery_healthy_s']} s, then a write on every partition)"
            + (
                f"; slowest recovery after a fault: {slowest['recovered_after_ms']} ms after "
                f"{slowest['action']} {slowest['node'] or ''} (partition {slowest['partition']})"
                if slowest is not None and slowest["recovered_after_ms"] else ""
            )
        )
        group_summary = summary["consumer_group"]
        if group_summary is not None:
            console.print(
                f"group {group_summary['group']} ({group_summary['members']} members): read "
                f"{group_summary['read']} ({group_summary['read_again']} again), acked but "
                f"unread {group_summary['acked_unread']}, {group_summary['commits_observed']} "
                f"commits observed, committed {group_summary['committed']}"
            )
        for partition, loss in summary["attributed_losses"].items():
            console.print(
                f"[yellow]ATTRIBUTED[/yellow] {summary['topic']}-{partition}: {loss['lost']} "
                f"acked writes lost to an unclean/designated election (RECOVERING at metadata "
                f"offset {', '.join(str(o) for o in loss['metadata_offsets'])})"
            )
        for value in summary["unattributed_values"][:10]:
            console.print(f"[red]lost acked write[/red] {value}")
        for name, check in summary["checks"].items():
            if not check["ok"]:
                console.print(f"[red]check failed[/red] {name}: {check}")
        console.print(f"summary: {summary['summary_file']}; journal: {summary['journal']}")
    sys.exit(EXIT_OK if summary["ok"] else EXIT_FAILED)
