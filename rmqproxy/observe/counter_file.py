"""A proxy worker's counter and histogram values in a memory-mapped file of its slot (issue 41).

With ``proxy --workers N`` a worker killed with SIGKILL is restarted in the same slot. Every
counter and histogram cell of its ``Metrics`` lives in ``worker-<slot>.metrics``, mapped
MAP_SHARED: an increment is a store into the page cache, which outlives the process, so the next
worker of the slot opens the file and continues every series from the dead one's last increment
(the ``worker`` series stay monotonic: sums and ``rate()`` stay exact).

The file: a header (magic, then the bytes used so far), then records appended as children are
first used, each ``key length, slot count, key (JSON of the metric name and label values), then
that many 8-byte cells`` at an 8-byte boundary. A record counts once the header's ``used`` says
so, written after the record: a worker killed mid-append leaves a file whose tail is ignored.
The file grows by doubling (a new mapping of the longer file; the old ones stay mapped, the same
pages, so children keep their views) up to ``max_bytes``; past it new children count in memory.
A file that is not one (bad magic, lengths that do not add up) is reset with a warning.
One process owns a file at a time (``flock``, which the kernel drops with the process).
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import struct
from collections.abc import Sequence

from twisted.logger import Logger

__all__ = ["CounterFile", "CounterFileBusy", "worker_file"]

log = Logger()

MAGIC = b"RMQPMET1"
_HEADER = struct.Struct("=8sQ")  # magic, bytes used (header included)
_RECORD = struct.Struct("=II")  # key length, cells
HEADER_BYTES = 64
INITIAL_BYTES = 64 * 1024
#: The most a file grows to: 64 MiB holds 400,000 histogram children of 20 buckets.
MAX_BYTES = 64 * 1024 * 1024


class CounterFileBusy(Exception):
    """Another live process owns this slot's file (a worker of the slot still running)."""


def worker_file(directory: str, slot: int | str) -> str:
    """The path of slot ``slot``'s file in ``directory``."""
    return os.path.join(directory, f"worker-{slot}.metrics")


def _key(name: str, labels: Sequence[str]) -> bytes:
    """What identifies a child across restarts: its metric's name and its label values."""
    return json.dumps([name, *labels], ensure_ascii=False).encode()


def _align(n: int) -> int:
    return (n + 7) & ~7


