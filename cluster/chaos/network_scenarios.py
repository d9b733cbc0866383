"""Chaos scenarios that cut or degrade the network itself (`minikraft up --network netns` only):
Jepsen's partition nemeses and netem, and `--nemesis`, a seeded mix of them with kill -9 and
SIGSTOP. Each picks targets and timings from `ctx.rng` only and heals what it set before it
returns (the runner's final heal lifts anything left).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from cluster.chaos.netns_faults import (
    Grudge,
    Netem,
    NetnsFaults,
    bridge,
    halves,
    isolate,
    majorities_ring,
    one_way,
)
from cluster.chaos.scenarios import ChaosContext, Scenario, kill_broker, partition, pause_broker

NETEM_LOSS = Netem(loss_pct=10.0, delay_ms=50.0, jitter_ms=20.0)
NETEM_PROFILES = {
    "netem-loss": NETEM_LOSS,
    "netem-delay": Netem(delay_ms=100.0, jitter_ms=50.0),
    "netem-reorder": Netem(delay_ms=20.0, jitter_ms=10.0, reorder_pct=25.0),
    "netem-duplicate": Netem(duplicate_pct=10.0),
    "netem-bandwidth": Netem(rate_kbit=2000),
}


def net(ctx: ChaosContext) -> NetnsFaults:
    if ctx.faults.net is None:
        raise ValueError(
            "network faults need a cluster started with `minikraft up --network netns`"
        )
    return ctx.faults.net


def _groups(ctx: ChaosContext) -> list[list[str]]:
    """Controllers and brokers, each shuffled (seeded): partitions split each quorum."""
    groups = [[s.name for s in ctx.controllers()], [s.name for s in ctx.brokers()]]
    for group in groups:
        ctx.rng.shuffle(group)
    return groups


def _all(ctx: ChaosContext) -> list[str]:
    return [s.name for s in ctx.cluster.all_nodes()]


async def _hold_partition(ctx: ChaosContext, grudge: Grudge, kind: str, **detail: object) -> None:
    await net(ctx).partition(grudge, kind, **detail)
    try:
        await ctx.hold(3.0, 5.0)
    finally:
        await net(ctx).heal()
    await ctx.hold(1.5, 2.5)


async def partition_leader_round(ctx: ChaosContext) -> None:
    leader = await ctx.leader_controller()
    if leader is None:
        await asyncio.sleep(0.3)
        return
    await _hold_partition(ctx, isolate(leader.name, _all(ctx)), "isolate-leader",
                          node=leader.name)


async def partition_random_node_round(ctx: ChaosContext) -> None:
    target = ctx.rng.choice(_all(ctx))
    await _hold_partition(ctx, isolate(target, _all(ctx)), "isolate-node", node=target)


async def partition_halves_round(ctx: ChaosContext) -> None:
    grudge, majority, minority = halves(_groups(ctx))
    await _hold_partition(ctx, grudge, "majority-minority", majority=majority,
                          minority=minority)


async def partition_bridge_round(ctx: ChaosContext) -> None:
    grudge, bridges = bridge(_groups(ctx))
    await _hold_partition(ctx, grudge, "bridge", bridges=bridges)


async def partition_ring_round(ctx: ChaosContext) -> None:
    nodes = _all(ctx)
    ctx.rng.shuffle(nodes)
    await _hold_partition(ctx, majorities_ring(nodes), "majorities-ring", ring=nodes)


async def partition_one_way_round(ctx: ChaosContext) -> None:
    nodes = _all(ctx)
    victim = ctx.rng.choice(nodes)
    await _hold_partition(ctx, one_way([victim], [n for n in nodes if n != victim]), "one-way",
                          node=victim)


def _netem_round(name: str) -> Scenario:
    async def round_(ctx: ChaosContext) -> None:
        await net(ctx).apply_netem(_all(ctx), NETEM_PROFILES[name], ctx.rng.randrange(1 << 16))
        try:
            await ctx.hold(3.0, 5.0)
        finally:
            await net(ctx).heal()
        await ctx.hold(1.0, 2.0)

    round_.__name__ = name
    return round_


async def _netem_any_round(ctx: ChaosContext) -> None:
    names = list(NETEM_PROFILES)
    if not await net(ctx).has_netem():
        names.remove("netem-duplicate")  # the only profile without a fallback
    await _netem_round(ctx.rng.choice(names))(ctx)


def _repeat(round_: Callable[[ChaosContext], Awaitable[None]]) -> Scenario:
    async def scenario(ctx: ChaosContext) -> None:
        net(ctx)
        while ctx.time_left_s() > 0:
            await round_(ctx)

    scenario.__doc__ = round_.__doc__
    return scenario


async def netem_loss(ctx: ChaosContext) -> None:
    """10% loss, 50 ms +- 20 ms latency on every node for the whole run."""
    faults = net(ctx)
    mechanism = await faults.apply_netem(_all(ctx), NETEM_LOSS, ctx.rng.randrange(1 << 16))
    ctx.notes.append(f"netem-loss applied with {mechanism}")
    try:
        while ctx.time_left_s() > 0:
            await asyncio.sleep(min(0.5, max(0.0, ctx.time_left_s())))
    finally:
        await faults.heal()


NEMESES: dict[str, Callable[[ChaosContext], Awaitable[None]]] = {
    "kill": kill_broker,  # one round: the deadline has passed for a round context
    "pause": pause_broker,
    # One node (a broker or the active controller) cut off every other: the fault layer on
    # loopback and netns, `docker network disconnect` on a compose cluster.
    "disconnect": partition,
    "partition-random-node": partition_random_node_round,
    "partition-leader": partition_leader_round,
    "partition-random-halves": partition_halves_round,
    "partition-bridge": partition_bridge_round,
    "partition-majorities-ring": partition_ring_round,
    "partition-one-way": partition_one_way_round,
    "netem": _netem_any_round,
    **{name: _netem_round(name) for name in NETEM_PROFILES},
}
PROCESS_NEMESES = frozenset({"kill", "pause", "disconnect"})  # any network (netns not needed)
DEFAULT_NEMESES = ("kill", "pause", "partition-random-halves", "partition-leader", "netem")


async def nemesis(ctx: ChaosContext) -> None:
    """A seeded mix over the run of the nemeses named by --nemesis (kill -9, SIGSTOP, partitions,
    netem), one at a time, each healed before the next."""
    names = ctx.nemeses or list(DEFAULT_NEMESES)
    unknown = sorted(set(names) - set(NEMESES))
    if unknown:
        raise ValueError(f"unknown nemesis {unknown}; known: {sorted(NEMESES)}")
    if any(n not in PROCESS_NEMESES for n in names):
        net(ctx)
    while ctx.time_left_s() > 0:
        name = ctx.rng.choice(names)
        ctx.faults.record("nemesis-round", nemesis=name)
        if name in PROCESS_NEMESES:
            await NEMESES[name](ctx.one_round())
        else:
            await NEMESES[name](ctx)


NETNS_SCENARIOS: dict[str, Scenario] = {
    "partition-leader": _repeat(partition_leader_round),
    "partition-halves": _repeat(partition_halves_round),
    "partition-bridge": _repeat(partition_bridge_round),
    "partition-ring": _repeat(partition_ring_round),
    "partition-one-way": _repeat(partition_one_way_round),
    "netem-loss": netem_loss,
    "nemesis": nemesis,
}
