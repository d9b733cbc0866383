"""ARCHITECTURE.md: nothing in a core/ package does I/O, reads clocks or draws randomness,
and imports go one way: kafkawire <- storage <- raft <- metadata <- controller, broker <-
cluster (the tools), with the audit (analytics) reading the wire, storage, raft's control
records, metadata and the cores' rule checkers. Issue 18: every package is covered; no node
runtime imports another (both node kinds embed raft.runtime, Raft's own runtime, and
storage.runtime under it, as Kafka's nodes embed its raft and storage modules); no import
cycles between modules. Issue 33: no exceptions, no core imports another package's core but the
shared ones (metadata, storage, kafkawire), and no cycles between packages either (a node
package's core and runtime, each of cluster's subpackages)."""

import ast
import functools
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_IN_CORE = {"asyncio", "os", "time", "random", "socket", "aiohttp", "uvloop", "subprocess"}
# The wall clock lives in the wire layer for the runtimes; a core takes now_ms as an argument.
FORBIDDEN_IN_CORE_OF_OURS = {"kafkawire.clock"}
_OURS = {"kafkawire", "storage", "raft", "metadata", "controller", "broker", "analytics", "cluster"}
# package -> the packages (or subpackages) of ours it may import: the layers below it.
MAY_IMPORT = {
    # The foundation (the wire layer) imports nothing of ours.
    "kafkawire": set(),
    # Storage (record batches, segments, the segmented log) sits on the wire layer, under raft
    # and the broker's partitions, as Kafka's storage module does.
    "storage": {"kafkawire"},
    "raft": {"kafkawire", "storage"},
    # Kafka's image module, pure: records, PartitionRegistration, the image and its delta (with
    # raft's control records in the metadata log).
    "metadata": {"kafkawire", "storage", "raft.core"},
    # The two node kinds side by side: neither imports the other.
    "controller": {"kafkawire", "storage", "raft", "metadata"},
    "broker": {"kafkawire", "storage", "raft", "metadata"},
    # The audit decodes with the code that wrote and judges with the cores' rule checkers; it
    # runs no node (ARCHITECTURE.md).
    "analytics": {"kafkawire", "storage", "raft.core", "metadata", "controller.core", "broker.core"},
    # The tools on top: the launcher and CLI start nodes and run the audit.
    "cluster": {"kafkawire", "storage", "raft", "metadata", "controller", "broker", "analytics"},
}
# What a core may import of another package: the shared vocabulary, never a decision-maker's core.
CORE_MAY_IMPORT = {"kafkawire", "storage.core", "metadata"}
# Runtime package -> the runtime packages it may import: none, but Raft's runtime (the
# metadata log) and storage's (files, segments, fsync), which both node kinds embed.
RUNTIME_MAY_IMPORT = {
    "storage.runtime": set(),
    "raft.runtime": {"storage.runtime"},
    "controller.runtime": {"raft.runtime", "storage.runtime"},
    "broker.runtime": {"raft.runtime", "storage.runtime"},
}


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _files(pattern: str) -> list[Path]:
    return sorted(ROOT.glob(pattern))


