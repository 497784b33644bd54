"""Pure transformations of pull/hold events: DataFrames and plain values in, DataFrames out.

No I/O and no session state here, except that windows and dates are computed in the session time
zone, which ``spark_jobs.session.build_session`` sets to UTC. Every function tests alone on a
handmade DataFrame (tests/spark/test_transforms.py).

Definitions (documented once, here, and in spark_jobs/README.md):

- Percentiles are ``percentile_approx`` with ``accuracy`` (default 10000): the value returned for
  percentile p has a rank within ``n / accuracy`` of ``p * n`` among the n values of its group,
  and it is always one of the values (never interpolated). ``total_ms`` and ``service_ms``
  percentiles are over all pulls; ``hold_ms`` percentiles are over held pulls only (over all
  pulls the median hold of a busy queue would just be 0).
- Timeout overshoot: for ``wake == "timeout"`` only, ``hold_ms`` minus the deadline the server
  held the pull to: ``suspend_ms`` in ``long`` mode, and in ``short`` mode the broker's
  ``shortPollingTimeMills``, which is not in the event, so it is a job parameter
  (``short_polling_ms``, default 1000 as in DESIGN.md). Events of another mode get none.
- Hold share of time: sum of ``hold_ms`` over sum of ``total_ms``: how much of the pull time the
  clients saw was waiting for messages rather than the broker working.
- Arrival rate: messages returned per minute for a (group, topic): a consumer that keeps up
  receives what producers send, so this is the arrival rate as that group sees it. An hour
  window divides by 60; the whole-input table divides by the minutes between the first and the
  last answer (at least 1).
- Windows and dates come from ``ts_ms`` (when the answer was written), as the log files do.
"""

from __future__ import annotations

import functools
import operator

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from .defaults import DEFAULT_ACCURACY, DEFAULT_SHORT_POLLING_MS
from .schema import CORRUPT_COLUMN, PULL_EVENT_FIELDS, PULL_EVENT_READ, WAKES

PERCENTILES = (0.5, 0.9, 0.99)
_PCT_NAMES = ("p50", "p90", "p99")
FIELDS = [name for name, _ in PULL_EVENT_FIELDS]

#: Arrival-rate buckets (messages returned per minute): lower edge and label, in order.
RATE_BUCKETS: tuple[tuple[float, str], ...] = (
    (0, "0"),
    (1e-9, "<10"),
    (10, "10-99"),
    (100, "100-999"),
    (1000, "1000-9999"),
    (10000, ">=10000"),
)


# ---------------------------------------------------------------------------------------------
# parsing


def parse_lines(lines: DataFrame) -> DataFrame:
    """Parse raw log lines (columns ``value``, ``source``) against the PullEvent schema.

    Returns every PullEvent field plus ``reason`` (null for a good line) and, for rejected lines
    only, ``source`` and ``line``. Reasons, first match wins:
    ``blank`` (empty or whitespace); ``malformed`` (not a JSON object, or a field of the wrong
    type, NaN included: Spark's PERMISSIVE reader flags these); ``trailing_data`` (text after the
    object, or two objects run together ``}{`` as a lost newline leaves them: Spark's reader would
    otherwise keep the first and silently drop the rest; a string field containing ``}{`` is
    rejected too); ``missing_field:<names>``; ``non_finite`` (an infinite duration such as 1e999).
    """
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN, "allowNonNumericNumbers": "false"}
    e = F.from_json(F.col("value"), PULL_EVENT_READ, options)
    parsed = lines.select(F.col("value"), F.col("source"), e.alias("e"))
    value = F.col("value")
    missing = [F.col("e")[name].isNull() for name in FIELDS]
    missing_names = F.concat_ws(",", *[F.when(F.col("e")[name].isNull(), F.lit(name)) for name in FIELDS])
    non_finite = functools.reduce(
        operator.or_,
        [F.isnan(F.col("e")[d]) | (F.abs(F.col("e")[d]) == float("inf")) for d in ("hold_ms", "service_ms", "total_ms")],
    )
    # Cheap tests first: the costly ones (trim, the field list) only run on lines already suspect.
    reason = (
        F.when(F.col("e").isNull() & (F.trim(value) == ""), F.lit("blank"))
        .when(F.col("e").isNull() | F.col("e")[CORRUPT_COLUMN].isNotNull(), F.lit("malformed"))
        .when(value.contains("}{") | (~value.endswith("}") & ~F.rtrim(value).endswith("}")), F.lit("trailing_data"))
        .when(functools.reduce(operator.or_, missing), F.concat(F.lit("missing_field:"), missing_names))
        .when(non_finite, F.lit("non_finite"))
    )
    kept = parsed.select(*[F.col("e")[name].alias(name) for name in FIELDS], reason.alias("reason"), "source", "value")
    return kept.select(
        *FIELDS,
        "reason",
        F.when(F.col("reason").isNotNull(), F.col("source")).alias("source"),
        F.when(F.col("reason").isNotNull(), F.col("value")).alias("line"),
    )


