"""Explicit Spark schemas: the pull/hold event as logged, and what the jobs write.

``PULL_EVENT`` is ``rmqproxy.observe.pull_events.PullEvent`` field for field (docs/operations.md, "The pull event log"):
same names, same order, epoch-ms and counters as longs, durations as doubles. Nothing is ever
inferred; ``tests/spark/test_schema.py`` checks this table against the dataclass.
"""

from __future__ import annotations

from pyspark.sql import types as T

from .defaults import WAKES  # noqa: F401 (wake reasons: with the defaults, which need no pyspark)

#: (field, Spark type) in PullEvent order.
PULL_EVENT_FIELDS: tuple[tuple[str, T.DataType], ...] = (
    ("ts_ms", T.LongType()),
    ("arrived_ms", T.LongType()),
    ("group", T.StringType()),
    ("topic", T.StringType()),
    ("queue_id", T.IntegerType()),
    ("client_id", T.StringType()),
    ("remote", T.StringType()),
    ("offset", T.LongType()),
    ("max_msgs", T.IntegerType()),
    ("suspend_ms", T.LongType()),
    ("held", T.BooleanType()),
    ("hold_ms", T.DoubleType()),
    ("service_ms", T.DoubleType()),
    ("total_ms", T.DoubleType()),
    ("wake", T.StringType()),
    ("mode", T.StringType()),
    ("code", T.StringType()),
    ("msgs", T.LongType()),
    ("bytes", T.LongType()),
    ("next_offset", T.LongType()),
    ("max_offset", T.LongType()),
    ("protocol", T.StringType()),
    ("instance", T.StringType()),
)

#: Fields added after the first schema, and what an event written before each existed reads as
#: (a JSON line without it, a Parquet file of an older ``rmqproxy.schema_version``); the
#: compaction fills in the same (``rmqproxy/observe/compaction.py``'s ``ADDED``).
ADDED: dict[str, object] = {"instance": "", "protocol": "remoting"}

#: Every other field is required: a line missing one, or with one of the wrong type, is rejected.
PULL_EVENT = T.StructType([T.StructField(name, kind, nullable=False) for name, kind in PULL_EVENT_FIELDS])

#: Compacted Parquet files (rmqproxy/observe/compaction.py) read with these columns; one a file
#: written before it existed reads as null, then as its ``ADDED`` default.
PULL_EVENT_COLUMNAR = T.StructType([T.StructField(name, kind, nullable=True) for name, kind in PULL_EVENT_FIELDS])

#: Spark's JSON reader puts the raw text of a line it could not convert here (PERMISSIVE mode).
CORRUPT_COLUMN = "_corrupt_record"
PULL_EVENT_READ = T.StructType(
    [T.StructField(name, kind, nullable=True) for name, kind in PULL_EVENT_FIELDS]
    + [T.StructField(CORRUPT_COLUMN, T.StringType(), nullable=True)]
)


#: One rejected input line: where it came from, why, and the line itself.
REJECT = T.StructType(
    [
        T.StructField("source", T.StringType(), nullable=False),
        T.StructField("reason", T.StringType(), nullable=False),
        T.StructField("line", T.StringType(), nullable=False),
    ]
)
