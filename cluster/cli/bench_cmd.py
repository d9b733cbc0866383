"""`minikraft bench raft|produce|failover|audit|scale|kafka [--compare PEER] [--output json]`
(CLI.md).

Peers run in the same run as minikraft with matched settings (BENCHMARKS.md): raft with etcd
(fsync every commit) or PySyncObj (no fsync, minikraft then runs with minikraft.raft.fsync=false),
failover with etcd at the same election timeout, produce with NATS JetStream R3; audit always
compares Spark with the single-process baseline. The peers come from `make bench-deps`. kafka
runs every line against Apache Kafka itself (`make kafka-deps`), its peer always.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cluster.output import EXIT_USAGE, emit_json, fail, output_option
from kafkawire.errors import KafkaError

PEERS = {
    "raft": (None, "etcd", "pysyncobj"),
    "failover": (None, "etcd"),
    "produce": (None, "nats"),
    "audit": (None,),
    "scale": (None,),
    "kafka": (None, "kafka"),
}


@click.command()
@click.argument("which", type=click.Choice(["raft", "produce", "failover", "audit", "scale", "kafka"]))
@click.option("--compare", type=click.Choice(["etcd", "pysyncobj", "nats", "kafka"]),
              default=None)
@click.option("--quick", is_flag=True, help="a short run (smoke test), not for quoting")
@click.option("--records", type=click.IntRange(min=1), default=None,
              help="audit only: metadata records to generate (default 1,000,000)")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="audit only: audit the logs under DIR (generated there if none)")
@click.option("--network", type=click.Choice(["loopback", "netns"]), default="loopback",
              show_default=True,
              help="failover only: netns cuts the leader off with a network partition in its "
              "own namespace (root) instead of kill -9")
@click.option("--partitions", type=click.IntRange(min=1), default=None,
              help="scale only: partitions to create, RF 3 (default 100,000)")
@click.option("--topics", type=click.IntRange(min=1), default=None,
              help="scale only: topics they are spread over (default 10)")
@click.option("--kills", type=(click.IntRange(min=1), click.IntRange(min=1)), default=None,
              help="kafka only: controller and broker kills instead of 20 and 10")
@click.option("--cold-starts", type=click.IntRange(min=1), default=None,
              help="kafka only: Ready's cold starts of each instead of 5")
@click.option("--budget-min", type=click.FloatRange(min=1), default=None,
              help="kafka only: end within this many minutes (repetitions and kills that "
              "would not fit are not begun; the report says how many were made)")
@output_option
def bench(which: str, compare: str | None, quick: bool, records: int | None,
          directory: Path | None, network: str, partitions: int | None, topics: int | None,
          kills: tuple[int, int] | None, cold_starts: int | None, budget_min: float | None,
          output: str) -> None:
    """Run a bounded benchmark on localhost and print its figures."""
    if network == "netns" and which != "failover":
        fail("--network netns applies to bench failover only", EXIT_USAGE)
    if compare not in PEERS[which]:
        allowed = ", ".join(p for p in PEERS[which] if p) or "no peer"
        fail(f"bench {which} compares with {allowed}, not {compare}", EXIT_USAGE)
    if which != "audit" and (records is not None or directory is not None):
        fail("--records and --dir apply to bench audit only", EXIT_USAGE)
    if which != "scale" and (partitions is not None or topics is not None):
        fail("--partitions and --topics apply to bench scale only", EXIT_USAGE)
    if which != "kafka" and (kills is not None or cold_starts is not None
                             or budget_min is not None):
        fail("--kills, --cold-starts and --budget-min apply to bench kafka only", EXIT_USAGE)
    from cluster.bench.peers.procs import PeerMissing
    from cluster.bench.report import print_report

    try:
        if network == "netns":
            from cluster.bench.failover_netns import run_netns_failover_bench

            report = run_netns_failover_bench(cuts=3 if quick else 20, compare=compare)
            title = f"bench failover ({report['kills']} partitions isolating the leader, netns)"
        else:
            report, title = _run(which, compare, quick, records, directory, partitions, topics,
                                 kills, cold_starts, budget_min)
    except PeerMissing as exc:
        fail(str(exc), EXIT_USAGE)
    except KafkaError as exc:  # CLI.md: one line with the Kafka error name, never a traceback
        fail(f"bench {which}: {exc.error.name}: {exc.message}")
    except (RuntimeError, TimeoutError, OSError) as exc:
        fail(f"bench {which}: {exc}")
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    if output == "json":
        emit_json(report)
        return
    print_report(title, report)


def _run(which: str, compare: str | None, quick: bool, records: int | None = None,
         directory: Path | None = None, partitions: int | None = None,
         topics: int | None = None, kills: tuple[int, int] | None = None,
         cold_starts: int | None = None, budget_min: float | None = None,
         ) -> tuple[dict[str, Any], str]:
    if which == "kafka":
        from cluster.bench.kafka_bench import run_kafka_bench

        report = run_kafka_bench(quick=quick, kills=kills, cold_starts=cold_starts,
                                 budget_s=None if budget_min is None else 60 * budget_min)
        return report, (
            f"bench kafka (minikraft vs Apache Kafka {report['kafka_version']}, 3 controllers "
            "+ 3 brokers each, RF 3, min ISR 2, acks=all)"
        )
    if which == "scale":
        from cluster.bench.scale_bench import run_scale_bench

        report = run_scale_bench(
            partitions=partitions or 100_000, topics=topics or 10, quick=quick
        )
        return report, (
            f"bench scale ({report['partitions']:,} partitions in {report['topics']} topics, "
            "RF 3, 3 controllers + 3 brokers)"
        )
    if which == "raft":
        from cluster.bench.raft_bench import run_raft_bench

        report = run_raft_bench(quick=quick, compare=compare)
        return report, f"bench raft (3 voters on 127.0.0.1, {report['durability']})"
    if which == "failover":
        from cluster.bench.failover_bench import run_failover_bench

        report = run_failover_bench(quick=quick, compare=compare)
        return report, f"bench failover ({report['kills']} kill -9 of the leader)"
    if which == "audit":
        from cluster.bench.audit_bench import run_audit_bench

        report = run_audit_bench(quick=quick, records=records or 1_000_000,
                                 directory=directory)
        return report, f"bench audit ({report['records']:,} metadata records)"
    from cluster.bench.produce_bench import run_produce_bench

    report = run_produce_bench(quick=quick)
    if compare == "nats":
        from cluster.bench.peers.nats import compare_produce_with_nats

        report = compare_produce_with_nats(report, quick=quick)
    load = report["workload"]
    return report, (
        f"bench produce (3 brokers on 127.0.0.1, RF=3, min ISR=2, acks=all, "
        f"{load['record_size']} B records, {load['producers']} producers, "
        f"{load['records_per_batch']} records per batch)"
    )
