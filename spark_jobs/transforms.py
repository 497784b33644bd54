"""Pure transformations of pull/hold events: DataFrames and plain values in, DataFrames out.

No I/O and no session state here, except that windows and dates are computed in the session time
zone, which ``spark_jobs.session.build_session`` sets to UTC. Every function tests alone on a
handmade DataFrame (tests/spark/test_transforms.py).

Definitions (documented once, here, and in spark_jobs/README.md):

- Percentiles come from KLL sketches (Spark's ``kll_sketch_*`` functions, Apache DataSketches)
  of size ``sketch_k`` (default 4096): the value returned for percentile p is one of the values
  (never interpolated), and with 99% confidence its rank is within ``rank_error(k) * n`` of
  ``p * n`` among the n values of its group (0.07% at k = 4096: p99 lies in p98.93..p99.07). A
  group of at most k values is exact: the value of rank ceil(p * n). Sketches are built per cell
  (``cell_stats``) and merged for each window, which keeps the bound; compaction is randomized,
  so above k values a rerun can move a percentile within that bound. ``total_ms`` and
  ``service_ms`` percentiles are over all pulls; ``hold_ms`` percentiles are over held pulls
  only (over all pulls the median hold of a busy queue would just be 0).
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
from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from .defaults import DEFAULT_SHORT_POLLING_MS, DEFAULT_SKETCH_K
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

    Returns every PullEvent field (null on rejected lines) plus ``reason`` (null for a good line)
    and, for rejected lines only, ``source`` and ``line``. Reasons, first match wins:
    ``blank`` (empty or whitespace); ``malformed`` (not a JSON object, or a field of the wrong
    type, NaN included: Spark's PERMISSIVE reader flags these); ``trailing_data`` (text after the
    object, or two objects run together, ``}{`` or ``} {``, as a lost newline leaves them: Spark's
    reader would otherwise keep the first and silently drop the rest; a string field containing
    ``}`` then ``{`` is rejected too); ``missing_field:<names>``; ``non_finite`` (an infinite
    duration such as 1e999).
    """
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN, "allowNonNumericNumbers": "false"}
    e = F.from_json(F.col("value"), PULL_EVENT_READ, options)
    # Parsed in a generator (one row out per line): Spark pushes a filter below a projection by
    # copying the projection into it, which would run from_json once per field it names.
    parsed = lines.select(F.col("value"), F.col("source"), F.inline(F.array(F.struct(e.alias("e")))))
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
        .when(_second_object(value) | (~value.endswith("}") & ~F.rtrim(value).endswith("}")), F.lit("trailing_data"))
        .when(functools.reduce(operator.or_, missing), F.concat(F.lit("missing_field:"), missing_names))
        .when(non_finite, F.lit("non_finite"))
    )
    kept = parsed.select(*[F.col("e")[name].alias(name) for name in FIELDS], reason.alias("reason"), "source", "value")
    good = F.col("reason").isNull()
    return kept.select(
        *[F.when(good, F.col(name)).alias(name) for name in FIELDS],
        "reason",
        F.when(~good, F.col("source")).alias("source"),
        F.when(~good, F.col("value")).alias("line"),
    )


def _second_object(value: Column) -> Column:
    """The line has ``}`` then ``{`` with only whitespace between. Substring tests only (Spark's
    ``instr`` and ``length`` count characters, several times the cost); the pattern runs only on
    the rare line with ``}`` then a space or tab, which a compact JSON writer never puts out."""
    spaced = value.contains("} ") | value.contains("}\t")
    return value.contains("}{") | (spaced & value.rlike(r"\}\s*\{"))


def valid_events(parsed: DataFrame) -> DataFrame:
    """The good lines of ``parse_lines``: its PullEvent columns (all, or those kept)."""
    return parsed.where(F.col("reason").isNull()).drop("reason", "source", "line")


def rejected_lines(parsed: DataFrame) -> DataFrame:
    """The rejected lines of ``parse_lines``: ``source``, ``reason``, ``line``."""
    return parsed.where(F.col("reason").isNotNull()).select(
        F.coalesce(F.col("source"), F.lit("")).alias("source"), "reason", F.col("line")
    )


# ---------------------------------------------------------------------------------------------
# derived columns


def expected_hold_ms(short_polling_ms: int) -> Column:
    """The deadline a held pull was held to: ``suspend_ms`` (long mode) or the short polling time."""
    return (
        F.when(F.col("mode") == "long", F.col("suspend_ms").cast("double"))
        .when(F.col("mode") == "short", F.lit(float(short_polling_ms)))
    )


