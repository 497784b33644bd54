"""Pure transformations of pull/hold events: DataFrames and plain values in, DataFrames out.

No I/O and no session state here, except that windows and dates are computed in the session time
zone, which ``spark_jobs.session.build_session`` sets to UTC. Every function tests alone on a
handmade DataFrame (tests/spark/test_transforms.py).

Definitions (documented once, here, and in spark_jobs/README.md):

- Percentiles come from KLL sketches (Spark's ``kll_sketch_*`` functions, Apache DataSketches)
  of size ``sketch_k`` (default 1024): the value returned for percentile p is one of the values
  (never interpolated), and with 99% confidence its rank is within ``rank_error(k) * n`` of
  ``p * n`` among the n values of its group (0.27% at k = 1024: p99 lies in p98.73..p99.27). A
  group of at most k values is exact: the value of rank ceil(p * n). Sketches are built per cell
  (``cell_stats``) and merged for each window, which keeps the bound; compaction is randomized,
  so above k values a rerun can move a percentile within that bound. ``total_ms`` and
  ``service_ms`` percentiles are over all pulls; ``hold_ms`` percentiles are over held pulls
  only (over all pulls the median hold of a busy queue would just be 0).
- Timeout overshoot: for ``wake == "timeout"`` only, ``hold_ms`` minus the deadline the server
  held the pull to: ``suspend_ms`` in ``long`` mode, and in ``short`` mode the broker's
  ``shortPollingTimeMills``, which is not in the event, so it is a job parameter
  (``short_polling_ms``, default 1000, the server's). Events of another mode get none.
- Hold share of time: sum of ``hold_ms`` over sum of ``total_ms``: how much of the pull time the
  clients saw was waiting for messages rather than the broker working.
- Arrival rate: messages returned per minute for a (group, topic): a consumer that keeps up
  receives what producers send, so this is the arrival rate as that group sees it. An hour
  window divides by 60; the whole-input table divides by the minutes between the first and the
  last answer (at least 1).
- Windows and dates come from ``ts_ms`` (when the answer was written), as the log files do.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from pyspark.sql.window import Window

from .defaults import DEFAULT_SHORT_POLLING_MS, DEFAULT_SKETCH_K, SKETCHED
from .schema import ADDED, CORRUPT_COLUMN, PULL_EVENT_COLUMNAR, PULL_EVENT_FIELDS, PULL_EVENT_READ, WAKES

PERCENTILES = (0.5, 0.9, 0.99)
PCT_NAMES = ("p50", "p90", "p99")
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


#: Spark's JSON options for both readers: PERMISSIVE keeps a row per line, and NaN is not a number.
JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN, "allowNonNumericNumbers": "false"}


def parse_lines(lines: DataFrame) -> DataFrame:
    """Parse raw log lines (columns ``value``, ``source``) against the PullEvent schema.

    Returns every PullEvent field (null on rejected lines) plus ``reason`` (null for a good line)
    and, for rejected lines only, ``source`` and ``line``. Reasons, first match wins:
    ``blank`` (empty or whitespace); ``malformed`` (not a JSON object, not UTF-8, or a field of
    the wrong type, NaN included: Spark's PERMISSIVE reader flags these); ``trailing_data`` (text
    after the object, or two objects run together, ``}{`` or ``} {``, as a lost newline leaves
    them: Spark's reader would otherwise keep the first and silently drop the rest; a string
    field containing ``}`` then ``{`` is rejected too); ``missing_field:<names>``; ``non_finite``
    (an infinite duration such as 1e999).
    """
    e = F.from_json(F.col("value"), PULL_EVENT_READ, JSON_OPTIONS)
    # Parsed in a generator (one row out per line): Spark pushes a filter below a projection by
    # copying the projection into it, which would run from_json once per field it names.
    parsed = lines.select(F.col("value"), F.col("source"), F.inline(F.array(F.struct(e.alias("e")))))
    value = F.col("value")
    unparsed = F.col("e").isNull()
    # Cheap tests first: the costly ones (trim, the field list) only run on lines already suspect.
    reason = _first_reason(
        (unparsed & (F.trim(value) == ""), "blank"),
        # the JSON reader's byte parser rejects bytes that are not UTF-8; from_json would read them as U+FFFD
        (unparsed | F.col("e")[CORRUPT_COLUMN].isNotNull() | ~F.is_valid_utf8(value), "malformed"),
        (_second_object(value) | (~value.endswith("}") & ~F.rtrim(value).endswith("}")), "trailing_data"),
        *_field_reasons("e"),
    )
    kept = parsed.select("e.*", reason.alias("reason"), "source", "value").drop(CORRUPT_COLUMN)
    return _parsed(kept, "source", "value")


def needs_line_reader() -> Column:
    """Lines (``value``) that ``parse_records`` could read otherwise than ``parse_lines``: anything
    but ``{``, then no ``}`` up to the last byte, which is ``}``. Spark's JSON reader skips blank lines, splits
    an array into rows and drops what follows the first object. Flags a brace inside a string or
    a nested object too (rare; the line parser reads those right): one byte search is the cheap
    test, where ``_second_object``'s three character searches cost twice the read itself. Its
    twin for plain local files, by byte counts over whole files: ``files.one_object_per_line``."""
    return F.expr(
        "NOT startswith(value, '{') OR NOT endswith(value, '}')"
        " OR contains(substring(CAST(value AS BINARY), 1, octet_length(value) - 1), X'7D')"
    )


def parse_records(records: DataFrame) -> DataFrame:
    """``parse_lines`` for rows of Spark's JSON reader (``files.read_records``), with the same
    columns and reasons, ``source`` and ``line`` always null. Equal to ``parse_lines`` on logs
    where no line ``needs_line_reader``, and about a third faster: the reader parses the bytes
    as they are, where ``from_json`` decodes each line through a fresh 8 KiB character reader."""
    reason = _first_reason((F.col(CORRUPT_COLUMN).isNotNull(), "malformed"), *_field_reasons())
    kept = records.select(*FIELDS, reason.alias("reason"))
    return _parsed(kept, "CAST(NULL AS STRING)", "CAST(NULL AS STRING)")


def parse_columnar(rows: DataFrame) -> DataFrame:
    """``parse_records`` for rows of compacted Parquet files (``files.read_columnar``): every row
    is an event the compaction checked, so only a missing field (a column older files lack,
    read as null) or an infinite duration can reject one."""
    reason = _first_reason(*_field_reasons())
    return _parsed(rows.select(*FIELDS, reason.alias("reason")), "CAST(NULL AS STRING)", "CAST(NULL AS STRING)")


def _field_reasons(struct: str = "") -> list[tuple[Column, Column]]:
    """The reasons read off the parsed fields (top-level columns, or those of the struct column
    ``struct``): a missing field (one ``ADDED`` later never is), an infinite duration. SQL text,
    as ``CELLS`` (why there)."""
    field = [f"{struct}.`{name}`" if struct else f"`{name}`" for name in FIELDS]
    required = [(f, name) for f, name in zip(field, FIELDS, strict=True) if name not in ADDED]
    missing = " OR ".join(f"{f} IS NULL" for f, _ in required)
    names = ", ".join(f"CASE WHEN {f} IS NULL THEN '{name}' END" for f, name in required)
    durations = [f for f, name in zip(field, FIELDS, strict=True) if name in ("hold_ms", "service_ms", "total_ms")]
    non_finite = " OR ".join(f"isnan({f}) OR abs({f}) = double('inf')" for f in durations)
    return [
        (F.expr(missing), F.expr(f"concat('missing_field:', concat_ws(',', {names}))")),
        (F.expr(non_finite), F.lit("non_finite")),
    ]


def _first_reason(*cases: tuple[Column, Column | str]) -> Column:
    """The reason of the first case whose test holds (null when none does)."""
    (test, reason), *rest = [(test, F.lit(r) if isinstance(r, str) else r) for test, r in cases]
    chain = F.when(test, reason)
    for test, reason in rest:
        chain = chain.when(test, reason)
    return chain


def _parsed(kept: DataFrame, source: str, line: str) -> DataFrame:
    """The fields of good lines only, a field ``ADDED`` later as its default where an older
    writer left it out; ``source`` and ``line`` (SQL) of rejected ones only."""
    return kept.selectExpr(
        *[f"CASE WHEN reason IS NULL THEN {_value(name)} END AS `{name}`" for name in FIELDS],
        "reason",
        f"CASE WHEN reason IS NOT NULL THEN {source} END AS source",
        f"CASE WHEN reason IS NOT NULL THEN {line} END AS line",
    )


def _value(name: str) -> str:
    """A parsed field as SQL: itself, or its ``ADDED`` default in place of null."""
    if name not in ADDED:
        return f"`{name}`"
    default = ADDED[name]
    literal = "'" + default.replace("'", "''") + "'" if isinstance(default, str) else repr(default)
    return f"coalesce(`{name}`, {literal})"


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
#: The column each measure's sketch and maximum read, in SQL (hold: held pulls only).
_MEASURES = {m: "CASE WHEN held THEN hold_ms END" if m == "hold" else f"{m}_ms" for m in SKETCHED}


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
    return grouped.agg(kind.alias("kind"), *[F.expr(f"{a.format(k=sketch_k)} AS {n}") for n, (a, _) in CELLS.items()])


def cell_schema(spark: SparkSession) -> StructType:
    """The columns and types of ``cell_stats``'s cells: what a rollup holds
    (rmqproxy/observe/rollup.py), which the report reads in place of the rows it was made from."""
    return cell_stats(enrich(parse_columnar(spark.createDataFrame([], PULL_EVENT_COLUMNAR)))).schema


#: Every column of a cell: its aggregate over events (``{k}``: the sketch size) and the aggregate
#: that merges cells into a coarser group; one table, so a column cannot be made and then left
#: out of merges. SQL text: one JVM call makes a whole expression, where building it from Column
#: objects costs a Py4J round trip per node (a few seconds of planning over the job's tables).
CELLS: dict[str, tuple[str, str]] = {
    "pulls": ("count(1)", "sum"),
    "held_pulls": ("sum(CAST(held AS BIGINT))", "sum"),
    "found_pulls": ("sum(CAST(found AS BIGINT))", "sum"),
    "timeouts_measured": ("count(overshoot_ms)", "sum"),
    **{f"{m}_ms_sum": (f"sum({m}_ms)", "sum") for m in ("total", "hold", "service", "overshoot")},
    "msgs": ("sum(msgs)", "sum"),
    "bytes": ("sum(bytes)", "sum"),
    **{f"_wake_{w}": (f"sum(CAST(wake = '{w}' AS BIGINT))", "sum") for w in WAKES},
    **{f"{m}_ms_max": (f"max({_MEASURES[m]})", "max") for m in SKETCHED},
    "first_ts_ms": ("min(ts_ms)", "min"),
    "last_ts_ms": ("max(ts_ms)", "max"),
    **{f"_{m}_sketch": (f"kll_sketch_agg_double({_MEASURES[m]}, {{k}})", "kll_merge_agg_double") for m in SKETCHED},
}


def reject_counts(cells: DataFrame) -> DataFrame:
    """Lines per ``reason`` (null = kept) from ``cell_stats``."""
    return cells.where(F.col("kind") == "window").groupBy("reason").agg(F.sum("pulls").alias("count"))


def _good(cells: DataFrame, kind: str) -> DataFrame:
    return cells.where(F.col("reason").isNull() & (F.col("kind") == kind))


def _merged() -> list[Column]:
    """Aggregates that merge cells into any coarser group: sums, maxima, minima, merged sketches
    (a merged sketch keeps its cells' k)."""
    return [F.expr(f"{merge}({name}) AS {name}") for name, (_, merge) in CELLS.items()]


def _merge_groups(cells: DataFrame, keys: list[str]) -> DataFrame:
    """Cells merged per ``keys``, a group of one cell passed through as it is. Merging allocates a
    union of k items per sketch and group, and a minute is nearly always one cell (its pulls all
    suspendable or all not): merging those anyway was most of the minute table's time."""
    shared = cells.groupBy(*keys).count().where(F.col("count") > 1).drop("count")
    names = list(CELLS)
    alone = cells.join(F.broadcast(shared), keys, "left_anti").select(*keys, *names)
    merged = cells.join(F.broadcast(shared), keys, "left_semi").groupBy(*keys).agg(*_merged())
    return alone.unionByName(merged)


def _quantiles(sketch: str) -> str:
    """SQL for the PERCENTILES of a sketch (null when it saw no value): each is one of the values."""
    ranks = ", ".join(f"{p!r}D" for p in PERCENTILES)
    quantiles = f"kll_sketch_get_quantile_double({sketch}, array({ranks}))"
    return f"CASE WHEN kll_sketch_get_n_double({sketch}) > 0 THEN {quantiles} END"


def _share(numerator: str, denominator: str) -> str:
    """SQL for numerator / denominator as a double, null when the denominator is not positive."""
    return f"CASE WHEN {denominator} > 0 THEN CAST({numerator} AS DOUBLE) / {denominator} END"


def _finish(df: DataFrame, keys: list[str], minutes: str) -> DataFrame:
    """Read percentiles off the merged sketches and turn counts into shares; ``minutes`` is the
    window length (SQL)."""
    # read each sketch once (a projection of its own): every read deserializes and sorts it
    df = df.selectExpr("*", *[f"{_quantiles(f'_{m}_sketch')} AS _{m}" for m in SKETCHED])
    held_share = f"{_share('held_pulls', 'pulls')} AS held_share"
    columns = [*[f"`{k}`" for k in keys], "pulls", "held_pulls", held_share, "found_pulls"]
    for m in ("total", "hold", "service"):
        columns += [f"_{m}[{i}] AS {m}_ms_{name}" for i, name in enumerate(PCT_NAMES)] + [f"{m}_ms_max"]
    wake_total = " + ".join(f"_wake_{w}" for w in WAKES)
    columns += [
        f"{_share('total_ms_sum', 'pulls')} AS total_ms_mean",
        f"{_share('service_ms_sum', 'pulls')} AS service_ms_mean",
        f"{_share('hold_ms_sum', 'total_ms_sum')} AS hold_share_of_time",
        *[f"{_share(f'_wake_{w}', 'pulls')} AS wake_{w}_share" for w in WAKES],
        f"{_share(f'pulls - ({wake_total})', 'pulls')} AS wake_other_share",
        "_wake_timeout AS timeouts",
        "timeouts_measured",
        "_overshoot[0] AS overshoot_ms_p50",
        "_overshoot[2] AS overshoot_ms_p99",
        "overshoot_ms_max",
        f"{_share('overshoot_ms_sum', 'timeouts_measured')} AS overshoot_ms_mean",
        "msgs",
        "bytes",
        f"msgs / ({minutes}) AS msgs_per_min",
        "total_ms_sum",
        "hold_ms_sum",
        "service_ms_sum",
        "first_ts_ms",
        "last_ts_ms",
    ]
    return df.selectExpr(*columns)


def _sorted(table: DataFrame, *columns: str) -> DataFrame:
    """A summary table in order, sorted in one partition: a global ``orderBy`` samples its input
    first, which here means merging and reading every sketch twice, for a table that is small."""
    return table.repartition(1).sortWithinPartitions(*columns)


def window_cells(cells: DataFrame, window: str) -> DataFrame:
    """Good window cells merged per (group, topic, window start) for ``window`` "minute" or "hour"
    (``cell_stats`` in): cells still, sketches kept, to finish (``finish_windows``) or merge further."""
    if window not in ("minute", "hour"):
        raise ValueError(f"window must be minute or hour, not {window!r}")
    start = F.col("minute") if window == "minute" else _epoch_window(F.unix_millis("minute"), 3_600_000)
    keyed = _good(cells, "window").withColumn("window_start", start)
    return _merge_groups(keyed, ["group", "topic", "window_start"])


def finish_windows(windows: DataFrame, window: str) -> DataFrame:
    """The table of ``window_cells(cells, window)``. Columns: group, topic, window_start, date,
    then the pull aggregates (see module doc)."""
    out = _finish(windows, ["group", "topic", "window_start"], "1.0D" if window == "minute" else "60.0D")
    return out.select(
        "group", "topic", "window_start", F.date_format("window_start", "yyyy-MM-dd").alias("date"),
        *[c for c in out.columns if c not in ("group", "topic", "window_start")],
    ).transform(_sorted, "group", "topic", "window_start")  # fmt: skip


def window_stats(cells: DataFrame, window: str) -> DataFrame:
    """Per (group, topic, window start) for ``window`` "minute" or "hour" (``cell_stats`` in)."""
    return finish_windows(window_cells(cells, window), window)


def group_topic_stats(windows: DataFrame) -> DataFrame:
    """Per (group, topic) over the whole input, from ``window_cells`` of either size: hours merge
    sixty times fewer sketches than minutes, and merging sketches is most of a table's time."""
    grouped = windows.groupBy("group", "topic").agg(*_merged())
    span = "greatest(1.0D, (last_ts_ms - first_ts_ms) / 60000.0D)"
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
    out = _finish(grouped.join(minutes, "bucket"), ["bucket", "group_topic_minutes"], "group_topic_minutes")
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
    grouped = grouped.select(*names, F.expr(_quantiles("_service_sketch")).alias("_service"))
    service = F.col("_service")
    order = [service[2].desc(), F.col("service_ms_max").desc(), *[F.col(n) for n in keys]]
    ranked = grouped.where(F.col("pulls") >= min_pulls).select(
        # one window partition on purpose: a ranking is global, and there is a row per queue or client
        F.row_number().over(Window.partitionBy(F.lit(0)).orderBy(*order)).alias("rank"),
        *names,
        *[service[i].alias(f"service_ms_{name}") for i, name in enumerate(PCT_NAMES)],
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
