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
import functools
import os
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, NamedTuple

if __package__ in (None, ""):  # run as a file (spark-submit spark_jobs/hold_report.py)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import DataFrame, SparkSession

from spark_jobs import files, report, schema, session, transforms
from spark_jobs.defaults import ENGINES
from spark_jobs.session import build_session

TABLES = ("by_minute", "by_hour", "group_topic", "rate_vs_pull_time", "slowest_queues", "slowest_clients")
PARTITIONED = ("by_minute", "by_hour")


def _log(message: str) -> None:
    print(f"[hold_report {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Source(NamedTuple):
    """The input: its raw lines with their source file, the same files through Spark's JSON
    reader, whether that reader may stand for the line parser (no line ``needs_line_reader``),
    which may still be being checked, the rows of compacted Parquet files without a rollup for
    the job's options (None if none), and those with one: their rows (for ``--events-parquet``
    only) and their cells (None if none)."""

    lines: DataFrame
    records: DataFrame
    plain: Future[bool]
    columnar: DataFrame | None = None
    rolled: DataFrame | None = None
    cells: DataFrame | None = None


def extract(spark: SparkSession, inputs: list[str], *, sketch_k: int = transforms.DEFAULT_SKETCH_K,
            short_polling_ms: int = transforms.DEFAULT_SHORT_POLLING_MS, events: bool = False) -> Source:  # fmt: skip
    """The input, with its line check under way: local plain files are checked by their bytes in
    background threads (``files.one_object_per_line``, several times faster than Spark), so the
    check and its reads overlap the pass (``scan``); other inputs by a scan of the lines, first.
    Compacted files with a rollup for ``sketch_k`` and ``short_polling_ms`` give their cells, and
    their rows only for ``events`` (``--events-parquet``): listing files costs a job past a few dozen."""
    dataset = files.event_dataset(files.hadoop_listing(spark), inputs, (sketch_k, short_polling_ms))
    lines = files.read_lines(spark, dataset.json)
    records = files.read_records(spark, dataset.json, schema.PULL_EVENT_READ, transforms.JSON_OPTIONS)
    columnar = files.read_columnar(spark, dataset.parquet, schema.PULL_EVENT_COLUMNAR)
    rolled = files.read_columnar(spark, dataset.rolled, schema.PULL_EVENT_COLUMNAR) if events else None
    cells = files.read_columnar(spark, dataset.cells, transforms.cell_schema(spark)) if dataset.cells else None
    if cells is not None:
        _log(f"{len(dataset.cells)} of {len(dataset.cells) + len(dataset.parquet)} compacted files read from their rollups")
    _log("checking line shapes")
    local = files.local_files(spark, lines)
    if local is not None:
        plain = files.check_in_background(local, spark.sparkContext.defaultParallelism)
    else:
        plain = Future()
        plain.set_result(lines.where(transforms.needs_line_reader()).isEmpty())
    return Source(lines, records, plain, columnar, rolled, cells)


def transform(
    lines: DataFrame, records: DataFrame | None = None, *, short_polling_ms: int = transforms.DEFAULT_SHORT_POLLING_MS,
    sketch_k: int = transforms.DEFAULT_SKETCH_K, with_date: bool = False, columnar: DataFrame | None = None,
    rolled: DataFrame | None = None, cells: DataFrame | None = None,
) -> tuple[DataFrame, DataFrame, DataFrame]:  # fmt: skip
    """Lines (and their JSON reader ``records``, if any, and the rows of compacted files,
    ``columnar``) in; (parsed lines, enriched events, cells) out. Lazy.

    ``cells`` is the one scan of the input (``transforms.cell_stats``, from ``records`` when
    given), with the cells of rollups (``cells``, for the rows ``rolled``), that every table is
    merged from (``summaries``). The parsed lines are read only to write rejected lines, and
    ``events`` only for ``--events-parquet``."""
    parsed = transforms.parse_lines(lines)
    read = parsed if records is None else transforms.parse_records(records)
    if columnar is not None:
        read = read.unionByName(transforms.parse_columnar(columnar))
    enriched = transforms.enrich(read, short_polling_ms, with_date=with_date)
    scanned = transforms.cell_stats(enriched, sketch_k)
    cells = scanned if cells is None else scanned.unionByName(cells)
    if rolled is not None:
        enriched = transforms.enrich(read.unionByName(transforms.parse_columnar(rolled)), short_polling_ms,
                                     with_date=with_date)  # fmt: skip
    return parsed, transforms.valid_events(enriched), cells


def summaries(cells: DataFrame, *, top: int = 20, min_pulls: int = 20) -> dict[str, DataFrame]:
    """The summary tables by name, merged from ``cells``. Lazy; the hour cells are cached when
    first computed (the whole-input table merges them again), so the caller clears the cache."""
    by_minute = transforms.window_stats(cells, "minute")
    hours = transforms.window_cells(cells, "hour").cache()
    return {
        "by_minute": by_minute,
        "by_hour": transforms.finish_windows(hours, "hour"),
        "group_topic": transforms.group_topic_stats(hours),
        "rate_vs_pull_time": transforms.rate_vs_pull_time(cells, by_minute),
        "slowest_queues": transforms.slowest_queues(cells, top, min_pulls),
        "slowest_clients": transforms.slowest_clients(cells, top, min_pulls),
    }


def scan(
    spark: SparkSession, source: Source, **options: Any
) -> tuple[DataFrame, DataFrame, DataFrame]:  # fmt: skip
    """The one pass over the input: ``transform``'s (parsed lines, events, cells), the cells
    computed. Through the JSON reader while the line check runs (``session.speculate``); if the
    check fails, that pass is cancelled and the lines are parsed as text instead."""
    _log("reading and parsing input")
    rows = {"columnar": source.columnar, "rolled": source.rolled, "cells": source.cells}
    parsed, events, cells = transform(source.lines, source.records, **rows, **options)
    done = session.speculate(spark, lambda: _computed(cells), source.plain)
    if done is None:
        _log("some lines are not one JSON object each: parsing every line as text")
        parsed, events, cells = transform(source.lines, None, **rows, **options)
        done = _computed(cells)
    return parsed, events, done


def _computed(cells: DataFrame) -> DataFrame:
    """The cells computed once and cut from the input's lineage: every table reads these rows,
    and a cached plan is not always recognised inside a join (the rate table's would rescan)."""
    return cells.localCheckpoint(eager=True)


def load(
    spark: SparkSession,
    output: str,
    parsed: DataFrame,
    events: DataFrame,
    cells: DataFrame,
    options: dict,
    events_parquet: bool,
    started: float,
) -> dict:
    """Write everything under ``output`` from the computed ``cells`` (``scan``); returns the
    summary written, whose ``seconds`` count from ``started`` (monotonic)."""
    try:
        tables = summaries(cells, top=options["top"], min_pulls=options["min_pulls"])
        counts = {row["reason"]: row["count"] for row in transforms.reject_counts(cells).collect()}
        _log_counts(counts)
        # Only a log with rejects is read a second time, to write them with their file and text;
        # otherwise its empty plan (limit 0 reads nothing; a DataFrame of an empty Python list cost
        # a job of over a second).
        rejects = transforms.rejected_lines(parsed)
        rejects = rejects if _split(counts)[1] else rejects.limit(0)
        rejects.write.mode("overwrite").json(files.join(output, "rejects"))
        if events_parquet:
            _log("writing events Parquet")
            events.write.mode("overwrite").partitionBy("date").parquet(files.join(output, "events"))
        with session.settings(spark, session.INTERPRETED):
            collected = files.write_tables(spark, output, {n: tables[n] for n in TABLES}, PARTITIONED, _log)
        summary = _summary(output, options, counts, collected, "spark")
        return files.publish(functools.partial(files.write_bytes, spark), output, summary, collected,
                             report.render_hold_report, started, _log)  # fmt: skip
    finally:
        spark.catalog.clearCache()


def _split(counts: dict[str | None, int]) -> tuple[int, dict[str, int]]:
    """Lines by reason (None = kept) as (kept, rejected by reason, sorted)."""
    return counts.get(None, 0), dict(sorted((k, v) for k, v in counts.items() if k is not None))


def _log_counts(counts: dict[str | None, int]) -> None:
    kept, rejected = _split(counts)
    _log(f"{kept + sum(rejected.values())} lines: {kept} events kept, {sum(rejected.values())} rejected {rejected}")


def _summary(output: str, options: dict, counts: dict[str | None, int],
             collected: dict[str, tuple[list[str], list[tuple]]], engine: str) -> dict:  # fmt: skip
    """The summary of a report (``files.publish`` adds its tables and seconds): lines by reason
    (``counts``, None = kept), the time range, the options, and what merged the tables."""
    kept, rejected = _split(counts)
    columns, rows = collected["group_topic"]
    return {
        "inputs": options.get("inputs"),
        "output": output,
        "lines": kept + sum(rejected.values()),
        "events": kept,
        "rejected": sum(rejected.values()),
        "rejected_by_reason": rejected,
        "first_ts_ms": min((r[columns.index("first_ts_ms")] for r in rows), default=None),
        "last_ts_ms": max((r[columns.index("last_ts_ms")] for r in rows), default=None),
        "options": {k: v for k, v in options.items() if k != "inputs"},
        "engine": engine,
    }


def run_merged(cells: list[str], output: str, options: dict, started: float) -> dict:
    """The report from rollups alone (``cells``, their paths), merged in this process
    (``cell_merge``): the Spark path's tables, summary and page, no JVM. Local files only."""
    from spark_jobs import cell_merge

    _log(f"merging the cells of {len(cells)} rollups in this process (no Spark)")
    merged = cell_merge.read_cells(cells)
    counts = cell_merge.reject_counts(merged)
    _log_counts(counts)
    tables = cell_merge.summaries(merged, top=options["top"], min_pulls=options["min_pulls"])
    files.replace_local_folder(Path(output, "rejects"))  # none: a compaction keeps rejected lines as JSON lines
    collected = files.write_local_tables(output, {n: tables[n] for n in TABLES}, PARTITIONED, cell_merge.rows, _log)
    summary = _summary(output, options, counts, collected, "merge")
    return files.publish(files.write_local, output, summary, collected, report.render_hold_report, started, _log)


def run(
    spark: SparkSession, inputs: list[str], output: str, *,
    short_polling_ms: int = transforms.DEFAULT_SHORT_POLLING_MS, sketch_k: int = transforms.DEFAULT_SKETCH_K,
    top: int = 20, min_pulls: int = 20, events_parquet: bool = False,
) -> dict:  # fmt: skip
    """Extract, scan (transform and compute), load; returns the summary."""
    source = extract(spark, inputs, sketch_k=sketch_k, short_polling_ms=short_polling_ms, events=events_parquet)
    started = time.monotonic()
    parsed, events, cells = scan(
        spark, source, short_polling_ms=short_polling_ms, sketch_k=sketch_k, with_date=events_parquet
    )
    options = _options(inputs, short_polling_ms=short_polling_ms, sketch_k=sketch_k, top=top, min_pulls=min_pulls)
    return load(spark, output, parsed, events, cells, options, events_parquet, started)


def _sketch_k(text: str) -> int:
    k = int(text)
    if not 8 <= k <= 65535:
        raise argparse.ArgumentTypeError(f"sketch size must be 8..65535, not {k}")
    return k


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
    parser.add_argument("--sketch-k", type=_sketch_k, default=transforms.DEFAULT_SKETCH_K,
                        help="KLL sketch size of the percentiles (rank error 0.27%% at 1024; 8..65535)")  # fmt: skip
    parser.add_argument("--top", type=int, default=20, help="rows in the slowest queue/client rankings")
    parser.add_argument("--min-pulls", type=int, default=20, help="pulls a queue or client needs to be ranked")
    parser.add_argument("--events-parquet", action="store_true", help="also write the parsed events as Parquet")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    parser.add_argument("--engine", choices=ENGINES, default="auto",
                        help="spark: always Spark; merge: merge rollups in this process (every input file must have one "
                             "for these options; local paths, local master); auto: merge when it can, else Spark")  # fmt: skip
    return parser.parse_args(argv)


def mergeable(args: argparse.Namespace) -> tuple[list[str], str]:
    """The rollups ``run_merged`` would read for these arguments, or no rollups and why not: the
    merge stands for Spark only for local paths, a local master, no Spark settings to honour and a
    log whose every file has a rollup for the report's sketch size and short polling time."""
    uris = [p for p in [*args.input, args.output] if "://" in p or p.startswith("file:")]
    if args.master and not args.master.startswith("local"):
        return [], f"the master is {args.master}"
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return [], "run by spark-submit"
    if uris:
        return [], f"{uris[0]} is not a local path"
    if args.events_parquet:
        return [], "--events-parquet writes the rows"
    if args.conf:
        return [], "--conf sets Spark settings"
    dataset = files.event_dataset(files.LOCAL, args.input, (args.sketch_k, args.short_polling_ms))
    if dataset.json or dataset.parquet or not dataset.cells:
        return [], (f"{len(dataset.json)} JSON-lines and {len(dataset.parquet)} Parquet inputs have no rollup for "
                    f"--sketch-k {args.sketch_k} --short-polling-ms {args.short_polling_ms}")  # fmt: skip
    return dataset.cells, ""


def _options(inputs: list[str], *, short_polling_ms: int, sketch_k: int, top: int, min_pulls: int) -> dict:
    """The options a report's summary records, the same for either engine."""
    return {"inputs": list(inputs), "short_polling_ms": short_polling_ms, "sketch_k": sketch_k, "top": top,
            "min_pulls": min_pulls}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    if args.engine != "spark":
        cells, why_not = mergeable(args)
        if cells:
            options = _options(args.input, short_polling_ms=args.short_polling_ms, sketch_k=args.sketch_k,
                               top=args.top, min_pulls=args.min_pulls)  # fmt: skip
            run_merged(cells, args.output, options, started)
            return 0
        if args.engine == "merge":
            raise SystemExit(f"hold_report: --engine merge cannot run: {why_not}")
        _log(f"reading with Spark: {why_not}")
    conf = dict(item.split("=", 1) for item in args.conf)
    spark = build_session("rmqproxy-hold-report", args.master, conf)
    try:
        run(
            spark, args.input, args.output, short_polling_ms=args.short_polling_ms, sketch_k=args.sketch_k,
            top=args.top, min_pulls=args.min_pulls, events_parquet=args.events_parquet,
        )  # fmt: skip
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
