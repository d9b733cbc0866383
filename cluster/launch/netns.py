"""`minikraft up --network netns`: one Linux network namespace per node, each with its own address
on a bridge this module creates; the host namespace gets an address on the same bridge, so the
CLI and clients reach every node unchanged.

Every name carries the cluster directory's id (a short hash of its path), so `down`, or the next
`up`, removes what a crashed run left behind by that id alone: namespaces `mk<id>-<node>`, links
`mk<id>br` (the bridge), `mk<id>h<node_id>` (host end of a veth) and `mk<id>n<node_id>` (the
node's end). Link names stay within the kernel's 15 characters (IFNAMSIZ - 1).

This is the only module that holds the private test range the nodes get addresses from
(10.213.0.0/16, one /24 per cluster); tests build addresses from it.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

# A private (RFC 1918) range for test clusters only; one /24 per cluster directory.
TEST_RANGE = ipaddress.ip_network("10.213.0.0/16")
NET_ID_CHARS = 6
IFNAME_MAX = 15  # IFNAMSIZ - 1
HOST_INDEX = 1
FIRST_NODE_INDEX = 10
COMMAND_TIMEOUT_S = 10.0


class NetnsError(RuntimeError):
    """An `ip` command this module needs was refused."""


def net_id(directory: Path) -> str:
    """The cluster directory's id: every namespace and link name carries it."""
    return hashlib.sha1(str(directory.resolve()).encode()).hexdigest()[:NET_ID_CHARS]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
    )
    if check and result.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


def netns_unavailable_reason() -> str | None:
    """Why `--network netns` cannot run here (None when it can): root, `ip`, and the kernel
    accepting `ip netns add` (a container without CAP_SYS_ADMIN refuses it)."""
    if os.geteuid() != 0:
        return "--network netns needs root (it creates network namespaces and a bridge)"
    if shutil.which("ip") is None:
        return "--network netns needs the `ip` command (apt-get install iproute2)"
    probe = f"mkprobe{os.getpid()}"
    added = _ip("netns", "add", probe, check=False)
    if added.returncode != 0:
        return f"--network netns: `ip netns add` was refused: {added.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


# The commands chaos runs inside a node's namespace to cut and degrade the network
# (cluster/chaos/netns_faults.py), and the Debian package of each.
FAULT_TOOLS = {"nft": "nftables", "tc": "iproute2", "iptables": "iptables"}


def missing_fault_tools() -> list[str]:
    """The network-fault commands not on PATH (`up --network netns` itself needs only `ip`)."""
    return sorted(tool for tool in FAULT_TOOLS if shutil.which(tool) is None)


def network_faults_unavailable_reason() -> str | None:
    """Why chaos cannot cut or degrade a netns cluster's network here (None when it can):
    netns itself, then nft, tc and iptables (a machine without `make system-deps`)."""
    reason = netns_unavailable_reason()
    if reason is not None:
        return reason
    missing = missing_fault_tools()
    if not missing:
        return None
    packages = " ".join(sorted({FAULT_TOOLS[tool] for tool in missing}))
    return (
        f"network faults need {', '.join(f'`{tool}`' for tool in missing)}, not found on PATH "
        f"(apt-get install {packages}, or make system-deps)"
    )


