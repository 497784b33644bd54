"""Compaction of the pull event log: closed JSON-lines files rewritten as Parquet.

``pulls-D-H-<instance>-<n>.jsonl`` becomes ``date=D/hour=H/pulls-D-H-<instance>-<n>.parquet``
under the same folder: the event schema with its types (``COLUMNS``, as ``spark_jobs/schema.py``),
its version in the file's metadata (``rmqproxy.schema_version``), partitioned by date and hour.
A line that is not exactly an event as the server writes it (a torn line, a wrong type, a field
missing or unknown) is kept as it was in ``<stem>.rejected.jsonl`` beside the Parquet file, so a
report over compacted files rejects what it would have rejected from the JSON.

Crash safety: both files are written under hidden temporary names, fsynced, and renamed, the
Parquet file last; only then is the JSON file deleted. The Parquet file is the mark of a
complete compaction: a reader takes a JSON file unless its Parquet twin exists, and a sidecar
only beside its Parquet file (``dataset_files``), so a crash leaves one or the other counted,
never neither and never both; the next pass finishes the job.

A file is closed once a later file of its instance exists, or once its hour has ended and it
has not been written for ``CLOSED_AFTER_S``. One compactor works on a folder at a time (an ``flock`` on ``.compact.lock``): the
server's background pass (``rmqproxy compact`` run as a child process, so its parsing never
holds the reactor's GIL) and one started by hand never meet on a file.
"""

from __future__ import annotations

import calendar
import fcntl
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from spark_jobs.defaults import COMPACTED_GLOB

from ..core.files import fsync_dir
from . import rollup

#: The version of the columnar event schema, written in every Parquet file's metadata: 1 the
#: first fields, 2 added ``instance``, 3 ``protocol``.
SCHEMA_VERSION = 3
#: (column, kind) in ``PullEvent`` order; kinds: long, int, str, bool, double.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("ts_ms", "long"), ("arrived_ms", "long"), ("group", "str"), ("topic", "str"), ("queue_id", "int"),
    ("client_id", "str"), ("remote", "str"), ("offset", "long"), ("max_msgs", "int"), ("suspend_ms", "long"),
    ("held", "bool"), ("hold_ms", "double"), ("service_ms", "double"), ("total_ms", "double"), ("wake", "str"),
    ("mode", "str"), ("code", "str"), ("msgs", "long"), ("bytes", "long"), ("next_offset", "long"),
    ("max_offset", "long"), ("protocol", "str"), ("instance", "str"),
)  # fmt: skip
#: Columns added after version 1, and what a line an older server wrote reads as without them
#: (a reader of older Parquet files does the same: ``spark_jobs/schema.py``'s ``ADDED``).
ADDED: dict[str, object] = {"instance": "", "protocol": "remoting"}
#: A file whose hour ended this long ago takes no more events.
CLOSED_AFTER_S = 300
LOCK_NAME = ".compact.lock"
JSONL = re.compile(r"^pulls-(\d{8})-(\d{2})-(.+)-(\d+)\.jsonl$")

_LIMITS = {"long": 1 << 63, "int": 1 << 31}
_NAMES = frozenset(name for name, _ in COLUMNS)
_FIRST_NAMES = _NAMES - ADDED.keys()


class Busy(Exception):
    """Another compactor holds the folder."""


def twin(jsonl: Path) -> Path:
    """Where a JSON-lines file's Parquet twin goes (``date=D/hour=H/<stem>.parquet``)."""
    match = JSONL.match(jsonl.name)
    if match is None:
        raise ValueError(f"not an event-log file name: {jsonl.name}")
    return jsonl.parent / f"date={match[1]}" / f"hour={match[2]}" / (jsonl.stem + ".parquet")


def sidecar(parquet: Path) -> Path:
    """The lines a compaction kept as they were, beside its Parquet file."""
    return parquet.with_name(parquet.stem + ".rejected.jsonl")


