"""ARCHITECTURE.md: nothing in a core/ package does I/O, reads clocks or draws randomness,
and imports go one way (kafkawire <- raft <- controller <- metadata <- broker <- cluster, the
tools). Issue 18: every package is covered; no node runtime imports another (the controller's
and the broker's share metadata/, and both embed raft.runtime, Raft's own runtime, as Kafka's
nodes embed its raft module); no import cycles between modules; bench code only in
cluster/bench."""

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_IN_CORE = {"asyncio", "os", "time", "random", "socket", "aiohttp", "uvloop", "subprocess"}
# package -> top-level packages of ours it must not import
_OURS = {"cluster", "storage", "raft", "controller", "metadata", "broker", "analytics"}
_NODE_RUNTIMES = {"raft.runtime", "controller.runtime", "broker.runtime"}
LAYERS = {
    # The foundation (the wire layer) imports nothing of ours.
    "kafkawire": _OURS,
    # Storage (record batches, segments, the segmented log) sits on the wire layer, under raft
    # and the broker's partitions, as Kafka's storage module does.
    "storage": _OURS - {"storage"},
    # The node packages import the foundation and the ones below them, never the tools.
    "raft": {"controller", "metadata", "broker", "cluster", "analytics"},
    "controller": {"broker", "cluster", "analytics"},
    # Kafka's image module (records, PartitionRegistration, MetadataImage/Delta, the loader,
    # publishers, describe answers) is pure and sits under the controller and the broker: it
    # never imports either (issue 33), and both node kinds read it.
    "metadata": {"controller", "broker", "cluster", "analytics", "raft.runtime", "storage.runtime"},
    # The broker and the controller are siblings on metadata/ (the vocabulary both read):
    # neither imports the other (issue 33: the broker read BrokerState from controller.core).
    "broker": {"controller", "cluster", "analytics"},
    # The audit decodes with the code that wrote (the foundation, raft.core, metadata, the rule
    # checkers in controller.core) and judges the broker's HWM with the broker core's own rule
    # (broker.core.high_watermark); it runs no node (ARCHITECTURE.md).
    "analytics": {"cluster", "broker.runtime", *_NODE_RUNTIMES},
    # The tools on top: the launcher and CLI start nodes and run the audit (nothing above).
    "cluster": set(),
}
# Runtime package -> the runtime packages it may import: none, but Raft's runtime (the
# metadata log, its storage helpers), which both node kinds embed.
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
    """The packages the wheel ships and mypy checks are the ones LAYERS rules."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        tool = tomllib.load(handle)["tool"]
    for packages in (tool["hatch"]["build"]["targets"]["wheel"]["packages"], tool["mypy"]["packages"]):
        assert set(packages) == set(LAYERS), f"add {set(packages) ^ set(LAYERS)} to LAYERS"
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
    """A core sits below every runtime: it imports cores, the wire and metadata/ (Kafka's
    image module, pure: the records, PartitionRegistration and the image every core reads)."""
    for name in _all_imports(path):
        top = name.split(".")[0]
        if top in _OURS and top != "metadata":
            assert name.split(".")[1:2] == ["core"], (
                f"{path.relative_to(ROOT)} imports {name}: a core imports only cores"
            )



def _all_imports(path: Path) -> Iterator[str]:
    """Every import of the module, in functions and under TYPE_CHECKING too: a lazy or
    type-only import still ties the two modules' designs together."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    modules = {
        _module_name(path): path
        for package in sorted(LAYERS)
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


_NODE_PACKAGES = ("kafkawire", "raft", "controller", "metadata", "broker", "analytics")


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


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_imports_go_one_way(package: str) -> None:
    for path in _files(f"{package}/**/*.py"):
        for name in _imports(path):
            for banned in LAYERS[package]:
                assert not (name == banned or name.startswith(banned + ".")), (
                    f"{path.relative_to(ROOT)} imports {name}, against the layering"
                )


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
