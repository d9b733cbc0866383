"""One SparkSession for every Spark test (starting a JVM costs seconds): local[2], two shuffle
partitions, no UI. Tests here are marked `spark` and skipped when pyspark or Java is missing."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark")

if shutil.which("java") is None:
    pytest.skip("Java is needed for the Spark tests", allow_module_level=True)

from pyspark.sql import SparkSession  # noqa: E402

from analytics.engine.spark_session import build_session  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("local[2]", app_name="minikraft-tests", shuffle_partitions=2)
    yield session
    session.stop()
