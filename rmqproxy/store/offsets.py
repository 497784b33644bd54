"""Consumer offsets: the next queue offset each group will consume, per topic and queue.

Kept in memory, persisted as ``config/consumerOffset.json`` in RocketMQ's shape
(``{"offsetTable": {"topic@group": {"queueId": offset}}}``) by atomic replace, and loaded at
start. Written by the owner thread, snapshotted by the flusher thread: hence the lock.
"""

from __future__ import annotations

import threading
from pathlib import Path

from .files import read_json, write_json_atomic


class ConsumerOffsets:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._table: dict[tuple[str, str, int], int] = {}
        self._dirty = False
        for key, queues in read_json(path, {}).get("offsetTable", {}).items():
            topic, _, group = key.rpartition("@")
            for queue_id, offset in queues.items():
                self._table[(group, topic, int(queue_id))] = int(offset)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self._table[(group, topic, queue_id)] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, or None when the group never committed one for this queue."""
        return self._table.get((group, topic, queue_id))

    def groups_of(self, topic: str) -> set[str]:
        with self._lock:
            return {g for (g, t, _) in self._table if t == topic}

    def table(self) -> dict[tuple[str, str, int], int]:
        with self._lock:
            return dict(self._table)

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self._table if k[1] == topic]:
                del self._table[key]
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
        write_json_atomic(self.path, {"offsetTable": table})
