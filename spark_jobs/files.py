"""Reading inputs and writing outputs for the jobs, through Hadoop's FileSystem API so that any
URI Spark can read (local paths, ``file:``, ``hdfs:``, ``s3a:`` with its connector...) works for
the small files too (CSV summaries, report.html, summary.json), not just for Spark's writers.

Inputs: each ``--input`` is a file, a directory (its files, not recursively; names starting
with ``_`` or ``.`` skipped, as Hadoop does), or a glob; ``.gz`` (and other Hadoop codecs) are
decompressed by extension. Every line keeps the path of its file (``source``). An event log's
folder that holds compacted files is read as one dataset, Parquet and JSON lines (``event_dataset``).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import shutil
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from .defaults import COMPACTED_GLOB, rollup_name


#: Summary tables computed at once (``write_tables``), and how its log line for each done one starts.
TABLE_WORKERS = 3
TABLE_DONE = "table"


def _paths(inputs: Sequence[str]) -> list[str]:
    if not inputs:
        raise ValueError("no input given")
    return list(inputs)




class Dataset(NamedTuple):
    """The files an event-log report reads: JSON lines (files, globs or URIs, as given), the
    Parquet files of compacted logs whose rows it reads (``parquet``), and those whose cells it
    reads from their rollups instead (``rolled``, and the rollups: ``cells``)."""

    json: list[str]
    parquet: list[str]
    rolled: list[str] = []
    cells: list[str] = []


class Listing(Protocol):
    """The three file-system questions ``event_dataset`` asks: Hadoop's FileSystem API for a
    job (``hadoop_listing``), the local one for the report that reads rollups without a JVM
    (``LOCAL``)."""

    def glob(self, folder: str, pattern: str) -> list[str]:
        """Paths matching ``pattern`` under ``folder``."""

    def exists(self, path: str) -> bool:
        """Whether ``path`` is there."""

    def files(self, folder: str) -> list[str]:
        """The paths of the plain files directly in ``folder`` (none if it is not a folder)."""


class _Hadoop:
    def __init__(self, spark: SparkSession) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, path):
        return path.getFileSystem(self._conf)

    def glob(self, folder: str, pattern: str) -> list[str]:
        path = self._jvm.org.apache.hadoop.fs.Path(self._jvm.org.apache.hadoop.fs.Path(folder), pattern)
        return [str(s.getPath()) for s in (self._fs(path).globStatus(path) or [])]

    def exists(self, path: str) -> bool:
        hadoop = self._jvm.org.apache.hadoop.fs.Path(path)
        return bool(self._fs(hadoop).exists(hadoop))

    def files(self, folder: str) -> list[str]:
        path = self._jvm.org.apache.hadoop.fs.Path(folder)
        fs = self._fs(path)
        if not fs.isDirectory(path):
            return []
        return [str(s.getPath()) for s in fs.listStatus(path) if s.isFile()]


def hadoop_listing(spark: SparkSession) -> Listing:
    """``event_dataset``'s questions through Hadoop's FileSystem API (any URI the session reads)."""
    return _Hadoop(spark)


class _Local:
    def glob(self, folder: str, pattern: str) -> list[str]:
        return [str(p) for p in Path(folder).glob(pattern)]

    def exists(self, path: str) -> bool:
        return Path(path).exists()

    def files(self, folder: str) -> list[str]:
        return [str(p) for p in Path(folder).iterdir() if p.is_file()] if Path(folder).is_dir() else []


#: ``event_dataset``'s questions answered by this machine's own file system (plain paths only).
LOCAL: Listing = _Local()


def event_dataset(listing: Listing, inputs: Sequence[str], rollups: tuple[int, int] | None = None) -> Dataset:
    """``inputs`` as a ``Dataset``, their folders listed by ``listing``. A folder holding a
    compacted log (``COMPACTED_GLOB``) is read as one dataset: its Parquet files, the lines each
    compaction kept aside (``.rejected.jsonl`` beside its Parquet file), and its JSON-lines files
    except those whose Parquet twin exists (compacted, not yet deleted). A Parquet file with a
    rollup for ``rollups`` (sketch size, short polling ms: ``defaults.rollup_name``) is
    ``rolled``. Any other input is passed on as it is."""
    dataset = Dataset([], [], [], [])
    for given in _paths(inputs):
        parquet = sorted(listing.glob(given, COMPACTED_GLOB))
        if not parquet:
            dataset.json.append(given)
            continue
        found = set()
        if rollups is not None:
            found = set(listing.glob(given, COMPACTED_GLOB[: -len("*.parquet")] + rollup_name("*", *rollups)))
        for path in parquet:
            head, stem = path.rsplit("/", 1)[0], path.rsplit("/", 1)[1][: -len(".parquet")]
            cells = f"{head}/{rollup_name(stem, *rollups)}" if rollups is not None else None
            if cells in found:
                dataset.rolled.append(path)
                dataset.cells.append(cells)
            else:
                dataset.parquet.append(path)
        dataset.json.extend(p[: -len(".parquet")] + ".rejected.jsonl" for p in parquet
                            if listing.exists(p[: -len(".parquet")] + ".rejected.jsonl"))  # fmt: skip
        compacted = {p.rsplit("/", 1)[1][: -len(".parquet")] for p in parquet}
        for path in sorted(listing.files(given)):
            name = path.rsplit("/", 1)[1]
            compacted_twin = name.endswith(".jsonl") and name[: -len(".jsonl")] in compacted
            if not name.startswith(("_", ".")) and not compacted_twin:
                dataset.json.append(path)
    return dataset


def read_lines(spark: SparkSession, inputs: Sequence[str]) -> DataFrame:
    """Every line of every input as (``value``, ``source``); no input, no rows."""
    if not inputs:
        return spark.range(0).select(F.lit("").alias("value"), F.lit("").alias("source"))
    text = spark.read.text(list(inputs))
    return text.select(F.col("value"), F.input_file_name().alias("source"))


def read_records(spark: SparkSession, inputs: Sequence[str], schema: StructType, options: dict[str, str]) -> DataFrame:
    """Every line of every input through Spark's JSON reader (``schema`` explicit, nothing
    inferred), the same files as ``read_lines``; only the schema's columns (no partition columns
    from ``key=value`` directory names); no input, no rows."""
    if not inputs:
        return spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])
    return spark.read.schema(schema).options(**options).json(list(inputs)).select(*schema.fieldNames())


def read_columnar(spark: SparkSession, paths: Sequence[str], schema: StructType) -> DataFrame | None:
    """The rows of compacted Parquet files (events, or the cells of their rollups) with
    ``schema``'s columns (a column a file lacks reads as null), or None when there are none."""
    if not paths:
        return None
    reader = spark.read.schema(schema).option("recursiveFileLookup", "true")  # no partition columns
    return reader.parquet(*paths).select(*schema.fieldNames())


