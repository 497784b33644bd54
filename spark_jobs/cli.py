"""``rmqproxy report``: the Spark jobs behind one click command (registered by rmqproxy.cli).

It only translates options into the jobs' own argument lists, so ``python -m
spark_jobs.hold_report``, ``spark-submit spark_jobs/hold_report.py`` and ``rmqproxy report`` take
the same flags and run the same code. pyspark is imported only when the command runs.
"""

from __future__ import annotations

import click

from .defaults import DEFAULT_SHORT_POLLING_MS, DEFAULT_SKETCH_K, DEFAULT_STATS_TIMEZONE, ENGINES


@click.command("report", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-i", "--input", "inputs", multiple=True, required=True,
              help="event log (or stats.log) file, directory, glob or Hadoop URI; repeatable; .gz is read as gzip")
@click.option("-o", "--output", required=True, help="output directory or URI (replaced)")
@click.option("--master", help="Spark master, e.g. local[2] or spark://host:7077 (default local[*])")
@click.option("--source", type=click.Choice(["events", "stats-log"]), default="events", show_default=True,
              help="events: rmqproxy pull/hold event logs; stats-log: an Apache RocketMQ broker's stats.log")
@click.option("--short-polling-ms", type=int, default=DEFAULT_SHORT_POLLING_MS, show_default=True,
              help="events: the broker's shortPollingTimeMills, for short-mode timeout overshoot")
@click.option("--sketch-k", type=click.IntRange(8, 65535), default=DEFAULT_SKETCH_K, show_default=True,
              help="events: KLL sketch size of the percentiles (rank error 0.27% at 1024)")
@click.option("--top", type=int, default=20, show_default=True, help="rows in the slowest queue/client rankings")
@click.option("--min-pulls", type=int, default=None, help="pulls a queue or client needs to be ranked [20; stats-log 1]")
@click.option("--events-parquet", is_flag=True, help="events: also write the parsed events as Parquet by date")
@click.option("--timezone", default=DEFAULT_STATS_TIMEZONE, show_default=True, help="stats-log: zone of the log's timestamps")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="extra Spark setting; repeatable")
@click.option("--engine", type=click.Choice(ENGINES), default="auto", show_default=True,
              help="events: merge = merge compacted files' rollups in this process, no Spark (every file needs one "
                   "for these options; local paths and master); spark = always Spark; auto = merge when it can")  # fmt: skip
def report(inputs, output, master, source, short_polling_ms, sketch_k, top, min_pulls, events_parquet, timezone,
           confs, engine) -> None:  # fmt: skip
    """Summarise pull/hold event logs (or a broker's stats.log) into Parquet, CSV and report.html."""
    argv = [x for path in inputs for x in ("--input", path)] + ["--output", output, "--top", str(top)]
    if master:
        argv += ["--master", master]
    if min_pulls is not None:
        argv += ["--min-pulls", str(min_pulls)]
    argv += [x for conf in confs for x in ("--conf", conf)]
    if source == "events":
        from . import hold_report

        argv += ["--short-polling-ms", str(short_polling_ms), "--sketch-k", str(sketch_k), "--engine", engine]
        if events_parquet:
            argv.append("--events-parquet")
        hold_report.main(argv)
    else:
        if engine == "merge":
            raise click.UsageError("--engine merge is for event logs; a stats.log is read by Spark")
        from . import stats_log

        stats_log.main(argv + ["--timezone", timezone])
