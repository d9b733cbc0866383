"""Datadriven transcripts, etcd's style (github.com/cockroachdb/datadriven), for the scenario
tests of the controller (tests/scenarios/*.txt) and the raft core (tests/scenarios/raft/*.txt).

A transcript is a sequence of cases; blank lines and `#` comment lines between them are kept:

    fence 2                  # a command, with an optional inline comment
    ----
    the output the command must print, up to the next blank line

`run_transcript` feeds each command (inline comment removed) to a handler and compares what it
returns with the expected output. A mismatch fails with the file, line and a diff; with
MINIKRAFT_REWRITE=1 in the environment the file is rewritten in place with the actual outputs
instead (review the change with `git diff`).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REWRITE_ENV = "MINIKRAFT_REWRITE"
SEPARATOR = "----"


@dataclass(frozen=True, slots=True)
class Case:
    line: int  # 1-based line of the command
    text: str  # the command line as written (inline comment included)
    expected: tuple[str, ...]

    @property
    def command(self) -> str:
        return self.text.split("#", 1)[0].strip()


Chunk = Case | str  # a case, or a kept line (blank or comment)


def parse(text: str, source: str) -> list[Chunk]:
    lines = text.splitlines()
    chunks: list[Chunk] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            chunks.append(line)
            i += 1
            continue
        start = i + 1
        i += 1
        if i >= len(lines) or lines[i].strip() != SEPARATOR:
            raise ValueError(f"{source}:{start}: expected {SEPARATOR!r} after {line.strip()!r}")
        i += 1
        expected = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i].rstrip())
            i += 1
        chunks.append(Case(start, line.rstrip(), tuple(expected)))
    return chunks


def render(chunks: list[Chunk], outputs: dict[int, list[str]]) -> str:
    """The transcript with `outputs` (by case line) in place of the expected outputs."""
    out: list[str] = []
    for index, chunk in enumerate(chunks):
        if isinstance(chunk, str):
            out.append(chunk)
            continue
        out += [chunk.text, SEPARATOR, *outputs.get(chunk.line, list(chunk.expected))]
        following = chunks[index + 1] if index + 1 < len(chunks) else None
        if isinstance(following, Case) or (isinstance(following, str) and following.strip()):
            out.append("")  # a blank line ends an output block
    return "\n".join(out).rstrip("\n") + "\n"


def run_transcript(path: Path, handler: Callable[[str], str]) -> int:
    """Run every case of `path` through `handler`; returns the number of cases. Fails on the
    first mismatch (later outputs follow from it) unless rewriting."""
    chunks = parse(path.read_text(), path.name)
    rewrite = os.environ.get(REWRITE_ENV) == "1"
    outputs: dict[int, list[str]] = {}
    cases = [c for c in chunks if isinstance(c, Case)]
    for case in cases:
        actual = [line.rstrip() for line in handler(case.command).splitlines() if line.strip()]
        outputs[case.line] = actual
        if not rewrite and actual != list(case.expected):
            diff = "\n".join(
                difflib.unified_diff(
                    list(case.expected), actual, "expected", "actual", lineterm="", n=20
                )
            )
            raise AssertionError(
                f"{path.name}:{case.line}: {case.command}\n{diff}\n"
                f"(rerun with {REWRITE_ENV}=1 to accept the actual output)"
            )
    if rewrite:
        path.write_text(render(chunks, outputs))
    return len(cases)
