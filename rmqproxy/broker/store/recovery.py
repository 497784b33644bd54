"""Crash recovery: re-dispatch every valid record from the last checkpoint on, and cut the commit
log at the first torn or corrupt one (validated by length and, unless turned off, CRC). A start
after a clean stop never gets here: the clean stop recorded the log's end."""

from __future__ import annotations

from collections.abc import Callable

from codec.message import Message

from .commitlog import CommitLog
from .index import KeyIndex
from .queues import QueueTable


def recover(commitlog: CommitLog, queues: QueueTable, index: KeyIndex, checkpoint: int, *, check_crc: bool,
            tags_code: Callable[[Message], int]) -> int:  # fmt: skip
    """Rebuild consume-queue and index entries from ``checkpoint`` on, drop those past the cut,
    and make all of it durable; returns how many records were re-dispatched. Records of a queue
    destroyed before the crash (``QueueTable.dropped``) stay out of it."""
    start = max(checkpoint, commitlog.min_offset)
    if commitlog.files.segment_for(start) is None and commitlog.files.last is not None:
        start = commitlog.min_offset
    dropped = queues.dropped
    recovered = 0
    for phys, msg in commitlog.scan(start, check_crc=check_crc):
        if dropped and phys < dropped.get((msg.topic, msg.queue_id), -1):
            continue  # its queue was destroyed (CLEAN_UNUSED_TOPIC): it stays gone
        cq = queues.open(msg.topic, msg.queue_id)
        cq.put(msg.queue_offset, phys, msg.store_size, tags_code(msg))
        index.add_message(msg.topic, msg.properties.get("KEYS"), msg.properties.get("UNIQ_KEY"), phys)
        recovered += 1
    end = commitlog.scan_end
    commitlog.truncate(end)
    queues.truncate_to_phys(end)
    index.write(index.take_pending())
    queues.fsync_all()
    for segment in commitlog.files.ordered():
        segment.fsync()
    return recovered
