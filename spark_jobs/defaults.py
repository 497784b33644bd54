"""Job defaults shared by the jobs and ``rmqproxy report`` (no pyspark import here, so the click
command loads without Spark installed)."""

#: KLL sketch size for the percentiles (spark_jobs/transforms.py): rank error 0.27% (``rank_error``),
#: so p99 lies in p98.73..p99.27, and a group of at most 1024 values (a busy minute) is exact.
#: Larger k is more exact, and costs memory per sketch (up to ~3k doubles) and merge time: at 4096
#: (0.07%) a 10M-event run took 4-5 s longer (bench/spark.py).
DEFAULT_SKETCH_K = 1024


def rank_error(k: int) -> float:
    """Normalized rank error of a KLL sketch of size ``k`` for single quantiles at 99% confidence
    (DataSketches' published fit for KllDoublesSketch)."""
    return 2.296 / k**0.9723


#: The server's default ``shortPollingTimeMills``: the deadline of a held pull in short polling mode.
DEFAULT_SHORT_POLLING_MS = 1000
#: distribution/conf/logback_broker.xml (rocketmq-all-4.9.8) stamps stats.log with %d{...,GMT+8}.
DEFAULT_STATS_TIMEZONE = "+08:00"

#: Wake reasons the server writes (rmqproxy/core/hold.py); anything else counts as "other".
WAKES = ("none", "arrival", "timeout", "disconnect", "shutdown")

#: Measures whose distribution a cell keeps as a KLL sketch (hold over held pulls only,
#: overshoot over timeouts only: spark_jobs/transforms.py).
SKETCHED = ("total", "hold", "service", "overshoot")

#: A compacted event log's Parquet files under its folder (rmqproxy/observe/compaction.py writes
#: them; the jobs read them).
COMPACTED_GLOB = "date=*/hour=*/pulls-*.parquet"

#: The version of a rollup's cells (rmqproxy/observe/rollup.py): a report reads the rows of a
#: file whose rollup is of another version.
ROLLUP_VERSION = 1


def rollup_name(stem: str, sketch_k: int, short_polling_ms: int) -> str:
    """The file name of the rollup of the compacted file ``<stem>.parquet`` for these report
    options, beside it (not ``*.parquet``: a rollup is not a file of events)."""
    return f"{stem}.v{ROLLUP_VERSION}.k{sketch_k}.s{short_polling_ms}.cells"


#: ``--engine`` of the event report: auto merges rollups in the process when it can (see
#: ``hold_report.mergeable``), else runs Spark; spark and merge force one.
ENGINES = ("auto", "spark", "merge")
