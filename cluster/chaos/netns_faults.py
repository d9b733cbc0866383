"""Network faults on a cluster started with `minikraft up --network netns`, applied inside each
node's own namespace, so the kernel drops and delays the packets (the in-process fault layer,
kafkawire/faults.py, stays for loopback mode and the simulator).

- Partitions (Jepsen's nemeses): a *grudge* maps a node to the nodes whose packets it drops; an
  nftables table `inet minikraft` in the node's namespace drops them on input. Two-way cuts put
  each side in the other's grudge, a one-way cut only one side. The host (clients, the CLI)
  always reaches every node, as clients do in Jepsen's partitions.
- netem: loss, latency with jitter, reordering, duplication and a bandwidth limit with
  `tc qdisc ... netem` on the node's veth. A kernel without sch_netem (CONFIG_NET_SCH_NETEM)
  gets the same faults another way: loss with an nftables `numgen random` drop, latency, jitter
  and reordering with cluster/chaos/netns_delay.py (NFQUEUE, verdicts held back), a bandwidth
  limit with `tbf`; only duplication has no fallback (a clear error).

Every rule is lifted by `heal()`: the table is deleted, the qdisc removed, the delayer stopped
by its pid.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cluster.chaos.netns_delay import READY_LINE
from cluster.launch.local_cluster import LocalCluster, NodeSpec
from cluster.launch.netns import NetnsPlan

log = logging.getLogger(__name__)

TABLE = "minikraft"
COMMAND_TIMEOUT_S = 10.0
DELAY_QUEUE = 0
DELAYER_START_S = 20.0
QUEUE_RULE = (
    ("-w", "5"),
    ("OUTPUT", "-j", "NFQUEUE", "--queue-num", str(DELAY_QUEUE), "--queue-bypass"),
)
Grudge = dict[str, set[str]]  # node name -> names of the nodes whose packets it drops


class NetworkFaultError(RuntimeError):
    """A network fault could not be applied (a refused command, a missing kernel feature)."""


@dataclass(frozen=True)
class Netem:
    """One netem profile (netem's own parameter names)."""

    loss_pct: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    reorder_pct: float = 0.0
    duplicate_pct: float = 0.0
    rate_kbit: int = 0

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v}

    def tc_args(self) -> list[str]:
        args: list[str] = []
        if self.delay_ms:
            args += ["delay", f"{self.delay_ms}ms", f"{self.jitter_ms}ms"]
        if self.loss_pct:
            args += ["loss", f"{self.loss_pct}%"]
        if self.reorder_pct:
            args += ["reorder", f"{self.reorder_pct}%"]
        if self.duplicate_pct:
            args += ["duplicate", f"{self.duplicate_pct}%"]
        if self.rate_kbit:
            args += ["rate", f"{self.rate_kbit}kbit"]
        return args


def split(nodes: list[str], minority: int) -> tuple[list[str], list[str]]:
    return nodes[minority:], nodes[:minority]


def two_way(side_a: list[str], side_b: list[str]) -> Grudge:
    """Every node of one side drops every node of the other."""
    grudge: Grudge = {}
    for a in side_a:
        grudge.setdefault(a, set()).update(side_b)
    for b in side_b:
        grudge.setdefault(b, set()).update(side_a)
    return grudge


def isolate(node: str, others: list[str]) -> Grudge:
    return two_way([node], [o for o in others if o != node])


