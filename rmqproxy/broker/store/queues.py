"""The store's consume queues by (topic, queue id): found on disk at start, created on a queue's
first put under a folder checked to lie inside the store, the lookups by queue, and deletion
(mqadmin cleanExpiredCQ, cleanUnusedTopic) recorded so that a crash recovery never fills a
deleted queue with its old records again."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

from twisted.logger import Logger

from ...core.files import backup_of, read_json, write_json_atomic
from .consumequeue import ConsumeQueue
from .mapped import Allocate, OpenBudget, Segment, fsync_directory

log = Logger()

Key = tuple[str, int]


class QueueTable:
    """The consume queues under ``consumequeue/``. ``by_key`` is the table itself: the put and
    read hot paths index it directly."""

    def __init__(
        self, root: Path, entries_per_file: int, budget: OpenBudget, dropped_path: Path, allocate: Allocate | None
    ) -> None:
        self.root = root
        self.entries_per_file = entries_per_file
        self.budget = budget
        self.allocate = allocate
        self.by_key: dict[Key, ConsumeQueue] = {}
        # queues destroyed since start → the commit-log end then: a crash recovery must not
        # dispatch their older records again (cleared once a checkpoint passes them)
        self.dropped_path = dropped_path
        self.dropped: dict[Key, int] = {}

    def load(self) -> None:
        """Open every queue found on disk, and read which were destroyed before a crash."""
        self.root.mkdir(exist_ok=True)
        for topic_dir in sorted(self.root.iterdir()):
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.name.isdigit():
                    self.open(topic_dir.name, int(queue_dir.name))
        self.dropped = {(t, int(q)): int(end) for t, q, end in read_json(self.dropped_path, [])}

    def forget_dropped(self) -> None:
        """A checkpoint now lies past every destroyed queue's records: nothing recovers them."""
        if self.dropped:
            self.dropped.clear()
            self.dropped_path.unlink(missing_ok=True)
            backup_of(self.dropped_path).unlink(missing_ok=True)

    def open(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue, created if new (ValueError for a name whose folder would leave the store)."""
        key = (topic, queue_id)
        cq = self.by_key.get(key)
        if cq is None:
            cq = ConsumeQueue(self.directory(topic, queue_id), self.entries_per_file, self.allocate, self.budget)
            self.by_key[key] = cq
        return cq

    def directory(self, topic: str, queue_id: int) -> Path:
        """``consumequeue/<topic>/<queue>``, refused (ValueError) unless it lies right under the
        store's consume-queue folder: names are validated where they enter, and this is the
        defence behind that, so no name can create a file outside the store."""
        top = self.root.resolve()
        directory = (top / topic / str(queue_id)).resolve()
        if directory.parent.parent != top or queue_id < 0:
            raise ValueError(f"refusing a consume queue outside the store: topic {topic!r}, queue {queue_id}")
        return directory

    def keys(self) -> list[Key]:
        return sorted(self.by_key)

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.by_key.get((topic, queue_id))
        return cq.min_offset if cq is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be readable (``getMaxOffsetInQueue``)."""
        cq = self.by_key.get((topic, queue_id))
        return cq.max_offset if cq is not None else 0

    def entry(self, topic: str, queue_id: int, offset: int) -> tuple[int, int, int] | None:
        """(physical offset, size, tags code) of one entry, or None."""
        cq = self.by_key.get((topic, queue_id))
        return cq.entry(offset) if cq is not None else None

    def entries(self, topic: str, queue_id: int, start: int, max_entries: int) -> list[tuple[int, int, int]]:
        """Up to ``max_entries`` entries from ``start``, never past the end of the file holding it
        (QUERY_CONSUME_QUEUE)."""
        cq = self.by_key.get((topic, queue_id))
        return cq.entries(start, max_entries) if cq is not None else []

    def tags_codes(self, topic: str, queue_id: int, start: int) -> Iterator[tuple[int, int]]:
        """(queue offset, tags code) of each entry from ``start`` to the queue's end (a parked
        queue's tags codes are delivery times)."""
        cq = self.by_key.get((topic, queue_id))
        if cq is None:
            return
        for offset in range(max(start, cq.min_offset), cq.max_offset):
            entry = cq.entry(offset)
            if entry is not None:
                yield offset, entry[2]

    def is_empty(self, topic: str, queue_id: int) -> bool:
        """Whether a queue has no entry a consumer can read (none yet, or all expired)."""
        cq = self.by_key.get((topic, queue_id))
        return cq is None or cq.min_offset >= cq.max_offset

    def correct_min(self, phys_min: int) -> None:
        """Move every queue's min offset past entries whose records lie below ``phys_min`` (deleted
        by retention), deleting queue files that hold only such entries."""
        for cq in list(self.by_key.values()):
            cq.correct_min(phys_min)

    def truncate_to_phys(self, end: int) -> None:
        """Drop every entry whose record lies at or past ``end`` (recovery cut the log there)."""
        for cq in self.by_key.values():
            cq.truncate_to_phys(end)

    def sync_directories(self) -> None:
        """fsync each queue's folder, so files created since the last checkpoint survive a crash."""
        for cq in list(self.by_key.values()):
            cq.files.sync_directory()

    def fsync_all(self) -> None:
        for cq in self.by_key.values():
            for segment in cq.files.ordered():
                segment.fsync()

    def destroy(self, topic: str, queue_id: int, log_end: int) -> list[Segment]:
        """Delete a queue, files and folder, recording that the commit log's records below
        ``log_end`` are never dispatched into it again; returns its segments (so the caller
        forgets them). OSError, and nothing deleted, if that record cannot be saved."""
        key = (topic, queue_id)
        cq = self.by_key[key]
        directory = self.directory(topic, queue_id)
        dropped = {**self.dropped, key: log_end}
        write_json_atomic(self.dropped_path, [[t, q, end] for (t, q), end in sorted(dropped.items())])
        self.dropped = dropped
        del self.by_key[key]
        segments = cq.files.ordered()
        cq.files.dropped = True  # a directory fsync the flusher has begun finds nothing: fine
        cq.close()
        for segment in segments:
            segment.path.unlink(missing_ok=True)
        shutil.rmtree(directory, ignore_errors=True)
        changed = directory.parent
        try:
            changed.rmdir()  # the topic's folder, once its last queue is gone
            changed = changed.parent
        except OSError:
            pass
        try:
            fsync_directory(changed)
        except OSError:
            log.warn("store: cannot fsync {folder} after deleting a consume queue", folder=changed)
        return segments

    def close(self) -> None:
        for cq in self.by_key.values():
            cq.close()
