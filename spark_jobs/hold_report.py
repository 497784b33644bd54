"""hold_report: where pull time goes, from rmqproxy's pull/hold event logs.

Run it either way (same file, same flags):

    python -m spark_jobs.hold_report --input STORE/logs --output OUT [--master local[2]]
    spark-submit spark_jobs/hold_report.py --input hdfs:///rmq/logs --output hdfs:///rmq/report

Reads JSONL event logs (files, directories, globs, ``.gz``; any Hadoop filesystem URI) with the
explicit PullEvent schema, and writes under OUT:

    by_minute/date=YYYY-MM-DD/   Parquet, per (group, topic, minute)   (pull aggregates, see
    by_hour/date=YYYY-MM-DD/     Parquet, per (group, topic, hour)      spark_jobs/transforms.py)
    group_topic/                 Parquet, per (group, topic), whole input
    rate_vs_pull_time/           Parquet, pulls by their minute's arrival-rate bucket
    slowest_queues/, slowest_clients/   Parquet, ranked by p99 service time
    csv/*.csv                    the same tables as single CSV files
    rejects/                     JSON lines {source, reason, line} for every line not kept
    summary.json                 lines read, kept, rejected by reason, time range, options
    report.html                  self-contained report with charts
    events/date=YYYY-MM-DD/      Parquet of the parsed events (only with --events-parquet)

``main()`` wires; ``extract``/``transform``/``load`` are separate and the transforms are pure
(spark_jobs/transforms.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file (spark-submit spark_jobs/hold_report.py)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from spark_jobs import files, report, transforms
from spark_jobs.session import build_session

TABLES = ("by_minute", "by_hour", "group_topic", "rate_vs_pull_time", "slowest_queues", "slowest_clients")
PARTITIONED = ("by_minute", "by_hour")


def _log(message: str) -> None:
    print(f"[hold_report {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def extract(spark: SparkSession, inputs: list[str]) -> DataFrame:
    """Raw lines with their source file."""
    return files.read_lines(spark, inputs)


def transform(
    lines: DataFrame,
    *,
    short_polling_ms: int = transforms.DEFAULT_SHORT_POLLING_MS,
    accuracy: int = transforms.DEFAULT_ACCURACY,
    top: int = 20,
    min_pulls: int = 20,
    keep_all_columns: bool = False,
) -> tuple[DataFrame, DataFrame, dict[str, DataFrame]]:
    """Lines in; (parsed lines, enriched events, summary tables by name) out. Lazy.

    ``parsed`` is what a job caches: every line's reject reason (with the line for rejects) and,
    for good lines, the enriched columns the summaries read (all columns with
    ``keep_all_columns``), so the JSON is parsed once."""
    enriched = transforms.enrich(transforms.parse_lines(lines), short_polling_ms, with_date=keep_all_columns)
    if keep_all_columns:
        parsed = enriched
    else:
        parsed = enriched.select(*transforms.ENRICHED_USED, "reason", "source", "line")
    events = transforms.valid_events(parsed)
    by_minute = transforms.window_stats(events, "minute", accuracy)
    tables = {
        "by_minute": by_minute,
        "by_hour": transforms.window_stats(events, "hour", accuracy),
        "group_topic": transforms.group_topic_stats(events, accuracy),
        "rate_vs_pull_time": transforms.rate_vs_pull_time(events, by_minute, accuracy),
        "slowest_queues": transforms.slowest_queues(events, top, min_pulls, accuracy),
        "slowest_clients": transforms.slowest_clients(events, top, min_pulls, accuracy),
    }
    return parsed, events, tables


def load(
    spark: SparkSession,
    output: str,
    parsed: DataFrame,
    events: DataFrame,
    tables: dict[str, DataFrame],
    options: dict,
    events_parquet: bool = False,
) -> dict:
    """Run the plan and write everything under ``output``; returns the summary written."""
    started = time.monotonic()
    parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        _log("reading and parsing input")
        counts = {row["reason"]: row["count"] for row in transforms.reject_counts(parsed).collect()}
        kept = counts.pop(None, 0)
        rejected = sum(counts.values())
        _log(f"{kept + rejected} lines: {kept} events kept, {rejected} rejected {dict(sorted(counts.items()))}")
        transforms.rejected_lines(parsed).write.mode("overwrite").json(files.join(output, "rejects"))
        if events_parquet:
            _log("writing events Parquet")
            events.write.mode("overwrite").partitionBy("date").parquet(files.join(output, "events"))
        collected = files.write_tables(spark, output, {n: tables[n] for n in TABLES}, PARTITIONED, _log)
        columns, rows = collected["group_topic"]
        first = min((r[columns.index("first_ts_ms")] for r in rows), default=None)
        last = max((r[columns.index("last_ts_ms")] for r in rows), default=None)
        summary = {
            "inputs": options.get("inputs"),
            "output": output,
            "lines": kept + rejected,
            "events": kept,
            "rejected": rejected,
            "rejected_by_reason": dict(sorted(counts.items())),
            "first_ts_ms": first,
            "last_ts_ms": last,
            "options": {k: v for k, v in options.items() if k != "inputs"},
            "tables": {name: len(collected[name][1]) for name in TABLES},
            "seconds": round(time.monotonic() - started, 3),
        }
        _log("writing report.html")
        html = report.render_hold_report(summary, {n: report.Table(*collected[n]) for n in TABLES})
        page = files.write_report(spark, output, html, summary)
        _log(f"done in {summary['seconds']} s: {page}")
        return summary
    finally:
        spark.catalog.clearCache()


def run(spark: SparkSession, inputs: list[str], output: str, **options) -> dict:
    """Extract, transform, load; returns the summary."""
    events_parquet = bool(options.pop("events_parquet", False))
    lines = extract(spark, inputs)
    parsed, events, tables = transform(lines, keep_all_columns=events_parquet, **options)
    return load(spark, output, parsed, events, tables, {"inputs": list(inputs), **options}, events_parquet)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="hold_report", description="Pull/hold event logs -> Parquet, CSV and an HTML report."
    )
    parser.add_argument("--input", "-i", action="append", required=True,
                        help="event log file, directory, glob or URI (repeatable; .gz read as gzip)")  # fmt: skip
    parser.add_argument("--output", "-o", required=True, help="output directory or URI (replaced)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--short-polling-ms", type=int, default=transforms.DEFAULT_SHORT_POLLING_MS,
                        help="the broker's shortPollingTimeMills, for the overshoot of short-mode timeouts")  # fmt: skip
    parser.add_argument("--accuracy", type=int, default=transforms.DEFAULT_ACCURACY,
                        help="percentile_approx accuracy (rank error <= n/accuracy)")  # fmt: skip
    parser.add_argument("--top", type=int, default=20, help="rows in the slowest queue/client rankings")
    parser.add_argument("--min-pulls", type=int, default=20, help="pulls a queue or client needs to be ranked")
    parser.add_argument("--events-parquet", action="store_true", help="also write the parsed events as Parquet")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.conf)
    spark = build_session("rmqproxy-hold-report", args.master, conf)
    try:
        run(
            spark, args.input, args.output, short_polling_ms=args.short_polling_ms, accuracy=args.accuracy,
            top=args.top, min_pulls=args.min_pulls, events_parquet=args.events_parquet,
        )  # fmt: skip
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
