"""The pull event log's files: their names, rolling over by size, and retention.

A file is ``pulls-YYYYMMDD-HH-<instance>-<n>.jsonl``: the UTC hour of the answers in it, the
instance that wrote it (its advertised ``host_port``; a worker of ``proxy --workers`` adds
``.w<slot>``, ``writer_name``) and its number within that hour, since a file rolls over at
``ROLL_BYTES``. Names sort by hour, never collide between the servers, proxies and workers whose
logs share one place, and hold no ``:`` (Hadoop paths refuse it).

Retention (``plan``) is a pure function of the files, the clock and the disk, so it is tested
without sleeping: files older than ``pullLogRetentionHours`` go, then the oldest until the log
fits ``pullLogMaxBytes``, then, while the disk is more than ``DISK_HIGH`` used, the oldest until
it is not (the store refuses sends at 90%: the log gives way first). If that is still not enough,
writing stops until there is room. The file being written is never deleted; where several
processes write one folder, its keeper cannot know which files they write, so none written in
the last ``ACTIVE_S`` is deleted.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterable
from pathlib import Path

#: A log file is closed and the next one begun once it holds this much.
ROLL_BYTES = 64 << 20
#: Above this used share of its disk the log deletes its oldest files, and stops writing if that
#: is not enough.
DISK_HIGH = 0.85
#: ``pullLogMaxBytes=0``: the smaller of this and ``AUTO_MAX_SHARE`` of the disk.
AUTO_MAX_BYTES = 10 << 30
AUTO_MAX_SHARE = 0.10
#: A file written this recently may be one a worker still appends to: its folder's keeper leaves
#: it. A busy writer appends every flush interval (half a second) plus its queue's wait behind a
#: slow disk; a minute covers both many times over, and holds back from retention only a minute
#: of each worker's newest events.
ACTIVE_S = 60.0

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def instance_name(address: str) -> str:
    """An instance's address (``host:port``) as a file-name part: ``host_port``."""
    return _UNSAFE.sub("_", address.replace(":", "_")) or "local"


def writer_name(address: str, worker: int = 0) -> str:
    """The file-name part of one writer of the log: ``host_port``, and ``.w<slot>`` for worker
    ``slot`` of ``proxy --workers`` (the workers of one proxy share its address and folder)."""
    return instance_name(address) + (f".w{worker}" if worker else "")


def hour_of(ts_ms: int) -> str:
    """``YYYYMMDD-HH``, the UTC hour of an epoch-ms time."""
    return time.strftime("%Y%m%d-%H", time.gmtime(ts_ms / 1000))


def log_file_name(hour: str, instance: str, number: int = 0) -> str:
    return f"pulls-{hour}-{instance}-{number}.jsonl"


def auto_max_bytes(disk_total: int) -> int:
    """The log's byte bound when ``pullLogMaxBytes`` is 0: 10 GiB or 10% of the disk, the smaller."""
    return min(AUTO_MAX_BYTES, int(disk_total * AUTO_MAX_SHARE))


@dataclasses.dataclass(frozen=True)
class LogFile:
    """A file of the log as retention sees it; ``mtime`` (epoch s) is when it was last written."""

    path: Path
    size: int
    mtime: float


@dataclasses.dataclass(frozen=True)
class Plan:
    """What retention does now: the files to delete, each with why (age, size or disk), the
    log's size after, and whether writing must stop because the disk stays too full."""

    delete: list[tuple[LogFile, str]]
    size_after: int
    stop_writing: bool


def plan(files: Iterable[LogFile], now: float, *, max_age_s: float, max_bytes: int, disk_total: int,
         disk_used: int, writing: Path | None = None, active_s: float = 0.0) -> Plan:  # fmt: skip
    """Retention's decision (see the module doc); ``writing`` is the file being written, and no
    file written in the last ``active_s`` seconds is deleted either (0: only ``writing`` is kept)."""
    ordered = sorted(files, key=lambda f: (f.mtime, f.path.name))
    size = sum(f.size for f in ordered)
    candidates = [f for f in ordered if f.path != writing and not 0 <= now - f.mtime < active_s]
    delete: list[tuple[LogFile, str]] = []
    while candidates and now - candidates[0].mtime > max_age_s:
        delete.append((candidates.pop(0), "age"))
    size -= sum(f.size for f, _ in delete)
    while candidates and size > max_bytes:
        oldest = candidates.pop(0)
        delete.append((oldest, "size"))
        size -= oldest.size
    used = disk_used - sum(f.size for f, _ in delete)
    high = DISK_HIGH * disk_total
    while candidates and used > high:
        oldest = candidates.pop(0)
        delete.append((oldest, "disk"))
        size -= oldest.size
        used -= oldest.size
    return Plan(delete, size, used > high)


def scan(directory: Path) -> list[LogFile]:
    """The log's files under ``directory`` (any depth, so compacted ones count too)."""
    found = []
    for path in directory.rglob("pulls-*"):
        try:
            stat = path.stat()
        except OSError:
            continue  # deleted meanwhile
        if path.is_file():
            found.append(LogFile(path, stat.st_size, stat.st_mtime))
    return found


class Roller:
    """Which file an hour's next bytes go to: the instance's last file of that hour, until it
    would pass ``ROLL_BYTES``, then the next number. Writer thread only."""

    def __init__(self, directory: Path, instance: str, roll_bytes: int = ROLL_BYTES) -> None:
        self.directory = directory
        self.instance = instance
        self.roll_bytes = roll_bytes
        self._hour = ""
        self._number = 0
        self._size = 0

    def path_for(self, hour: str, size: int) -> Path:
        """The file ``size`` more bytes of ``hour`` are appended to."""
        if hour != self._hour:
            self._hour = hour
            self._number, self._size = self._last_of(hour)
        if self._size and self._size + size > self.roll_bytes:
            self._number += 1
            self._size = 0
        self._size += size
        return self.directory / log_file_name(hour, self.instance, self._number)

    @property
    def current(self) -> Path | None:
        """The file being written, if any."""
        return self.directory / log_file_name(self._hour, self.instance, self._number) if self._hour else None

    def _last_of(self, hour: str) -> tuple[int, int]:
        """The number and size of this instance's last file of ``hour`` (a restart goes on with
        it), or (0, 0)."""
        prefix = f"pulls-{hour}-{self.instance}-"
        numbers = [int(p.name[len(prefix):-len(".jsonl")]) for p in self.directory.glob(prefix + "*.jsonl")
                   if p.name[len(prefix):-len(".jsonl")].isdigit()]  # fmt: skip
        if not numbers:
            return 0, 0
        last = max(numbers)
        try:
            size = (self.directory / log_file_name(hour, self.instance, last)).stat().st_size
        except OSError:
            size = 0
        return last, size
