"""`minikraft bench raft|produce|failover|audit [--compare PEER] [--output json]` (CLI.md)."""

from __future__ import annotations

import click

from cluster.cli.output import EXIT_USAGE, emit_json, emit_table, fail, output_option


@click.command()
@click.argument("which", type=click.Choice(["raft", "produce", "failover", "audit"]))
@click.option("--compare", type=click.Choice(["etcd", "pysyncobj", "nats"]), default=None)
@click.option("--quick", is_flag=True, help="a short run (smoke test), not for quoting")
@output_option
def bench(which: str, compare: str | None, quick: bool, output: str) -> None:
    """Run a bounded benchmark on localhost and print its figures."""
    if which != "raft":
        fail(f"bench {which} is not built yet; `bench raft` is", EXIT_USAGE)
    if compare is not None:
        fail("--compare peers come with the benchmarks issue; run without it", EXIT_USAGE)
    from cluster.bench.raft_bench import run_raft_bench

    report = run_raft_bench(quick=quick)
    if output == "json":
        emit_json(report)
        return
    emit_table(
        f"bench {which} (3 voters on 127.0.0.1, {report['durability']})",
        ["metric", "unit", "minikraft", "peer", "ratio"],
        [
            [r["metric"], r["unit"], r["minikraft"], r["peer"], r["ratio"]]
            for r in report["results"]
        ],
    )
