"""Chaos scenarios: each a seeded sequence of faults that runs until its deadline.

A scenario picks its targets and timings from `ctx.rng` only, so a seed names one run (the
cluster's own timing still varies). Every fault is lifted before the scenario returns, except
what the runner's final heal lifts anyway (a killed node is restarted there at the latest).
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.incremental_alter_configs.v1 import request as iac_request
from kio.static.primitive import i8

from cluster.chaos.process_faults import ProcessFaults
from cluster.client.admin_client import QuorumStatus, describe_quorum
from cluster.client.bootstrap import new_client, send_to_any
from cluster.client.topics import describe_all, partition_rows
from cluster.launch.local_cluster import LocalCluster, NodeSpec, is_running
from kafkawire.config import ConfigError, NodeConfig
from kafkawire.constants import CONFIG_RESOURCE_TOPIC, OP_SET
from kafkawire.errors import Errors, KafkaError
from raft.core.replica_key import ReplicaKey, uuid_from_str, uuid_to_str
from raft.runtime.meta_properties import read_meta_properties
from storage.runtime.power_loss import DISK_MODE_KEY, POWER_LOSS_SIM

DEFAULT_SESSION_TIMEOUT_MS = 9000
ONE_ROUND_S = 0.05
# kill-leader-broker: how long a round waits for the restarted broker to rejoin every ISR.
FULL_ISR_WAIT_S = 30.0


# Kafka's ConfigResource.Type TOPIC and AlterConfigOp.OpType SET.

@dataclass
class ChaosContext:
    cluster: LocalCluster
    faults: ProcessFaults
    rng: random.Random
    deadline: float  # time.monotonic()
    topic: str
    min_insync_replicas: int = 2
    notes: list[str] = field(default_factory=list)
    # name -> {"ok": bool, ...}: what a scenario verified itself; any ok=false fails the run.
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    nemeses: list[str] = field(default_factory=list)  # --nemesis (network_scenarios.nemesis)

    def time_left_s(self) -> float:
        return self.deadline - time.monotonic()

    async def hold(self, low_s: float, high_s: float) -> None:
        """Sleep a seeded time in [low_s, high_s]."""
        await asyncio.sleep(self.rng.uniform(low_s, high_s))

    async def kill_and_restart(
        self, target: NodeSpec, down_low_s: float = 1.0, down_high_s: float = 2.5
    ) -> None:
        """SIGKILL `target`, hold it down a seeded time, restart it on its own data."""
        await self.faults.kill(target)
        await self.hold(down_low_s, down_high_s)
        self.faults.restart(target)

    def brokers(self) -> list[NodeSpec]:
        return list(self.cluster.brokers)

    def controllers(self) -> list[NodeSpec]:
        return list(self.cluster.controllers)

    async def leader_controller(self) -> NodeSpec | None:
        try:
            status = await describe_quorum(self.cluster.bootstrap_controller, timeout_ms=3000)
        except KafkaError:
            return None
        return next((c for c in self.cluster.controllers if c.node_id == status.leader_id), None)

    def session_timeout_ms(self, spec: NodeSpec) -> int:
        try:
            config = NodeConfig.from_file(spec.config)
            return int(config.get("broker.session.timeout.ms") or DEFAULT_SESSION_TIMEOUT_MS)
        except (ConfigError, ValueError):
            return DEFAULT_SESSION_TIMEOUT_MS

    async def wait_running(self, spec: NodeSpec, timeout_s: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if is_running(spec):
                return True
            await asyncio.sleep(0.05)
        return False

    def node_property(self, spec: NodeSpec, key: str) -> str | None:
        try:
            return NodeConfig.from_file(spec.config).get(key)
        except ConfigError:
            return None

    async def quorum(self) -> QuorumStatus | None:
        try:
            return await describe_quorum(self.cluster.bootstrap_controller, timeout_ms=3000)
        except KafkaError:
            return None

    async def wait_quorum(
        self, predicate: Callable[[QuorumStatus], bool], timeout_s: float
    ) -> QuorumStatus | None:
        """The first DescribeQuorum answer that satisfies predicate, or None after timeout_s."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = await self.quorum()
            if status is not None and predicate(status):
                return status
            await asyncio.sleep(0.3)
        return None

    async def partitions(self) -> dict[int, dict[str, Any]]:
        """The run topic's partitions as `topics describe --output json` rows ({} on error)."""
        try:
            topics = await describe_all(self.cluster.bootstrap_controller, [self.topic])
        except KafkaError:
            return {}
        return {row["partition"]: row for row in partition_rows(topics)}

    async def wait_partition(
        self, partition: int, predicate: Callable[[dict[str, Any]], bool], timeout_s: float
    ) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            row = (await self.partitions()).get(partition)
            if row is not None and predicate(row):
                return row
            await asyncio.sleep(0.3)
        return None

    async def cli(self, *args: str, timeout_s: float = 60.0) -> tuple[int, str, str]:
        """Run `minikraft ARGS` as its own process, as an operator would (bounded)."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cluster.cli.main", *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return -1, "", f"minikraft {args[0]} timed out after {timeout_s} s"
        self.faults.record("cli", command=" ".join(args[:2]), exit_code=proc.returncode)
        return proc.returncode or 0, out.decode(), err.decode()

    def one_round(self) -> ChaosContext:
        """This run's context with a deadline 50 ms away: a looping scenario runs one round
        (each round holds its fault for seconds), even on a loaded machine where 1 ms passes
        before its first deadline check."""
        return ChaosContext(
            self.cluster, self.faults, self.rng, time.monotonic() + ONE_ROUND_S, self.topic,
            self.min_insync_replicas, self.notes, self.checks, self.nemeses,
        )

    def check(self, name: str, ok: bool, **detail: Any) -> None:
        """Record a verification; a later failing one with the same name wins."""
        if name in self.checks and not self.checks[name]["ok"]:
            return
        self.checks[name] = {"ok": ok, **detail}


Scenario = Callable[[ChaosContext], Awaitable[None]]


async def kill_leader_controller(ctx: ChaosContext) -> None:
    """SIGKILL the active controller (the Raft leader), let the others elect, restart it."""
    while ctx.time_left_s() > 0:
        leader = await ctx.leader_controller()
        if leader is None:
            await asyncio.sleep(0.2)
            continue
        await ctx.kill_and_restart(leader)
        await ctx.hold(1.0, 2.0)


async def kill_broker(ctx: ChaosContext) -> None:
    """SIGKILL a seeded broker, hold it down, restart it on its own data."""
    while ctx.time_left_s() > 0:
        target = ctx.rng.choice(ctx.brokers())
        await ctx.kill_and_restart(target)
        await ctx.hold(1.0, 2.0)


async def kill_leader_broker(ctx: ChaosContext) -> None:
    """SIGKILL the broker leading a seeded partition of the run's topic, hold it down, restart it
    on its own data, and wait (bounded) until every partition has its full ISR again before the
    next round: each round moves leaderships under load with the cluster otherwise whole, so the
    producers write between rounds (kill-broker's back-to-back kills keep partitions under min
    ISR most of the time)."""
    while ctx.time_left_s() > 0:
        rows = await ctx.partitions()
        led = sorted(p for p, r in rows.items() if r["leader"] >= 0)
        if not led:
            await asyncio.sleep(0.3)
            continue
        leader = rows[ctx.rng.choice(led)]["leader"]
        target = next((b for b in ctx.brokers() if b.node_id == leader), None)
        if target is None:
            await asyncio.sleep(0.3)
            continue
        await ctx.kill_and_restart(target)
        rejoin_by = time.monotonic() + FULL_ISR_WAIT_S  # bounded for the whole round
        for partition in sorted(rows):
            await ctx.wait_partition(
                partition, lambda r: len(r["isr"]) == len(r["replicas"]),
                max(0.0, rejoin_by - time.monotonic()),
            )
        await ctx.hold(2.0, 4.0)


async def pause_broker(ctx: ChaosContext) -> None:
    """SIGSTOP a broker past broker.session.timeout.ms (the controller fences it and moves its
    leaderships), then SIGCONT: it comes back with a stale broker epoch and must catch up."""
    while ctx.time_left_s() > 0:
        target = ctx.rng.choice(ctx.brokers())
        pause_s = ctx.session_timeout_ms(target) / 1000 + ctx.rng.uniform(0.5, 1.5)
        ctx.faults.pause(target)
        try:
            await asyncio.sleep(pause_s)
        finally:
            ctx.faults.resume(target)
        await ctx.hold(1.0, 2.0)


async def partition(ctx: ChaosContext) -> None:
    """The fault layer cuts one node (a broker or the active controller) off from every other
    node, both ways; clients still reach it, as in a real partition between racks."""
    while ctx.time_left_s() > 0:
        candidates = ctx.brokers()
        leader = await ctx.leader_controller()
        if leader is not None:
            candidates.append(leader)
        target = ctx.rng.choice(candidates)
        peers = [s for s in ctx.cluster.all_nodes() if s.name != target.name]
        await ctx.faults.partition(target, peers)
        try:
            await ctx.hold(2.0, 4.0)
        finally:
            await ctx.faults.heal_network()
        await ctx.hold(1.0, 2.0)


async def rolling_restart(ctx: ChaosContext) -> None:
    """SIGTERM (clean shutdown) each node in turn, brokers first, and start it again; the next
    node goes down only once the last one runs again. At least one node, then while time lasts."""
    order = ctx.brokers()
    ctx.rng.shuffle(order)
    controllers = ctx.controllers()
    ctx.rng.shuffle(controllers)
    for index, spec in enumerate(order + controllers):
        if index and ctx.time_left_s() <= 0:
            break
        clean = await ctx.faults.terminate(spec)
        if not clean:
            ctx.notes.append(f"{spec.name} did not stop within the SIGTERM wait")
        ctx.faults.restart(spec)
        await ctx.wait_running(spec)
        await ctx.hold(1.5, 2.5)


async def _set_min_isr(ctx: ChaosContext, value: int) -> None:
    """IncrementalAlterConfigs v1 (SET) through the brokers, which forward it to the active
    controller, as a Kafka admin client does."""
    request = iac_request.IncrementalAlterConfigsRequest(
        resources=(
            iac_request.AlterConfigsResource(
                resource_type=i8(CONFIG_RESOURCE_TOPIC),
                resource_name=ctx.topic,
                configs=(
                    iac_request.AlterableConfig(
                        name="min.insync.replicas", config_operation=i8(OP_SET), value=str(value)
                    ),
                ),
            ),
        ),
        validate_only=False,
    )
    ctx.faults.record("alter-config", topic=ctx.topic, config=f"min.insync.replicas={value}")
    client = new_client("chaos-admin")
    try:
        bootstrap = [b.address for b in ctx.brokers()]
        _address, response = await send_to_any(client, bootstrap, request, timeout_ms=5000)
        error = Errors.of(response.responses[0].error_code)
    except KafkaError as exc:
        error = exc.error
    finally:
        await client.close()
    if error is not Errors.NONE:
        ctx.notes.append(f"min.insync.replicas={value}: {error.name}")


async def min_isr_change(ctx: ChaosContext) -> None:
    """Change the topic's min.insync.replicas under load (rule 15 keeps the ELR), with a broker
    killed and restarted between changes; ends back at the topic's starting min ISR."""
    try:
        while ctx.time_left_s() > 0:
            await _set_min_isr(ctx, ctx.rng.choice([1, 2, 3]))
            await ctx.hold(0.5, 1.5)
            target = ctx.rng.choice(ctx.brokers())
            await ctx.kill_and_restart(target, 1.0, 2.0)
            await ctx.hold(0.5, 1.5)
    finally:
        await _set_min_isr(ctx, ctx.min_insync_replicas)


