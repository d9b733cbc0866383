"""The `minikraft` command: Kafka's tool names and flags (CLI.md)."""

from __future__ import annotations

import logging
import sys

import click

from cluster.cli.audit_cmd import audit
from cluster.cli.bench_cmd import bench
from cluster.cli.chaos_cmd import chaos
from cluster.cli.configs_cmd import configs
from cluster.cli.consume_cmd import consume
from cluster.cli.consumer_groups_cmd import consumer_groups
from cluster.cli.dump_log_cmd import dump_log
from cluster.cli.election_cmd import leader_election
from cluster.cli.health_cmd import health
from cluster.cli.node_cmds import broker, controller
from cluster.cli.output import EXIT_USAGE
from cluster.cli.produce_cmd import produce
from cluster.cli.quorum_cmd import metadata_quorum
from cluster.cli.storage_cmd import storage
from cluster.cli.topics_cmd import topics
from cluster.cli.unclean_recovery_cmd import unclean_recovery
from cluster.cli.up_cmd import down, up


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """minikraft: a small, real KRaft cluster to learn, test and break."""


cli.add_command(storage)
cli.add_command(controller)
cli.add_command(broker)
cli.add_command(up)
cli.add_command(down)
cli.add_command(metadata_quorum)
cli.add_command(dump_log)
cli.add_command(bench)
cli.add_command(audit)
cli.add_command(topics)
cli.add_command(configs)
cli.add_command(leader_election)
cli.add_command(unclean_recovery)
cli.add_command(produce)
cli.add_command(consume)
cli.add_command(consumer_groups)
cli.add_command(health)
cli.add_command(chaos)


def main() -> None:
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except SystemExit:
        raise
    sys.exit(0)


if __name__ == "__main__":
    main()
