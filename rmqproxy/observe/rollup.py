"""Rollups: the cells a report merges its tables from, computed once as a file is compacted.

``rmqproxy report`` makes one pass over the events, cutting them into cells (counts, sums,
maxima and KLL sketches per group/topic/minute and per queue and client:
``spark_jobs/transforms.py``'s ``cell_stats``), and merges every table from those. Most of its
time over a compacted log is that pass. So the compaction, which holds the rows anyway, writes a
compacted file's cells beside it (``spark_jobs.defaults.rollup_name``) and the report reads those
instead of the file's rows: the same columns, the same sketches (Apache DataSketches' KLL, whose
serialized form is the same in its C++ library, used here, and its Java one, used by Spark).

A rollup depends on two report options, so both are in its name: the sketch size, and the short
polling time a short-mode timeout's overshoot is measured against (the server's own
``shortPollingTimeMills`` for its background compaction). A report run with other values reads
the rows. A rollup is written before its Parquet file and counts only beside it, so a crash
between the two leaves the rows to read, never the cells of events not in the dataset.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from spark_jobs.defaults import DEFAULT_SHORT_POLLING_MS, DEFAULT_SKETCH_K, SKETCHED, WAKES, rollup_name


class Options(NamedTuple):
    """The report options a rollup is made for (``rmqproxy report``'s defaults unless told)."""

    sketch_k: int = DEFAULT_SKETCH_K
    short_polling_ms: int = DEFAULT_SHORT_POLLING_MS


DEFAULT = Options()


def rollup_path(parquet: Path, sketch_k: int, short_polling_ms: int) -> Path:
    """Where the rollup of the compacted file ``parquet`` goes, for these report options."""
    return parquet.with_name(rollup_name(parquet.stem, sketch_k, short_polling_ms))


def cells(events, sketch_k: int, short_polling_ms: int):
    """The cells of a table of events (``compaction.COLUMNS``) as a pyarrow table: one row per
    window cell (group, topic, minute, suspendable) and per queue cell (group, topic, queue_id,
    client), the columns and types of ``cell_stats`` (its test checks both)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ts = events["ts_ms"].to_numpy()
    mode, wake = events["mode"], events["wake"]
    expected = pc.if_else(pc.equal(mode, "long"), pc.cast(events["suspend_ms"], pa.float64()),
                          pc.if_else(pc.equal(mode, "short"), float(short_polling_ms), pa.scalar(None, pa.float64())))  # fmt: skip
    timeout = pc.equal(wake, "timeout")
    derived = {
        "minute": pa.array(ts - ts % 60_000, pa.timestamp("ms", tz="UTC")),
        "suspendable": pc.greater(events["suspend_ms"], 0),
        "client": pc.if_else(pc.not_equal(events["client_id"], ""), events["client_id"], events["remote"]),
        "_held": pc.cast(events["held"], pa.int64()),
        "_found": pc.cast(pc.equal(events["code"], "SUCCESS"), pa.int64()),
        "_held_hold": pc.if_else(events["held"], events["hold_ms"], pa.scalar(None, pa.float64())),
        "_overshoot": pc.if_else(timeout, pc.subtract(events["hold_ms"], expected), pa.scalar(None, pa.float64())),
        **{f"_is_{w}": pc.cast(pc.equal(wake, w), pa.int64()) for w in WAKES},
    }
    table = events.select(["group", "topic", "queue_id", "ts_ms", "total_ms", "hold_ms", "service_ms", "msgs",
                           "bytes"])  # fmt: skip
    for name, column in derived.items():
        table = table.append_column(name, column)
    measure = {"total": "total_ms", "hold": "_held_hold", "service": "service_ms", "overshoot": "_overshoot"}
    aggregates = [
        ("ts_ms", "count"), ("_held", "sum"), ("_found", "sum"), ("_overshoot", "count"),
        ("total_ms", "sum"), ("hold_ms", "sum"), ("service_ms", "sum"), ("_overshoot", "sum"),
        ("msgs", "sum"), ("bytes", "sum"), *[(f"_is_{w}", "sum") for w in WAKES],
        *[(measure[m], "max") for m in SKETCHED], ("ts_ms", "min"), ("ts_ms", "max"),
        *[(measure[m], "list") for m in SKETCHED],
    ]  # fmt: skip
    names = [
        "pulls", "held_pulls", "found_pulls", "timeouts_measured",
        "total_ms_sum", "hold_ms_sum", "service_ms_sum", "overshoot_ms_sum", "msgs", "bytes",
        *[f"_wake_{w}" for w in WAKES], *[f"{m}_ms_max" for m in SKETCHED], "first_ts_ms", "last_ts_ms",
        *[f"_{m}_sketch" for m in SKETCHED],
    ]  # fmt: skip
    kinds = {"window": ["group", "topic", "minute", "suspendable"], "queue": ["group", "topic", "queue_id", "client"]}
    key_types = {"group": pa.string(), "topic": pa.string(), "minute": pa.timestamp("ms", tz="UTC"),
                 "suspendable": pa.bool_(), "queue_id": pa.int32(), "client": pa.string()}  # fmt: skip
    parts = []
    for kind, keys in kinds.items():
        grouped = table.group_by(keys, use_threads=False).aggregate(aggregates)
        n = grouped.num_rows
        columns = {"reason": pa.nulls(n, pa.string())}
        for key, key_type in key_types.items():
            columns[key] = grouped[key] if key in keys else pa.nulls(n, key_type)
        columns["kind"] = pa.array([kind] * n, pa.string())
        for name, (column, function) in zip(names, aggregates, strict=True):
            values = grouped[f"{column}_{function}"]
            columns[name] = _sketches(values, sketch_k) if function == "list" else values
        parts.append(pa.table(columns))
    return pa.concat_tables(parts)


def _sketches(lists, sketch_k: int):
    """A serialized KLL sketch of each list's values (nulls left out), as a binary column."""
    import numpy as np
    import pyarrow as pa
    from datasketches import kll_doubles_sketch

    lists = lists.combine_chunks()
    offsets = lists.offsets.to_numpy()
    values = lists.values.to_numpy(zero_copy_only=False)  # a null is NaN (no event holds a NaN)
    out = []
    for start, end in zip(offsets[:-1], offsets[1:]):  # noqa: B905 (n + 1 offsets)
        sketch = kll_doubles_sketch(sketch_k)
        present = values[start:end]
        present = present[~np.isnan(present)]
        if len(present):
            sketch.update(np.ascontiguousarray(present))
        out.append(sketch.serialize())
    return pa.array(out, pa.binary())
