"""Chaos scenarios: each a seeded sequence of faults that runs until its deadline.

A scenario picks its targets and timings from `ctx.rng` only, so a seed names one run (the
cluster's own timing still varies). Every fault is lifted before the scenario returns, except
what the runner's final heal lifts anyway (a killed node is restarted there at the latest).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from cluster.chaos.process_faults import ProcessFaults
from cluster.cli.admin_client import describe_quorum
from cluster.cli.topics_cmd import controller_request
from cluster.config import ConfigError, NodeConfig
from cluster.launch.local_cluster import LocalCluster, NodeSpec, is_running
from cluster.protocol import controller_messages as msg
from cluster.protocol.errors import Errors, KafkaError

DEFAULT_SESSION_TIMEOUT_MS = 9000


@dataclass
class ChaosContext:
    cluster: LocalCluster
    faults: ProcessFaults
    rng: random.Random
    deadline: float  # time.monotonic()
    topic: str
    min_insync_replicas: int = 2
    notes: list[str] = field(default_factory=list)

    def time_left_s(self) -> float:
        return self.deadline - time.monotonic()

    async def hold(self, low_s: float, high_s: float) -> None:
        """Sleep a seeded time in [low_s, high_s]."""
        await asyncio.sleep(self.rng.uniform(low_s, high_s))

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


Scenario = Callable[[ChaosContext], Awaitable[None]]


async def kill_leader_controller(ctx: ChaosContext) -> None:
    """SIGKILL the active controller (the Raft leader), let the others elect, restart it."""
    while ctx.time_left_s() > 0:
        leader = await ctx.leader_controller()
        if leader is None:
            await asyncio.sleep(0.2)
            continue
        await ctx.faults.kill(leader)
        await ctx.hold(1.0, 2.5)
        ctx.faults.restart(leader)
        await ctx.hold(1.0, 2.0)


async def kill_broker(ctx: ChaosContext) -> None:
    """SIGKILL a seeded broker, hold it down, restart it on its own data."""
    while ctx.time_left_s() > 0:
        target = ctx.rng.choice(ctx.brokers())
        await ctx.faults.kill(target)
        await ctx.hold(1.0, 2.5)
        ctx.faults.restart(target)
        await ctx.hold(1.0, 2.0)


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
    request = msg.IncrementalAlterConfigsRequest(
        [msg.AlterConfigsResource(
            msg.RESOURCE_TYPE_TOPIC, ctx.topic,
            [msg.AlterableConfig("min.insync.replicas", msg.OP_SET, str(value))],
        )]
    )
    ctx.faults.record("alter-config", topic=ctx.topic, config=f"min.insync.replicas={value}")
    try:
        response = await controller_request(
            ctx.cluster.bootstrap_controller, request, timeout_ms=5000
        )
        error = Errors.of(response.responses[0].error_code)
    except KafkaError as exc:
        error = exc.error
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
            await ctx.faults.kill(target)
            await ctx.hold(1.0, 2.0)
            ctx.faults.restart(target)
            await ctx.hold(0.5, 1.5)
    finally:
        await _set_min_isr(ctx, ctx.min_insync_replicas)


async def mixed(ctx: ChaosContext) -> None:
    """A seeded mix: each round runs one round of a single-fault scenario."""
    singles = [kill_leader_controller, kill_broker, pause_broker, partition]
    while ctx.time_left_s() > 0:
        choice = ctx.rng.choice(singles)
        ctx.faults.record("mixed-round", scenario=choice.__name__.replace("_", "-"))
        round_ctx = ChaosContext(
            ctx.cluster, ctx.faults, ctx.rng, time.monotonic() + 0.001, ctx.topic,
            ctx.min_insync_replicas, ctx.notes,
        )
        await choice(round_ctx)


SCENARIOS: dict[str, Scenario] = {
    "kill-leader-controller": kill_leader_controller,
    "kill-broker": kill_broker,
    "pause-broker": pause_broker,
    "partition": partition,
    "rolling-restart": rolling_restart,
    "min-isr-change": min_isr_change,
    "mixed": mixed,
}