def closed_files(directory: Path, now: float) -> list[Path]:
    """The JSON-lines files of ``directory`` no writer appends to any more (see the module doc),
    oldest first."""
    latest: dict[str, tuple[str, int]] = {}
    found = []
    for path in directory.glob("pulls-*.jsonl"):
        match = JSONL.match(path.name)
        if match is None:
            continue
        hour, number = f"{match[1]}{match[2]}", int(match[4])
        found.append((hour, number, match[3], path))
        latest[match[3]] = max(latest.get(match[3], ("", -1)), (hour, number))
    closed = []
    for hour, number, instance, path in sorted(found):
        if (hour, number) < latest[instance] or (now - _hour_end(hour) >= CLOSED_AFTER_S
                                                 and now - _mtime(path) >= CLOSED_AFTER_S):  # fmt: skip
            closed.append(path)
    return closed


def _hour_end(hour: str) -> float:
    return calendar.timegm(time.strptime(hour, "%Y%m%d%H")) + 3600


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("inf")  # gone meanwhile: not to be compacted


def dataset_files(directory: Path) -> tuple[list[Path], list[Path]]:
    """What a report reads under ``directory``: (JSON-lines files, Parquet files). A JSON file
    whose Parquet twin exists is left out (it was compacted), and a sidecar of rejected lines
    counts only beside its Parquet file. ``spark_jobs.files.event_dataset`` applies the same rule
    through Hadoop's file systems (the jobs do not import rmqproxy)."""
    parquet = sorted(directory.glob(COMPACTED_GLOB))
    json_files = [p for p in sorted(directory.glob("pulls-*.jsonl*")) if not (JSONL.match(p.name) and twin(p).exists())]
    json_files += [sidecar(p) for p in parquet if sidecar(p).exists()]
    return json_files, parquet


@contextmanager
def folder_lock(directory: Path, *, wait: bool) -> Iterator[None]:
    """Hold the folder's compaction lock (``Busy`` if another compactor has it and not ``wait``)."""
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise Busy(f"another compaction is running in {directory}") from None
        yield
    finally:
        os.close(fd)  # releases the lock


