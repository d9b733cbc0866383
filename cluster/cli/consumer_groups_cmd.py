"""`minikraft consumer-groups --bootstrap-server B (--list | --describe --group G | --delete
--group G | --reset-offsets --group G (--topic T[:P,P] | --all-topics) (--to-earliest |
--to-latest | --to-offset N | --shift-by N) [--execute | --dry-run]) [--output json]`, in the
shape of Kafka's kafka-consumer-groups.sh, on Kafka's protocol (CLI.md).

--list asks every broker (ListGroups answers only the groups a broker coordinates, as Kafka's
admin client does); the others ask the group's coordinator (FindCoordinator), and again when it
moved (NOT_COORDINATOR and its kin, bounded). A reset needs an inactive group (Empty), commits
with generation -1 as Kafka's tool does, and without --execute only prints the plan.
"""

from __future__ import annotations

import asyncio
from typing import Any

import click

from cluster.client.bootstrap import new_client, split_bootstrap
from cluster.client.groups_admin import GroupsAdmin, describe_report, reset_plan
from cluster.output import EXIT_FAILED, EXIT_USAGE, emit_json, emit_table, fail, output_option
from kafkawire.errors import Errors, KafkaError


async def _run(bootstrap: str, work: Any) -> Any:
    client = new_client()
    try:
        return await work(GroupsAdmin(client, bootstrap))
    finally:
        await client.close()


def _run_or_fail(bootstrap: str, work: Any) -> Any:
    split_bootstrap(bootstrap)
    try:
        return asyncio.run(_run(bootstrap, work))
    except KafkaError as exc:
        unreachable = exc.error in (Errors.NETWORK_EXCEPTION, Errors.REQUEST_TIMED_OUT)
        fail(f"{exc.error.name}: {exc.message}" if exc.message else exc.error.name,
             EXIT_USAGE if unreachable else EXIT_FAILED)


@click.command("consumer-groups")
@click.option("--bootstrap-server", required=True, help="broker host:port[,host:port...]")
@click.option("--list", "list_groups", is_flag=True, help="every consumer group")
@click.option("--describe", is_flag=True, help="offsets, lag and members of --group")
@click.option("--delete", is_flag=True, help="delete --group (it must have no members)")
@click.option("--reset-offsets", is_flag=True, help="reset --group's committed offsets")
@click.option("--group", default=None)
@click.option("--topic", "topics", multiple=True, help="T or T:P,P (with --reset-offsets)")
@click.option("--all-topics", is_flag=True, help="every topic the group committed (reset)")
@click.option("--to-earliest", is_flag=True)
@click.option("--to-latest", is_flag=True)
@click.option("--to-offset", type=int, default=None)
@click.option("--shift-by", type=int, default=None)
@click.option("--execute", is_flag=True, help="commit the reset (without it: a dry run)")
@click.option("--dry-run", is_flag=True, help="print the reset plan only (the default)")
@output_option
def consumer_groups(
    bootstrap_server: str, list_groups: bool, describe: bool, delete: bool, reset_offsets: bool,
    group: str | None, topics: tuple[str, ...], all_topics: bool, to_earliest: bool,
    to_latest: bool, to_offset: int | None, shift_by: int | None, execute: bool, dry_run: bool,
    output: str,
) -> None:
    """List, describe, delete consumer groups and reset their offsets (kafka-consumer-groups.sh)."""
    actions = [list_groups, describe, delete, reset_offsets]
    if sum(actions) != 1:
        fail("exactly one of --list, --describe, --delete, --reset-offsets is required", EXIT_USAGE)
    if not list_groups and not group:
        fail("--group is required", EXIT_USAGE)
    assert group is not None or list_groups
    if list_groups:
        rows = _run_or_fail(bootstrap_server, lambda admin: admin.list_groups())
        if output == "json":
            emit_json({"groups": rows})
        else:
            emit_table("Consumer groups", ["GROUP", "STATE", "PROTOCOL TYPE"],
                       [(r["group"], r["state"], r["protocol_type"]) for r in rows])
        return
    assert group is not None
    if describe:
        report = _run_or_fail(bootstrap_server, lambda admin: describe_report(admin, group))
        if output == "json":
            emit_json(report)
            return
        emit_table(
            f"Group {group} ({report['state']}, coordinator {report['coordinator']})",
            ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
            [
                tuple("-" if v is None else v for v in (
                    o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"],
                    o["consumer_id"], o["host"], o["client_id"],
                ))
                for o in report["offsets"]
            ],
        )
        return
    if delete:
        _run_or_fail(bootstrap_server, lambda admin: admin.delete(group))
        if output == "json":
            emit_json({"group": group, "deleted": True})
        else:
            click.echo(f"Deletion of requested consumer groups ('{group}') was successful.")
        return
    targets = [
        ("earliest", 0) if to_earliest else None,
        ("latest", 0) if to_latest else None,
        ("offset", to_offset) if to_offset is not None else None,
        ("shift", shift_by) if shift_by is not None else None,
    ]
    chosen = [t for t in targets if t is not None]
    if len(chosen) != 1:
        fail("one of --to-earliest, --to-latest, --to-offset, --shift-by is required", EXIT_USAGE)
    if bool(topics) == all_topics:
        fail("one of --topic or --all-topics is required", EXIT_USAGE)
    if execute and dry_run:
        fail("--execute and --dry-run exclude each other", EXIT_USAGE)

    async def reset(admin: GroupsAdmin) -> dict[tuple[str, int], int]:
        described = await admin.describe_group(group)
        if described.group_state not in ("Empty", "Dead"):
            raise KafkaError(
                Errors.NON_EMPTY_GROUP,
                f"Assignments can only be reset if the group '{group}' is inactive, but the "
                f"current state is {described.group_state}.",
            )
        plan = await reset_plan(admin, group, list(topics), all_topics, chosen[0])  # type: ignore[arg-type]
        if execute:
            await admin.commit(group, plan)
        return plan

    plan = _run_or_fail(bootstrap_server, reset)
    rows = [{"topic": t, "partition": p, "new_offset": o} for (t, p), o in sorted(plan.items())]
    if output == "json":
        emit_json({"group": group, "executed": execute, "offsets": rows})
    else:
        emit_table(
            f"Group {group}: {'reset' if execute else 'reset plan (dry run; --execute to commit)'}",
            ["TOPIC", "PARTITION", "NEW-OFFSET"],
            [(r["topic"], r["partition"], r["new_offset"]) for r in rows],
        )
