"""The commit log: every message of every topic, appended in stored-record layout.

A record is exactly what a pull answer carries (``codec.message`` v1 layout), so the read path
sends stored bytes as they are. Physical offsets are global and stable: segment base + position.
A record never spans segments: when one does not fit with ``MIN_BLANK`` bytes to spare, the rest
of the segment gets a blank marker (TOTALSIZE = the rest, MAGIC = ``BLANK_MAGIC``, as RocketMQ's
``CommitLog`` writes) and the record starts the next segment. PHYSICALOFFSET (record bytes 28..36)
is patched in at append time, so callers encode before they know where the record goes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from codec.errors import MessageError
from codec.message import (
    MAGIC_V1,
    MAGIC_V2,
    PHYSICAL_OFFSET_AT,
    STORE_TIMESTAMP_END_V6,
    Message,
    decode_message,
    record_store_timestamp,
)

from .mapped import Allocate, Prefaulter, Segment, SegmentQueue, zero_range

BLANK_MAGIC = 0xCBD43194  # RocketMQ CommitLog.BLANK_MAGIC_CODE (-875286124)
MIN_BLANK = 8  # END_FILE_MIN_BLANK_LENGTH: room kept for the blank marker
PREFAULT_WINDOW = 16 * 1024 * 1024  # pages faulted in ahead of the write position

_HEAD = struct.Struct(">iI")
_PHYS = struct.Struct(">q")


class CommitLog:
    """Append-only segments of records. Owner thread only, except ``Segment.fsync``."""

    def __init__(self, directory: Path, segment_size: int, allocate: Allocate | None = None) -> None:
        kwargs = {"allocate": allocate} if allocate is not None else {}
        self.files = SegmentQueue(directory, segment_size, **kwargs)
        self.segment_size = segment_size
        self.write_pos = self.files.first.base if self.files.first else 0
        self.blank_bytes = 0  # segment ends left blank by appends since start
        self.prefaulter: Prefaulter | None = None
        # Fast path of ``append``: records ending at or before ``_fast_end`` go to ``_fast_segment``
        # with no roll and no allocation (set by ``prepare``; only ever too small, never too big).
        self._fast_segment: Segment | None = None
        self._fast_end = -1

    def start_prefaulting(self) -> None:
        """Fault pages in ahead of the write position from a helper thread (after recovery)."""
        self.prefaulter = Prefaulter(self.files, PREFAULT_WINDOW)
        self.prefaulter.request(self.write_pos)

    @property
    def min_offset(self) -> int:
        """Smallest physical offset still stored (moves when retention deletes a segment)."""
        first = self.files.first
        return first.base if first is not None else self.write_pos

    @property
    def max_offset(self) -> int:
        """Physical offset the next record will get (the end of stored data)."""
        return self.write_pos

    def fits(self, size: int) -> bool:
        return size + MIN_BLANK <= self.segment_size

    def prepare(self, size: int) -> Segment:
        """The segment a record of ``size`` bytes will go to at ``write_pos``, with disk blocks
        for it (OSError if the disk is full); writes the blank marker and rolls to the next
        segment first when the record does not fit. Call before writing the record."""
        pos = self.write_pos
        room = self.segment_size - pos % self.segment_size
        if size + MIN_BLANK > room:
            segment = self.files.reserve(pos, pos + MIN_BLANK)
            _HEAD.pack_into(segment.mm, pos - segment.base, room, BLANK_MAGIC)
            self.blank_bytes += room
            pos += room
            self.write_pos = pos
            segment = self.files.reserve(pos, pos + size)
            if self.prefaulter is not None:
                self.prefaulter.kick(pos)
        else:
            segment = self.files.reserve(pos, pos + size)
        self._fast_segment = segment
        self._fast_end = min(segment.base + segment.allocated, segment.end - MIN_BLANK)
        return segment

    def append(self, record: bytes) -> int:
        """Write ``record`` and patch its physical offset; return the offset. The common case (the
        record fits the blocks already allocated in the current segment) is a compare."""
        pos = self.write_pos
        end = pos + len(record)
        segment = self._fast_segment
        if end > self._fast_end or pos < segment.base:
            segment = self.prepare(len(record))
            pos = self.write_pos
            end = pos + len(record)
        prefaulter = self.prefaulter
        if prefaulter is not None and end + PREFAULT_WINDOW // 2 > prefaulter.wanted:
            prefaulter.request(end)
        at = pos - segment.base
        mm = segment.mm
        mm[at : at + len(record)] = record
        _PHYS.pack_into(mm, at + PHYSICAL_OFFSET_AT, pos)
        self.write_pos = end
        return pos

    def read(self, phys: int, size: int) -> bytes | None:
        """The record bytes at ``phys`` (None once its segment was deleted or beyond the end)."""
        if phys < 0 or phys + size > self.write_pos:
            return None
        segment = self.files.segment_for(phys)
        if segment is None:
            return None
        at = phys - segment.base
        return segment.mm[at : at + size]

    def size_at(self, phys: int) -> int | None:
        """TOTALSIZE of the record at ``phys``, or None."""
        segment = self.files.segment_for(phys)
        if segment is None or phys + 8 > self.write_pos:
            return None
        total, magic = _HEAD.unpack_from(segment.mm, phys - segment.base)
        return total if magic in (MAGIC_V1, MAGIC_V2) and total > 0 else None

    def store_time(self, phys: int) -> int | None:
        """STORETIMESTAMP of the record at ``phys``, or None (deleted, or beyond the end)."""
        segment = self.files.segment_for(phys)
        if segment is None or phys + STORE_TIMESTAMP_END_V6 > self.write_pos:
            return None
        return record_store_timestamp(segment.mm, phys - segment.base)

    def roll_next(self, phys: int) -> int:
        """Start of the segment after the one holding ``phys`` (``CommitLog.rollNextFile``)."""
        return phys + self.segment_size - phys % self.segment_size

    def dirty_segments(self, start: int, end: int) -> list[Segment]:
        """Segments covering physical offsets [start, end) (flusher thread safe)."""
        if end <= start:
            return []
        first = start // self.segment_size
        last = (end - 1) // self.segment_size
        return [s for s in self.files.ordered() if first <= s.base // self.segment_size <= last]

    def reserve(self, sizes: list[int]) -> None:
        """Allocate the disk blocks that appending records of ``sizes`` will need, so the appends
        themselves cannot fail half way (OSError here, before anything is written)."""
        pos = self.write_pos
        for size in sizes:
            room = self.segment_size - pos % self.segment_size
            if size + MIN_BLANK > room:
                self.files.reserve(pos, pos + MIN_BLANK)
                pos += room
            self.files.reserve(pos, pos + size)
            pos += size

    def scan(self, start: int, *, check_crc: bool) -> Iterator[tuple[int, Message]]:
        """Valid records from ``start`` on, in order; stops at the first zero, torn or corrupt
        record (its offset is then ``self.scan_end``). Used by recovery only."""
        pos = start
        self.scan_end = start
        for segment in self.files.ordered():
            if segment.end <= pos:
                continue
            pos = max(pos, segment.base)
            while pos < segment.end:
                at = pos - segment.base
                if segment.size - at < 8:
                    break
                total, magic = _HEAD.unpack_from(segment.mm, at)
                if magic == BLANK_MAGIC and total == segment.size - at:
                    pos = segment.end
                    break
                if total <= 0 or magic not in (MAGIC_V1, MAGIC_V2) or total + MIN_BLANK > segment.size - at:
                    self.scan_end = pos
                    return
                try:
                    msg, _ = decode_message(segment.mm[at : at + total], check_crc=check_crc)
                except MessageError:
                    self.scan_end = pos
                    return
                if msg.physical_offset != pos:
                    self.scan_end = pos
                    return
                yield pos, msg
                pos += total
            self.scan_end = pos
        self.scan_end = pos

    def truncate(self, end: int) -> None:
        """Forget everything from ``end`` on: zero the rest of its segment, delete later ones."""
        for segment in self.files.ordered():
            if segment.base >= end and segment.base != end - end % self.segment_size:
                self.files.drop(segment)
            elif segment.base <= end < segment.end:
                zero_range(segment, end - segment.base, segment.size)
        self.write_pos = end
        self._fast_segment, self._fast_end = None, -1

    def close(self) -> None:
        if self.prefaulter is not None:
            self.prefaulter.close()
            self.prefaulter = None
        self.files.close()
