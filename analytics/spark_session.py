"""The SparkSession the audit runs in: any master (`local[N]`, `spark://host:port`), the
project's virtualenv Python on the executors, no UI, few shuffle partitions, quiet logs."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from analytics.broker_inputs import (
    AckJournalDataSource,
    BrokerJournalDataSource,
    PartitionLogDataSource,
)
from analytics.datasource import MetadataBatchDataSource, MetadataLogDataSource

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MASTER = "local[2]"
# In local mode the executors live in the driver's JVM: Spark's 1g default makes the cached
# rows of a million-record audit spill to disk. Still a bound: no data is collected to the
# driver's Python side. Read at JVM start only (an already running session keeps its own).
DEFAULT_DRIVER_MEMORY = "4g"
# A small input (a demo cluster's logs: thousands of records) costs Spark mostly fixed work:
# JIT-compiling Spark itself and generating code for each query. C1 alone (no C2 tier)
# compiles much less and is fast enough for so few rows; whole-stage codegen (a Janino
# compile per query stage) is off, the interpreted operators win below ~1e5 rows; one shuffle
# partition per core. Read at JVM start only, like the memory.
SMALL_INPUT_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss4m"
SMALL_INPUT_CONF = {"spark.sql.codegen.wholeStage": "false"}
# Spark's INFO/WARN chatter would drown the CLI's own output on stderr; errors still show.
_LOG4J2_PROPERTIES = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _log4j2_config() -> Path:
    path = Path(tempfile.gettempdir()) / f"minikraft-audit-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2_PROPERTIES:
        path.write_text(_LOG4J2_PROPERTIES)
    return path


def build_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "minikraft-audit",
    shuffle_partitions: int = 8,
    extra_conf: dict[str, str] | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    small_input: bool = False,
) -> SparkSession:
    """A session with the minikraft-metadata data source registered; small_input: tuned for
    a few thousand rows (SMALL_INPUT_JAVA_OPTIONS, SMALL_INPUT_CONF)."""
    # Executors must run the same interpreter and see the same packages as the driver.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_options = f"-Dlog4j2.configurationFile=file:{_log4j2_config()}"
    conf = dict(extra_conf or {})
    if small_input:
        java_options += " " + SMALL_INPUT_JAVA_OPTIONS
        conf = {**SMALL_INPUT_CONF, **conf}
    python_path = os.pathsep.join(
        p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", python_path)
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.executor.extraJavaOptions", java_options)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_sources(spark)
    return spark


def register_data_sources(spark: SparkSession) -> None:
    for source in (MetadataLogDataSource, MetadataBatchDataSource, BrokerJournalDataSource, AckJournalDataSource,
                   PartitionLogDataSource):
        spark.dataSource.register(source)
