"""The pull/hold event: one record per pull answered, and the JSONL log that keeps them.

``PullEvent`` is the schema of docs/operations.md ("The pull event log"): the spark jobs and the metrics read
the same fields. ``PullLog`` appends events to ``<dir>/pulls-YYYYMMDD-HH-<instance>-<n>.jsonl`` (UTC hour of
the answer; ``log_files`` names them). The reactor thread only serialises an event and appends it to a buffer; a writer thread
does the file I/O, so a slow disk never stalls a pull. ``pullLogMode``: ``all`` logs every pull,
``held`` only held ones, ``off`` nothing. Lines are written whole; a crash loses at most the
last flush interval's buffer.

The log never costs the broker: at most ``MAX_QUEUED_BYTES`` wait for the writer (a disk slower
than the pulls drops the newest chunks), and a failed write (a full disk) drops its chunk and
the writer goes on. Dropped events are counted (``dropped``, exported as a metric) and each new
kind of write error is logged once.

Nor does it fill the disk: files roll over at 64 MiB, and the writer thread applies retention
(``log_files``: age, ``pullLogMaxBytes``, and the disk's 85% mark) every ``RETENTION_EVERY_S``.
With ``pullLogCompact`` it also starts ``rmqproxy compact`` on the folder, as a child process in
the idle scheduling class using at most a quarter of a core, once a minute when closed files
wait (``compaction``): Parquet parsing never holds this process's GIL.

Under ``proxy --workers`` every worker writes the one folder, so the log's roles part (``role``):
each worker's log only ``writer`` (its own files, ``.w<slot>`` in their names; it deletes and
compacts nothing, and stops writing while retention could not bring the disk under its mark),
and the supervisor's only ``keeper`` (retention over every file, bounded by the whole
``pullLogMaxBytes``, never a file written in the last ``ACTIVE_S``, and the compaction; it logs
no event). A single process's log is ``all``: both.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from twisted.logger import Logger

from codec.codes import PullSysFlag, ResponseCode, code_name
from codec.command import RemotingCommand
from codec.message import record_count

from . import rollup
from .compaction import closed_files
from .log_files import ACTIVE_S, DISK_HIGH, Plan, Roller, auto_max_bytes, hour_of, plan, scan, writer_name

if TYPE_CHECKING:
    from ..core.config import Config

log = Logger()

FLUSH_EVERY_S = 0.5
FLUSH_AT_BYTES = 1 << 20
MAX_QUEUED_BYTES = 64 << 20
#: How often the writer thread applies retention, writing or idle.
RETENTION_EVERY_S = 10.0
#: How often it looks for closed files to compact (``pullLogCompact``).
COMPACT_EVERY_S = 60.0
#: The share of one core the background compaction takes at most (``compaction.Pacer``): enough
#: for 18,000 events/s, several times what a busy server logs.
COMPACT_CPU_SHARE = 0.25
#: How long a compaction has to end once asked to at shutdown, before it is killed.
COMPACT_STOP_S = 5.0
#: The compaction process's niceness where Linux's idle scheduling class is not to be had.
COMPACT_NICENESS = 19
#: What a log does with its folder: ``all`` (write, delete, compact), ``writer``, ``keeper``.
ROLES = ("all", "writer", "keeper")
_IDLE = ()


@dataclasses.dataclass(frozen=True)
class PullEvent:
    """One answered pull (field meanings: docs/operations.md). Times in ms; ``*_ms`` epoch fields are ints."""

    ts_ms: int
    arrived_ms: int
    group: str
    topic: str
    queue_id: int
    client_id: str
    remote: str
    offset: int
    max_msgs: int
    suspend_ms: int
    held: bool
    hold_ms: float
    service_ms: float
    total_ms: float
    wake: str
    mode: str
    code: str
    msgs: int
    bytes: int
    next_offset: int
    max_offset: int
    #: How the client pulled: ``remoting`` (PULL_MESSAGE, LITE_PULL_MESSAGE) or ``grpc`` (a 5.x
    #: client's ReceiveMessage: one event per queue it served).
    protocol: str = "remoting"
    #: The server or proxy that logged the event (its advertised ``host:port``): ``PullLog`` fills
    #: it in as it writes, so logs of several instances read as one dataset.
    instance: str = ""

    @classmethod
    def of_pull(cls, header: Any, answer: RemotingCommand | None, *, arrived: float, done: float, done_ms: int,
                held: bool, hold_ms: float, wake: str, mode: str, client_id: str, remote: str) -> PullEvent:  # fmt: skip
        """The event of one pull, in either mode: ``header`` its typed request header, ``answer``
        what the client got (None: nobody was left to answer), ``arrived`` and ``done`` in reactor
        (monotonic) seconds, ``done_ms`` the wall clock's epoch ms at ``done`` (the logged times)."""
        total_ms = (done - arrived) * 1000
        ext = answer.ext_fields if answer is not None and answer.ext_fields else {}
        found = answer is not None and answer.code == ResponseCode.SUCCESS
        return cls(
            ts_ms=done_ms, arrived_ms=done_ms - round(total_ms), group=header.consumer_group, topic=header.topic,
            queue_id=header.queue_id, client_id=client_id, remote=remote, offset=header.queue_offset,
            max_msgs=header.max_msg_nums, suspend_ms=suspend_ms(header), held=held, hold_ms=round(hold_ms, 3),
            service_ms=round(total_ms - hold_ms, 3), total_ms=round(total_ms, 3), wake=wake, mode=mode,
            code=code_name(answer.code, response=True) if answer is not None else "NO_RESPONSE",
            msgs=record_count(answer.body) if found else 0, bytes=len(answer.body) if answer is not None else 0,
            next_offset=_int(ext.get("nextBeginOffset"), header.queue_offset), max_offset=_int(ext.get("maxOffset"), 0),
        )  # fmt: skip

    def to_json(self) -> str:
        return self.json_line().decode()

    def json_line(self) -> bytes:
        """The event as one compact JSON object, fields in schema order (orjson writes a dataclass
        directly: half a microsecond, where ``json.dumps`` of a dict took eight)."""
        return orjson.dumps(self)


