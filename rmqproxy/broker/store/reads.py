"""Reading the store: a pull's read of a queue (``DefaultMessageStore.getMessage`` of 4.9.8, with
its statuses, next/min/max offsets and transfer limits), records by physical offset, and the
lookups by time and by key. Reads run on the owner thread and change nothing but a counter."""

from __future__ import annotations

import struct
from collections.abc import Iterable

from codec.errors import MessageError
from codec.message import Message, decode_message

from .commitlog import CommitLog
from .consumequeue import UNIT
from .index import KeyIndex
from .model import GetResult, GetStatus, MessageFilter, StoreConfig
from .queues import QueueTable


class Reader:
    """The store's read side. ``memory_limit``: how far behind the log's end a record still
    counts as cached, which picks the in-memory or the on-disk transfer limits."""

    def __init__(self, queues: QueueTable, commitlog: CommitLog, index: KeyIndex, config: StoreConfig,
                 memory_limit: int) -> None:  # fmt: skip
        self.queues = queues
        self.commitlog = commitlog
        self.index = index
        self.config = config
        self.memory_limit = memory_limit
        self.count = 0  # messages returned by ``get_message`` since start

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int,
        message_filter: MessageFilter | None = None,
        max_bytes: int | None = None,
    ) -> GetResult:
        """Read up to ``max_msgs`` matching records from ``offset``."""
        cq = self.queues.by_key.get((topic, queue_id))
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        if max_offset == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
        scan_limit = max(16000, max_msgs * UNIT) // UNIT  # index bytes a read may examine
        buffer = cq.index_buffer(offset, scan_limit)
        if buffer is None:
            return GetResult(GetStatus.OFFSET_FOUND_NULL, cq.roll_next(offset), min_offset, max_offset)

        config = self.config
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        messages = result.messages
        total = 0
        commitlog = self.commitlog
        max_phys = commitlog.write_pos
        next_file_start = None
        examined = 0
        matches_record = message_filter.matches_record if message_filter is not None else None
        for phys, size, tags_code in struct.iter_unpack(">qiq", buffer):
            if next_file_start is not None and phys < next_file_start:
                examined += 1
                continue
            if messages:
                if len(messages) >= max_msgs:
                    break
                in_disk = max_phys - phys > self.memory_limit
                limit_bytes = (
                    config.max_transfer_bytes_on_message_in_disk
                    if in_disk
                    else config.max_transfer_bytes_on_message_in_memory
                )
                limit_count = (
                    config.max_transfer_count_on_message_in_disk
                    if in_disk
                    else config.max_transfer_count_on_message_in_memory
                )
                if max_bytes is not None:
                    limit_bytes = min(limit_bytes, max_bytes)
                if total + size > limit_bytes or len(messages) > limit_count - 1:
                    break
            examined += 1
            if message_filter is not None and not message_filter.matches_tags_code(tags_code):
                continue
            record = commitlog.read(phys, size)
            if record is None:
                if not messages:
                    result.status = GetStatus.MESSAGE_WAS_REMOVING
                next_file_start = commitlog.roll_next(phys)
                continue
            next_file_start = None
            if matches_record is not None and not matches_record(record):
                continue
            messages.append(record)
            total += size
            result.status = GetStatus.FOUND
        result.next_begin_offset = offset + examined
        self.count += len(messages)
        return result

    def read_record(self, phys: int) -> bytes | None:
        """The stored record at a physical offset (VIEW_MESSAGE_BY_ID, send-back)."""
        size = self.commitlog.size_at(phys)
        return self.commitlog.read(phys, size) if size is not None else None

    def look_message(self, phys: int) -> Message | None:
        """The message at a physical offset, decoded; None if there is none or it cannot be."""
        record = self.read_record(phys)
        if record is None:
            return None
        try:
            return decode_message(record)[0]
        except MessageError:
            return None

    def message_at(self, topic: str, queue_id: int, offset: int) -> Message | None:
        """The message at a queue offset, or None."""
        entry = self.queues.entry(topic, queue_id, offset)
        return self.look_message(entry[0]) if entry is not None else None

    def in_disk(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the message at a queue offset lies beyond the memory window reads treat as
        cached (``checkInDiskByConsumeOffset``); False when the queue has no such entry."""
        entry = self.queues.entry(topic, queue_id, offset)
        return entry is not None and self.commitlog.write_pos - entry[0] > self.memory_limit

    def earliest_message_time(self, topic: str, queue_id: int) -> int | None:
        """Store time of a queue's first readable message, or None."""
        entry = self.queues.entry(topic, queue_id, self.queues.min_offset(topic, queue_id))
        return self.commitlog.store_time(entry[0]) if entry is not None else None

    def search_offset_by_timestamp(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Queue offset whose store time equals ``timestamp`` or is nearest to it (ties and
        equal distances go to the earlier); all later → the first offset, all earlier → the last
        message's offset, empty → 0 (``ConsumeQueue.getOffsetInQueueByTime``)."""
        cq = self.queues.by_key.get((topic, queue_id))
        if cq is None or cq.max_offset <= cq.min_offset:
            return 0
        store_time = self.commitlog.store_time
        lo, hi = cq.min_offset, cq.max_offset - 1
        while lo < hi:  # first offset whose store time >= timestamp
            mid = (lo + hi) // 2
            t = store_time(cq.entry(mid)[0])
            if t is not None and t >= timestamp:
                hi = mid
            else:
                lo = mid + 1
        right_time = store_time(cq.entry(lo)[0])
        if right_time is None or right_time < timestamp:
            return lo  # all earlier: the last message
        if right_time == timestamp or lo == cq.min_offset:
            return lo
        left_time = store_time(cq.entry(lo - 1)[0]) or 0
        return lo if timestamp - left_time > right_time - timestamp else lo - 1

    def messages_by_keys(
        self, topic: str, keys: Iterable[str], max_num: int, begin_ms: int = 0, end_ms: int = 2**62
    ) -> dict[str, list[bytes]]:
        """Records of ``topic`` whose KEYS or UNIQ_KEY contain each key, newest first, in one pass
        over the index: key -> its records (keys with none are left out)."""
        found: dict[str, list[bytes]] = {}
        for key, physs in self.index.lookup_many(topic, keys).items():
            for phys in physs:
                msg = self.look_message(phys)
                if msg is None or msg.topic != topic or not begin_ms <= msg.store_timestamp <= end_ms:
                    continue
                if key in (msg.properties.get("KEYS") or "").split() or msg.properties.get("UNIQ_KEY") == key:
                    records = found.setdefault(key, [])
                    records.append(self.read_record(phys))
                    if len(records) >= max_num:
                        break
        return found
