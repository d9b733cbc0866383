"""`minikraft unclean-recovery` (CLI.md "Unclean recovery tool", seed 004 KAFKA-20098).

Asks every broker GetReplicaLogInfo for the partitions to recover until `--recovery-duration-ms`
passes (or every replica answered), picks per partition the replica with the highest
PartitionLeaderEpoch, then the highest last written leader epoch (so a longer diverged log from an
older epoch never wins), then the longest log (controller.core.unclean_recovery, shared with the
controller's recovery manager), then shows the answers, writes the plan for
`leader-election --election-type DESIGNATED`, or sends the DESIGNATED elections itself.
`--bootstrap-server` names brokers (Metadata lists the live brokers to ask); the elections go
to them (forwarded to the active controller) or, with `--bootstrap-controller`, to the
controllers themselves (KIP-919). Everything travels on Kafka's protocol: Metadata,
DescribeTopicPartitions, GetReplicaLogInfo (kafkawire.get_replica_log_info) and ElectLeaders v3.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from cluster.cli.bootstrap_options import bootstrap_options
from cluster.client.unclean_recovery import (
    DEFAULT_DURATION_MS,
    DEFAULT_ELECTION_ATTEMPTS,
    PartitionKey,
    Target,
    exit_code,
    parse_partition_file,
    plan_document,
    run_recovery,
    target_json,
)
from cluster.output import (
    EXIT_OK,
    EXIT_USAGE,
    emit_json,
    emit_table,
    fail,
    output_option,
    stderr,
)
from kafkawire.errors import Errors, KafkaError


def _show_table(targets: list[Target]) -> None:
    rows: list[tuple[object, ...]] = []
    for target in targets:
        if not target.answers:
            rows.append((target.topic, target.partition, "-", "", "", "", "", "no answer"))
        for broker_id in sorted(target.answers):
            a = target.answers[broker_id]
            rows.append(
                (
                    target.topic,
                    target.partition,
                    broker_id,
                    a.broker_epoch,
                    a.partition_leader_epoch,
                    a.last_written_leader_epoch,
                    a.log_end_offset,
                    "" if a.error == Errors.NONE else a.error.name,
                )
            )
    emit_table(
        "Replica log info (GetReplicaLogInfo)",
        [
            "topic",
            "partition",
            "broker",
            "broker epoch",
            "leader epoch",
            "last written epoch",
            "log end offset",
            "error",
        ],
        rows,
    )


def _report_text(targets: list[Target], plan_file: str | None) -> None:
    for result, text in (
        ("elected", "Elected designated leaders (RECOVERING) for"),
        ("already_online", "Already online (not changed):"),
    ):
        names = [f"{t.name} (leader {t.leader})" for t in targets if t.result == result]
        if names:
            click.echo(f"{text} " + ", ".join(names))
    planned = [f"{t.name} -> {t.designated_leader}" for t in targets if t.result == "planned"]
    if planned:
        where = f" written to {plan_file}" if plan_file else ""
        click.echo("Plan" + where + ": " + ", ".join(planned))


@click.command("unclean-recovery")
@bootstrap_options
@click.option("--show-replica-info", is_flag=True, help="print every GetReplicaLogInfo answer")
@click.option("--manual-recovery-output-file", default=None, help="write the plan to a new file")
@click.option("--automated-recovery", is_flag=True, help="send the DESIGNATED elections")
@click.option("--path-to-json-file", default=None, help='{"partitions":[{"topic","partitions"}]}')
@click.option("--all-offline-partitions", is_flag=True)
@click.option("--recovery-duration-ms", type=int, default=DEFAULT_DURATION_MS, show_default=True)
@click.option(
    "--recovery-election-attempts",
    type=int,
    default=DEFAULT_ELECTION_ATTEMPTS,
    show_default=True,
    help="retries of transient election failures (seed 004): N allows N + 1 sends",
)
@output_option
def unclean_recovery(
    bootstrap_server: str | None,
    bootstrap_controller: str | None,
    show_replica_info: bool,
    manual_recovery_output_file: str | None,
    automated_recovery: bool,
    path_to_json_file: str | None,
    all_offline_partitions: bool,
    recovery_duration_ms: int,
    recovery_election_attempts: int,
    output: str,
) -> None:
    """Recover offline partitions: the replica with the highest epoch, then the longest log."""
    if bootstrap_server is None:
        fail("--bootstrap-server (broker addresses) is required: brokers answer", EXIT_USAGE)
    if not (show_replica_info or manual_recovery_output_file or automated_recovery):
        fail(
            "at least one of --show-replica-info, --manual-recovery-output-file, "
            "--automated-recovery",
            EXIT_USAGE,
        )
    if manual_recovery_output_file and automated_recovery:
        fail("--manual-recovery-output-file and --automated-recovery exclude each other", EXIT_USAGE)
    if (path_to_json_file is None) == (not all_offline_partitions):
        fail("exactly one of --path-to-json-file, --all-offline-partitions", EXIT_USAGE)
    if recovery_duration_ms < 0 or recovery_election_attempts < 0:
        fail("--recovery-duration-ms >= 0 and --recovery-election-attempts >= 0", EXIT_USAGE)
    if manual_recovery_output_file and Path(manual_recovery_output_file).exists():
        fail(f"{manual_recovery_output_file} exists: the plan goes to a new file", EXIT_USAGE)
    keys: list[PartitionKey] | None = None
    if path_to_json_file is not None:
        try:
            keys = parse_partition_file(path_to_json_file)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            fail(f"cannot read {path_to_json_file}: {exc}", EXIT_USAGE)
    try:
        targets, interrupted = asyncio.run(
            run_recovery(
                bootstrap_server,
                keys,
                recovery_duration_ms,
                recovery_election_attempts,
                automated_recovery,
                bootstrap_controller,
            )
        )
    except KafkaError as exc:
        code = EXIT_USAGE if exc.error in (Errors.NETWORK_EXCEPTION, Errors.REQUEST_TIMED_OUT) else 1
        fail(f"{exc.error.name}: {exc.message}", code)
    if manual_recovery_output_file and not interrupted:
        try:
            with open(manual_recovery_output_file, "x") as plan:  # never overwrite (CLI.md)
                json.dump(plan_document(targets), plan, indent=2)
                plan.write("\n")
        except OSError as exc:
            fail(f"cannot create {manual_recovery_output_file}: {exc}", EXIT_USAGE)
    if output == "json":
        emit_json([target_json(t) for t in targets])
    else:
        if show_replica_info:
            _show_table(targets)
        if not targets:
            click.echo("No offline partitions")
        _report_text(targets, manual_recovery_output_file)
    for target in targets:
        if target.result not in ("elected", "already_online", "planned"):
            stderr.print(
                f"{target.name}: {target.error or 'FAILED'}: {target.reason}", highlight=False
            )
    if interrupted:
        stderr.print("Stopped by SIGTERM: reported what was done so far", highlight=False)
    code = exit_code(targets, automated_recovery)
    if code != EXIT_OK:
        raise SystemExit(code)