async def mixed(ctx: ChaosContext) -> None:
    """A seeded mix: each round runs one round of a single-fault scenario."""
    singles = [kill_leader_controller, kill_broker, pause_broker, partition]
    while ctx.time_left_s() > 0:
        choice = ctx.rng.choice(singles)
        ctx.faults.record("mixed-round", scenario=choice.__name__.replace("_", "-"))
        await choice(ctx.one_round())


async def power_loss(ctx: ChaosContext) -> None:
    """kill -9 seeded nodes (brokers and controllers, the active one included) under load on a
    disk that loses what was not fsync'd (minikraft.disk.mode=power-loss-sim): an acks=all write
    is acked only once fsync'd on min ISR replicas (rule 20), a Raft entry is committed only once
    fsync'd on a majority (rule 2), so the run must still lose nothing acked or committed."""
    plain = [
        spec.name for spec in ctx.cluster.all_nodes()
        if ctx.node_property(spec, DISK_MODE_KEY) != POWER_LOSS_SIM
    ]
    if plain:
        raise ValueError(
            f"power-loss needs every node on {DISK_MODE_KEY}={POWER_LOSS_SIM}; not: {plain} "
            f"(minikraft up --set {DISK_MODE_KEY}={POWER_LOSS_SIM})"
        )
    kills = 0
    while ctx.time_left_s() > 0 or kills == 0:
        candidates = ctx.brokers() + ctx.controllers()
        leader = await ctx.leader_controller()
        if leader is not None:
            candidates.append(leader)  # the active controller is hit more often
        target = ctx.rng.choice(candidates)
        await ctx.faults.kill(target)
        kills += 1
        await ctx.hold(0.5, 1.5)
        ctx.faults.restart(target)
        await ctx.wait_running(target)
        await ctx.hold(1.0, 2.0)