def halves(groups: list[list[str]]) -> tuple[Grudge, list[str], list[str]]:
    """Jepsen's majority/minority halves, per quorum: each group (controllers, brokers; already
    shuffled) splits into a majority and a minority, and the minorities form one side."""
    majority: list[str] = []
    minority: list[str] = []
    for group in groups:
        big, small = split(group, len(group) // 2)
        majority += big
        minority += small
    return two_way(majority, minority), majority, minority


def bridge(groups: list[list[str]]) -> tuple[Grudge, list[str]]:
    """Jepsen's bridge: each group splits into two sides and one node that sees both; the sides
    do not see each other. Returns the grudge and the bridge nodes."""
    side_a: list[str] = []
    side_b: list[str] = []
    bridges: list[str] = []
    for group in groups:
        if len(group) < 3:
            side_a += group
            continue
        middle = len(group) // 2
        side_a += group[:middle]
        bridges.append(group[middle])
        side_b += group[middle + 1:]
    return two_way(side_a, side_b), bridges


def majorities_ring(nodes: list[str]) -> Grudge:
    """Jepsen's majorities-ring: on a ring of the (shuffled) nodes each node sees only its
    nearest neighbours, enough for a majority, so no two nodes see the same majority."""
    n = len(nodes)
    reach = (n // 2 + 1) // 2  # neighbours on each side: itself + 2 * reach >= a majority
    grudge: Grudge = {}
    for i, node in enumerate(nodes):
        for j, other in enumerate(nodes):
            distance = min(abs(i - j), n - abs(i - j))
            if distance > reach:
                grudge.setdefault(node, set()).add(other)
    return grudge


def one_way(victims: list[str], sources: list[str]) -> Grudge:
    """Victims drop what sources send; sources still receive from the victims."""
    return {v: set(sources) for v in victims}


def nft_ruleset(drop_from: list[str], loss_pct: float) -> str:
    """The node's whole `inet minikraft` table (replaced atomically: created, deleted, added)."""
    lines = [f"table inet {TABLE}", f"delete table inet {TABLE}"]
    rules = []
    if drop_from:
        rules.append(f"  chain input {{ type filter hook input priority 0; policy accept; "
                     f"ip saddr {{ {', '.join(sorted(drop_from))} }} drop; }}")
    if loss_pct:
        per_mille = round(loss_pct * 10)
        rules.append(f"  chain loss {{ type filter hook input priority 10; policy accept; "
                     f"numgen random mod 1000 < {per_mille} drop; }}")
    if rules:
        lines += [f"table inet {TABLE} {{", *rules, "}"]
    return "\n".join(lines) + "\n"


async def run_in_namespace(
    plan: NetnsPlan, name: str, *command: str, stdin: str | None = None, check: bool = True
) -> tuple[int, str]:
    """Run a command in node `name`'s namespace (bounded); (exit code, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        *plan.exec_prefix(name), *command,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        _out, err = await asyncio.wait_for(
            proc.communicate(None if stdin is None else stdin.encode()), COMMAND_TIMEOUT_S
        )
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise NetworkFaultError(f"{name}: {command[0]} timed out") from None
    code = proc.returncode or 0
    if check and code != 0:
        raise NetworkFaultError(f"{name}: {' '.join(command)}: {err.decode().strip()}")
    return code, err.decode()


async def set_drop_rules(
    plan: NetnsPlan, name: str, drop_from: list[str], loss_pct: float = 0.0
) -> None:
    """Node `name` drops every packet from the addresses in drop_from (and loss_pct of the
    rest); an empty list and no loss lifts its rules."""
    await run_in_namespace(plan, name, "nft", "-f", "-", stdin=nft_ruleset(drop_from, loss_pct))


@dataclass
class NetnsFaults:
    cluster: LocalCluster
    record: Callable[..., None]
    grudge: Grudge = field(default_factory=dict)
    netem: dict[str, Netem] = field(default_factory=dict)  # node name -> profile in force
    delayers: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    _has_netem: bool | None = None

    @property
    def plan(self) -> NetnsPlan:
        plan = self.cluster.netns
        if plan is None:
            raise NetworkFaultError("network faults need a cluster started with --network netns")
        return plan

    def names(self) -> list[str]:
        return [s.name for s in self.cluster.all_nodes()]

    def spec(self, name: str) -> NodeSpec:
        return self.cluster.node(name)

    async def _run(self, name: str, *command: str, check: bool = True) -> tuple[int, str]:
        return await run_in_namespace(self.plan, name, *command, check=check)

    async def _apply_nft(self, name: str) -> None:
        drop_from = [self.spec(n).host for n in sorted(self.grudge.get(name, ()))]
        profile = self.netem.get(name)
        fallback = profile is not None and not await self.has_netem()
        await set_drop_rules(
            self.plan, name, drop_from, profile.loss_pct if fallback and profile else 0.0
        )

    # -- partitions ------------------------------------------------------------------------------

    async def partition(self, grudge: Grudge, kind: str, **detail: Any) -> None:
        """Replace the partition in force by `grudge`."""
        self.grudge = {k: set(v) for k, v in grudge.items() if v}
        self.record(
            "net-partition", kind=kind, grudge={k: sorted(v) for k, v in self.grudge.items()},
            **detail,
        )
        # Every namespace at once: a cut applied node after node would start its effect (and a
        # failover) before the last rule is in.
        await asyncio.gather(*(self._apply_nft(name) for name in self.names()))

    # -- netem -----------------------------------------------------------------------------------

    async def has_netem(self) -> bool:
        """Whether this kernel has sch_netem (probed once, on the first node's veth)."""
        if self._has_netem is None:
            first = self.cluster.all_nodes()[0]
            dev = self.plan.veth_node(first.node_id)
            code, _err = await self._run(
                first.name, "tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay", "0ms",
                check=False,
            )
            self._has_netem = code == 0
            if code == 0:
                await self._run(first.name, "tc", "qdisc", "del", "dev", dev, "root", check=False)
        return self._has_netem

    async def apply_netem(self, names: list[str], profile: Netem, seed: int = 1) -> str:
        """Put the profile on each node's veth; returns the mechanism used (netem | fallback)."""
        native = await self.has_netem()
        if not native and profile.duplicate_pct:
            raise NetworkFaultError(
                "packet duplication needs sch_netem, which this kernel lacks "
                "(CONFIG_NET_SCH_NETEM)"
            )
        mechanism = "tc-netem" if native else "nft-numgen-loss+nfqueue-delay+tbf-rate"
        self.record("netem", nodes=names, mechanism=mechanism, **profile.to_json())
        for index, name in enumerate(names):
            self.netem[name] = profile
            dev = self.plan.veth_node(self.spec(name).node_id)
            if native:
                await self._run(name, "tc", "qdisc", "replace", "dev", dev, "root", "netem",
                                *profile.tc_args())
                continue
            if profile.rate_kbit:
                await self._run(name, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
                                "rate", f"{profile.rate_kbit}kbit", "burst", "32kbit",
                                "latency", "400ms")
            if profile.delay_ms or profile.reorder_pct:
                await self._start_delayer(name, profile, seed * 100 + index)
            await self._apply_nft(name)
        return mechanism

    async def _start_delayer(self, name: str, profile: Netem, seed: int) -> None:
        await self._stop_delayer(name)
        proc = await asyncio.create_subprocess_exec(
            *self.plan.exec_prefix(name), sys.executable, "-m", "cluster.chaos.netns_delay",
            "--queue", str(DELAY_QUEUE), "--delay-ms", str(profile.delay_ms),
            "--jitter-ms", str(profile.jitter_ms), "--reorder-pct", str(profile.reorder_pct),
            "--seed", str(seed),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
        )
        self.delayers[name] = proc
        # Bound to the queue before packets are sent there: a fixed pause was too short for a
        # Python start on a loaded machine, and `bypass` then let every packet through undelayed.
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), DELAYER_START_S)
        except TimeoutError:
            line = b""
        if line.decode().strip() != READY_LINE:
            raise NetworkFaultError(
                f"{name}: the NFQUEUE delayer did not bind its queue within {DELAYER_START_S:.0f} s"
                f" (exit code {proc.returncode})"
            )
        # This kernel's nftables has no `queue` expression, its xtables NFQUEUE target (through
        # iptables-nft) is there; --queue-bypass: with no delayer bound, packets pass untouched.
        await self._run(name, "iptables", *QUEUE_RULE[0], "-A", *QUEUE_RULE[1])

    async def _stop_delayer(self, name: str) -> None:
        proc = self.delayers.pop(name, None)
        if proc is None:
            return
        await self._run(name, "iptables", *QUEUE_RULE[0], "-D", *QUEUE_RULE[1], check=False)
        if proc.returncode is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 5.0)
        except TimeoutError:
            proc.kill()
            await proc.wait()

    # -- heal ------------------------------------------------------------------------------------

    async def heal(self) -> None:
        """Lift every partition and netem profile this run set (every node, best effort)."""
        if not self.grudge and not self.netem and not self.delayers:
            return
        touched = sorted(set(self.grudge) | set(self.netem) | set(self.delayers))
        self.grudge.clear()
        netem_nodes = list(self.netem)
        self.netem.clear()
        for name in list(self.delayers):
            await self._stop_delayer(name)
        for name in self.names():
            try:
                await self._apply_nft(name)
                if name in netem_nodes:
                    dev = self.plan.veth_node(self.spec(name).node_id)
                    await self._run(name, "tc", "qdisc", "del", "dev", dev, "root", check=False)
            except NetworkFaultError as exc:
                log.warning("chaos: could not heal %s: %s", name, exc)
        self.record("net-heal", nodes=touched)
