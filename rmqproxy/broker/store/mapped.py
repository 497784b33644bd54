"""Fixed-size, memory-mapped segment files named by the global offset of their first byte.

Both the commit log and the consume queues are a ``SegmentQueue``: an ordered list of equally
sized files ``<dir>/<20-digit base offset>``, as RocketMQ lays them out. A segment file has its
full size from the start but is sparse: disk blocks are allocated (``posix_fallocate``) in steps
just ahead of the writer, through ``reserve``, so an idle topic costs kilobytes rather than a
whole segment, and running out of disk fails ``reserve`` with ``OSError`` instead of a SIGBUS on a
later write through the mapping. Writes go through the mapping (no syscall per record);
durability comes from ``fsync`` on the file descriptor, which releases the GIL, so a flusher
thread can make data durable while the owner thread keeps appending.

Consume queues share an ``OpenBudget``: only so many of their segments are mapped at once, and
idle ones are released and mapped again on their next use, so the number of queues a client can
create does not decide how many file descriptors the process holds.

Threading: one owner thread creates, writes, releases and deletes segments; a flusher thread may
call ``Segment.fsync`` concurrently (under the segment's lock, through its path once released).
"""

from __future__ import annotations

import collections
import ctypes
import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path

OFFSET_DIGITS = 20
_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23 if os.uname().sysname == "Linux" else None)


def _libc_madvise() -> Callable[[int, int, int], int] | None:
    """libc ``madvise`` through ctypes, which releases the GIL for the call. ``mmap.madvise``
    holds it, and populating a megabyte takes milliseconds on a VM: the writer would stall."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


_MADVISE = _libc_madvise() if _POPULATE_WRITE is not None else None


def segment_name(base: int) -> str:
    """RocketMQ's file name for a segment starting at ``base``: 20 zero-padded digits."""
    return f"{base:0{OFFSET_DIGITS}d}"


Allocate = Callable[[int, int, int], None]  # (fd, offset, length): give that range disk blocks
DEFAULT_STEP = 16 << 20  # bytes allocated at a time ahead of the writer (capped by segment size)


def _allocate(fd: int, offset: int, length: int) -> None:
    os.posix_fallocate(fd, offset, length)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    """Make the names in ``directory`` durable (its files' creation or deletion)."""
    _fsync_dir(directory)