def _epoch_window(ts: Column, size_ms: int) -> Column:
    """Start of the whole-UTC window of ``size_ms`` holding epoch-ms ``ts``, as a timestamp (cut
    from the epoch ms, cheaper than truncating timestamps row by row)."""
    return F.timestamp_millis(ts - F.pmod(ts, F.lit(size_ms)))


def enrich(events: DataFrame, short_polling_ms: int = DEFAULT_SHORT_POLLING_MS, with_date: bool = False) -> DataFrame:
    """Add ``minute`` (window start, a timestamp), ``overshoot_ms``, ``found`` (code SUCCESS),
    ``client`` (the client id, or the remote address when the client never sent one); with
    ``with_date`` also ``date`` (yyyy-MM-dd, for partitioning events)."""
    ts = F.col("ts_ms")
    columns = [
        *events.columns,
        _epoch_window(ts, 60_000).alias("minute"),
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
# cells: the one pass over the events

#: Cells: what every summary is merged from, two kinds cut in the same pass (grouping sets).
#: Window cells feed the window, whole-input and arrival-rate tables; queue cells feed the slowest
#: queue and client rankings. Rejected lines (PullEvent columns null) fall in cells of their own
#: ``reason``. Two small kinds instead of one cell per queue, client and minute: a sketch costs
#: its size k in memory however few values it holds, so fewer cells is a faster pass.
WINDOW_KEYS = ("group", "topic", "minute", "suspendable")
QUEUE_KEYS = ("group", "topic", "queue_id", "client")
#: Measures with a KLL sketch per cell, and the column each sketches (hold: held pulls only).
_SKETCHED = ("total", "hold", "service", "overshoot")

def _measure(name: str) -> Column:
    if name == "hold":
        return F.when(F.col("held"), F.col("hold_ms"))
    return F.col(f"{name}_ms")


def cell_stats(events: DataFrame, sketch_k: int = DEFAULT_SKETCH_K) -> DataFrame:
    """Enriched events (good and rejected lines, or just events) in; one row per cell out:
    ``kind`` ("window" or "queue"), ``reason`` (null for good lines), the keys of its kind (the
    others null), counts, sums, maxima, first/last ``ts_ms``, per-wake counts and a KLL sketch
    (``_<measure>_sketch``) of total, hold, service and overshoot time. The input is parsed and
    scanned once; sketches, unlike ``percentile_approx`` results, merge into any coarser group
    without losing their bound."""
    keyed = events.withColumn("suspendable", F.col("suspend_ms") > 0)
    if "reason" not in events.columns:
        keyed = keyed.withColumn("reason", F.lit(None).cast("string"))
    keys = ["reason", *dict.fromkeys(WINDOW_KEYS + QUEUE_KEYS)]
    grouped = keyed.groupingSets([["reason", *WINDOW_KEYS], ["reason", *QUEUE_KEYS]], *keys)
    kind = F.when(F.grouping("minute") == 0, F.lit("window")).otherwise(F.lit("queue"))
    columns = _cell_columns(sketch_k)
    return grouped.agg(kind.alias("kind"), *[column.alias(name) for name, (column, _) in columns.items()])


def _cell_columns(sketch_k: int) -> dict[str, tuple[Column, Callable[[str], Column]]]:
    """Every column of a cell: its aggregate over events, and the function that merges cells
    into a coarser group (one table, so a column cannot be made and then left out of merges)."""
    held = F.col("held")
    return {
        "pulls": (F.count(F.lit(1)), F.sum),
        "held_pulls": (F.sum(held.cast("long")), F.sum),
        "found_pulls": (F.sum(F.col("found").cast("long")), F.sum),
        "timeouts_measured": (F.count("overshoot_ms"), F.sum),
        "total_ms_sum": (F.sum("total_ms"), F.sum),
        "hold_ms_sum": (F.sum("hold_ms"), F.sum),
        "service_ms_sum": (F.sum("service_ms"), F.sum),
        "overshoot_ms_sum": (F.sum("overshoot_ms"), F.sum),
        "msgs": (F.sum("msgs"), F.sum),
        "bytes": (F.sum("bytes"), F.sum),
        **{f"_wake_{w}": (F.sum((F.col("wake") == w).cast("long")), F.sum) for w in WAKES},
        **{f"{m}_ms_max": (F.max(_measure(m)), F.max) for m in _SKETCHED},
        "first_ts_ms": (F.min("ts_ms"), F.min),
        "last_ts_ms": (F.max("ts_ms"), F.max),
        **{
            f"_{m}_sketch": (F.kll_sketch_agg_double(_measure(m), sketch_k), F.kll_merge_agg_double)
            for m in _SKETCHED
        },
    }


def reject_counts(cells: DataFrame) -> DataFrame:
    """Lines per ``reason`` (null = kept) from ``cell_stats``."""
    return cells.where(F.col("kind") == "window").groupBy("reason").agg(F.sum("pulls").alias("count"))


def _good(cells: DataFrame, kind: str) -> DataFrame:
    return cells.where(F.col("reason").isNull() & (F.col("kind") == kind))


def _merged() -> list[Column]:
    """Aggregates that merge cells into any coarser group: sums, maxima, minima, merged sketches
    (a merged sketch keeps its cells' k, so the k given here shapes nothing)."""
    return [merge(name).alias(name) for name, (_, merge) in _cell_columns(DEFAULT_SKETCH_K).items()]


def _merge_groups(cells: DataFrame, keys: list[str]) -> DataFrame:
    """Cells merged per ``keys``, a group of one cell passed through as it is. Merging allocates a
    union of k items per sketch and group, and a minute is nearly always one cell (its pulls all
    suspendable or all not): merging those anyway was most of the minute table's time."""
    shared = cells.groupBy(*keys).count().where(F.col("count") > 1).drop("count")
    names = list(_cell_columns(DEFAULT_SKETCH_K))
    alone = cells.join(F.broadcast(shared), keys, "left_anti").select(*keys, *names)
    merged = cells.join(F.broadcast(shared), keys, "left_semi").groupBy(*keys).agg(*_merged())
    return alone.unionByName(merged)


def _quantiles(sketch: str) -> Column:
    """The PERCENTILES of a sketch (null when it saw no value): each is one of the values."""
    column = F.col(sketch)
    ranks = F.array(*[F.lit(p) for p in PERCENTILES])
    return F.when(F.kll_sketch_get_n_double(column) > 0, F.kll_sketch_get_quantile_double(column, ranks))


def _share(numerator: Column, denominator: Column) -> Column:
    return F.when(denominator > 0, numerator.cast("double") / denominator)


def _finish(df: DataFrame, keys: list[str], minutes: Column) -> DataFrame:
    """Read percentiles off the merged sketches and turn counts into shares; ``minutes`` is the
    window length."""
    pulls = F.col("pulls")
    columns = [F.col(k) for k in keys] + [
        pulls,
        "held_pulls",
        _share(F.col("held_pulls"), pulls).alias("held_share"),
        "found_pulls",
    ]
    # read each sketch once (a projection of its own): every read deserializes and sorts it
    df = df.select("*", *[_quantiles(f"_{m}_sketch").alias(f"_{m}") for m in _SKETCHED])
    quantiles = {m: F.col(f"_{m}") for m in _SKETCHED}
    for measure in ("total", "hold", "service"):
        columns += [quantiles[measure][i].alias(f"{measure}_ms_{name}") for i, name in enumerate(_PCT_NAMES)]
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
        quantiles["overshoot"][0].alias("overshoot_ms_p50"),
        quantiles["overshoot"][2].alias("overshoot_ms_p99"),
        "overshoot_ms_max",
        _share(F.col("overshoot_ms_sum"), F.col("timeouts_measured")).alias("overshoot_ms_mean"),
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


def _sorted(table: DataFrame, *columns: str) -> DataFrame:
    """A summary table in order, sorted in one partition: a global ``orderBy`` samples its input
    first, which here means merging and reading every sketch twice, for a table that is small."""
    return table.repartition(1).sortWithinPartitions(*columns)


def window_stats(cells: DataFrame, window: str) -> DataFrame:
    """Per (group, topic, window start) for ``window`` "minute" or "hour" (``cell_stats`` in).

    Columns: group, topic, window_start, date, then the pull aggregates (see module doc).
    """
    if window not in ("minute", "hour"):
        raise ValueError(f"window must be minute or hour, not {window!r}")
    start = F.col("minute") if window == "minute" else _epoch_window(F.unix_millis("minute"), 3_600_000)
    keyed = _good(cells, "window").withColumn("window_start", start)
    grouped = _merge_groups(keyed, ["group", "topic", "window_start"])
    minutes = F.lit(1.0 if window == "minute" else 60.0)
    out = _finish(grouped, ["group", "topic", "window_start"], minutes)
    return out.select(
        "group", "topic", "window_start", F.date_format("window_start", "yyyy-MM-dd").alias("date"),
        *[c for c in out.columns if c not in ("group", "topic", "window_start")],
    ).transform(_sorted, "group", "topic", "window_start")  # fmt: skip


def group_topic_stats(cells: DataFrame) -> DataFrame:
    """Per (group, topic) over the whole input (``cell_stats`` in)."""
    grouped = _good(cells, "window").groupBy("group", "topic").agg(*_merged())
    span = F.greatest(F.lit(1.0), (F.col("last_ts_ms") - F.col("first_ts_ms")) / 60000.0)
    return _sorted(_finish(grouped, ["group", "topic"], span), "group", "topic")


def rate_bucket(rate: Column) -> Column:
    """Label of the RATE_BUCKETS bucket a messages-per-minute value falls in."""
    expr = None
    for edge, label in reversed(RATE_BUCKETS):
        cond = rate >= F.lit(edge)
        expr = F.when(cond, F.lit(label)) if expr is None else expr.when(cond, F.lit(label))
    return expr


def rate_bucket_index(label: Column) -> Column:
    """Position of a RATE_BUCKETS label in RATE_BUCKETS, to put bucket tables in rate order."""
    positions = F.create_map(*[x for i, (_, name) in enumerate(RATE_BUCKETS) for x in (F.lit(name), F.lit(i))])
    return positions[label]


def rate_vs_pull_time(cells: DataFrame, by_minute: DataFrame) -> DataFrame:
    """Pull, hold and service time of every pull, grouped by its (group, topic, minute)'s arrival
    rate (RATE_BUCKETS of ``msgs_per_min``): low traffic means long pulls (they are held), while
    service time stays flat. Only pulls with the suspend flag (``suspend_ms`` > 0) count: a plain
    poll is never held, so it says nothing about holding. ``group_topic_minutes`` counts the
    minutes in the bucket (all of them), ``msgs_per_min`` is their mean rate. One row per bucket
    with suspendable pulls, in bucket order (``bucket_index``). ``cell_stats`` and ``window_stats``
    by minute in."""
    rates = by_minute.select(
        "group", "topic", F.col("window_start").alias("minute"), rate_bucket(F.col("msgs_per_min")).alias("bucket")
    )
    suspendable = _good(cells, "window").where(F.col("suspendable"))
    joined = suspendable.join(F.broadcast(rates), ["group", "topic", "minute"])
    grouped = joined.groupBy("bucket").agg(*_merged()).drop("msgs")
    minutes = by_minute.groupBy(rate_bucket(F.col("msgs_per_min")).alias("bucket")).agg(
        F.count(F.lit(1)).alias("group_topic_minutes"), F.sum("msgs").alias("msgs")
    )
    out = _finish(grouped.join(minutes, "bucket"), ["bucket", "group_topic_minutes"], F.col("group_topic_minutes"))
    return _sorted(out.select(rate_bucket_index(F.col("bucket")).alias("bucket_index"), *out.columns), "bucket_index")


def _slowest(cells: DataFrame, keys: list[str], top: int, min_pulls: int) -> DataFrame:
    pulls = F.sum("pulls")
    grouped = _good(cells, "queue").groupBy(*keys).agg(
        pulls.alias("pulls"),
        F.kll_merge_agg_double("_service_sketch").alias("_service_sketch"),
        F.max("service_ms_max").alias("service_ms_max"),
        (F.sum("service_ms_sum") / pulls).alias("service_ms_mean"),
        (F.sum("held_pulls") / pulls).alias("held_share"),
        F.sum("msgs").alias("msgs"),
        F.array_join(F.array_sort(F.collect_set("group")), ",").alias("groups"),
    )
    names = [c for c in grouped.columns if not c.startswith("_")]
    grouped = grouped.select(*names, _quantiles("_service_sketch").alias("_service"))
    service = F.col("_service")
    order = [service[2].desc(), F.col("service_ms_max").desc(), *[F.col(n) for n in keys]]
    ranked = grouped.where(F.col("pulls") >= min_pulls).select(
        # one window partition on purpose: a ranking is global, and there is a row per queue or client
        F.row_number().over(Window.partitionBy(F.lit(0)).orderBy(*order)).alias("rank"),
        *names,
        *[service[i].alias(f"service_ms_{name}") for i, name in enumerate(_PCT_NAMES)],
    )
    return ranked.where(F.col("rank") <= top)


def slowest_queues(cells: DataFrame, top: int = 20, min_pulls: int = 1) -> DataFrame:
    """Queues (group, topic, queue_id) by p99 service time, slowest first (hold excluded); ties
    by max service time, then key. Only keys with at least ``min_pulls`` pulls are ranked.
    ``cell_stats`` in."""
    return _slowest(cells, ["group", "topic", "queue_id"], top, min_pulls).drop("groups").orderBy("rank")


def slowest_clients(cells: DataFrame, top: int = 20, min_pulls: int = 1) -> DataFrame:
    """Clients by p99 service time, slowest first: ``client`` is the client id from the heartbeat,
    or the remote address when the client never sent one; ``groups`` lists its groups.
    ``cell_stats`` in."""
    return _slowest(cells, ["client"], top, min_pulls).orderBy("rank")
