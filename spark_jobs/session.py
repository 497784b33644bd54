"""The one place a SparkSession is built for the jobs (and the tests' shared session).

Settings the jobs rely on, each only a default that ``spark-submit --conf`` overrides:
- ``spark.sql.session.timeZone=UTC``: minute/hour windows and the ``date`` partition are UTC, as
  the server's hourly log files are (rmqproxy/observe/pull_events.py names them by UTC hour);
- ``spark.sql.shuffle.partitions``: the summaries are small, so 200 shuffle partitions would be
  mostly scheduling; adaptive execution coalesces further;
- ``spark.ui.showConsoleProgress=true``: the stage progress bar on stderr is the progress display
  on long runs;
- ``spark.sql.sources.parallelPartitionDiscovery.threshold``: inputs are listed in the driver up
  to 512 paths, not in a Spark job past 32.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TypeVar

from pyspark import SparkConf, SparkContext
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from spark_jobs import cds

T = TypeVar("T")
_tags = itertools.count(1)

DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "16",
    "spark.ui.showConsoleProgress": "true",
    # KLL sketch aggregates are object aggregates: keep hashing past 128 keys a task (one key per
    # cell) instead of falling back to sorting every row.
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "100000",
    # An event log is a file an hour (three days kept: 72), each compacted one with a rollup:
    # past 32 paths Spark lists them in a job of its own, a second or two of scheduling where
    # the driver lists a few hundred files in milliseconds.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "512",
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


def speculate(spark: SparkSession, action: Callable[[], T], keep: Future[bool]) -> T | None:
    """Run ``action`` (Spark jobs, from this thread) while ``keep`` is being decided; its result,
    or None once ``keep`` comes out False, which cancels the action's jobs at once. For work that
    is only valid if a check holds and that need not wait for it: the check's time overlaps the
    work instead of preceding it. An exception of ``keep`` is raised."""
    sc = spark.sparkContext
    tag = f"rmqproxy-speculative-{os.getpid()}-{next(_tags)}"
    vetoed = threading.Event()
    result = None

    def decided(check: Future[bool]) -> None:
        if check.exception() is not None or not check.result():
            vetoed.set()
            sc.cancelJobsWithTag(tag)

    sc.addJobTag(tag)
    try:
        keep.add_done_callback(decided)
        if not vetoed.is_set():
            try:
                result = action()
            except Exception:
                if not vetoed.is_set():
                    raise
    finally:
        sc.removeJobTag(tag)
    return result if keep.result() else None