class Pacer:
    """Keeps a compaction to ``share`` of one core (1: as fast as it goes): called between slices
    of work, it sleeps until the process's CPU time is at most ``share`` of the wall time since
    it began. Even in the idle scheduling class, a compaction using every idle moment cost a
    saturated server a fifth of its sends on two cores (bench/e2e.py --compaction-cost)."""

    def __init__(self, share: float = 1.0, *, cpu: Callable[[], float] = time.process_time,
                 wall: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
        if not 0 < share <= 1:
            raise ValueError(f"a CPU share is more than 0 and at most 1, not {share}")
        self.share, self.cpu, self.wall, self.sleep = share, cpu, wall, sleep
        self._cpu0, self._wall0 = cpu(), wall()

    def __call__(self) -> None:
        if self.share < 1:
            ahead = (self.cpu() - self._cpu0) / self.share - (self.wall() - self._wall0)
            if ahead > 0:
                self.sleep(ahead)


#: Lines parsed between two calls of the pacer (a few milliseconds of work).
PACE_EVERY_LINES = 2048
_FULL_SPEED = Pacer()


def compact(directory: Path, *, now: float | None = None, wait: bool = False, cpu_share: float = 1.0,
            cells: rollup.Options = rollup.DEFAULT) -> list[Path]:  # fmt: skip
    """Compact every closed file of ``directory``, using at most ``cpu_share`` of a core, with
    rollups for the report options ``cells``; returns the Parquet files written. A compacted file
    without a rollup for these options (compacted before rollups, or for other options) gets one.
    ``Busy`` if another compactor works there (unless ``wait``)."""
    directory = Path(directory)
    pace = Pacer(cpu_share)
    written = []
    with folder_lock(directory, wait=wait):
        for path in closed_files(directory, time.time() if now is None else now):
            written.append(compact_file(path, pace, cells))
        for parquet in directory.glob(COMPACTED_GLOB):
            if not rollup.rollup_path(parquet, *cells).exists():
                pace()
                _write_rollup(parquet, _read_events(parquet), cells)
    return written


def compact_file(jsonl: Path, pace: Callable[[], None] = _FULL_SPEED, cells: rollup.Options = rollup.DEFAULT) -> Path:
    """Rewrite one closed JSON-lines file as its Parquet twin, with its rollup, then delete it
    (see the module doc for the order); returns the Parquet file. A twin already there means an
    earlier pass ended between the rename and the delete: only the delete is left to do."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = twin(jsonl)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        columns, rejected = parse(jsonl.read_bytes(), pace)
        table = pa.table({name: pa.array(values, type=_arrow_type(kind)) for (name, kind), values
                          in zip(COLUMNS, columns)})  # noqa: B905  fmt: skip
        table = table.replace_schema_metadata({"rmqproxy.schema_version": str(SCHEMA_VERSION)})
        side = sidecar(target)
        if rejected:
            _write_then_rename(side, lambda tmp: tmp.write_bytes(b"".join(rejected)))
        else:
            side.unlink(missing_ok=True)
        pace()
        _write_rollup(target, table, cells)
        _write_then_rename(target, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
        fsync_dir(target.parent)
    jsonl.unlink(missing_ok=True)
    fsync_dir(jsonl.parent)
    return target


def _arrow_type(kind: str):
    """pyarrow's type of a column kind (pyarrow loads only to compact)."""
    import pyarrow as pa

    return {"long": pa.int64(), "int": pa.int32(), "str": pa.string(), "bool": pa.bool_(), "double": pa.float64()}[kind]


def _read_events(parquet: Path):
    """The events of a compacted file, a column added since it was written as its default."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(parquet)
    for name, kind in COLUMNS:
        if name not in table.column_names:
            table = table.append_column(name, pa.array([ADDED[name]] * table.num_rows, _arrow_type(kind)))
    return table.select([name for name, _ in COLUMNS])


def _write_rollup(parquet: Path, events, cells: rollup.Options) -> None:
    """Write the rollup of the events of ``parquet`` (before the file itself: see ``rollup``)."""
    import pyarrow.parquet as pq

    path = rollup.rollup_path(parquet, *cells)
    table = rollup.cells(events, *cells)
    _write_then_rename(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def parse(data: bytes, pace: Callable[[], None] = _FULL_SPEED) -> tuple[list[list], list[bytes]]:
    """The events of a JSON-lines file, column by column, and the lines that are not exactly an
    event as the server writes it, blank ones included (kept as they were, with their line end);
    ``pace`` is called every ``PACE_EVERY_LINES`` lines."""
    columns: list[list] = [[] for _ in COLUMNS]
    rejected: list[bytes] = []
    for number, line in enumerate(data.splitlines(keepends=True)):  # the lines Hadoop reads: ends at \n, \r or \r\n
        if number % PACE_EVERY_LINES == 0:
            pace()
        row = _row(line)
        if row is None:
            rejected.append(line if line.endswith(b"\n") else line + b"\n")
            continue
        for column, value in zip(columns, row):  # noqa: B905 (a row has a value per column)
            column.append(value)
    return columns, rejected


def _row(line: bytes) -> list | None:
    """The values of one line in column order, or None unless it is exactly a well-typed event."""
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(event) is not dict or not _FIRST_NAMES <= event.keys() <= _NAMES:
        return None
    row = []
    for name, kind in COLUMNS:
        value = event.get(name, ADDED.get(name))
        kind_of = type(value)
        if kind == "str":
            ok = kind_of is str
        elif kind == "bool":
            ok = kind_of is bool
        elif kind == "double":
            ok = kind_of is float or kind_of is int
            value = float(value) if ok else value
        else:
            ok = kind_of is int and -_LIMITS[kind] <= value < _LIMITS[kind]
        if not ok:
            return None
        row.append(value)
    return row


def _write_then_rename(path: Path, write) -> None:
    """``write(tmp)`` to a hidden temporary beside ``path``, fsync it, and rename it into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
