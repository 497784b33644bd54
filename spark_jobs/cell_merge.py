"""The summary tables merged from cells in this process, with pyarrow and Apache DataSketches:
the twin of ``transforms.py``'s table functions, for a log whose every file has a rollup.

Over a compacted log with rollups (rmqproxy/observe/rollup.py) the report has no rows left to
read: it merges a few hundred thousand cells, and a JVM's start and Spark's planning and
scheduling of the tables' many short jobs cost more than the merge. ``hold_report`` then merges
here instead (``--engine``). The definitions are ``transforms.py``'s (module doc there), the
merge spec is its ``CELLS``, and the sketches are the same KLL bytes (DataSketches' C++ library
here, its Java one in Spark), percentiles read the same way (inclusive rank: the value of rank
ceil(p * n) when exact). tests/spark/test_compacted.py checks that both give the same report.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasketches import kll_doubles_sketch

from .defaults import SKETCHED, WAKES
from .transforms import CELLS, PCT_NAMES, PERCENTILES, RATE_BUCKETS

_WINDOW_MS = {"minute": 60_000, "hour": 3_600_000}
#: How each of ``CELLS``'s merges is done here: pyarrow's aggregate, or a list of sketches to merge.
_MERGE = {"sum": "sum", "max": "max", "min": "min", "kll_merge_agg_double": "list"}
_DOUBLE = pa.float64()


def read_cells(paths: Sequence[str]) -> pa.Table:
    """The cells of these rollups, as one table (their columns are ``transforms.cell_schema``)."""
    return pa.concat_tables([pq.read_table(path) for path in paths])


def reject_counts(cells: pa.Table) -> dict[str | None, int]:
    """Lines per ``reason`` (None = kept), as ``transforms.reject_counts``."""
    windows = cells.filter(pc.equal(cells["kind"], "window"))
    counted = windows.group_by("reason", use_threads=False).aggregate([("pulls", "sum")])
    return dict(zip(counted["reason"].to_pylist(), counted["pulls_sum"].to_pylist(), strict=True))


def summaries(cells: pa.Table, *, top: int = 20, min_pulls: int = 20) -> dict[str, pa.Table]:
    """The summary tables by name (``hold_report.summaries``'s, in its order), from ``cells``."""
    good = _good(cells, "window")
    minutes = _merge(_keyed(good, "minute"), ["group", "topic", "window_start"])
    hours = _merge(_keyed(good, "hour"), ["group", "topic", "window_start"])
    by_minute = _windows(minutes, 1.0)
    queues = _good(cells, "queue")
    return {
        "by_minute": by_minute,
        "by_hour": _windows(hours, 60.0),
        "group_topic": _group_topic(hours),
        "rate_vs_pull_time": _rate_vs_pull_time(good, by_minute),
        "slowest_queues": _slowest(queues, ["group", "topic", "queue_id"], top, min_pulls).drop_columns("groups"),
        "slowest_clients": _slowest(queues, ["client"], top, min_pulls),
    }


def _good(cells: pa.Table, kind: str) -> pa.Table:
    """The cells of good lines of one ``kind`` ("window" or "queue"), as ``transforms._good``."""
    return cells.filter(pc.and_(pc.is_null(cells["reason"]), pc.equal(cells["kind"], kind)))


def _keyed(windows: pa.Table, window: str) -> pa.Table:
    ms = pc.cast(windows["minute"], pa.int64()).to_numpy()
    start = pa.array(ms - ms % _WINDOW_MS[window], pa.timestamp("ms", tz="UTC"))
    return windows.append_column("window_start", start)


def _merge(cells: pa.Table, keys: list[str]) -> pa.Table:
    """Cells merged per ``keys``: sums, maxima, minima, merged sketches (``CELLS``'s merges)."""
    aggregates = [(name, _MERGE[merge]) for name, (_, merge) in CELLS.items()]
    grouped = cells.group_by(keys, use_threads=False).aggregate(aggregates)
    columns = {key: grouped[key] for key in keys}
    for name, function in aggregates:
        column = grouped[f"{name}_{function}"]
        columns[name] = _merged_sketches(column) if function == "list" else column
    return pa.table(columns)


def _merged_sketches(lists: pa.ChunkedArray) -> pa.Array:
    """One serialized sketch per list of them: the list's one sketch as it is, else their merge
    (a merged sketch keeps its first sketch's k, as all of a report's cells share one)."""
    out = []
    for sketches in lists.to_pylist():
        if len(sketches) == 1:
            out.append(sketches[0])
            continue
        merged = kll_doubles_sketch.deserialize(sketches[0])
        for other in sketches[1:]:
            merged.merge(kll_doubles_sketch.deserialize(other))
        out.append(merged.serialize())
    return pa.array(out, pa.binary())


def _quantiles(sketches: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
    """The PERCENTILES of each sketch, one array per percentile (null where it saw no value)."""
    values = np.full((len(sketches), len(PERCENTILES)), np.nan)
    for i, data in enumerate(sketches.to_pylist()):
        sketch = kll_doubles_sketch.deserialize(data)
        if not sketch.is_empty():
            values[i] = sketch.get_quantiles(PERCENTILES, inclusive=True)
    return [pa.array(values[:, j], _DOUBLE, from_pandas=True) for j in range(len(PERCENTILES))]


def _share(numerator, denominator) -> pa.Array:
    """numerator / denominator as doubles, null where the denominator is not positive."""
    numerator, denominator = pc.cast(numerator, _DOUBLE), pc.cast(denominator, _DOUBLE)
    return pc.if_else(pc.greater(denominator, 0.0), pc.divide(numerator, denominator), pa.scalar(None, _DOUBLE))


def _finish(merged: pa.Table, keys: list[str], minutes) -> pa.Table:
    """Percentiles off the merged sketches and counts as shares: ``transforms._finish``'s columns
    in its order; ``minutes`` is the window length (a number or a column)."""
    col = merged.column
    pct = {m: _quantiles(col(f"_{m}_sketch")) for m in SKETCHED}
    out = {k: col(k) for k in keys}
    out.update(pulls=col("pulls"), held_pulls=col("held_pulls"), held_share=_share(col("held_pulls"), col("pulls")),
               found_pulls=col("found_pulls"))  # fmt: skip
    for m in ("total", "hold", "service"):
        out.update({f"{m}_ms_{name}": pct[m][i] for i, name in enumerate(PCT_NAMES)})
        out[f"{m}_ms_max"] = col(f"{m}_ms_max")
    woken = col("_wake_" + WAKES[0])
    for w in WAKES[1:]:
        woken = pc.add(woken, col(f"_wake_{w}"))
    out.update(
        total_ms_mean=_share(col("total_ms_sum"), col("pulls")),
        service_ms_mean=_share(col("service_ms_sum"), col("pulls")),
        hold_share_of_time=_share(col("hold_ms_sum"), col("total_ms_sum")),
        **{f"wake_{w}_share": _share(col(f"_wake_{w}"), col("pulls")) for w in WAKES},
        wake_other_share=_share(pc.subtract(col("pulls"), woken), col("pulls")),
        timeouts=col("_wake_timeout"),
        timeouts_measured=col("timeouts_measured"),
        overshoot_ms_p50=pct["overshoot"][0],
        overshoot_ms_p99=pct["overshoot"][2],
        overshoot_ms_max=col("overshoot_ms_max"),
        overshoot_ms_mean=_share(col("overshoot_ms_sum"), col("timeouts_measured")),
        msgs=col("msgs"),
        bytes=col("bytes"),
        msgs_per_min=pc.divide(pc.cast(col("msgs"), _DOUBLE), minutes),
        total_ms_sum=col("total_ms_sum"),
        hold_ms_sum=col("hold_ms_sum"),
        service_ms_sum=col("service_ms_sum"),
        first_ts_ms=col("first_ts_ms"),
        last_ts_ms=col("last_ts_ms"),
    )
    return pa.table(out)


def _windows(merged: pa.Table, minutes: float) -> pa.Table:
    """``transforms.finish_windows``: group, topic, window_start, date, then the aggregates."""
    out = _finish(merged, ["group", "topic", "window_start"], minutes)
    date = pc.strftime(out["window_start"], format="%Y-%m-%d")
    out = out.add_column(3, "date", date)
    return out.sort_by([("group", "ascending"), ("topic", "ascending"), ("window_start", "ascending")])


def _group_topic(hours: pa.Table) -> pa.Table:
    """``transforms.group_topic_stats``: per (group, topic) from the hour cells."""
    merged = _merge(hours, ["group", "topic"])
    span = pc.divide(pc.cast(pc.subtract(merged["last_ts_ms"], merged["first_ts_ms"]), _DOUBLE), 60_000.0)
    out = _finish(merged, ["group", "topic"], pc.max_element_wise(span, 1.0))
    return out.sort_by([("group", "ascending"), ("topic", "ascending")])


def _buckets(rates: pa.ChunkedArray) -> pa.Array:
    """``transforms.rate_bucket``: the label of the bucket each rate falls in (null below 0)."""
    edges = np.array([edge for edge, _ in RATE_BUCKETS])
    labels = [label for _, label in RATE_BUCKETS]
    values = pc.fill_null(pc.cast(rates, _DOUBLE), -1.0).to_numpy()
    index = np.searchsorted(edges, values, side="right") - 1
    return pa.array([labels[i] if i >= 0 else None for i in index], pa.string())


def _rate_vs_pull_time(windows: pa.Table, by_minute: pa.Table) -> pa.Table:
    """``transforms.rate_vs_pull_time``, from the good window cells and the minute table."""
    buckets = _buckets(by_minute["msgs_per_min"])
    rates = pa.table({"group": by_minute["group"], "topic": by_minute["topic"],
                      "minute": by_minute["window_start"], "bucket": buckets})  # fmt: skip
    suspendable = windows.filter(pc.fill_null(windows["suspendable"], False))
    joined = suspendable.join(rates, ["group", "topic", "minute"], join_type="inner")
    grouped = _merge(joined, ["bucket"]).drop_columns("msgs")
    counted = pa.table({"bucket": buckets, "msgs": by_minute["msgs"]}).group_by("bucket", use_threads=False)
    minutes = counted.aggregate([([], "count_all"), ("msgs", "sum")]).rename_columns(
        {"count_all": "group_topic_minutes", "msgs_sum": "msgs"}
    )
    both = grouped.join(minutes, "bucket", join_type="inner")
    out = _finish(both, ["bucket", "group_topic_minutes"], pc.cast(both["group_topic_minutes"], _DOUBLE))
    position = {label: i for i, (_, label) in enumerate(RATE_BUCKETS)}
    index = pa.array([position[b] for b in out["bucket"].to_pylist()], pa.int32())
    return out.add_column(0, "bucket_index", index).sort_by("bucket_index")


def _slowest(queues: pa.Table, keys: list[str], top: int, min_pulls: int) -> pa.Table:
    """``transforms._slowest``: keys by p99 service time, slowest first, the first ``top`` of
    those with at least ``min_pulls`` pulls."""
    grouped = queues.group_by(keys, use_threads=False).aggregate([
        ("pulls", "sum"), ("_service_sketch", "list"), ("service_ms_max", "max"), ("service_ms_sum", "sum"),
        ("held_pulls", "sum"), ("msgs", "sum"), ("group", "distinct"),
    ])  # fmt: skip
    pulls = grouped["pulls_sum"]
    table = pa.table({
        **{k: grouped[k] for k in keys},
        "pulls": pulls,
        "service_ms_max": grouped["service_ms_max_max"],
        "service_ms_mean": pc.divide(pc.cast(grouped["service_ms_sum_sum"], _DOUBLE), pc.cast(pulls, _DOUBLE)),
        "held_share": pc.divide(pc.cast(grouped["held_pulls_sum"], _DOUBLE), pc.cast(pulls, _DOUBLE)),
        "msgs": grouped["msgs_sum"],
        "groups": pa.array([",".join(sorted(g)) for g in grouped["group_distinct"].to_pylist()], pa.string()),
        "_service_sketch": _merged_sketches(grouped["_service_sketch_list"]),
    })  # fmt: skip
    table = table.filter(pc.greater_equal(table["pulls"], min_pulls))
    service = _quantiles(table["_service_sketch"])
    table = table.drop_columns("_service_sketch")
    for i, name in enumerate(PCT_NAMES):
        table = table.append_column(f"service_ms_{name}", service[i])
    order = [("service_ms_p99", "descending"), ("service_ms_max", "descending"), *[(k, "ascending") for k in keys]]
    ranked = table.sort_by(order).slice(0, max(top, 0))
    return ranked.add_column(0, "rank", pa.array(range(1, ranked.num_rows + 1), pa.int32()))


def rows(table: pa.Table) -> tuple[list[str], list[tuple]]:
    """A table's (columns, rows) as a Spark job collects them: timestamps as naive UTC datetimes."""
    columns = [
        [v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in column.to_pylist()]
        for column in table.columns
    ]
    return table.column_names, list(zip(*columns, strict=True)) if columns else []