def _metadata_directory_id(spec: NodeSpec) -> str | None:
    meta = read_meta_properties(Path(spec.dir) / "metadata")
    return None if meta is None else uuid_to_str(meta.directory_id)


def _voters_as_expected(status: QuorumStatus, expected: set[ReplicaKey]) -> bool:
    return set(status.voter_keys()) == expected


async def _replace_disk(ctx: ChaosContext, target: NodeSpec) -> None:
    """Seed 003's flow: the old key leaves the voter set, the new disk's key joins (rule 4)."""
    old_dir = _metadata_directory_id(target)
    before = await ctx.wait_quorum(lambda s: s.leader_id is not None, 15)
    if old_dir is None or before is None:
        ctx.check("disk_replace", False, problem=f"{target.name}: no directory id or no quorum")
        return
    others = {k for k in before.voter_keys() if k.id != target.node_id}
    await ctx.faults.kill(target)
    shutil.rmtree(Path(target.dir) / "metadata", ignore_errors=True)
    ctx.faults.record("wipe-metadata", target)
    code, _out, err = await ctx.cli(
        "storage", "format", "--config", target.config, "--cluster-id", ctx.cluster.cluster_id,
        "--no-initial-controllers",
    )
    new_dir = _metadata_directory_id(target)
    if code != 0 or new_dir is None or new_dir == old_dir:
        ctx.check("disk_replace", False, problem=f"format failed: {err.strip()}")
        return
    target.directory_id = new_dir
    ctx.faults.restart(target)
    new_key = ReplicaKey(target.node_id, uuid_from_str(new_dir))
    observed = await ctx.wait_quorum(lambda s: new_key in s.observer_keys(), 30)
    if observed is None:
        ctx.check("disk_replace", False, problem=f"{target.name} never fetched as an observer")
        return
    code, _out, err = await ctx.cli(
        "metadata-quorum", "--bootstrap-controller", ctx.cluster.bootstrap_controller,
        "remove-controller", "--controller-id", str(target.node_id),
        "--controller-directory-id", old_dir,
    )
    if code != 0:
        ctx.check("disk_replace", False, problem=f"remove-controller: {err.strip()}")
        return
    code, _out, err = await ctx.cli(
        "metadata-quorum", "--bootstrap-controller", ctx.cluster.bootstrap_controller,
        "add-controller", "--config", target.config,
    )
    if code != 0:
        ctx.check("disk_replace", False, problem=f"add-controller: {err.strip()}")
        return
    expected = others | {new_key}
    final = await ctx.wait_quorum(lambda s: _voters_as_expected(s, expected), 15)
    ctx.check(
        "disk_replace", final is not None, node=target.name, old_directory_id=old_dir,
        new_directory_id=new_dir,
        voters=sorted(f"{k.id}:{uuid_to_str(k.directory_id)}" for k in expected),
    )


