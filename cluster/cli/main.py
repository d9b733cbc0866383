"""The `minikraft` command: Kafka's tool names and flags (CLI.md)."""

from __future__ import annotations

import importlib
import logging
import os
import sys

# kio (Kafka's message schemas) registers Hypothesis strategies for its types whenever
# Hypothesis is importable, as it is in a development virtualenv: 0.4-0.5 s of every process
# start (a node, a one-shot command, the audit) for code only tests use. The program's own
# entry (`python -m cluster.cli.main`, the `minikraft` script) marks Hypothesis unavailable
# before anything imports kio; an importer such as pytest keeps it.
if __name__ == "__main__" or os.path.basename(sys.argv[0]) == "minikraft":
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

import click

from cluster.output import EXIT_USAGE

# Each command's module is imported when the command runs, not at start-up: a node process
# (`minikraft broker`) or a one-shot command then loads only what it uses, not chaos, bench,
# Spark's glue and aiohttp (about a second of start-up per process on this machine).
_COMMANDS = {
    "storage": "cluster.cli.storage_cmd:storage",
    "controller": "cluster.cli.node_cmds:controller",
    "broker": "cluster.cli.node_cmds:broker",
    "up": "cluster.cli.up_cmd:up",
    "down": "cluster.cli.up_cmd:down",
    "metadata-quorum": "cluster.cli.quorum_cmd:metadata_quorum",
    "dump-log": "cluster.cli.dump_log_cmd:dump_log",
    "bench": "cluster.cli.bench_cmd:bench",
    "audit": "cluster.cli.audit_cmd:audit",
    "topics": "cluster.cli.topics_cmd:topics",
    "configs": "cluster.cli.configs_cmd:configs",
    "leader-election": "cluster.cli.election_cmd:leader_election",
    "unclean-recovery": "cluster.cli.unclean_recovery_cmd:unclean_recovery",
    "produce": "cluster.cli.produce_cmd:produce",
    "consume": "cluster.cli.consume_cmd:consume",
    "consumer-groups": "cluster.cli.consumer_groups_cmd:consumer_groups",
    "health": "cluster.cli.health_cmd:health",
    "chaos": "cluster.cli.chaos_cmd:chaos",
    "console": "cluster.cli.console_cmd:console",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command) or command.name != cmd_name:
            raise RuntimeError(f"{target} is not the {cmd_name!r} command")
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """minikraft: a small, real KRaft cluster to learn, test and break."""


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
