"""How every command reports (CLI.md): `--output json` prints one JSON document on stdout and
nothing else there; otherwise a rich table or text. Errors are Kafka names, never tracebacks;
exit codes: 0 success, 1 the request ran and something failed, 2 usage or connection error."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

stderr = Console(stderr=True)
stdout = Console()

output_option = click.option(
    "--output",
    type=click.Choice(["json", "text"]),
    default="text",
    show_default=True,
    help="json: one JSON document on stdout",
)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


def emit_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    stdout.print(table)


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    # CLI.md: one line, never wrapped at the terminal width; the message is text, not markup.
    stderr.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(code)


def report_result(
    output: str, error: str | None, error_message: str | None, document: dict[str, Any], text: str
) -> None:
    """One resource's admin answer: with --output json the document and its `error` (a Kafka
    error name or null) first, even when it failed; then a failure exits 1 with the name and the
    message; else `text` is the success line."""
    if output == "json":
        emit_json({**document, "error": error})
    if error is not None:
        fail(f"{error}: {error_message or ''}")
    if output != "json":
        click.echo(text)
