"""ARCHITECTURE.md: nothing in a core/ package does I/O, reads clocks or draws randomness,
and imports go one way (kafkawire <- raft <- controller <- broker <- cluster, the tools)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_IN_CORE = {"asyncio", "os", "time", "random", "socket", "aiohttp", "uvloop", "subprocess"}
# package -> top-level packages of ours it must not import
_OURS = {"cluster", "raft", "controller", "broker", "analytics"}
LAYERS = {
    # The foundation (the wire layer) imports nothing of ours.
    "kafkawire": _OURS,
    # The node packages import the foundation and the ones below them, never the tools.
    "raft": {"controller", "broker", "cluster", "analytics"},
    "controller": {"broker", "cluster", "analytics"},
    "broker": {"cluster", "analytics"},
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


def test_there_are_core_modules_to_check() -> None:
    assert len(_files("*/core/**/*.py")) >= 3


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