#: How an event without an instance ends as JSON, cut off and replaced by the log's stamp: a
#: slice and a join, where ``dataclasses.replace`` would cost microseconds a pull.
_UNSTAMPED = -len(b'"instance":""}')
_SUSPEND = int(PullSysFlag.SUSPEND)  # a plain int: an IntFlag's ``&`` costs a microsecond a pull


def suspend_ms(header: Any) -> int:
    """How long a pull asked to be held: its ``suspendTimeoutMillis`` with the SUSPEND flag, else 0."""
    return header.suspend_timeout_millis if header.sys_flag & _SUSPEND else 0


def _int(text: str | None, default: int) -> int:
    """An answer's numeric ext field, ``default`` when absent or not a number (an upstream's answer)."""
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def yield_cores(pid: int) -> None:
    """Run process ``pid`` only on cores nothing else wants: Linux's SCHED_IDLE class (a niced
    process still took most of a core from a saturated server, and cost it up to a fifth of its
    sends, bench/e2e.py --compaction-cost), else the lowest niceness."""
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    else:
        os.setpriority(os.PRIO_PROCESS, pid, COMPACT_NICENESS)


def disk_usage(path: Path) -> tuple[int, int]:
    """Total and used bytes of the file system holding ``path``."""
    usage = shutil.disk_usage(path)
    return usage.total, usage.used