async def disk_replace_controller(ctx: ChaosContext) -> None:
    """kill -9 a seeded controller, delete its metadata directory, format it again (a new
    directory id, --no-initial-controllers), start it as an observer, `remove-controller` its old
    key and `add-controller` the new one, under the workload; the voter set must end as the
    survivors plus the new key, and the committed prefix must survive (the runner checks it)."""
    rounds = 0
    while ctx.time_left_s() > 0 or rounds == 0:
        await _replace_disk(ctx, ctx.rng.choice(ctx.controllers()))
        ctx.cluster.write_cluster_file()
        rounds += 1
        await ctx.hold(1.0, 2.0)


async def voter_churn(ctx: ChaosContext) -> None:
    """Remove a seeded non-leader voter (`remove-controller`; it keeps running as an observer)
    and add it back (`add-controller`), repeatedly under the workload; the voter set must end
    as it started."""
    start = await ctx.wait_quorum(lambda s: s.leader_id is not None, 15)
    if start is None:
        ctx.check("voter_churn", False, problem="no quorum leader")
        return
    original = set(start.voter_keys())
    rounds = 0
    while ctx.time_left_s() > 0 or rounds == 0:
        status = await ctx.wait_quorum(lambda s: s.leader_id is not None, 15)
        if status is None:
            break
        keys = sorted(
            (k for k in status.voter_keys() if k.id != status.leader_id), key=lambda k: k.id
        )
        if not keys:
            break
        key = ctx.rng.choice(keys)
        spec = next(c for c in ctx.cluster.controllers if c.node_id == key.id)
        bootstrap = ctx.cluster.bootstrap_controller
        code, _out, err = await ctx.cli(
            "metadata-quorum", "--bootstrap-controller", bootstrap, "remove-controller",
            "--controller-id", str(key.id), "--controller-directory-id",
            uuid_to_str(key.directory_id),
        )
        if code != 0:
            ctx.notes.append(f"remove-controller {key.id}: {err.strip()}")
        await ctx.hold(0.5, 1.5)
        # Add back, retried: the removed replica must be seen fetching as an observer first.
        for _ in range(5):
            code, _out, err = await ctx.cli(
                "metadata-quorum", "--bootstrap-controller", bootstrap, "add-controller",
                "--config", spec.config,
            )
            if code == 0 or "DUPLICATE_VOTER" in err:
                break
            await asyncio.sleep(1.0)
        rounds += 1
        await ctx.hold(0.5, 1.5)
    final = await ctx.wait_quorum(lambda s: _voters_as_expected(s, original), 20)
    ctx.check("voter_churn", final is not None, rounds=rounds,
              voters=sorted(f"{k.id}:{uuid_to_str(k.directory_id)}" for k in original))