def valid_events(parsed: DataFrame) -> DataFrame:
    """The good lines of ``parse_lines``: its PullEvent columns (all, or those kept)."""
    return parsed.where(F.col("reason").isNull()).drop("reason", "source", "line")


def rejected_lines(parsed: DataFrame) -> DataFrame:
    """The rejected lines of ``parse_lines``: ``source``, ``reason``, ``line``."""
    return parsed.where(F.col("reason").isNotNull()).select(
        F.coalesce(F.col("source"), F.lit("")).alias("source"), "reason", F.col("line")
    )


def reject_counts(parsed: DataFrame) -> DataFrame:
    """How many lines were read, kept and rejected, per reason (``reason`` null = kept)."""
    return parsed.groupBy(F.col("reason")).count()


# ---------------------------------------------------------------------------------------------
# derived columns


def expected_hold_ms(short_polling_ms: int) -> Column:
    """The deadline a held pull was held to: ``suspend_ms`` (long mode) or the short polling time."""
    return (
        F.when(F.col("mode") == "long", F.col("suspend_ms").cast("double"))
        .when(F.col("mode") == "short", F.lit(float(short_polling_ms)))
    )


#: What the aggregates read from ``enrich``'s output: a job caches only these.
ENRICHED_USED = ("ts_ms", "group", "topic", "queue_id", "client", "suspend_ms", "held", "hold_ms", "service_ms",
                 "total_ms", "wake", "found", "overshoot_ms", "msgs", "bytes", "minute", "hour")  # fmt: skip


def enrich(events: DataFrame, short_polling_ms: int = DEFAULT_SHORT_POLLING_MS, with_date: bool = False) -> DataFrame:
    """Add ``minute`` and ``hour`` (window starts, timestamps), ``overshoot_ms``, ``found`` (code
    SUCCESS), ``client`` (the client id, or the remote address when the client never sent one);
    with ``with_date`` also ``date`` (yyyy-MM-dd, for partitioning events). Windows are cut from
    the epoch ms (whole minutes and hours of UTC), cheaper than truncating timestamps row by row."""
    ts = F.col("ts_ms")
    columns = [
        *events.columns,
        F.timestamp_millis(ts - F.pmod(ts, F.lit(60_000))).alias("minute"),
        F.timestamp_millis(ts - F.pmod(ts, F.lit(3_600_000))).alias("hour"),
        F.when(F.col("wake") == "timeout", F.col("hold_ms") - expected_hold_ms(short_polling_ms)).alias(
            "overshoot_ms"
        ),
        (F.col("code") == "SUCCESS").alias("found"),
        F.when(F.col("client_id") != "", F.col("client_id")).otherwise(F.col("remote")).alias("client"),
    ]
    if with_date:
        columns.append(F.date_format(F.timestamp_millis(ts), "yyyy-MM-dd").alias("date"))
    return events.select(*columns)


# ---------------------------------------------------------------------------------------------
# aggregates


def _percentiles(column: Column, accuracy: int) -> Column:
    return F.percentile_approx(column, list(PERCENTILES), accuracy)


