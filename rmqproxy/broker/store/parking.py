"""Delay-level parking: a message sent with ``DELAY`` is stored in ``SCHEDULE_TOPIC`` (queue =
level − 1, its consume-queue tags code = its delivery time) and re-put into its real topic once
due. Delivery progress per level is ``config/delayOffset.json`` (``scheduleMessageOffset_<level>``
in the runtime info), written at checkpoints by the flush thread."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from codec.message import STOREHOST_V6_FLAG, Message

from ...core.delay_levels import SCHEDULE_TOPIC, parse_levels
from ...core.files import read_json, write_json_atomic
from .queues import QueueTable


class DelayParking:
    """The delay levels of one store and how far each has been delivered."""

    def __init__(self, levels: str, path: Path) -> None:
        self.levels_ms = parse_levels(levels)
        self.path = path
        self.offsets: dict[int, int] = {}  # level queue id → next offset to deliver (owner thread)
        self._saved: dict[int, int] = {}  # what the file holds (flush thread)

    def load(self) -> None:
        self.offsets = {int(k): v for k, v in read_json(self.path, {}).items()}
        self._saved = dict(self.offsets)

    def park(self, msg: Message) -> None:
        """Redirect a message whose ``DELAY`` names a level to that level's schedule queue,
        keeping its real topic and queue in properties; any other message is left as it is."""
        level_text = msg.properties.get("DELAY")
        if not level_text or msg.topic == SCHEDULE_TOPIC or not level_text.isdigit():
            return
        level = min(int(level_text), len(self.levels_ms))
        if level <= 0:
            return
        msg.properties["REAL_TOPIC"] = msg.topic
        msg.properties["REAL_QID"] = str(msg.queue_id)
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1

    def deliver_time(self, msg: Message) -> int:
        """When a parked message is due (epoch ms): its store time plus its level's delay."""
        return msg.store_timestamp + self.levels_ms[min(msg.queue_id, len(self.levels_ms) - 1)]

    def deliver_due(self, queues: QueueTable, now_ms: int, look: Callable[[int], Message | None],
                    put: Callable[[Message], object]) -> int | None:  # fmt: skip
        """Re-put (``put`` of ``unparked``) every parked message due by ``now_ms``; return the
        epoch ms of the next delivery due, or None when nothing waits."""
        next_due = None
        for level in range(len(self.levels_ms)):
            cq = queues.by_key.get((SCHEDULE_TOPIC, level))
            if cq is None:
                continue
            offset = max(self.offsets.get(level, 0), cq.min_offset)
            while offset < cq.max_offset:
                phys, _size, deliver_at = cq.entry(offset)
                if deliver_at > now_ms:
                    next_due = deliver_at if next_due is None else min(next_due, deliver_at)
                    break
                parked = look(phys)
                message = unparked(parked) if parked is not None else None
                if message is not None:
                    put(message)
                offset += 1
            self.offsets[level] = offset
        return next_due

    def progress(self, queues: QueueTable) -> dict[int, tuple[int, int]]:
        """Per delay level (from 1) whose delivery has begun: the offset of its next message to
        deliver and the end of its schedule queue."""
        return {queue_id + 1: (offset, queues.max_offset(SCHEDULE_TOPIC, queue_id))
                for queue_id, offset in sorted(self.offsets.items())}  # fmt: skip

    def save(self) -> None:
        """Flush thread, at a checkpoint: write the progress if it moved (OSError if it cannot)."""
        offsets = dict(self.offsets)
        if offsets != self._saved:
            write_json_atomic(self.path, {str(k): v for k, v in offsets.items()})
            self._saved = offsets


def unparked(parked: Message, drop: tuple[str, ...] = ("DELAY",), add: dict[str, str] | None = None) -> Message | None:
    """The message a parked one (delay level or timer) stands for: in its ``REAL_TOPIC`` and
    ``REAL_QID``, without the ``drop`` properties and with ``add``; None if it names no real topic."""
    props = dict(parked.properties)
    topic = props.pop("REAL_TOPIC", None)
    queue_id = props.pop("REAL_QID", "0")
    for key in drop:
        props.pop(key, None)
    if add:
        props.update(add)
    if topic is None:
        return None
    return Message(
        topic,
        parked.body,
        props,
        queue_id=int(queue_id) if queue_id.isdigit() else 0,
        flag=parked.flag,
        sys_flag=parked.sys_flag & ~STOREHOST_V6_FLAG,
        born_timestamp=parked.born_timestamp,
        born_host=parked.born_host,
        reconsume_times=parked.reconsume_times,
        prepared_transaction_offset=parked.prepared_transaction_offset,
    )

