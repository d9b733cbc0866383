"""`minikraft configs (--bootstrap-server B | --bootstrap-controller C) alter --entity-type
topics|brokers --entity-name X --add-config k=v[,k=v] | --delete-config k` (CLI.md, Kafka's
kafka-configs.sh), sent as Kafka's IncrementalAlterConfigs (brokers forward it to the active
controller)."""

from __future__ import annotations

import click
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.static.primitive import i8

from cluster.cli.bootstrap_options import bootstrap_options, chosen_bootstrap
from cluster.client.topics import error_name, parse_configs, run_admin
from cluster.output import EXIT_USAGE, fail, output_option, report_result
from kafkawire import constants

_RESOURCE_TYPES = {"topics": constants.CONFIG_RESOURCE_TOPIC, "brokers": constants.CONFIG_RESOURCE_BROKER}


@click.group("configs")
@bootstrap_options
@click.pass_context
def configs(
    ctx: click.Context, bootstrap_server: str | None, bootstrap_controller: str | None
) -> None:
    """Alter topic and broker configs."""
    ctx.obj = {"bootstrap": chosen_bootstrap(bootstrap_server, bootstrap_controller)}


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
    changes = [
        AlterableConfig(name=k, config_operation=i8(constants.OP_SET), value=v) for k, v in added.items()
    ]
    changes += [
        AlterableConfig(name=k, config_operation=i8(constants.OP_DELETE), value=None) for k in deleted
    ]
    request = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=i8(_RESOURCE_TYPES[entity_type]),
                resource_name=entity_name,
                configs=tuple(changes),
            ),
        ),
        validate_only=False,
    )
    response = run_admin(ctx.obj["bootstrap"], request)
    result = response.responses[0]
    what = "the cluster default" if entity_name == "" else f"{entity_type[:-1]} {entity_name}"
    report_result(
        output, error_name(result.error_code), result.error_message,
        {"entity_type": entity_type, "entity_name": entity_name},
        f"Completed updating config for {what}.",
    )