def _pull_aggregates(accuracy: int) -> list[Column]:
    held = F.col("held")
    aggregates = [
        F.count(F.lit(1)).alias("pulls"),
        F.sum(held.cast("long")).alias("held_pulls"),
        F.sum(F.col("found").cast("long")).alias("found_pulls"),
        _percentiles(F.col("total_ms"), accuracy).alias("_total"),
        _percentiles(F.when(held, F.col("hold_ms")), accuracy).alias("_hold"),
        _percentiles(F.col("service_ms"), accuracy).alias("_service"),
        _percentiles(F.col("overshoot_ms"), accuracy).alias("_overshoot"),
        F.max("total_ms").alias("total_ms_max"),
        F.max(F.when(held, F.col("hold_ms"))).alias("hold_ms_max"),
        F.max("service_ms").alias("service_ms_max"),
        F.max("overshoot_ms").alias("overshoot_ms_max"),
        F.avg("overshoot_ms").alias("overshoot_ms_mean"),
        F.count("overshoot_ms").alias("timeouts_measured"),
        F.sum("total_ms").alias("total_ms_sum"),
        F.sum("hold_ms").alias("hold_ms_sum"),
        F.sum("service_ms").alias("service_ms_sum"),
        F.sum("msgs").alias("msgs"),
        F.sum("bytes").alias("bytes"),
        F.min("ts_ms").alias("first_ts_ms"),
        F.max("ts_ms").alias("last_ts_ms"),
    ]
    aggregates += [F.sum((F.col("wake") == w).cast("long")).alias(f"_wake_{w}") for w in WAKES]
    return aggregates


def _share(numerator: Column, denominator: Column) -> Column:
    return F.when(denominator > 0, numerator.cast("double") / denominator)


def _finish(df: DataFrame, keys: list[str], minutes: Column) -> DataFrame:
    """Flatten percentile arrays and turn counts into shares; ``minutes`` is the window length."""
    pulls = F.col("pulls")
    columns = [F.col(k) for k in keys] + [
        pulls,
        "held_pulls",
        _share(F.col("held_pulls"), pulls).alias("held_share"),
        "found_pulls",
    ]
    for measure in ("total", "hold", "service"):
        columns += [F.col(f"_{measure}")[i].alias(f"{measure}_ms_{name}") for i, name in enumerate(_PCT_NAMES)]
        columns.append(f"{measure}_ms_max")
    columns += [
        _share(F.col("total_ms_sum"), pulls).alias("total_ms_mean"),
        _share(F.col("service_ms_sum"), pulls).alias("service_ms_mean"),
        _share(F.col("hold_ms_sum"), F.col("total_ms_sum")).alias("hold_share_of_time"),
    ]
    wake_total = functools.reduce(operator.add, [F.col(f"_wake_{w}") for w in WAKES])
    columns += [_share(F.col(f"_wake_{w}"), pulls).alias(f"wake_{w}_share") for w in WAKES]
    columns.append(_share(pulls - wake_total, pulls).alias("wake_other_share"))
    columns += [
        F.col("_wake_timeout").alias("timeouts"),
        "timeouts_measured",
        F.col("_overshoot")[0].alias("overshoot_ms_p50"),
        F.col("_overshoot")[2].alias("overshoot_ms_p99"),
        "overshoot_ms_max",
        "overshoot_ms_mean",
        "msgs",
        "bytes",
        (F.col("msgs") / minutes).alias("msgs_per_min"),
        "total_ms_sum",
        "hold_ms_sum",
        "service_ms_sum",
        "first_ts_ms",
        "last_ts_ms",
    ]
    return df.select(*columns)