def local_files(spark: SparkSession, lines: DataFrame) -> list[str] | None:
    """The paths of the files behind ``lines`` (``read_lines``) when this process can read them
    as Spark does: a local master, and every file a local one with no compression codec. ``None``
    otherwise (a cluster, another filesystem, ``.gz``...)."""
    if not spark.sparkContext.master.startswith("local"):
        return None
    jvm = spark.sparkContext._jvm
    codecs = jvm.org.apache.hadoop.io.compress.CompressionCodecFactory(spark.sparkContext._jsc.hadoopConfiguration())
    paths = []
    for uri in lines.inputFiles():
        parts = urllib.parse.urlsplit(uri)
        if parts.scheme != "file" or codecs.getCodec(jvm.org.apache.hadoop.fs.Path(uri)) is not None:
            return None
        paths.append(urllib.parse.unquote(parts.path))
    return paths


def all_one_object_per_line(paths: Sequence[str], threads: int) -> bool:
    """``one_object_per_line`` for every file, ``threads`` at a time (numpy drops the GIL); the
    first file that fails ends it (files not yet started are not read)."""
    pool = ThreadPoolExecutor(max(1, threads))
    try:
        return all(pool.map(one_object_per_line, paths))
    finally:
        pool.shutdown(cancel_futures=True)


