"""Retention and the disk: whole commit-log segments older than ``file_reserved_time_hours`` are
deleted (sooner when the disk passes ``disk_max_used_space_ratio``), and the used share of the
store's file system says when puts must wait for room (``DISK_FULL_RATIO``)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from .commitlog import CommitLog
from .index import KeyIndex
from .mapped import Segment
from .model import StoreConfig
from .queues import QueueTable

#: The reference's ``diskSpaceWarningLevelRatio``: above this used share puts are refused.
DISK_FULL_RATIO = 0.90


class Retention:
    """Deletes expired segments and measures the disk, on the owner thread."""

    def __init__(self, root: Path, commitlog: CommitLog, index: KeyIndex, queues: QueueTable, config: StoreConfig,
                 clock: Callable[[], float]) -> None:  # fmt: skip
        self.root = root
        self.commitlog = commitlog
        self.index = index
        self.queues = queues
        self.config = config
        self.clock = clock
        self._segment_newest: dict[int, int | None] = {}  # full segment base → newest store time

    def delete_expired(self, now_ms: int | None = None) -> int:
        """Delete whole commit-log segments whose newest message is older than
        ``file_reserved_time_hours`` (never the one being written); returns how many."""
        now_ms = int(self.clock() * 1000) if now_ms is None else now_ms
        keep_ms = self.config.file_reserved_time_hours * 3_600_000
        deleted = 0
        segments = self.commitlog.files.ordered()
        for segment in segments[:-1]:
            newest = self._segment_newest.get(segment.base)
            if newest is None:  # a full segment never changes: walk it once
                newest = self._segment_newest[segment.base] = self._newest_time_in(segment)
            if newest is None or now_ms - newest < keep_ms:
                break
            self.commitlog.files.drop(segment)
            self.index.drop_segment(segment.base)
            self._segment_newest.pop(segment.base, None)
            deleted += 1
        if deleted:
            self.queues.correct_min(self.commitlog.min_offset)
        return deleted

    def _newest_time_in(self, segment: Segment) -> int | None:
        """Store time of the last record in a full segment (walks records by TOTALSIZE)."""
        pos, newest = segment.base, None
        while pos < segment.end - 8:
            size = self.commitlog.size_at(pos)
            if size is None:
                break
            newest = self.commitlog.store_time(pos)
            pos += size
        return newest

    def used_share(self) -> float:
        """The used share of the disk after deleting expired segments early when it passes
        ``disk_max_used_space_ratio`` % (the reference's meaning of that key)."""
        ratio = self.disk_ratio()
        if ratio * 100 > self.config.disk_max_used_space_ratio and self.delete_expired():
            ratio = self.disk_ratio()
        return ratio

    def disk_ratio(self) -> float:
        """Used share of the file system holding the store (disk-full checks and alerts)."""
        usage = shutil.disk_usage(self.root)
        return usage.used / usage.total if usage.total else 0.0

    def disk_space(self) -> tuple[int, int]:
        """Total and usable bytes of the file system holding the store (``commitLogDirCapacity``)."""
        usage = shutil.disk_usage(self.root)
        return usage.total, usage.free


def used_ratio(path: Path) -> float:
    """The used share of ``path``'s file system as the reference's runtime info gives it
    (``UtilAll.getDiskPartitionSpaceUsedPercent``: used over used + usable, rounded up to a whole
    percent), or -1.0 when it cannot be measured (no such path)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    entire = usage.used + usage.free  # ``free`` is what an unprivileged writer may use
    if usage.total <= 0 or entire <= 0:
        return -1.0
    return -(-usage.used * 100 // entire) / 100
