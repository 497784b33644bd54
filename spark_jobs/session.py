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

import os

from pyspark import SparkConf
from pyspark.sql import SparkSession

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
#: ~15% of that pass on two cores (bench/spark.py).
LOCAL_DRIVER = {"spark.driver.memory": "4g", "spark.driver.extraJavaOptions": "-XX:+UseParallelGC"}


def build_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """A session with the jobs' defaults; explicit ``conf`` wins over them, spark-submit's too."""
    existing = SparkConf()
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not existing.contains("spark.master"):
        builder = builder.master("local[*]")
    settings = {k: v for k, v in DEFAULTS.items() if not existing.contains(k)}
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        settings.update({k: v for k, v in LOCAL_DRIVER.items() if not existing.contains(k)})
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_JOBS_LOG_LEVEL", "WARN"))
    return spark
