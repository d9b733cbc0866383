"""`minikraft configs --bootstrap-server H:P alter --entity-type topics|brokers --entity-name X
--add-config k=v[,k=v] | --delete-config k` (CLI.md, Kafka's kafka-configs.sh), sent as
IncrementalAlterConfigs to the active controller."""

from __future__ import annotations

import click

from cluster.cli.output import EXIT_USAGE, emit_json, fail, output_option
from cluster.cli.topics_cmd import error_name, parse_configs, run_admin
from cluster.protocol import controller_messages as msg

_RESOURCE_TYPES = {"topics": msg.RESOURCE_TYPE_TOPIC, "brokers": msg.RESOURCE_TYPE_BROKER}


@click.group("configs")
@click.option("--bootstrap-server", required=True, help="host:port[,host:port...]")
@click.pass_context
def configs(ctx: click.Context, bootstrap_server: str) -> None:
    """Alter topic and broker configs."""
    ctx.obj = {"bootstrap_server": bootstrap_server}


@configs.command()
@click.option("--entity-type", type=click.Choice(sorted(_RESOURCE_TYPES)), required=True)
@click.option("--entity-name", default=None, help="topic name or broker id")
@click.option("--entity-default", is_flag=True, help="the cluster-wide broker default")
@click.option("--add-config", "add_configs", multiple=True, help="k=v[,k=v]")
@click.option("--delete-config", "delete_configs", multiple=True, help="k[,k]")
@output_option
@click.pass_context
def alter(
    ctx: click.Context,
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    add_configs: tuple[str, ...],
    delete_configs: tuple[str, ...],
    output: str,
) -> None:
    """Set or delete configs of one topic or broker (IncrementalAlterConfigs)."""
    if entity_default:
        if entity_type != "brokers" or entity_name is not None:
            fail("--entity-default applies to --entity-type brokers without a name", EXIT_USAGE)
        entity_name = ""
    if entity_name is None:
        fail("--entity-name (or --entity-default for brokers) is required", EXIT_USAGE)
    added = parse_configs(add_configs)
    deleted = [k.strip() for item in delete_configs for k in item.split(",") if k.strip()]
    if not added and not deleted:
        fail("one of --add-config or --delete-config is required", EXIT_USAGE)
    changes = [msg.AlterableConfig(k, msg.OP_SET, v) for k, v in added.items()]
    changes += [msg.AlterableConfig(k, msg.OP_DELETE, None) for k in deleted]
    request = msg.IncrementalAlterConfigsRequest(
        [msg.AlterConfigsResource(_RESOURCE_TYPES[entity_type], entity_name, changes)]
    )
    response = run_admin(ctx.obj["bootstrap_server"], request)
    result = response.responses[0]
    error = error_name(result.error_code)
    if output == "json":
        emit_json({"entity_type": entity_type, "entity_name": entity_name, "error": error})
    if error is not None:
        fail(f"{error}: {result.error_message}")
    if output != "json":
        what = "the cluster default" if entity_name == "" else f"{entity_type[:-1]} {entity_name}"
        click.echo(f"Completed updating config for {what}.")
