"""stats_log: the same per-minute pull tables from an Apache RocketMQ broker's ``stats.log``.

    python -m spark_jobs.stats_log --input ~/logs/rocketmqlogs/stats.log --output OUT [--timezone +08:00]
    spark-submit spark_jobs/stats_log.py --input 'hdfs:///brokers/*/stats*.log*' --output hdfs:///rmq/stats

The format, as rocketmq-all-4.9.8 writes it (confirmed in the source):

- ``StatsItem.printAtMinutes`` logs ``String.format("[%s] [%s] Stats In One Minute, ", statsName,
  statsKey) + statPrintDetail(ss)`` once a minute, at the minute (``computeNextMinutesTimeMillis``);
  ``StatsItem.statPrintDetail`` is ``"SUM: %d TPS: %.2f AVGPT: %.2f"`` and
  ``RTStatsItem.statPrintDetail`` (GROUP_GET_LATENCY) is ``"TIMES: %d AVGRT: %.2f"``.
  ``computeStatsData`` takes first and last of the 10 s samples (up to 7): SUM is the value added
  over that last minute, TIMES the calls, AVGPT/AVGRT = SUM / TIMES.
- ``distribution/conf/logback_broker.xml`` (RocketmqStatsAppender) prefixes
  ``%d{yyy-MM-dd HH:mm:ss,GMT+8} %p - ``: the time is GMT+8 whatever the host's zone
  (``--timezone``; change it if your logback config differs).
- ``BrokerStatsManager`` names and keys: TOPIC_PUT_NUMS / TOPIC_PUT_SIZE ``topic``;
  GROUP_GET_NUMS / GROUP_GET_SIZE ``topic@group`` (``incGroupGetNums``: messages and bytes of
  pulls answered SUCCESS, one call each); GROUP_GET_LATENCY ``queueId@topic@group`` when
  ``enableDetailStat`` (the default) else ``topic@group``; QUEUE_* ``topic@queueId[@group]``;
  SNDBCK_PUT_NUMS ``topic@group``; BROKER_* the cluster name. Topic and group names cannot contain
  ``@`` (``TopicValidator``), so splitting on it is exact.
- ``PullMessageProcessor.processRequest`` (4.9.8) records GROUP_GET_LATENCY as the time from the
  start of processRequest to the messages copied into the response (``transferMsgByHeap``, default
  true). A held pull is re-run by ``PullRequestHoldService`` through processRequest, whose clock
  starts anew, so this is service time, hold excluded. Pulls that found nothing are not counted.

Hour, day and 5-minute lines ("Stats In One Hour", "Stats In One Day", "Stats Every 5 Minutes")
are skipped (counted); lines of none of these shapes are rejected to ``rejects/`` with a reason.

A line printed at minute T covers the minute before it: it is assigned the window [T-1m, T).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file (spark-submit spark_jobs/stats_log.py)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from spark_jobs import files, report, transforms
from spark_jobs.defaults import DEFAULT_STATS_TIMEZONE
from spark_jobs.session import build_session

DEFAULT_TIMEZONE = DEFAULT_STATS_TIMEZONE  # logback_broker.xml: %d{yyy-MM-dd HH:mm:ss,GMT+8}

_PREFIX = r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:[,.]\d{3})? +([A-Z]+) +- +"
_MINUTE = _PREFIX + r"\[([A-Z_]+)\] \[([^\]]*)\] Stats In One Minute, (.*)$"
_OTHER = _PREFIX + r"\[([A-Z_]+)\] \[([^\]]*)\] Stats (In One Hour|In One Day|Every 5 Minutes), "
_NUMBER = r"(\d+(?:[.,]\d+)?)"  # %.2f follows the JVM's locale: 1.50 or 1,50
_SUM = rf"^SUM: (\d+) TPS: {_NUMBER} AVGPT: {_NUMBER}\s*$"
_TIMES = rf"^TIMES: (\d+) AVGRT: {_NUMBER}\s*$"

TABLES = ("by_minute", "by_hour", "group_topic", "rate_vs_pull_time", "slowest_queues", "topic_put_by_minute",
          "topic_put")  # fmt: skip
PARTITIONED = ("by_minute", "by_hour", "topic_put_by_minute")


def _log(message: str) -> None:
    print(f"[stats_log {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _decimal(column: F.Column) -> F.Column:
    return F.regexp_replace(column, ",", ".").cast("double")


def parse_stats_lines(lines: DataFrame, timezone: str = DEFAULT_TIMEZONE) -> DataFrame:
    """Classify and parse stats.log lines (columns ``value``, ``source``).

    Returns ``kind`` ("minute", "skipped" or "rejected"), ``reason`` (rejected lines: ``blank``,
    ``malformed``, ``bad_numbers``), and for minute lines: ``printed_at`` (UTC timestamp),
    ``window_start`` (the minute before), ``stat``, ``key``, ``sum``, ``tps``, ``avgpt`` (SUM
    lines) or ``times``, ``avgrt`` (GROUP_GET_LATENCY); ``source`` and ``line`` for rejects.
    """
    value = F.col("value")
    ts_text = F.regexp_extract(value, _MINUTE, 1)
    detail = F.regexp_extract(value, _MINUTE, 5)
    is_minute = value.rlike(_MINUTE)
    is_other = value.rlike(_OTHER)
    is_sum = detail.rlike(_SUM)
    is_times = detail.rlike(_TIMES)
    local = F.when(is_minute, F.try_to_timestamp(ts_text, F.lit("yyyy-MM-dd HH:mm:ss")))
    printed_at = F.to_utc_timestamp(local, timezone)
    kind = (
        F.when(is_minute & (is_sum | is_times), F.lit("minute"))
        .when(is_other, F.lit("skipped"))
        .otherwise(F.lit("rejected"))
    )
    reason = (
        F.when(kind != "rejected", F.lit(None).cast("string"))
        .when(F.trim(value) == "", F.lit("blank"))
        .when(is_minute, F.lit("bad_numbers"))
        .otherwise(F.lit("malformed"))
    )
    parsed = lines.select(
        value.alias("_value"),
        F.col("source").alias("_source"),
        kind.alias("kind"),
        reason.alias("reason"),
        printed_at.alias("printed_at"),
        F.regexp_extract(value, _MINUTE, 3).alias("stat"),
        F.regexp_extract(value, _MINUTE, 4).alias("key"),
        F.when(is_sum, F.regexp_extract(detail, _SUM, 1).cast("long")).alias("sum"),
        F.when(is_sum, _decimal(F.regexp_extract(detail, _SUM, 2))).alias("tps"),
        F.when(is_sum, _decimal(F.regexp_extract(detail, _SUM, 3))).alias("avgpt"),
        F.when(is_times, F.regexp_extract(detail, _TIMES, 1).cast("long")).alias("times"),
        F.when(is_times, _decimal(F.regexp_extract(detail, _TIMES, 2))).alias("avgrt"),
    )
    minute_start = F.date_trunc("minute", F.col("printed_at"))
    return parsed.select(
        "kind",
        "reason",
        F.when(F.col("kind") == "minute", F.col("printed_at")).alias("printed_at"),
        F.when(F.col("kind") == "minute", minute_start - F.expr("INTERVAL 1 MINUTE")).alias("window_start"),
        *[F.when(F.col("kind") == "minute", F.col(c)).alias(c) for c in ("stat", "key")],
        "sum", "tps", "avgpt", "times", "avgrt",
        F.when(F.col("kind") == "rejected", F.col("_source")).alias("source"),
        F.when(F.col("kind") == "rejected", F.col("_value")).alias("line"),
    )  # fmt: skip


def _key_part(i: int) -> F.Column:
    return F.split(F.col("key"), "@").getItem(i)


def group_get_minutes(parsed: DataFrame) -> DataFrame:
    """Per (group, topic, window_start): msgs, bytes, found_pulls, service time sums (from
    GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY; see the module doc)."""
    minute = parsed.where(F.col("kind") == "minute")
    parts = F.size(F.split(F.col("key"), "@"))
    nums = minute.where((F.col("stat") == "GROUP_GET_NUMS") & (parts == 2)).select(
        _key_part(1).alias("group"), _key_part(0).alias("topic"), "window_start",
        F.col("sum").alias("msgs"),
        F.when(F.col("avgpt") > 0, F.round(F.col("sum") / F.col("avgpt")).cast("long")).otherwise(F.lit(0)).alias(
            "pulls_from_nums"
        ),
    )  # fmt: skip
    size = minute.where((F.col("stat") == "GROUP_GET_SIZE") & (parts == 2)).select(
        _key_part(1).alias("group"), _key_part(0).alias("topic"), "window_start", F.col("sum").alias("bytes")
    )
    latency = queue_latency_minutes(parsed).groupBy("group", "topic", "window_start").agg(
        F.sum("found_pulls").alias("latency_times"),
        F.sum("service_ms_sum").alias("service_ms_sum"),
        F.max("service_ms_mean").alias("service_ms_max_minute"),
    )
    keys = ["group", "topic", "window_start"]
    joined = (
        nums.groupBy(*keys).agg(F.sum("msgs").alias("msgs"), F.sum("pulls_from_nums").alias("pulls_from_nums"))
        .join(size.groupBy(*keys).agg(F.sum("bytes").alias("bytes")), keys, "full_outer")
        .join(latency, keys, "full_outer")
    )  # fmt: skip
    return joined.select(
        *keys,
        F.coalesce("msgs", F.lit(0)).alias("msgs"),
        F.coalesce("bytes", F.lit(0)).alias("bytes"),
        F.coalesce("latency_times", "pulls_from_nums", F.lit(0)).alias("found_pulls"),
        F.col("service_ms_sum"),
        F.col("latency_times"),
        F.col("service_ms_max_minute"),
    )


def queue_latency_minutes(parsed: DataFrame) -> DataFrame:
    """GROUP_GET_LATENCY lines as (group, topic, queue_id or null, window_start, found_pulls,
    service_ms_mean, service_ms_sum)."""
    minute = parsed.where((F.col("kind") == "minute") & (F.col("stat") == "GROUP_GET_LATENCY"))
    parts = F.size(F.split(F.col("key"), "@"))
    return minute.where(parts.isin(2, 3)).select(
        F.when(parts == 3, _key_part(2)).otherwise(_key_part(1)).alias("group"),
        F.when(parts == 3, _key_part(1)).otherwise(_key_part(0)).alias("topic"),
        F.when(parts == 3, _key_part(0).cast("int")).alias("queue_id"),
        "window_start",
        F.col("times").alias("found_pulls"),
        F.col("avgrt").alias("service_ms_mean"),
        (F.col("times") * F.col("avgrt")).alias("service_ms_sum"),
    )


def _get_stats(minutes: DataFrame, keys: list, span_minutes: F.Column | None) -> DataFrame:
    grouped = minutes.groupBy(*keys).agg(
        F.sum("msgs").alias("msgs"),
        F.sum("bytes").alias("bytes"),
        F.sum("found_pulls").alias("found_pulls"),
        F.sum("service_ms_sum").alias("service_ms_sum"),
        F.sum("latency_times").alias("latency_times"),
        F.max("service_ms_max_minute").alias("service_ms_max_minute"),
        F.count(F.lit(1)).alias("minutes"),
        F.min("window_start").alias("first_window"),
        F.max("window_start").alias("last_window"),
    )
    span = span_minutes if span_minutes is not None else F.col("minutes")
    return grouped.select(
        *grouped.columns[: len(keys)],
        "found_pulls", "msgs", "bytes",
        (F.col("msgs") / span).alias("msgs_per_min"),
        F.when(F.col("latency_times") > 0, F.col("service_ms_sum") / F.col("latency_times")).alias("service_ms_mean"),
        "service_ms_max_minute", "minutes", "first_window", "last_window",
    )  # fmt: skip


def by_minute(minutes: DataFrame) -> DataFrame:
    out = _get_stats(minutes, ["group", "topic", "window_start"], F.lit(1.0))
    return out.select(
        "group", "topic", "window_start", F.date_format("window_start", "yyyy-MM-dd").alias("date"),
        *[c for c in out.columns if c not in ("group", "topic", "window_start", "first_window", "last_window",
                                              "minutes")],
    ).orderBy("group", "topic", "window_start")  # fmt: skip


def by_hour(minutes: DataFrame) -> DataFrame:
    hourly = minutes.withColumn("hour", F.date_trunc("hour", "window_start"))
    out = _get_stats(hourly, ["group", "topic", "hour"], F.lit(60.0)).withColumnRenamed("hour", "window_start")
    return out.select(
        "group", "topic", "window_start", F.date_format("window_start", "yyyy-MM-dd").alias("date"),
        *[c for c in out.columns if c not in ("group", "topic", "window_start", "first_window", "last_window")],
    ).orderBy("group", "topic", "window_start")  # fmt: skip


def group_topic(minutes: DataFrame) -> DataFrame:
    """Whole input per (group, topic); the rate divides by the minutes from first to last window."""
    span = (F.col("last_window").cast("long") - F.col("first_window").cast("long")) / 60 + 1
    stats = _get_stats(minutes, ["group", "topic"], None)
    return stats.withColumn("msgs_per_min", F.col("msgs") / span).orderBy("group", "topic")


def rate_vs_service(minute_table: DataFrame) -> DataFrame:
    """By arrival-rate bucket of the (group, topic) minute: minutes, found pulls, mean rate, and
    mean service time weighted by pulls (stats.log has averages only)."""
    bucketed = minute_table.withColumn("bucket", transforms.rate_bucket(F.col("msgs_per_min")))
    out = bucketed.groupBy("bucket").agg(
        F.count(F.lit(1)).alias("group_topic_minutes"),
        F.sum("found_pulls").alias("found_pulls"),
        F.sum("msgs").alias("msgs"),
        F.sum(F.col("service_ms_mean") * F.col("found_pulls")).alias("_weighted"),
        F.sum(F.when(F.col("service_ms_mean").isNotNull(), F.col("found_pulls"))).alias("_timed"),
    )
    return out.select(
        transforms.rate_bucket_index(F.col("bucket")).alias("bucket_index"),
        "bucket", "group_topic_minutes", "found_pulls", "msgs",
        (F.col("msgs") / F.col("group_topic_minutes")).alias("msgs_per_min"),
        F.when(F.col("_timed") > 0, F.col("_weighted") / F.col("_timed")).alias("service_ms_mean"),
    ).orderBy("bucket_index")  # fmt: skip


def slowest_queues(parsed: DataFrame, top: int = 20, min_pulls: int = 1) -> DataFrame:
    """Queues by mean service time (GROUP_GET_LATENCY per queue; needs enableDetailStat)."""
    per_queue = queue_latency_minutes(parsed).where(F.col("queue_id").isNotNull())
    grouped = per_queue.groupBy("group", "topic", "queue_id").agg(
        F.sum("found_pulls").alias("found_pulls"),
        F.sum("service_ms_sum").alias("_sum"),
        F.max("service_ms_mean").alias("service_ms_max_minute"),
    )
    mean = F.when(F.col("found_pulls") > 0, F.col("_sum") / F.col("found_pulls"))
    ranked = grouped.where(F.col("found_pulls") >= min_pulls).select(
        "group", "topic", "queue_id", "found_pulls", mean.alias("service_ms_mean"), "service_ms_max_minute"
    )
    order = [F.col("service_ms_mean").desc_nulls_last(), F.col("service_ms_max_minute").desc_nulls_last(), "group",
             "topic", "queue_id"]  # fmt: skip
    return (
        ranked.select(F.row_number().over(Window.partitionBy(F.lit(0)).orderBy(*order)).alias("rank"), *ranked.columns)
        .where(F.col("rank") <= top)
        .orderBy("rank")
    )


def topic_put_by_minute(parsed: DataFrame) -> DataFrame:
    """Per (topic, window_start): messages and bytes put (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE)."""
    minute = parsed.where((F.col("kind") == "minute") & F.col("stat").isin("TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE"))
    out = minute.groupBy(F.col("key").alias("topic"), "window_start").agg(
        F.sum(F.when(F.col("stat") == "TOPIC_PUT_NUMS", F.col("sum"))).alias("put_msgs"),
        F.sum(F.when(F.col("stat") == "TOPIC_PUT_SIZE", F.col("sum"))).alias("put_bytes"),
    )
    return out.select(
        "topic", "window_start", F.date_format("window_start", "yyyy-MM-dd").alias("date"),
        F.coalesce("put_msgs", F.lit(0)).alias("put_msgs"), F.coalesce("put_bytes", F.lit(0)).alias("put_bytes"),
    ).orderBy("topic", "window_start")  # fmt: skip


def topic_put(put_minutes: DataFrame) -> DataFrame:
    span = (F.max("window_start").cast("long") - F.min("window_start").cast("long")) / 60 + 1
    return (
        put_minutes.groupBy("topic")
        .agg(F.sum("put_msgs").alias("put_msgs"), F.sum("put_bytes").alias("put_bytes"), span.alias("_minutes"))
        .select("topic", "put_msgs", "put_bytes", (F.col("put_msgs") / F.col("_minutes")).alias("put_msgs_per_min"))
        .orderBy(F.col("put_msgs").desc(), "topic")
    )


def transform(
    lines: DataFrame, *, timezone: str = DEFAULT_TIMEZONE, top: int = 20, min_pulls: int = 1
) -> tuple[DataFrame, dict[str, DataFrame]]:
    """Lines in; (parsed lines, tables by name) out. Lazy."""
    parsed = parse_stats_lines(lines, timezone)
    minutes = group_get_minutes(parsed)
    minute_table = by_minute(minutes)
    put_minutes = topic_put_by_minute(parsed)
    tables = {
        "by_minute": minute_table,
        "by_hour": by_hour(minutes),
        "group_topic": group_topic(minutes),
        "rate_vs_pull_time": rate_vs_service(minute_table),
        "slowest_queues": slowest_queues(parsed, top, min_pulls),
        "topic_put_by_minute": put_minutes,
        "topic_put": topic_put(put_minutes),
    }
    return parsed, tables


def load(spark: SparkSession, output: str, parsed: DataFrame, tables: dict[str, DataFrame], options: dict) -> dict:
    started = time.monotonic()
    parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        counts = {
            (r["kind"], r["reason"]): r["count"] for r in parsed.groupBy("kind", "reason").count().collect()
        }
        used = sum(v for (k, _), v in counts.items() if k == "minute")
        skipped = sum(v for (k, _), v in counts.items() if k == "skipped")
        by_reason = {r: v for (k, r), v in counts.items() if k == "rejected"}
        _log(f"{used} minute lines used, {skipped} other stats lines skipped, {sum(by_reason.values())} rejected")
        parsed.where(F.col("kind") == "rejected").select(
            F.coalesce("source", F.lit("")).alias("source"), "reason", "line"
        ).write.mode("overwrite").json(files.join(output, "rejects"))
        collected = files.write_tables(spark, output, {n: tables[n] for n in TABLES}, PARTITIONED, _log)
        windows = [r[collected["by_minute"][0].index("window_start")] for r in collected["by_minute"][1]]
        summary = {
            "inputs": options.get("inputs"),
            "output": output,
            "lines_used": used,
            "lines_skipped": skipped,
            "rejected": sum(by_reason.values()),
            "rejected_by_reason": dict(sorted(by_reason.items())),
            "first_ts_ms": int(min(windows).timestamp() * 1000) if windows else None,
            "last_ts_ms": int(max(windows).timestamp() * 1000) + 60_000 if windows else None,
            "options": {k: v for k, v in options.items() if k != "inputs"},
        }
        return files.publish(functools.partial(files.write_bytes, spark), output, summary, collected,
                             report.render_stats_report, started, _log)  # fmt: skip
    finally:
        spark.catalog.clearCache()


def run(spark: SparkSession, inputs: list[str], output: str, **options) -> dict:
    parsed, tables = transform(files.read_lines(spark, inputs), **options)
    return load(spark, output, parsed, tables, {"inputs": list(inputs), **options})


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="stats_log", description="RocketMQ broker stats.log -> the pull tables.")
    parser.add_argument("--input", "-i", action="append", required=True, help="stats.log file, directory, glob, URI")
    parser.add_argument("--output", "-o", required=True, help="output directory or URI (replaced)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--timezone", default=DEFAULT_TIMEZONE, help="zone of the log's timestamps (GMT+8)")
    parser.add_argument("--top", type=int, default=20, help="rows in the slowest queue ranking")
    parser.add_argument("--min-pulls", type=int, default=1, help="found pulls a queue needs to be ranked")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = build_session("rmqproxy-stats-log", args.master, dict(item.split("=", 1) for item in args.conf))
    try:
        run(spark, args.input, args.output, timezone=args.timezone, top=args.top, min_pulls=args.min_pulls)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
