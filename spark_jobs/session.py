"""The one place a SparkSession is built for the jobs (and the tests' shared session).

Settings the jobs rely on, each only a default that ``spark-submit --conf`` overrides:
- ``spark.sql.session.timeZone=UTC``: minute/hour windows and the ``date`` partition are UTC, as
  the server's hourly log files are (rmqproxy/holdlog.py names them by UTC hour);
- ``spark.sql.shuffle.partitions``: the summaries are small, so 200 shuffle partitions would be
  mostly scheduling; adaptive execution coalesces further;
- ``spark.ui.showConsoleProgress=true``: the stage progress bar on stderr is the progress display
  on long runs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from pyspark import SparkConf, SparkContext
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from spark_jobs import cds

DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "16",
    "spark.ui.showConsoleProgress": "true",
    # KLL sketch aggregates are object aggregates: keep hashing past 128 keys a task (one key per
    # cell) instead of falling back to sorting every row.
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "100000",
}

#: Only honoured when this process launches the JVM (``python -m``); under spark-submit the
#: launcher has already sized the driver from its own flags. The throughput collector: the job's
#: one pass allocates a sketch per cell and a string per field, and G1's concurrent work costs
#: ~15% of that pass on two cores (bench/spark.py). The class data sharing archive's flags
#: (``spark_jobs.cds``) join these JVM options.
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
LOCAL_DRIVER = {"spark.driver.memory": "4g", JAVA_OPTIONS: "-XX:+UseParallelGC"}


#: For queries over small inputs only (the summary tables, merged from cells): generating and
#: compiling code for each of their many short stages costs the driver more CPU than running the
#: plan interpreted (their heavy part, sketch merges, is library code either way).
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@contextlib.contextmanager
def settings(spark: SparkSession, values: dict[str, str]) -> Iterator[None]:
    """Run the body with these runtime SQL settings, then put back what was there before."""
    before = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def build_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """A session with the jobs' defaults; explicit ``conf`` wins over them, spark-submit's too."""
    existing = SparkConf()
    chosen = {k: v for k, v in DEFAULTS.items() if not existing.contains(k)}
    # JVM flags only reach a JVM this process starts (not spark-submit's, nor an existing gateway),
    # and ours only when neither spark-submit's defaults nor ``conf`` set the JVM options
    launching = "PYSPARK_GATEWAY_PORT" not in os.environ and SparkContext._gateway is None
    ours = launching and JAVA_OPTIONS not in (conf or {}) and not existing.contains(JAVA_OPTIONS)
    archive = cds.archive() if ours else cds.Archive()
    if launching:
        local = {**LOCAL_DRIVER, JAVA_OPTIONS: f"{LOCAL_DRIVER[JAVA_OPTIONS]} {archive.flags}".strip()}
        chosen.update({k: v for k, v in local.items() if not existing.contains(k)})
    chosen.update(conf or {})
    try:
        spark = _builder(app_name, master, existing, chosen).getOrCreate()
    except PySparkRuntimeError:
        if not archive.flags:
            raise
        archive.discard()  # a JVM that cannot start with the archive (a damaged file): start without
        archive = cds.Archive()
        chosen[JAVA_OPTIONS] = LOCAL_DRIVER[JAVA_OPTIONS]
        spark = _builder(app_name, master, existing, chosen).getOrCreate()
    archive.started(getattr(SparkContext._gateway, "proc", None))
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_JOBS_LOG_LEVEL", "WARN"))
    return spark


def _builder(app_name: str, master: str | None, existing: SparkConf, chosen: dict[str, str]) -> SparkSession.Builder:
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not existing.contains("spark.master"):
        builder = builder.master("local[*]")
    for key, value in chosen.items():
        builder = builder.config(key, value)
    return builder