@pytest.mark.parametrize("path", _files("*/core/**/*.py"), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_is_pure(path: Path) -> None:
    bad = [n for n in _imports(path) if n.split(".")[0] in FORBIDDEN_IN_CORE]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: pass time/I/O in from the runtime"


@pytest.mark.parametrize("path", _files("metadata/**/*.py"), ids=lambda p: str(p.relative_to(ROOT)))
def test_shared_metadata_is_pure(path: Path) -> None:
    """metadata/ is a core shared by both node kinds: the runtimes pass Raft and time in."""
    bad = [n for n in _imports(path) if n.split(".")[0] in FORBIDDEN_IN_CORE]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: pass time/I/O in from the runtime"


def test_there_are_core_modules_to_check() -> None:
    assert len(_files("*/core/**/*.py")) >= 3


def test_every_package_is_layered() -> None:
    """The packages the wheel ships and mypy checks are the ones MAY_IMPORT rules."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        tool = tomllib.load(handle)["tool"]
    for packages in (tool["hatch"]["build"]["targets"]["wheel"]["packages"], tool["mypy"]["packages"]):
        assert set(packages) == set(MAY_IMPORT), f"add {set(packages) ^ set(MAY_IMPORT)} to MAY_IMPORT"
    assert set(MAY_IMPORT) == _OURS
    runtimes = {str(p.parent.relative_to(ROOT)).replace("/", ".") for p in _files("*/runtime/__init__.py")}
    assert runtimes == set(RUNTIME_MAY_IMPORT), f"add {runtimes ^ set(RUNTIME_MAY_IMPORT)}"


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("runtime", sorted(RUNTIME_MAY_IMPORT))
def test_no_runtime_imports_another(runtime: str) -> None:
    others = {r for r in RUNTIME_MAY_IMPORT if r != runtime} - RUNTIME_MAY_IMPORT[runtime]
    for path in _files(f"{runtime.replace('.', '/')}/**/*.py"):
        for name in _all_imports(path):
            bad = [other for other in others if _within(name, other)]
            assert not bad, f"{path.relative_to(ROOT)} imports {name}: share it in metadata/"


@pytest.mark.parametrize("path", _files("*/core/**/*.py"), ids=lambda p: str(p.relative_to(ROOT)))
def test_cores_import_only_cores_and_the_wire(path: Path) -> None:
    """A core sits below every runtime: it imports its own core and the shared vocabulary (the
    wire layer, storage's core, metadata/: Kafka's image module, pure), never another package's
    core (its decisions are that package's), a runtime, or the clock (now_ms is an argument)."""
    relative = path.relative_to(ROOT)
    own = f"{relative.parts[0]}.core"
    for name in _all_imports(path):
        if _unit(name) is None:
            continue
        assert not any(_within(name, clock) for clock in FORBIDDEN_IN_CORE_OF_OURS), (
            f"{relative} imports {name}: a core takes the time as an argument"
        )
        assert _within(name, own) or any(_within(name, shared) for shared in CORE_MAY_IMPORT), (
            f"{relative} imports {name}: a core imports its own core, {sorted(CORE_MAY_IMPORT)}"
        )


def _all_imports(path: Path) -> tuple[str, ...]:
    """Every import of the module, in functions and under TYPE_CHECKING too: a lazy or
    type-only import still ties the two modules' designs together. Parsed once per file: the
    graph tests read the whole tree."""
    return _parsed_imports(path)


@functools.cache
def _parsed_imports(path: Path) -> tuple[str, ...]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return tuple(names)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    modules = {
        _module_name(path): path
        for package in sorted(MAY_IMPORT)
        for path in _files(f"{package}/**/*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {target for target in _all_imports(path) if target in modules}
        graph[name] = targets - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [{"a", "b", "c"}]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_between_modules() -> None:
    graph = _import_graph()
    assert len(graph) > 100  # the whole tree, not a corner of it
    cycles = _cycles(graph)
    assert not cycles, f"import cycles: {[sorted(c) for c in cycles]}"


_NODE_PACKAGES = ("kafkawire", "storage", "raft", "controller", "metadata", "broker", "analytics")


def test_bench_code_lives_in_cluster_bench() -> None:
    """Benchmarks and load generators are tools: not in a node package, and within cluster
    only the bench package and the CLI that runs it name cluster.bench."""
    for package in _NODE_PACKAGES:
        for path in _files(f"{package}/**/*.py"):
            assert "bench" not in path.name and "workload" not in path.name, (
                f"{path.relative_to(ROOT)}: bench code goes under cluster/bench"
            )
            text = path.read_text()
            assert "/v1/bench" not in text, f"{path.relative_to(ROOT)} serves a bench route"
    for path in _files("cluster/**/*.py"):
        relative = path.relative_to(ROOT).parts
        if relative[1] in ("bench", "cli"):
            continue
        bad = [n for n in _all_imports(path) if _within(n, "cluster.bench")]
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def _unit(name: str) -> str | None:
    """The package a module belongs to in the package graph: a node package's core or runtime,
    one of cluster's subpackages or top-level modules (the tools are siblings), else its
    top-level package (None: not ours)."""
    parts = name.split(".")
    if parts[0] not in _OURS:
        return None
    if len(parts) > 1 and (parts[1] in ("core", "runtime") or parts[0] == "cluster"):
        return ".".join(parts[:2])
    return parts[0]


def _against_the_order(package: str) -> set[tuple[str, str]]:
    """(module file, package it imports) for every import `package` may not make."""
    found = set()
    for path in _files(f"{package}/**/*.py"):
        for name in _all_imports(path):
            unit = _unit(name)
            if unit is None or unit.split(".")[0] == package:
                continue
            if not any(_within(name, allowed) for allowed in MAY_IMPORT[package]):
                found.add((str(path.relative_to(ROOT)), unit))
    return found


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_imports_go_one_way(package: str) -> None:
    bad = _against_the_order(package)
    assert not bad, f"against the layering ({package} may import {sorted(MAY_IMPORT[package])}): {sorted(bad)}"


def test_the_order_is_enforced() -> None:
    """The checker sees an import against the order (a broker module naming the controller)."""
    assert _unit("controller.core.alter_partition") == "controller.core"
    assert _unit("cluster.client.bootstrap") == "cluster.client"
    assert _unit("cluster.output.emit_table") == "cluster.output"
    assert not any(_within("controller.core.x", a) for a in MAY_IMPORT["broker"])
    assert any(_within("metadata.records", a) for a in MAY_IMPORT["broker"])


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for package in sorted(MAY_IMPORT):
        for path in _files(f"{package}/**/*.py"):
            unit = _unit(_module_name(path))
            assert unit is not None
            targets = graph.setdefault(unit, set())
            targets.update(u for n in _all_imports(path) if (u := _unit(n)) not in (None, unit))
    return graph


def test_no_import_cycles_between_packages() -> None:
    """Package level: a node package's core and runtime, cluster's subpackages (cli, client,
    launch, chaos, bench, console, apache_kafka) and the top-level packages."""
    graph = _package_graph()
    assert {"cluster.cli", "cluster.client", "cluster.launch", "storage.core"} <= set(graph)
    cycles = _cycles(graph)
    assert not cycles, f"package cycles: {[sorted(c) for c in cycles]}"


def test_the_cli_is_a_leaf() -> None:
    """cluster/cli is the `minikraft` command only: the client code it shares with chaos, the
    launcher, the console and the benchmarks is cluster/client."""
    for path in (path for package in sorted(_OURS) for path in _files(f"{package}/**/*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[:2] == ("cluster", "cli"):
            continue
        bad = [n for n in _all_imports(path) if _within(n, "cluster.cli")]
        assert not bad, f"{relative} imports {bad}: share it in cluster/client"


# Issue 18: no ambient state in a core. A ContextVar or a thread-local lets a runtime change a
# core's decision without passing it in (the old RECOVERY_MANAGER_ACTIVE); policy is a value
# (controller.core.election_policy.ElectionPolicy) passed as an argument.
AMBIENT_STATE_MODULES = {"contextvars", "threading", "_thread"}


@pytest.mark.parametrize("path", _files("*/core/**/*.py"), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_has_no_ambient_state(path: Path) -> None:
    bad = [n for n in _imports(path) if n.split(".")[0] in AMBIENT_STATE_MODULES]
    assert not bad, (
        f"{path.relative_to(ROOT)} imports {bad}: pass policy in as a value, not ambient state"
    )


def test_ambient_state_check_catches_a_contextvar(tmp_path: Path) -> None:
    core = tmp_path / "core.py"
    core.write_text("from contextvars import ContextVar\nimport threading\n")
    found = [n for n in _imports(core) if n.split(".")[0] in AMBIENT_STATE_MODULES]
    assert found == ["contextvars", "threading"]
