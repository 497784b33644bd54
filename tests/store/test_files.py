"""Segment files: prefaulting, and the append/ensure fast paths after truncation drops files."""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest

from codec import message as codec_message  # its hot names: codec.implementation rebinds them
from codec.message import decode_message
from rmqproxy.broker.store.commitlog import CommitLog
from rmqproxy.broker.store.consumequeue import UNIT, ConsumeQueue
from rmqproxy.broker.store.mapped import Segment, _allocate

from .conftest import msg


def _resident_kib(path: Path) -> int:
    """Rss of this process's mapping of ``path`` (Linux ``/proc/self/smaps``)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(str(path)):
            for detail in lines[i + 1 :]:
                if detail.startswith("Rss:"):
                    return int(detail.split()[1])
    raise AssertionError(f"{path} is not mapped")


def test_prefault_populates_the_pages_of_the_range_only(tmp_path: Path) -> None:
    """The GIL-free madvise reaches the segment's own mapping (a wrong address would populate
    nothing here, or another mapping)."""
    if not Path("/proc/self/smaps").exists():
        pytest.skip("needs Linux /proc")
    segment = Segment(tmp_path / "seg", 0, 8 << 20, create=True, allocate=_allocate)
    try:
        before = _resident_kib(segment.path)
        if not segment.prefault(mmap.PAGESIZE + 1, 2 << 20):
            pytest.skip("kernel without MADV_POPULATE_WRITE")
        grown = _resident_kib(segment.path) - before
        assert 2048 <= grown <= 2048 + 8  # 2 MiB from the page holding the start, nothing more
        assert bytes(segment.mm[: 4 << 20]) == bytes(4 << 20)  # populating writes nothing
    finally:
        segment.close()
    assert segment.prefault(0, 4096) is False  # closed: a no-op


class _Recorder:
    """An ``Allocate`` that records the ranges it gives blocks to."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, fd: int, offset: int, length: int) -> None:
        self.calls.append((offset, length))
        _allocate(fd, offset, length)


def test_consume_queue_allocates_a_file_again_after_truncation_dropped_it(tmp_path: Path) -> None:
    """``ensure`` skips entries it knows have blocks; a file dropped by truncation has none."""
    per_file = 8192  # 160 KiB files, allocated 64 KiB at a time
    cq = ConsumeQueue(tmp_path / "cq", per_file)
    for offset in range(per_file + 6000):
        cq.ensure(offset, offset)
        cq.put(offset, offset * 100, 100, 0)
    cq.truncate_to_phys(100 * 100)  # entries 100.. go, and with them the second file
    assert cq.max_offset == 100 and cq.files.segment_for(per_file * UNIT) is None
    for offset in range(100, per_file + 4000):
        cq.ensure(offset, offset)
        cq.put(offset, offset * 100, 100, 0)
    assert cq.files.segment_for(per_file * UNIT).allocated >= 4000 * UNIT  # every written entry has blocks
    assert cq.entry(per_file + 3999) == ((per_file + 3999) * 100, 100, 0)
    cq.close()


def test_commit_log_appends_after_truncation_go_where_it_ended(tmp_path: Path) -> None:
    """The append fast path remembers the segment and its allocated end; truncation must reset it."""
    allocate = _Recorder()
    log = CommitLog(tmp_path / "log", 4096, allocate)
    record = codec_message.encode_message(msg(body=bytes(1000)))
    offsets = [log.append(record) for _ in range(5)]  # three per segment, so two segments
    assert offsets[3] == 4096 and log.files.segment_for(4096) is not None
    log.truncate(offsets[1])
    assert log.files.segment_for(4096) is None
    allocate.calls.clear()
    again = [log.append(record) for _ in range(3)]
    assert again == [offsets[1], offsets[2], 4096]
    assert allocate.calls[-1][0] == 0  # the new second segment got blocks before its record
    for phys in again:
        got, _ = decode_message(log.read(phys, len(record)))
        assert got.physical_offset == phys
    log.close()
