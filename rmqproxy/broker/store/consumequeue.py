"""Consume queues: per (topic, queue id), fixed 20-byte entries indexed by logical offset.

An entry is (physical offset int64, record size int32, tags code int64), RocketMQ's
``ConsumeQueue.CQ_STORE_UNIT_SIZE`` layout, so reads by queue offset and tag filtering never scan
the commit log. Logical offsets start at 0 and never repeat; entry ``n`` lives at byte ``20 * n``
of the queue's global byte space, split into segments of ``entries_per_file`` entries. Files have
their full size from the start (sparse, blocks allocated ``ALLOCATE_STEP`` at a time), so
unwritten entries read as zeros: a written entry always has size > 0.
"""

from __future__ import annotations

import struct
from pathlib import Path

from .mapped import Allocate, OpenBudget, SegmentQueue

UNIT = 20
ALLOCATE_STEP = 64 << 10  # 3276 entries: a queue that sees a few messages costs 64 KiB of disk
_ENTRY = struct.Struct(">qiq")


class ConsumeQueue:
    """One queue's entries. ``min_offset``/``max_offset`` are logical (entry counts)."""

    def __init__(
        self,
        directory: Path,
        entries_per_file: int,
        allocate: Allocate | None = None,
        budget: OpenBudget | None = None,
    ) -> None:
        kwargs = {"allocate": allocate} if allocate is not None else {}
        self.files = SegmentQueue(directory, entries_per_file * UNIT, step=ALLOCATE_STEP, budget=budget, **kwargs)
        self.entries_per_file = entries_per_file
        self.min_offset = 0
        self.max_offset = 0
        self._last = None  # the segment written last: appends hit it until it fills
        self.ensured_end = 0  # entries below this have disk blocks (``ensure`` skips them)
        self._load()

    def _load(self) -> None:
        segments = self.files.ordered()
        if not segments:
            return
        self.min_offset = segments[0].base // UNIT
        last = segments[-1]
        lo, hi = 0, self.entries_per_file  # the last written entry is the last with size > 0
        while lo < hi:
            mid = (lo + hi) // 2
            if _ENTRY.unpack_from(last.mm, mid * UNIT)[1] > 0:
                lo = mid + 1
            else:
                hi = mid
        self.max_offset = last.base // UNIT + lo

    def ensure(self, first: int, last: int) -> None:
        """Allocate disk blocks for entries ``first`` to ``last`` now (OSError if the disk is full),
        so ``put`` never writes to a page without them."""
        if last < self.ensured_end:
            return
        segment = self.files.reserve(first * UNIT, (last + 1) * UNIT)
        self.ensured_end = min(segment.base + segment.allocated, segment.end) // UNIT

    def put(self, offset: int, phys: int, size: int, tags_code: int):
        """Write entry ``offset``; returns its segment (for the flusher's dirty set)."""
        at = offset * UNIT
        segment = self._last
        if segment is None or not segment.base <= at < segment.end or segment._closed:
            segment = self._last = self.files.get_or_create(at)
        segment.used = True
        _ENTRY.pack_into(segment.mm, at - segment.base, phys, size, tags_code)
        if offset >= self.max_offset:
            self.max_offset = offset + 1
        return segment

    def entry(self, offset: int) -> tuple[int, int, int] | None:
        if not self.min_offset <= offset < self.max_offset:
            return None
        segment = self.files.segment_for(offset * UNIT)
        if segment is None:
            return None
        segment.used = True
        return _ENTRY.unpack_from(segment.mm, offset * UNIT - segment.base)

    def index_buffer(self, offset: int, max_entries: int) -> bytes | None:
        """Up to ``max_entries`` entries from ``offset``, never past the end of its file or of the
        queue (``getIndexBuffer``, which a read scans no further than)."""
        segment = self.files.segment_for(offset * UNIT)
        if segment is None:
            return None
        segment.used = True
        start = offset * UNIT - segment.base
        end = min(segment.size, self.max_offset * UNIT - segment.base, start + max_entries * UNIT)
        return segment.mm[start:end] if end > start else None

    def entries(self, offset: int, max_entries: int) -> list[tuple[int, int, int]]:
        """(physical offset, size, tags code) of up to ``max_entries`` entries from ``offset``,
        within ``index_buffer``'s bounds (one file); empty outside the queue."""
        if not self.min_offset <= offset < self.max_offset or max_entries <= 0:
            return []
        buffer = self.index_buffer(offset, max_entries)
        return [_ENTRY.unpack_from(buffer, at) for at in range(0, len(buffer) - UNIT + 1, UNIT)] if buffer else []

    def roll_next(self, offset: int) -> int:
        """First logical offset of the file after the one holding ``offset``."""
        return offset + self.entries_per_file - offset % self.entries_per_file

    def truncate_to_phys(self, phys_end: int) -> None:
        """Drop trailing entries whose record starts at or after ``phys_end`` (recovery)."""
        while self.max_offset > self.min_offset:
            entry = self.entry(self.max_offset - 1)
            if entry is not None and entry[0] < phys_end:
                break
            offset = self.max_offset - 1
            segment = self.files.segment_for(offset * UNIT)
            if segment is not None:
                _ENTRY.pack_into(segment.mm, offset * UNIT - segment.base, 0, 0, 0)
            self.max_offset = offset
        self.ensured_end = 0
        for segment in self.files.ordered():
            if segment.base > self.max_offset * UNIT and segment.base // UNIT > self.min_offset:
                self.files.drop(segment)

    def correct_min(self, phys_min: int) -> None:
        """Move ``min_offset`` past entries whose records retention deleted, and delete whole
        files that hold only such entries (``ConsumeQueue.correctMinOffset``)."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self.entry(mid)
            if entry is not None and entry[0] >= phys_min:
                hi = mid
            else:
                lo = mid + 1
        self.min_offset = lo
        self.ensured_end = 0
        for segment in self.files.ordered():
            if segment.end <= lo * UNIT and segment is not self.files.last:
                self.files.drop(segment)

    def close(self) -> None:
        self.files.close()