@dataclass(frozen=True)
class NetnsPlan:
    """The names and addresses of one cluster's namespaces."""

    id: str
    subnet: ipaddress.IPv4Network

    @classmethod
    def for_directory(cls, directory: Path, subnet: str | None = None) -> NetnsPlan:
        ident = net_id(directory)
        if subnet is not None:
            return cls(ident, ipaddress.ip_network(subnet))  # type: ignore[arg-type]
        return cls(ident, _free_subnet(ident))

    @property
    def prefix(self) -> str:
        return f"mk{self.id}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def host_address(self) -> str:
        return str(self.subnet.network_address + HOST_INDEX)

    def node_address(self, index: int) -> str:
        return str(self.subnet.network_address + FIRST_NODE_INDEX + index)

    def namespace(self, node_name: str) -> str:
        return f"{self.prefix}-{node_name}"

    def veth_host(self, node_id: int) -> str:
        return _ifname(f"{self.prefix}h{node_id}")

    def veth_node(self, node_id: int) -> str:
        return _ifname(f"{self.prefix}n{node_id}")

    def exec_prefix(self, node_name: str) -> list[str]:
        """Run a command inside the node's namespace (`ip netns exec` execs it: same pid)."""
        return ["ip", "netns", "exec", self.namespace(node_name)]

    # -- create / remove ---------------------------------------------------------------------

    def create(self, nodes: list[tuple[str, int, str]]) -> None:
        """The bridge (host address on it) and, per (name, node_id, address), a namespace joined
        to the bridge by a veth pair. What an earlier run of this id left is removed first."""
        self.remove()
        length = self.subnet.prefixlen
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.host_address}/{length}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for name, node_id, address in nodes:
            ns, host_end, node_end = self.namespace(name), self.veth_host(node_id), \
                self.veth_node(node_id)
            _ip("netns", "add", ns)
            _ip("link", "add", host_end, "type", "veth", "peer", "name", node_end)
            _ip("link", "set", node_end, "netns", ns)
            _ip("link", "set", host_end, "master", self.bridge)
            _ip("link", "set", host_end, "up")
            _ip("-n", ns, "addr", "add", f"{address}/{length}", "dev", node_end)
            _ip("-n", ns, "link", "set", node_end, "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def remove(self) -> list[str]:
        """Delete every namespace and link carrying this id; returns what was removed."""
        removed = []
        for ns in self.namespaces():
            # Only our tooling starts processes in these namespaces (a chaos delayer a killed
            # run left behind): one still inside would keep the namespace alive after `del`.
            for pid in _ip("netns", "pids", ns, check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            # Deleting a namespace destroys the veth ends inside it, and so their host peers.
            if _ip("netns", "del", ns, check=False).returncode == 0:
                removed.append(ns)
        for link in self.links():
            if _ip("link", "del", link, check=False).returncode == 0:
                removed.append(link)
        return removed

    def namespaces(self) -> list[str]:
        out = _ip("netns", "list", check=False).stdout
        names = [line.split()[0] for line in out.splitlines() if line.strip()]
        return [n for n in names if n.startswith(f"{self.prefix}-")]

    def links(self) -> list[str]:
        out = _ip("-o", "link", "show", check=False).stdout
        names = []
        for line in out.splitlines():
            parts = line.split(":", 2)
            if len(parts) >= 2:
                names.append(parts[1].strip().split("@", 1)[0])
        return [n for n in names if n.startswith(self.prefix)]

    def leftovers(self) -> list[str]:
        """Namespaces and links of this id that exist now (empty after `down`)."""
        return self.namespaces() + self.links()


def _ifname(name: str) -> str:
    if len(name) > IFNAME_MAX:
        raise ValueError(f"interface name {name!r} is longer than {IFNAME_MAX} characters")
    return name


def _subnets_in_use() -> set[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = _ip("-o", "-4", "addr", "show", check=False).stdout
    used = set()
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            iface = ipaddress.ip_interface(fields[fields.index("inet") + 1])
            used.add(iface.network)
    return used


def _free_subnet(ident: str) -> ipaddress.IPv4Network:
    """The /24 this id hashes to, or the next one no interface of the host already uses (a
    bridge left by this same id is removed before it is created again, so it does not count)."""
    subnets = list(TEST_RANGE.subnets(new_prefix=24))  # type: ignore[union-attr]
    used = _subnets_in_use() if shutil.which("ip") else set()
    own = f"mk{ident}br"
    if shutil.which("ip"):
        own_out = _ip("-o", "-4", "addr", "show", "dev", own, check=False).stdout
        for line in own_out.splitlines():
            fields = line.split()
            used.discard(ipaddress.ip_interface(fields[fields.index("inet") + 1]).network)
    start = int(ident, 16) % (len(subnets) - 1) + 1
    for step in range(len(subnets) - 1):
        candidate = subnets[(start + step) % (len(subnets) - 1) + 1]
        if candidate not in used:
            return candidate  # type: ignore[return-value]
    raise NetnsError(f"every /24 of {TEST_RANGE} is in use on this host")