def check_in_background(paths: Sequence[str], threads: int) -> Future[bool]:
    """``all_one_object_per_line`` started in a background thread; its answer comes as a Future."""
    starter = ThreadPoolExecutor(1, thread_name_prefix="line-shapes")
    try:
        return starter.submit(all_one_object_per_line, list(paths), threads)
    finally:
        starter.shutdown(wait=False)


_CHUNK = 8 << 20
_OPEN, _CLOSE, _LF, _CR = b"{}\n\r"
_BOM = "\ufeff".encode()


def one_object_per_line(path: str) -> bool:
    """Whether ``transforms.needs_line_reader`` holds for none of the lines Hadoop reads from the
    file at ``path``, i.e. each is ``{``, then bytes other than ``}``, then ``}``; found from byte
    counts at memory speed instead of line by line. With a leading byte order mark (Hadoop drops
    it) and one final newline set aside, that is: ``{`` first, ``}`` last, every newline inside
    ``}\\n{``, and no other ``}`` (one per line). A carriage return anywhere gives False: Hadoop
    ends lines at one too, and the line parser reads such a file right. An empty file has no lines."""
    buf = bytearray(_CHUNK + 2)
    closes = newlines = joins = 0
    first, tail = None, b""
    with open(path, "rb", buffering=0) as f:
        if f.read(len(_BOM)) != _BOM:
            f.seek(0)
        while k := f.readinto(memoryview(buf)[len(tail) :]):
            n = len(tail)
            if buf.find(_CR, n, n + k) >= 0:
                return False
            # the last two bytes read before lead, so that a newline at a chunk's edge has both
            # neighbours: each is judged once, where it is neither first nor last of ``seen``
            seen = np.frombuffer(buf, np.uint8, n + k)
            if first is None:
                first = int(seen[0])
            closes += int(np.count_nonzero(seen[n:] == _CLOSE))
            lf = np.flatnonzero(seen == _LF)
            newlines += int(np.count_nonzero(lf >= n))
            inner = lf[(lf > 0) & (lf < n + k - 1)]
            joins += int(np.count_nonzero((seen[inner - 1] == _CLOSE) & (seen[inner + 1] == _OPEN)))
            tail = bytes(buf[max(0, n + k - 2) : n + k])
            buf[: len(tail)] = tail
    if first is None:
        return True
    final_lf = int(tail[-1] == _LF)
    last = tail[-1 - final_lf] if len(tail) > final_lf else None
    lines = newlines - final_lf + 1
    return first == _OPEN and last == _CLOSE and joins == lines - 1 and closes == lines


def _path(spark: SparkSession, uri: str):
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def write_bytes(spark: SparkSession, uri: str, data: bytes) -> None:
    """Create or replace the file ``uri`` with ``data``."""
    path, fs = _path(spark, uri)
    out = fs.create(path, True)
    try:
        step = 1 << 20
        for i in range(0, len(data), step):
            out.write(bytearray(data[i : i + step]))
    finally:
        out.close()


def write_report(write: Callable[[str, bytes], None], output: str, html: str, summary: dict) -> str:
    """Write a job's ``report.html`` and ``summary.json`` into ``output`` with ``write(uri,
    data)``; returns the report's URI."""
    page = join(output, "report.html")
    write(page, html.encode())
    write(join(output, "summary.json"), to_json(summary))
    return page


def publish(
    write: Callable[[str, bytes], None],
    output: str,
    summary: dict,
    collected: dict[str, tuple[list[str], list[tuple]]],
    render: Callable[[dict, dict[str, tuple[list[str], list[tuple]]]], str],
    started: float,
    log: Callable[[str], None],
) -> dict:
    """End a job: complete its ``summary`` with each table's row count and the seconds since
    ``started`` (monotonic), write ``render(summary, collected)`` as report.html and the summary as
    summary.json with ``write(uri, data)`` (``write_bytes`` bound to a session, or a local write);
    returns the summary written."""
    summary = {
        **summary,
        "tables": {name: len(rows) for name, (_, rows) in collected.items()},
        "seconds": round(time.monotonic() - started, 3),
    }
    log("writing report.html")
    page = write_report(write, output, render(summary, collected), summary)
    log(f"done in {summary['seconds']} s: {page}")
    return summary


