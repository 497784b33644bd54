"""Consumer offsets: the next queue offset each group will consume, per topic and queue, and the
next offset each group has been handed by a pull.

Committed offsets are kept in memory, persisted as ``config/consumerOffset.json`` in RocketMQ's
shape (``{"offsetTable": {"topic@group": {"queueId": offset}}}``) by atomic replace, and loaded at
start. They are stored as the client sent them, as the reference stores them; a negative one (some
clients commit -1 for a queue they have not consumed) reads as "no offset" everywhere, as the
reference's ``queryOffset() < 0`` does. Pulled offsets (the 5.x ``pullOffsetTable``) live in memory
only. Written by the owner thread, snapshotted by the flusher thread: hence the lock.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import NamedTuple

from ...core.files import read_json, write_json_atomic


class Progress(NamedTuple):
    """Where a group stands on one queue, as consume stats report it."""

    committed: int  # the committed offset, 0 when there is none
    pulled: int  # the next offset a pull handed out, never below ``committed``


class ConsumerOffsets:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._table: dict[tuple[str, str, int], int] = {}
        self._pulled: dict[tuple[str, str, int], int] = {}
        self._dirty = False
        for key, queues in read_json(path, {}).get("offsetTable", {}).items():
            topic, _, group = key.rpartition("@")
            for queue_id, offset in queues.items():
                self._table[(group, topic, int(queue_id))] = int(offset)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Store ``offset`` as sent, negative or past the queue's end included (as the reference)."""
        with self._lock:
            self._table[(group, topic, queue_id)] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, or None when the group has none for this queue (never committed,
        or committed a negative one)."""
        offset = self._table.get((group, topic, queue_id))
        return offset if offset is not None and offset >= 0 else None

    def record_pulled(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        """A pull answered this group with ``next_offset`` as its next begin offset."""
        self._pulled[(group, topic, queue_id)] = next_offset

    def progress(self, group: str, topic: str, queue_id: int) -> Progress:
        """Committed and pulled offsets as the 5.x ``getConsumeStats`` reports them: a missing or
        negative commit is 0, and the pulled offset is at least the committed one."""
        committed = self.query(group, topic, queue_id) or 0
        return Progress(committed, max(committed, self._pulled.get((group, topic, queue_id), committed)))

    def groups_of(self, topic: str) -> set[str]:
        with self._lock:
            return {g for (g, t, _) in self._table if t == topic}

    def table(self) -> dict[tuple[str, str, int], int]:
        """Every stored commit, as stored (negative ones included)."""
        with self._lock:
            return dict(self._table)

    def clone(self, src_group: str, dest_group: str, topic: str) -> bool:
        """Give ``dest_group`` exactly ``src_group``'s commits on ``topic`` (its own other queues
        of the topic go, as the reference replaces the whole entry); False, and nothing changes,
        when the source has none there."""
        with self._lock:
            copied = {q: o for (g, t, q), o in self._table.items() if g == src_group and t == topic}
            if not copied:
                return False
            for key in [k for k in self._table if k[0] == dest_group and k[1] == topic]:
                del self._table[key]
            for queue_id, offset in copied.items():
                self._table[(dest_group, topic, queue_id)] = offset
            self._dirty = True
            return True

    def topics_of(self, group: str) -> set[str]:
        """Topics ``group`` has commits on."""
        with self._lock:
            return {t for (g, t, _) in self._table if g == group}

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self._table if k[1] == topic]:
                del self._table[key]
            for key in [k for k in self._pulled if k[1] == topic]:
                del self._pulled[key]
            self._dirty = True

    def remove_group(self, group: str) -> None:
        """Forget every offset of ``group`` (deleteSubGroup with removeOffset / cleanOffset)."""
        with self._lock:
            for key in [k for k in self._table if k[0] == group]:
                del self._table[key]
            for key in [k for k in self._pulled if k[0] == group]:
                del self._pulled[key]
            self._dirty = True

    def persist(self, *, force: bool = False) -> None:
        """Write the table if it changed (flusher thread or shutdown)."""
        with self._lock:
            if not (self._dirty or force):
                return
            snapshot = dict(self._table)
            self._dirty = False
        table: dict[str, dict[str, int]] = {}
        for (group, topic, queue_id), offset in snapshot.items():
            table.setdefault(f"{topic}@{group}", {})[str(queue_id)] = offset
        try:
            write_json_atomic(self.path, {"offsetTable": table})
        except OSError:
            with self._lock:
                self._dirty = True  # the next round tries again
            raise