class CounterFile:
    """The cells of one worker slot's counters and histograms, in ``path`` (see the module docstring)."""

    def __init__(self, path: str, *, max_bytes: int = MAX_BYTES, initial_bytes: int = INITIAL_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise CounterFileBusy(f"{path} is in use by another process") from None
        self._maps: list[mmap.mmap] = []  # every mapping made: children hold views of the older ones
        self._index: dict[bytes, tuple[int, int]] = {}  # key -> (first cell, cells)
        self._children: dict[str, dict[tuple[str, ...], None]] = {}  # name -> its label values, in file order
        self._full = False
        size = os.fstat(self._fd).st_size
        problem = self._problem(size)
        if problem:
            if size:
                log.warn("metrics file {path}: {problem}; counting from zero", path=path, problem=problem)
            self._reset(max(initial_bytes, HEADER_BYTES))

    @property
    def used(self) -> int:
        """Bytes of the file in use, header included."""
        return int(self._header_used())

    @property
    def size(self) -> int:
        """Bytes of the file."""
        return len(self._maps[-1])

    def restored(self, name: str, count: int) -> list[tuple[str, ...]]:
        """The label values of ``name``'s children of ``count`` cells the file holds (a dead
        worker's: its successor exposes them from the start, so no series of the slot vanishes)."""
        return [labels for labels in self._children.get(name, ())
                if self._index[_key(name, labels)][1] == count]  # fmt: skip

    def cells(self, name: str, labels: Sequence[str], count: int) -> tuple[memoryview, memoryview] | None:
        """``count`` cells of the child ``name{labels}``, as integers and as floats (two views of
        the same 8-byte cells: a histogram's bucket counts are integers, its sum a float), those of
        the dead worker if it had them; None once the file is at ``max_bytes`` (count in memory)."""
        key = _key(name, labels)
        found = self._index.get(key)
        if found is None or found[1] != count:
            found = self._append(key, count)
            if found is None:
                return None
        first, count = found
        return self._ints[first : first + count], self._floats[first : first + count]

    def close(self) -> None:
        """Give the file up (to a successor in this process, in tests); children still write to it."""
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1

    # --- the file -----------------------------------------------------------------------------

    def _problem(self, size: int) -> str:
        """What makes the file unusable (its index then reset), or "" once ``_index`` is read."""
        if size < HEADER_BYTES or size % 8:
            return f"{size} bytes, not a metrics file"
        self._map(size)
        magic, used = _HEADER.unpack_from(self._maps[-1])
        if magic != MAGIC:
            return "not a metrics file (bad magic)"
        if not HEADER_BYTES <= used <= size:
            return f"{used} bytes used of {size}"
        at = HEADER_BYTES
        while at < used:
            if at + _RECORD.size > used:
                return f"a record cut at {at}"
            key_length, count = _RECORD.unpack_from(self._maps[-1], at)
            start = _align(at + _RECORD.size + key_length)
            end = start + 8 * count
            if not key_length or not count or end > used:
                return f"a record of {key_length} key bytes and {count} cells at {at}"
            key = bytes(self._maps[-1][at + _RECORD.size : at + _RECORD.size + key_length])
            try:
                name, *labels = json.loads(key)
            except ValueError:
                return f"a record whose key is not JSON at {at}"
            if not all(isinstance(part, str) for part in (name, *labels)):
                return f"a record whose key is not a name and label values at {at}"
            self._index[key] = (start // 8, count)  # a key written again (its cells changed) wins
            self._children.setdefault(name, {})[tuple(labels)] = None
            at = end
        return ""

    def _reset(self, size: int) -> None:
        self._index.clear()
        self._children.clear()
        if self._maps:  # the unusable file's mapping: nothing else holds a view of it yet
            self._ints.release()
            self._floats.release()
            self._maps.pop().close()
        os.ftruncate(self._fd, 0)  # every byte zero again
        os.ftruncate(self._fd, size)
        self._map(size)
        _HEADER.pack_into(self._maps[-1], 0, MAGIC, HEADER_BYTES)

    def _map(self, size: int) -> None:
        mapping = mmap.mmap(self._fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._maps.append(mapping)
        self._ints = memoryview(mapping).cast("q")
        self._floats = memoryview(mapping).cast("d")

    def _header_used(self) -> int:
        return _HEADER.unpack_from(self._maps[-1])[1]

    def _append(self, key: bytes, count: int) -> tuple[int, int] | None:
        at = self._header_used()
        start = _align(at + _RECORD.size + len(key))
        end = start + 8 * count
        if end > self.size and not self._grow(end):
            return None
        mapping = self._maps[-1]
        _RECORD.pack_into(mapping, at, len(key), count)
        mapping[at + _RECORD.size : at + _RECORD.size + len(key)] = key
        mapping[start:end] = bytes(end - start)  # a tail a killed worker began may hold anything
        _HEADER.pack_into(mapping, 0, MAGIC, end)  # the record counts from here on
        self._index[key] = (start // 8, count)
        return self._index[key]

    def _grow(self, needed: int) -> bool:
        size = self.size
        while size < needed:
            size *= 2
        size = min(size, self.max_bytes)
        if size < needed:
            if not self._full:
                self._full = True
                log.warn("metrics file {path} reached {max} bytes: new series count in memory only (a restart "
                         "of this worker restarts them from zero)", path=self.path, max=self.max_bytes)  # fmt: skip
            return False
        os.ftruncate(self._fd, size)
        self._map(size)
        return True
