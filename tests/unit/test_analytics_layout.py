"""analytics/ split by what it does (issue 33): read/ <- engine/ <- rules/ <- report/ <- the two
entry points (audit.py, baseline.py), and every rule family's pure form beside its Spark form.
A pure form imports no Spark, no Arrow and nothing that does I/O or reads clocks, so the
baseline, the simulators and unit tests can call it without a JVM."""

from pathlib import Path

import pytest

from tests.unit.test_layering import _all_imports as _imports  # modules and the names taken

ROOT = Path(__file__).resolve().parents[2]
ANALYTICS = ROOT / "analytics"
# sub-package -> the analytics sub-packages and modules it must not import
LOWER_THAN = {
    "read": {"engine", "rules", "report", "audit", "baseline", "generate"},
    "engine": {"rules", "report", "audit", "baseline", "generate"},
    "rules": {"report", "audit", "baseline", "generate"},
    "report": {"engine", "audit", "baseline", "generate"},
}
NOT_IN_PURE = {"pyspark", "pyarrow", "pandas", "os", "time", "random", "socket", "asyncio",
               "subprocess", "shutil", "tempfile", "threading", "multiprocessing"}
FAMILIES = sorted(p.parent for p in (ANALYTICS / "rules").glob("*/pure.py"))


@pytest.mark.parametrize("package", sorted(LOWER_THAN))
def test_analytics_imports_go_one_way(package: str) -> None:
    for path in sorted((ANALYTICS / package).rglob("*.py")):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "analytics" and len(parts) > 1:
                assert parts[1] not in LOWER_THAN[package], (
                    f"{path.relative_to(ROOT)} imports {name}: analytics/{package} sits below it")


def test_every_rule_family_has_its_pure_and_spark_forms_side_by_side() -> None:
    assert {f.name for f in FAMILIES} >= {"quorum", "partitions", "replication", "cleanup",
                                          "groups"}
    packages = {p.parent for p in (ANALYTICS / "rules").glob("*/__init__.py")}
    assert packages == set(FAMILIES), f"a rule family without pure.py: {packages - set(FAMILIES)}"
    for family in FAMILIES:
        assert (family / "spark.py").exists(), f"{family.relative_to(ROOT)} has no spark.py"


@pytest.mark.parametrize("path", [*(f / "pure.py" for f in FAMILIES),
                                  ANALYTICS / "rules" / "result.py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_pure_rule_forms_need_no_spark_and_do_no_io(path: Path) -> None:
    bad = [n for n in _imports(path) if n.split(".")[0] in NOT_IN_PURE
           or n.startswith(("analytics.engine", "analytics.read.datasource.Arrow"))
           or n.endswith(".spark")]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: a pure form takes rows, not files"


def test_the_spark_executors_path_is_the_repository_root() -> None:
    """Executors import the audit's modules from PROJECT_ROOT (spark.executorEnv.PYTHONPATH):
    a module moved one package deeper must still name the repository, not analytics/."""
    pytest.importorskip("pyspark", reason="the spark extra")
    from analytics.engine import spark_session

    assert (spark_session.PROJECT_ROOT / "pyproject.toml").is_file()
    assert (spark_session.PROJECT_ROOT / "analytics" / "__init__.py").is_file()
