"""The SparkSession the audit runs in: any master (`local[N]`, `spark://host:port`), the
project's virtualenv Python on the executors, no UI, few shuffle partitions, quiet logs."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from analytics.engine.data_sources import (
    AckJournalDataSource,
    BrokerJournalDataSource,
    ConsumerJournalDataSource,
    MetadataBatchDataSource,
    MetadataLogDataSource,
    PartitionLogDataSource,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # the repository: executors import from it
DEFAULT_MASTER = "local[2]"
# In local mode the executors live in the driver's JVM: Spark's 1g default makes the cached
# rows of a million-record audit spill to disk. Still a bound: no data is collected to the
# driver's Python side. Read at JVM start only (an already running session keeps its own).
DEFAULT_DRIVER_MEMORY = "4g"
# A small input (a demo cluster's logs: thousands of records) costs Spark mostly fixed work:
# JIT-compiling Spark itself and generating code for each query. C1 alone (no C2 tier)
# compiles much less and is fast enough for so few rows; whole-stage codegen (a Janino
# compile per query stage) is off, the interpreted operators win below ~1e5 rows; one shuffle
# partition per core. Read at JVM start only, like the memory. Adaptive execution is off too:
# it runs every shuffle stage of a query as a job of its own, to re-plan from its statistics,
# which for a few thousand rows only adds jobs (demo cluster: 51 jobs -> 26, 20.2 -> 17.2 s).
# Expression code generation is off as well (Spark's internal `codegen.factoryMode`:
# NO_CODEGEN takes the interpreted projections and predicates that FALLBACK keeps for
# expressions Janino cannot compile): each projection, predicate and ordering was a Janino
# compile of its own. Demo audit, five interleaved pairs: 9.8-14.5 s -> 7.9-11.1 s, faster in
# every pair, audit.json identical (BENCHMARKS.md, session 9); no gain measured at 1M.
SMALL_INPUT_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss4m"
LIGHT_JVM_CONF = {"spark.sql.codegen.wholeStage": "false",
                  "spark.sql.adaptive.enabled": "false"}
SMALL_INPUT_CONF = {**LIGHT_JVM_CONF, "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
# Up to a few GiB of input (a million records) the JVM's share of the audit is scans and a few
# aggregations (the replay runs in Python): C1 alone and the serial collector save the C2
# compiler's and G1's threads, about 15% of the audit's CPU at 1M records on 2 cores (91 -> 77
# s, bench audit). Past that the JVM's loops run long enough for C2 to pay.
LIGHT_JVM_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Starting Spark's JVM loads and verifies ~20k classes: with a class-data archive of them
# (Java's dynamic CDS: written at the driver JVM's exit by the first session on this machine,
# mapped by the next ones) start-up takes about 40% less CPU here. The archive is per user,
# pyspark version, Python environment and Java; one a JVM cannot use (another classpath) is
# ignored by the JVM. JVM logging is limited to errors so that a CDS warning never reaches
# the CLI's stdout.
CDS_JAVA_LOG = "-Xlog:disable -Xlog:all=error:stderr"
# The JVM writes the archive in its last seconds, after the Python process that started it has
# gone: an archive untouched this long is whole.
CDS_SETTLED_S = 30.0


def _cds_archive() -> Path:
    import hashlib

    import pyspark

    java = os.path.realpath(shutil.which("java") or "java")
    key = hashlib.sha1(f"{pyspark.__version__}|{sys.prefix}|{java}".encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"minikraft-spark-{os.getuid()}-{key}.jsa"


def cds_java_options() -> str:
    """Use the class-data archive if there is one; else have this JVM write one at its exit
    (to a file of its own, renamed into place by a later start: two audits never write one
    file, and a half-written archive is never used)."""
    archive = _cds_archive()
    if not archive.exists():
        for written in archive.parent.glob(archive.name + ".*"):
            pid = written.suffix[1:]
            try:
                settled = time.time() - written.stat().st_mtime > CDS_SETTLED_S
            except OSError:
                continue
            if pid.isdigit() and not Path(f"/proc/{pid}").exists() and settled:
                os.replace(written, archive)  # its JVM has exited and finished writing
                break
    if archive.exists():
        return f"-XX:SharedArchiveFile={archive} {CDS_JAVA_LOG}"
    return f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()} {CDS_JAVA_LOG}"
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
    light_jvm: bool = False,
    data_sources: bool = True,
) -> SparkSession:
    """A session with the minikraft-* data sources registered (data_sources=False: without;
    registering the six costs 1.6 s of a demo-size audit, which reads staged Parquet);
    light_jvm: C1 and the serial collector (LIGHT_JVM_JAVA_OPTIONS, LIGHT_JVM_CONF);
    small_input: tuned for a few thousand rows (SMALL_INPUT_JAVA_OPTIONS, SMALL_INPUT_CONF)."""
    # Executors must run the same interpreter and see the same packages as the driver.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_options = f"-Dlog4j2.configurationFile=file:{_log4j2_config()}"
    conf = dict(extra_conf or {})
    if small_input or light_jvm:
        java_options += f" {SMALL_INPUT_JAVA_OPTIONS if small_input else LIGHT_JVM_JAVA_OPTIONS}"
        conf = {**(SMALL_INPUT_CONF if small_input else LIGHT_JVM_CONF), **conf}
    # The archive is the driver's alone: an executor JVM (a standalone cluster) never writes it.
    driver_java_options = f"{java_options} {cds_java_options()}"
    python_path = os.pathsep.join(
        p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    conf = {"spark.sql.adaptive.enabled": "true", **conf}
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", python_path)
        .config("spark.driver.extraJavaOptions", driver_java_options)
        .config("spark.executor.extraJavaOptions", java_options)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if data_sources:
        register_data_sources(spark)
    return spark


def register_data_sources(spark: SparkSession) -> None:
    for source in (MetadataLogDataSource, MetadataBatchDataSource, BrokerJournalDataSource, AckJournalDataSource,
                   ConsumerJournalDataSource, PartitionLogDataSource):
        spark.dataSource.register(source)


# -- Python in the driver for a small input ---------------------------------------------------
# Each rule that runs plain Python over rows (the partition replay, rules 20, 22, 23) does it in
# Python workers: a worker's start (a fork of Spark's daemon, importing pyspark, pyarrow and the
# rules' modules) costs seconds of CPU, more than a demo cluster's few thousand rows take. With
# this session setting "true" (analytics.audit sets it for a small input) the same functions
# run in the driver's process over the rows collected as Arrow, and their output goes back to
# Spark as a DataFrame: the same code and the same output, without a worker.
PYTHON_IN_DRIVER_CONF = "minikraft.audit.pythonInDriver"


def python_in_driver(spark: SparkSession) -> bool:
    return spark.conf.get(PYTHON_IN_DRIVER_CONF, "false") == "true"


def _import_modules(modules: list[str], batches: Iterator[Any]) -> Iterator[Any]:
    import importlib

    for name in modules:
        importlib.import_module(name)
    yield from batches


def warm_python_workers(spark: SparkSession, modules: list[str]) -> threading.Thread:
    """Start Spark's Python workers (one per core) and import `modules` in them, from a
    thread, while the driver stages the input: the first Python task of the audit then finds
    its workers up (their start is seconds of a first mapInArrow job). Join the thread before
    stopping the session; a failure here only means a cold start later."""
    cores = spark.sparkContext.defaultParallelism

    def run() -> None:
        try:
            spark.range(0, cores, 1, cores).mapInArrow(
                functools.partial(_import_modules, modules), "id long").count()
        except Exception as exc:  # only a cold start later: the audit's jobs report failures
            logging.getLogger("minikraft.audit").debug("warming Python workers: %s", exc)

    thread = threading.Thread(target=run, name="warm-python-workers", daemon=True)
    thread.start()
    return thread


def _from_arrow(spark: SparkSession, batches: list[Any], schema: StructType) -> DataFrame:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    table = pa.Table.from_batches([b.cast(arrow_schema) if b.schema != arrow_schema else b
                                   for b in batches], schema=arrow_schema)
    # One chunk: pyspark 4.3's createDataFrame(pyarrow.Table) drops every row after a table's
    # first empty chunk (chunks [3, 0, 4] give 3 rows), and fn may yield an empty batch.
    return spark.createDataFrame(table.combine_chunks(), schema=schema)


def cogroup_in_arrow(left: DataFrame, right: DataFrame, keys: list[str],
                     fn: Callable[[Any, Any], Any], schema: StructType | str) -> DataFrame:
    """left.groupBy(keys).cogroup(right.groupBy(keys)).applyInArrow(fn, schema), or the same
    calls (one per key present on either side) in the driver (python_in_driver)."""
    spark = left.sparkSession
    if not python_in_driver(spark):
        return left.groupBy(*keys).cogroup(right.groupBy(*keys)).applyInArrow(fn, schema=schema)
    import pyarrow.compute as pc

    tables = left.toArrow(), right.toArrow()
    found = sorted({tuple(row[k] for k in keys) for table in tables
                    for row in table.select(keys).to_pylist()}, key=repr)
    out: list[Any] = []
    for key in found:
        parts = []
        for table in tables:
            mask = None
            for name, value in zip(keys, key, strict=True):
                test = pc.is_null(table[name]) if value is None else pc.equal(table[name], value)
                mask = test if mask is None else pc.and_(mask, test)
            parts.append(table.filter(mask))
        out += fn(*parts).to_batches()
    return _from_arrow(spark, out, _struct(spark, schema))


def _struct(spark: SparkSession, schema: StructType | str) -> StructType:
    if isinstance(schema, StructType):
        return schema
    return spark.createDataFrame([], schema).schema