def window_stats(events: DataFrame, window: str, accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per (group, topic, window start) for ``window`` "minute" or "hour" (enriched events in).

    Columns: group, topic, window_start, date, then the pull aggregates (see module doc).
    """
    if window not in ("minute", "hour"):
        raise ValueError(f"window must be minute or hour, not {window!r}")
    grouped = events.groupBy("group", "topic", F.col(window).alias("window_start")).agg(*_pull_aggregates(accuracy))
    minutes = F.lit(1.0 if window == "minute" else 60.0)
    out = _finish(grouped, ["group", "topic", "window_start"], minutes)
    return out.select(
        "group", "topic", "window_start", F.date_format("window_start", "yyyy-MM-dd").alias("date"),
        *[c for c in out.columns if c not in ("group", "topic", "window_start")],
    ).orderBy("group", "topic", "window_start")  # fmt: skip


def group_topic_stats(events: DataFrame, accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per (group, topic) over the whole input (enriched events in)."""
    grouped = events.groupBy("group", "topic").agg(*_pull_aggregates(accuracy))
    span = F.greatest(F.lit(1.0), (F.col("last_ts_ms") - F.col("first_ts_ms")) / 60000.0)
    return _finish(grouped, ["group", "topic"], span).orderBy("group", "topic")


def rate_bucket(rate: Column) -> Column:
    """Label of the RATE_BUCKETS bucket a messages-per-minute value falls in."""
    expr = None
    for edge, label in reversed(RATE_BUCKETS):
        cond = rate >= F.lit(edge)
        expr = F.when(cond, F.lit(label)) if expr is None else expr.when(cond, F.lit(label))
    return expr


def rate_vs_pull_time(events: DataFrame, by_minute: DataFrame, accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Pull, hold and service time of every pull, grouped by its (group, topic, minute)'s arrival
    rate (RATE_BUCKETS of ``msgs_per_min``): low traffic means long pulls (they are held), while
    service time stays flat. Only pulls with the suspend flag (``suspend_ms`` > 0) count: a plain
    poll is never held, so it says nothing about holding. ``group_topic_minutes`` counts the
    minutes in the bucket (all of them), ``msgs_per_min`` is their mean rate. One row per bucket
    with suspendable pulls, in bucket order (``bucket_index``)."""
    rates = by_minute.select(
        "group", "topic", F.col("window_start").alias("minute"), rate_bucket(F.col("msgs_per_min")).alias("bucket")
    )
    suspendable = events.where(F.col("suspend_ms") > 0)
    joined = suspendable.join(F.broadcast(rates), ["group", "topic", "minute"])
    grouped = joined.groupBy("bucket").agg(*_pull_aggregates(accuracy)).drop("msgs")
    minutes = by_minute.groupBy(rate_bucket(F.col("msgs_per_min")).alias("bucket")).agg(
        F.count(F.lit(1)).alias("group_topic_minutes"), F.sum("msgs").alias("msgs")
    )
    order = F.create_map(*[x for i, (_, label) in enumerate(RATE_BUCKETS) for x in (F.lit(label), F.lit(i))])
    out = _finish(grouped.join(minutes, "bucket"), ["bucket", "group_topic_minutes"], F.col("group_topic_minutes"))
    return out.select(order[F.col("bucket")].alias("bucket_index"), *out.columns).orderBy("bucket_index")


def _slowest(events: DataFrame, keys: list[Column], top: int, min_pulls: int, accuracy: int) -> DataFrame:
    grouped = events.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("pulls"),
        _percentiles(F.col("service_ms"), accuracy).alias("_service"),
        F.max("service_ms").alias("service_ms_max"),
        F.avg("service_ms").alias("service_ms_mean"),
        F.avg(F.col("held").cast("double")).alias("held_share"),
        F.sum("msgs").alias("msgs"),
        F.array_join(F.array_sort(F.collect_set("group")), ",").alias("groups"),
    )
    names = [c for c in grouped.columns if not c.startswith("_")]
    order = [F.col("_service")[2].desc(), F.col("service_ms_max").desc(), *[F.col(n) for n in names[: len(keys)]]]
    ranked = grouped.where(F.col("pulls") >= min_pulls).select(
        # one window partition on purpose: a ranking is global, and there is a row per queue or client
        F.row_number().over(Window.partitionBy(F.lit(0)).orderBy(*order)).alias("rank"),
        *names,
        *[F.col("_service")[i].alias(f"service_ms_{name}") for i, name in enumerate(_PCT_NAMES)],
    )
    return ranked.where(F.col("rank") <= top)


def slowest_queues(
    events: DataFrame, top: int = 20, min_pulls: int = 1, accuracy: int = DEFAULT_ACCURACY
) -> DataFrame:
    """Queues (group, topic, queue_id) by p99 service time, slowest first (hold excluded); ties
    by max service time, then key. Only keys with at least ``min_pulls`` pulls are ranked."""
    out = _slowest(events, [F.col("group"), F.col("topic"), F.col("queue_id")], top, min_pulls, accuracy)
    return out.drop("groups").orderBy("rank")


def slowest_clients(
    events: DataFrame, top: int = 20, min_pulls: int = 1, accuracy: int = DEFAULT_ACCURACY
) -> DataFrame:
    """Clients by p99 service time, slowest first: ``client`` is the client id from the heartbeat,
    or the remote address when the client never sent one; ``groups`` lists its groups."""
    return _slowest(events, [F.col("client")], top, min_pulls, accuracy).orderBy("rank")