class Segment:
    """One mapped file of ``size`` bytes holding global offsets [base, base + size).

    A segment under an ``OpenBudget`` may be *released*: its mapping and file descriptor are
    closed while the file stays. The next use of ``mm`` or ``fd`` maps it again (``__getattr__``
    runs only when they are unset, so a mapped segment costs nothing extra).
    """

    __slots__ = (
        "path", "base", "size", "fd", "mm", "allocated", "step", "used", "_allocate", "_closed", "_mapped",
        "_lock", "_address", "_budget",
    )

    def __init__(
        self,
        path: Path,
        base: int,
        size: int,
        *,
        create: bool,
        allocate: Allocate,
        step: int = DEFAULT_STEP,
        budget: OpenBudget | None = None,
    ) -> None:
        self.path = path
        self.base = base
        self.size = size
        self.step = step
        self._allocate = allocate
        self._budget = budget
        self.allocated = 0  # bytes [0, allocated) have disk blocks (an opened file: unknown, so 0)
        self.used = True  # set on each use, cleared by the budget's sweeps (CLOCK)
        self._closed = False
        self._mapped = False
        self._lock = threading.Lock()  # fsync (flusher) never races close or release (owner)
        if create:
            self._create()
        elif budget is None:
            self._map(os.open(path, os.O_RDWR))
        # else: an existing file under a budget is mapped on first use

    def _create(self) -> None:
        """Size a new segment under a temporary name and rename it into place, so a crash never
        leaves a segment of the wrong size behind (leftover temporaries are removed)."""
        work = self.path.with_name(self.path.name + ".new")
        fd = os.open(work, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, self.size)
            self._allocate(fd, 0, min(self.size, self.step))  # a full disk fails here, before use
            self.allocated = min(self.size, self.step)
            os.rename(work, self.path)  # the directory is fsynced by SegmentQueue.sync_directory
        except BaseException:
            os.close(fd)
            work.unlink(missing_ok=True)
            raise
        self._map(fd)

    def _map(self, fd: int) -> None:
        """Map the open file ``fd`` (closed here on failure) and count it against the budget."""
        try:
            if os.fstat(fd).st_size != self.size:
                raise OSError(f"segment {self.path} has {os.fstat(fd).st_size} bytes, expected {self.size}")
            self.mm = mmap.mmap(fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            # The mapping's address, for ``prefault`` (the temporary export ends at once, so
            # ``mm.close`` stays possible); valid while the segment is mapped.
            self._address = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self._mapped = True
        self.used = True
        if self._budget is not None:
            self._budget.mapped(self)

    def __getattr__(self, name: str) -> object:
        """Map a released segment again on the owner thread's next use of its mapping or fd."""
        if name not in ("mm", "fd", "_address") or self._mapped:
            raise AttributeError(name)
        if self._closed:
            raise ValueError(f"segment {self.path} is closed")
        self._map(os.open(self.path, os.O_RDWR))
        return object.__getattribute__(self, name)

    @property
    def end(self) -> int:
        return self.base + self.size

    def reserve(self, start: int, end: int) -> None:
        """Make sure bytes [start, end) of this segment have disk blocks before they are written
        (``OSError`` if the disk is full). Writers advance sequentially, so only the part past
        ``allocated`` is allocated, rounded up by ``step``."""
        if end > self.allocated:
            lo = max(start, self.allocated)
            hi = min(self.size, max(end, lo + self.step))
            self._allocate(self.fd, lo, hi - lo)
            self.allocated = hi

    def prefault(self, start: int, length: int) -> bool:
        """Fault in pages [start, start + length) for writing, so appends do not each take a page
        fault (several microseconds on virtual machines); True if the kernel did. Best effort:
        MADV_POPULATE_WRITE needs Linux 5.14. Any thread, without the GIL; a no-op once closed."""
        start -= start % mmap.PAGESIZE
        length = min(length, self.size - start)
        if length <= 0 or _POPULATE_WRITE is None:
            return False
        with self._lock:
            if self._closed or not self._mapped:
                return False
            if _MADVISE is not None:
                return _MADVISE(self._address + start, length, _POPULATE_WRITE) == 0
            try:
                self.mm.madvise(_POPULATE_WRITE, start, length)
            except OSError:
                return False
            return True

    def fsync(self) -> None:
        """Make everything written so far durable (flusher thread safe; a no-op once closed).
        A released segment is synced through its path: its dirty pages outlive the mapping."""
        with self._lock:
            if self._closed:
                return
            if self._mapped:
                os.fdatasync(self.fd)
                return
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)

    def release(self) -> None:
        """Close the mapping and fd, keeping the file (owner thread; the next use maps again)."""
        with self._lock:
            self._unmap()
        if self._budget is not None:
            self._budget.forget(self)

    def _unmap(self) -> None:
        if self._mapped:
            self._mapped = False
            self.mm.close()
            os.close(self.fd)
            del self.mm, self.fd, self._address

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._unmap()
        if self._budget is not None:
            self._budget.forget(self)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OpenBudget:
    """At most ``limit`` segments mapped at once, each holding a file descriptor and a mapping,
    so thousands of idle consume queues cannot exhaust the process's fds or address space.

    Past the limit, the segment unused longest is released (CLOCK: a segment whose ``used`` mark
    is set loses the mark and gets another round); ``release_idle`` releases every segment not
    used since its last call. Owner thread only.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(2, limit)
        self._mapped: collections.OrderedDict[Segment, None] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._mapped)

    def mapped(self, segment: Segment) -> None:
        self._mapped[segment] = None
        while len(self._mapped) > self.limit:
            victim = next(iter(self._mapped))
            if victim.used:
                victim.used = False
                self._mapped.move_to_end(victim)
            else:
                del self._mapped[victim]
                victim.release()

    def forget(self, segment: Segment) -> None:
        self._mapped.pop(segment, None)

    def release_idle(self) -> int:
        """Release the segments not used since the last call; returns how many."""
        released = 0
        for segment in list(self._mapped):
            if segment.used:
                segment.used = False
            else:
                del self._mapped[segment]
                segment.release()
                released += 1
        return released


_ZEROS = bytes(1 << 20)


def zero_range(segment: Segment, start: int, end: int) -> None:
    """Zero bytes [start, end) of a segment in 1 MiB steps (no segment-sized allocation),
    skipping holes of the sparse file, which read as zeros already."""
    while start < end:
        try:
            start = os.lseek(segment.fd, start, os.SEEK_DATA)
        except OSError:
            return  # ENXIO: only holes from ``start`` to the end of the file
        if start >= end:
            return
        n = min(end - start, len(_ZEROS), os.lseek(segment.fd, start, os.SEEK_HOLE) - start)
        segment.mm[start : start + n] = _ZEROS[:n]
        start += n


class Prefaulter:
    """A thread that keeps pages ahead of a writer faulted in, off the writer's thread.

    The writer calls ``request(offset)`` (cheap: an int compare per call) as it advances; the
    thread populates the segments up to ``offset + window``.
    """

    STEP = 1 << 20

    def __init__(self, queue: SegmentQueue, window: int = 16 << 20) -> None:
        self.queue = queue
        self.window = window
        self.wanted = 0  # written by the owner, read by the thread
        self._done = 0
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="rmqproxy-store-prefault", daemon=True)
        self._thread.start()

    def request(self, offset: int) -> None:
        if offset + self.window // 2 > self.wanted:
            self.wanted = offset + self.window
            self._wake.set()

    def kick(self, offset: int) -> None:
        """A new segment starts at ``offset``: populate it now."""
        self.wanted = max(self.wanted, offset + self.window)
        self._wake.set()

    def _run(self) -> None:
        while not self._stop:
            self._wake.wait()
            self._wake.clear()
            while not self._stop and self._done < self.wanted:
                start = max(self._done, self.wanted - self.window)
                segment = self.queue.segment_for(start)
                if segment is None:
                    break  # not allocated yet: the writer kicks us once it is
                length = min(self.STEP, segment.end - start)
                segment.prefault(start - segment.base, length)
                self._done = start + length

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join()


class SegmentQueue:
    """The ordered segments of one directory; global offset ``o`` lives in segment ``o // size``."""

    def __init__(
        self,
        directory: Path,
        segment_size: int,
        allocate: Allocate = _allocate,
        step: int = DEFAULT_STEP,
        budget: OpenBudget | None = None,
    ) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self.allocate = allocate
        self.step = step
        self.budget = budget  # with one, existing files are mapped on first use, not here
        self.segments: dict[int, Segment] = {}  # segment index -> Segment, ascending insertion
        self.directory_dirty = False  # a segment was created since the directory was last fsynced
        self.dropped = False  # the store destroyed this queue: its directory may be gone
        directory.mkdir(parents=True, exist_ok=True)
        for entry in sorted(directory.iterdir()):
            if entry.name.endswith(".new"):
                entry.unlink()  # allocation interrupted by a crash
            elif entry.name.isdigit() and len(entry.name) == OFFSET_DIGITS:
                base = int(entry.name)
                if base % segment_size:
                    raise OSError(f"{entry} does not start at a multiple of the segment size {segment_size}")
                self.segments[base // segment_size] = Segment(
                    entry, base, segment_size, create=False, allocate=allocate, step=step, budget=budget
                )

    def segment_for(self, offset: int) -> Segment | None:
        return self.segments.get(offset // self.segment_size)

    def get_or_create(self, offset: int) -> Segment:
        """The segment holding ``offset``, allocated now if missing (``OSError`` if it cannot be)."""
        index = offset // self.segment_size
        segment = self.segments.get(index)
        if segment is None:
            base = index * self.segment_size
            segment = Segment(
                self.directory / segment_name(base),
                base,
                self.segment_size,
                create=True,
                allocate=self.allocate,
                step=self.step,
                budget=self.budget,
            )
            self.segments[index] = segment
            self.directory_dirty = True
        return segment

    def reserve(self, start: int, end: int) -> Segment:
        """Create segments and allocate disk blocks for global offsets [start, end), which may
        span segments; returns the segment holding ``start`` (``OSError`` if the disk is full).
        Every append calls this: the common case, a range inside blocks already allocated, is one
        lookup and one comparison."""
        first = self.segments.get(start // self.segment_size)
        if first is not None and end - first.base <= first.allocated:
            return first
        first = self.get_or_create(start)
        segment = first
        while True:
            segment.reserve(start - segment.base, min(end, segment.end) - segment.base)
            if end <= segment.end:
                return first
            start = segment.end
            segment = self.get_or_create(start)

    def sync_directory(self) -> None:
        """Make new segments' names durable (a power loss must not lose a file whose data was
        fsynced). The flush thread calls this before it reports anything durable."""
        if self.directory_dirty:
            self.directory_dirty = False
            try:
                _fsync_dir(self.directory)
            except FileNotFoundError:
                if not self.dropped:
                    raise

    @property
    def first(self) -> Segment | None:
        return self.segments[min(self.segments)] if self.segments else None

    @property
    def last(self) -> Segment | None:
        return self.segments[max(self.segments)] if self.segments else None

    def ordered(self) -> list[Segment]:
        """Segments by base offset. Safe from the flusher thread: ``list(dict.items())`` copies
        in one step under the GIL, where iterating the dict itself could see it change size."""
        return [segment for _, segment in sorted(list(self.segments.items()))]

    def drop(self, segment: Segment) -> None:
        """Delete a segment file (retention, truncation)."""
        self.segments.pop(segment.base // self.segment_size, None)
        segment.delete()

    def close(self) -> None:
        for segment in self.segments.values():
            segment.close()
        self.segments.clear()