class PullLog:
    """The event log (see the module doc): ``log(event)`` on the reactor thread, files and
    retention on a writer thread of its own; ``role`` and ``worker`` (a slot, 0 for none) say
    which part of a shared folder's work it does."""

    def __init__(self, directory: Path, mode: str = "all", *, instance: str = "", retention_hours: float = 72,
                 max_bytes: int = 0, clock: Callable[[], float] = time.time,
                 disk: Callable[[Path], tuple[int, int]] = disk_usage,
                 check_every_s: float = RETENTION_EVERY_S, compact: rollup.Options | None = None,
                 role: str = "all", worker: int = 0) -> None:  # fmt: skip
        if mode not in ("all", "held", "off"):
            raise ValueError(f"pull log mode must be all, held or off, not {mode!r}")
        if role not in ROLES:
            raise ValueError(f"pull log role must be one of {', '.join(ROLES)}, not {role!r}")
        self.directory = Path(directory)
        self.mode = mode
        self.role = role
        self._logs = "off" if role == "keeper" else mode  # what ``__call__`` keeps: a keeper logs nothing
        self.max_age_s = retention_hours * 3600
        self.max_bytes = max_bytes
        self.clock = clock
        self.disk = disk
        self.check_every_s = check_every_s
        self._stamp = b'"instance":' + orjson.dumps(instance) + b"}\n"  # host:port; "" for nobody's log
        self._roller = Roller(self.directory, writer_name(instance, worker))
        self._buffer: list[bytes] = []
        self._buffered_bytes = 0
        self._hour_key = -1  # the UTC hour (ts_ms // 3600000) of the buffered events
        self._hour = ""  # the same, as a file names it
        self._last_flush = time.monotonic()
        self._chunks: queue.SimpleQueue = queue.SimpleQueue()
        self._queued = 0  # bytes handed to the writer and not yet written
        self._lock = threading.Lock()
        self._errors_seen: set[str] = set()
        self._writer: threading.Thread | None = None
        self._next_check = 0.0
        self.written = 0
        self.dropped = 0  # events lost to a full queue, a failed write, or a disk too full to write
        self.bytes = 0  # the log's size on disk, as of the last retention pass and the writes since
        self.deleted: collections.Counter[str] = collections.Counter()  # files retention deleted, by why
        self.deleted_bytes = 0
        self.paused = False  # the disk stays above its high mark: nothing is written
        # the rollups' options when closed files are compacted in the background (never by a writer)
        self.compact = None if role == "writer" else compact
        self.compactions = 0  # compaction processes started
        self._compactor: subprocess.Popen | None = None
        self._next_compact = 0.0
        if mode != "off":
            self.directory.mkdir(parents=True, exist_ok=True)
            if not self.max_bytes:
                self.max_bytes = auto_max_bytes(self.disk(self.directory)[0])
            self._writer = threading.Thread(target=self._write_loop, name="rmqproxy-pull-log", daemon=True)
            self._writer.start()

    @classmethod
    def of(cls, config: Config, *, worker: int = 0, role: str | None = None) -> PullLog:
        """The log the pull-log keys of ``config`` describe: a single process's (``all``), or with
        ``worker`` (a slot of ``proxy --workers``) a ``writer`` of its own files only."""
        return cls(config.pull_log_dir, config.pull_log_mode, instance=config.advertised_address,
                   retention_hours=config.pull_log_retention_hours, max_bytes=config.pull_log_max_bytes,
                   compact=rollup.Options(short_polling_ms=config.short_polling_ms) if config.pull_log_compact else None,
                   role=role or ("writer" if worker else "all"), worker=worker)  # fmt: skip

    @classmethod
    def keeper_of(cls, config: Config) -> PullLog:
        """The keeper of the folder the workers of ``config``'s proxy write: retention of all
        their files within the whole ``pullLogMaxBytes``, and the compaction; it logs no event."""
        return cls.of(config, role="keeper")

    def __call__(self, event: PullEvent) -> None:
        """Record ``event`` (reactor thread: serialise and buffer only)."""
        if self._logs == "off" or (self._logs == "held" and not event.held):
            return
        hour_key = event.ts_ms // 3_600_000
        if hour_key != self._hour_key:
            if self._buffer:
                self.flush()
            self._hour_key = hour_key
            self._hour = hour_of(event.ts_ms)
        line = event.json_line()
        if not event.instance:
            line = line[:_UNSTAMPED] + self._stamp  # ``"instance":""}`` becomes this log's address
        else:
            line += b"\n"
        self._buffer.append(line)
        self._buffered_bytes += len(line)
        if self._buffered_bytes >= FLUSH_AT_BYTES or time.monotonic() - self._last_flush >= FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        """Hand the buffered lines to the writer thread (or drop them if it is too far behind)."""
        self._last_flush = time.monotonic()
        if self._buffer:
            data = b"".join(self._buffer)
            lines = len(self._buffer)
            self._buffer = []
            self._buffered_bytes = 0
            with self._lock:
                if self._queued + len(data) > MAX_QUEUED_BYTES:
                    self.dropped += lines
                    return
                self._queued += len(data)
            self._chunks.put((self._hour, data, lines))

    def _write_loop(self) -> None:
        while True:
            try:
                item = self._chunks.get(timeout=self.check_every_s)
            except queue.Empty:
                item = _IDLE
            if item is None:
                return
            if self.clock() >= self._next_check:
                self.enforce()
            if self.compact is not None and self.clock() >= self._next_compact:
                self._start_compaction()
            if item is not _IDLE:
                self._write(*item)

    def _write(self, hour: str, data: bytes, lines: int) -> None:
        try:
            if self.paused:
                with self._lock:
                    self.dropped += lines
                return
            path = self._roller.path_for(hour, len(data))
            try:
                with open(path, "ab") as f:
                    f.write(data)
                self.written += lines
                self.bytes += len(data)
            except OSError as exc:
                with self._lock:
                    self.dropped += lines
                self._error_once(exc, "cannot write {path} ({error}); its events are dropped and counted", path)
        finally:
            with self._lock:
                self._queued -= len(data)

    def enforce(self) -> Plan:
        """Apply retention now (the writer thread does, every ``check_every_s``; call it only
        while no writer runs). A ``writer`` deletes nothing: it pauses while the keeper's same
        decision could not make room (the keeper's next pass deletes what this plan would)."""
        total, used = self.disk(self.directory)
        files = scan(self.directory)
        decision = plan(files, self.clock(), max_age_s=self.max_age_s, max_bytes=self.max_bytes,
                        disk_total=total, disk_used=used, writing=self._roller.current,
                        active_s=0.0 if self.role == "all" else ACTIVE_S)  # fmt: skip
        if self.role == "writer":
            self.bytes = sum(f.size for f in files)
        else:
            self._delete(decision)
        if decision.stop_writing != self.paused:
            if decision.stop_writing:
                log.warn("pull log: its disk stays above {high:.0%} used with no file of it left to delete: "
                         "events are dropped (and counted) until there is room", high=DISK_HIGH)  # fmt: skip
            else:
                log.info("pull log: its disk has room again; writing resumes")
            self.paused = decision.stop_writing
        self._next_check = self.clock() + self.check_every_s
        return decision

    def _delete(self, decision: Plan) -> None:
        """Delete the files ``decision`` gives up, counting them by why."""
        for file, why in decision.delete:
            try:
                file.path.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                self._error_once(exc, "cannot delete {path} ({error})", file.path)
                continue
            self.deleted[why] += 1
            self.deleted_bytes += file.size
        self.bytes = decision.size_after

    def _start_compaction(self) -> None:
        """Start ``rmqproxy compact`` on the folder if closed files wait and none is running."""
        self._next_compact = self.clock() + COMPACT_EVERY_S
        if self._compactor is not None and self._compactor.poll() is None:
            return
        if not closed_files(self.directory, self.clock()):
            return
        try:
            self._compactor = subprocess.Popen(
                [sys.executable, "-m", "rmqproxy.cli", "compact", "--no-wait", "--cpu-share", str(COMPACT_CPU_SHARE),
                 "--sketch-k", str(self.compact.sketch_k), "--short-polling-ms", str(self.compact.short_polling_ms),
                 str(self.directory)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            yield_cores(self._compactor.pid)
        except OSError as exc:
            self._error_once(exc, "cannot start compaction of {path} ({error})", self.directory)
            return
        self.compactions += 1

    def _error_once(self, exc: OSError, fmt: str, path: Path) -> None:
        """Log each kind of file error once (a full disk would repeat it for every chunk)."""
        kind = f"{type(exc).__name__} {exc.errno}"
        if kind not in self._errors_seen:
            self._errors_seen.add(kind)
            log.warn("pull log: " + fmt, path=path, error=exc)

    def close(self) -> None:
        """Flush and wait for the writer, and stop a compaction under way (shutdown): the server's
        children end with it, and a compaction stopped at any step is finished by the next."""
        if self._writer is not None:
            self.flush()
            self._chunks.put(None)
            self._writer.join()
            self._writer = None
        compactor = self._compactor
        if compactor is not None and compactor.poll() is None:
            compactor.terminate()
            try:
                compactor.wait(COMPACT_STOP_S)
            except subprocess.TimeoutExpired:
                compactor.kill()
                compactor.wait()