def write_local(path: str, data: bytes) -> None:
    """Create or replace the local file ``path`` (and its folder) with ``data``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(data)


def replace_local_folder(folder: Path) -> Path:
    """Empty the local output folder ``folder`` (made if missing) and mark it complete with
    ``_SUCCESS``, as Spark's writers leave one; returns it."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "_SUCCESS").touch()
    return folder


def write_local_tables(
    output: str,
    tables: dict,
    partitioned: Sequence[str],
    rows: Callable[[object], tuple[list[str], list[tuple]]],
    log: Callable[[str], None],
) -> dict[str, tuple[list[str], list[tuple]]]:
    """``write_tables`` for pyarrow tables under a local ``output``: the same folders (Parquet,
    ``partitioned`` ones by ``date``, each replaced) and CSV files; returns their (columns, rows)
    as ``rows`` gives them."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    collected = {}
    for name, table in tables.items():
        folder = replace_local_folder(Path(output, name))
        parts = {"": table}
        if name in partitioned:
            parts = {f"date={d}": table.filter(pc.equal(table["date"], d)).drop_columns("date")
                     for d in sorted(set(table["date"].to_pylist()))}  # fmt: skip
        for part, rows_of_part in parts.items():
            (folder / part).mkdir(exist_ok=True)
            pq.write_table(rows_of_part, folder / part / "part-00000.parquet")
        collected[name] = rows(table)
        write_local(join(output, "csv", f"{name}.csv"), to_csv(*collected[name]))
        log(f"{TABLE_DONE} {name} written ({table.num_rows} rows)")
    return collected


def read_bytes(spark: SparkSession, uri: str) -> bytes:
    path, fs = _path(spark, uri)
    stream = fs.open(path)
    try:
        length = fs.getFileStatus(path).getLen()
        buf = bytearray(length)
        stream.readFully(0, buf)
        return bytes(buf)
    finally:
        stream.close()


def exists(spark: SparkSession, uri: str) -> bool:
    path, fs = _path(spark, uri)
    return bool(fs.exists(path))


def _cell(value: object) -> object:
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return repr(round(value, 6))
    return value


def to_csv(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> bytes:
    """A CSV document (header row, RFC 4180 quoting, '' for null, UTC timestamps)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else _cell(v) for v in row])
    return buf.getvalue().encode()


def to_json(document: object) -> bytes:
    return (json.dumps(document, indent=2, sort_keys=True, default=str) + "\n").encode()


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def write_tables(
    spark: SparkSession,
    output: str,
    tables: dict[str, DataFrame],
    partitioned: Sequence[str],
    log: Callable[[str], None],
) -> dict[str, tuple[list[str], list[tuple]]]:
    """Write each (small) summary table as Parquet (``partitioned`` ones by ``date``) and as one
    CSV file ``csv/<name>.csv``; returns their collected (columns, rows) for the report, in the
    order given.

    Tables are computed ``TABLE_WORKERS`` at a time, in the order given: each is a few short jobs
    whose planning and scheduling run in the driver while the executors idle, and concurrent
    tables fill those gaps (10M events: ~1-2 s of 8-12). All are marked cached before any runs,
    so a table built on another (the arrival-rate table on the minute table) reads its cached
    rows, waiting for them if they are being computed; the caller clears the cache."""
    cached = {name: df.cache() for name, df in tables.items()}

    def one(name: str) -> tuple[list[str], list[tuple]]:
        table = cached[name]
        writer = table.write.mode("overwrite")
        if name in partitioned:
            writer = writer.partitionBy("date")
        writer.parquet(join(output, name))
        rows = [tuple(r) for r in table.collect()]
        write_bytes(spark, join(output, "csv", f"{name}.csv"), to_csv(table.columns, rows))
        log(f"{TABLE_DONE} {name} written ({len(rows)} rows)")
        return table.columns, rows

    log(f"computing {len(tables)} tables, {TABLE_WORKERS} at a time: {', '.join(tables)}")
    with ThreadPoolExecutor(TABLE_WORKERS) as pool:
        return dict(zip(tables, pool.map(one, tables), strict=True))