async def last_replica_standing(ctx: ChaosContext) -> None:
    """Force an unclean recovery (unclean.leader.election.enable=false): kill -9 a seeded
    follower (it drops out of the ISR while writes continue), then every ISR member; start only
    the stale replica; `minikraft unclean-recovery --automated-recovery --all-offline-partitions`
    elects it (DESIGNATED), the partition goes RECOVERING then RECOVERED (rule 21). Writes acked
    while the stale replica was down may be lost: the runner attributes them (rule 23)."""
    rows = await ctx.partitions()
    if not rows:
        ctx.check("unclean_recovery", False, problem=f"{ctx.topic} cannot be described")
        return
    partition = ctx.rng.choice(sorted(rows))
    row = rows[partition]
    followers = [r for r in row["replicas"] if r != row["leader"]]
    spare_id = ctx.rng.choice(followers)
    spare = ctx.cluster.node(f"broker-{spare_id}")
    await ctx.faults.kill(spare)
    timeout_s = ctx.session_timeout_ms(spare) / 1000 + 20
    shrunk = await ctx.wait_partition(
        partition, lambda r: spare_id not in r["isr"] and r["leader"] >= 0, timeout_s
    )
    if shrunk is None:
        ctx.check("unclean_recovery", False, problem=f"broker {spare_id} never left the ISR")
        return
    await ctx.hold(1.0, 2.0)  # acks=all writes the spare never sees
    isr = [ctx.cluster.node(f"broker-{b}") for b in shrunk["isr"]]
    for spec in isr:
        await ctx.faults.kill(spec)
    offline = await ctx.wait_partition(partition, lambda r: r["leader"] == -1, timeout_s)
    if offline is None:
        ctx.check("unclean_recovery", False, problem="the partition never went offline")
        return
    ctx.faults.restart(spare)
    # The spare is back and unfenced when it is no longer an offline replica.
    back = await ctx.wait_partition(
        partition, lambda r: spare_id not in r["offline_replicas"], timeout_s
    )
    still_offline = back is not None and back["leader"] == -1
    bootstrap = ctx.cluster.bootstrap_server
    result: list[dict[str, Any]] = []
    code = -1
    for _ in range(5):
        code, out, err = await ctx.cli(
            "unclean-recovery", "--bootstrap-server", bootstrap, "--automated-recovery",
            "--all-offline-partitions", "--recovery-duration-ms", "3000", "--output", "json",
        )
        if out.strip():
            result = json.loads(out)
        if code == 0:
            break
        ctx.notes.append(f"unclean-recovery exit {code}: {err.strip()[:200]}")
        await asyncio.sleep(1.0)
    elected = next((r for r in result if r["partition"] == partition), None)
    recovered = await ctx.wait_partition(
        partition, lambda r: r["leader"] == spare_id and r["leader_recovery_state"] == "RECOVERED",
        30,
    )
    ctx.check(
        "unclean_recovery",
        still_offline and code == 0 and elected is not None and elected["leader"] == spare_id
        and recovered is not None,
        partition=partition, designated_leader=spare_id, killed_isr=shrunk["isr"],
        tool_exit_code=code, tool_result=elected,
    )


SCENARIOS: dict[str, Scenario] = {
    "kill-leader-controller": kill_leader_controller,
    "kill-broker": kill_broker,
    "kill-leader-broker": kill_leader_broker,
    "pause-broker": pause_broker,
    "partition": partition,
    "rolling-restart": rolling_restart,
    "min-isr-change": min_isr_change,
    "mixed": mixed,
    "power-loss": power_loss,
    "disk-replace-controller": disk_replace_controller,
    "last-replica-standing": last_replica_standing,
    "voter-churn": voter_churn,
}
