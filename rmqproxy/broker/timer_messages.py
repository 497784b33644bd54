"""5.x timer messages: ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS`` or ``TIMER_DELIVER_MS``, delivered
at the time asked.

The send path asks ``timer_delivery`` what a message's properties mean (the reference's rules:
a delay level wins, SEC before MS before DELIVER_MS, at most ``timerMaxDelaySec`` ahead, a time
already past is delivered at once). ``TimerService.park`` turns a timer message into one stored in
``rmq_sys_wheel_timer`` queue 0, with its real topic and queue in ``REAL_TOPIC``/``REAL_QID`` and
its delivery time in ``TIMER_OUT_MS``, which is also its consume-queue tags code.

The service keeps pending timers in a heap of (delivery time, queue offset) under one alarm at
wall-clock times (``core.alarm.wall_alarm``: a ``CLOCK_REALTIME`` timerfd under a real reactor, to
the millisecond, where the reference's wheel works in 1 s slots). Delivery times are absolute, so
they follow the wall clock as the reference's do: a step forward delivers what it made due.
and puts each into its real topic when due, with ``TIMER_ENQUEUE_MS`` and ``TIMER_DEQUEUE_MS``
added. The heap holds at most ``capacity`` timers; past that it keeps the earliest half and reads
the rest back from the consume queue when it runs dry. Progress is the offset of the earliest
undelivered timer, kept as the consumer offset of ``CID_SYS_RMQ_TIMER``; a start reads the queue
from there, and a timer due while the server was down is delivered unless the key index shows
its delivered copy (a kill -9 right after a delivery does not deliver it twice).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from twisted.logger import Logger

from codec.message import Message, decode_message

from ..core.alarm import Alarm
from ..core.clocks import Wall
from .store import Arrival, MessageStore
from ..core.delay_levels import TIMER_TOPIC

log = Logger()

TIMER_GROUP = "CID_SYS_RMQ_TIMER"
TIMER_PROPERTIES = ("TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_DELIVER_MS")  # in the order they win
TIMER_KEYS = frozenset(TIMER_PROPERTIES)
DEFAULT_CAPACITY = 100_000


class TimerRefused(Exception):
    """A timer message the broker refuses: ``code`` and ``remark`` are the answer."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def timer_delivery(properties: dict[str, str], now_ms: int, max_delay_s: int, enabled: bool = True) -> int | None:
    """When a message with these properties is delivered: None for at once (not a timer message,
    one whose delay level wins, or one whose time has passed), else the epoch ms. Raises
    TimerRefused with the reference's answer. Drops the timer properties a delay level overrides."""
    if TIMER_KEYS.isdisjoint(properties):
        return None
    level = properties.get("DELAY", "")
    if level.isdigit() and int(level) > 0:
        for key in TIMER_PROPERTIES:
            properties.pop(key, None)
        return None
    if "TIMER_OUT_MS" in properties:  # already timed (a delivered copy sent again): as the reference
        return None
    if not enabled:
        raise TimerRefused(1, "accurate timer message is not enabled, timerWheelEnable is false")
    if "TIMER_DEL_UNIQKEY" in properties:
        raise TimerRefused(1, "deleting a timer message (TIMER_DEL_UNIQKEY) is not supported by rmqproxy")
    illegal = TimerRefused(
        13, f"timer message illegal, the delay time should not be bigger than the max delay {max_delay_s * 1000}ms; "
            "or if set del msg, the delay time should be bigger than the current time",
    )  # fmt: skip
    key = next(k for k in TIMER_PROPERTIES if k in properties)
    text = properties[key].strip()
    if not text.lstrip("-").isdigit():
        raise illegal
    value = int(text)
    deliver_ms = now_ms + value * 1000 if key == "TIMER_DELAY_SEC" else now_ms + value if key == "TIMER_DELAY_MS" else value
    if deliver_ms <= now_ms:
        return None
    if deliver_ms - now_ms > max_delay_s * 1000:
        raise illegal
    return deliver_ms


class TimerService:
    def __init__(
        self,
        store: MessageStore,
        wall: Wall,
        alarm: Callable[[Callable[[], None]], Alarm],
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        self.store = store
        self.wall = wall
        self._make_alarm = alarm
        self._alarm: Alarm | None = None
        self.capacity = capacity
        self._due: list[tuple[int, int]] = []  # heap of (delivery ms, timer queue offset)
        self._offsets: list[int] = []  # heap of the offsets in ``_due``, for the progress offset
        self._delivered: set[int] = set()  # offsets delivered but still in ``_offsets``
        self._horizon: int | None = None  # when set, timers due after it are left in the queue
        self._left_from: int | None = None  # the lowest offset of those left in the queue
        self.delivered = 0

    # --- the send side ---------------------------------------------------------------------

    @staticmethod
    def park(msg: Message, deliver_ms: int, now_ms: int) -> Message:
        """``msg`` made a parked timer message in place."""
        msg.properties["REAL_TOPIC"] = msg.topic
        msg.properties["REAL_QID"] = str(msg.queue_id)
        msg.properties["TIMER_OUT_MS"] = str(deliver_ms)
        msg.properties["TIMER_ENQUEUE_MS"] = str(now_ms)
        msg.topic = TIMER_TOPIC
        msg.queue_id = 0
        return msg

    def arrived(self, arrival: Arrival) -> None:
        """Arrival listener: a timer message was stored."""
        if arrival.topic == TIMER_TOPIC:
            self._add(arrival.tags_code, arrival.queue_offset)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Read the pending timers back from the queue (delivering those already due)."""
        self._load(self._progress(), None, recovering=True)
        self._fire()

    def stop(self) -> None:
        if self._alarm is not None:
            self._alarm.close()
            self._alarm = None

    @property
    def pending(self) -> int:
        return len(self._due)

    # --- the heap ----------------------------------------------------------------------------

    def _add(self, due_ms: int, offset: int) -> None:
        if self._horizon is not None and due_ms > self._horizon:
            self._left_from = offset if self._left_from is None else min(self._left_from, offset)
            return
        heapq.heappush(self._due, (due_ms, offset))
        heapq.heappush(self._offsets, offset)
        if len(self._due) > self.capacity:
            self._trim()
        if self._due[0] == (due_ms, offset):
            self._arm()

    def _trim(self) -> None:
        """Keep the earliest half (and any due in the same millisecond as the last of them: the
        horizon splits no millisecond); the rest stays in the queue until the heap runs dry."""
        horizon = heapq.nsmallest(self.capacity // 2, self._due)[-1][0]
        keep = sorted(entry for entry in self._due if entry[0] <= horizon)
        left = [entry for entry in self._due if entry[0] > horizon]
        if not left:
            return
        self._due = keep  # sorted, so a heap
        self._horizon = horizon
        low = min(offset for _, offset in left)
        self._left_from = low if self._left_from is None else min(self._left_from, low)
        kept = {offset for _, offset in keep}
        self._offsets = [o for o in self._offsets if o in kept and o not in self._delivered]
        heapq.heapify(self._offsets)
        self._delivered.clear()

    def _load(self, start: int, after_ms: int | None, recovering: bool = False) -> None:
        """Read the timers of the queue from ``start`` (those due after ``after_ms``, if given);
        on ``recovering``, those already due are delivered unless their copy was."""
        now_ms = int(self.wall() * 1000)
        due = []
        for offset, due_ms in self.store.tags_codes(TIMER_TOPIC, 0, start):
            if after_ms is not None and due_ms <= after_ms:
                continue
            if recovering and due_ms <= now_ms:
                due.append((offset, due_ms))
            else:
                self._add(due_ms, offset)
        done = self._already_delivered(due)
        for offset, due_ms in due:
            if offset not in done:
                self._add(due_ms, offset)
        self._commit_progress()

    def _already_delivered(self, due: list[tuple[int, int]]) -> set[int]:
        """The offsets among ``due`` whose delivered copy is in its real topic (found by its
        ``UNIQ_KEY`` and ``TIMER_OUT_MS``; one pass over the key index per topic)."""
        done: set[int] = set()
        wanted: dict[str, dict[str, list[tuple[int, int]]]] = {}
        for offset, due_ms in due:
            parked = self.store.message_at(TIMER_TOPIC, 0, offset)
            if parked is None:
                done.add(offset)  # expired with its segment: nothing left to deliver
                continue
            key, topic = parked.properties.get("UNIQ_KEY"), parked.properties.get("REAL_TOPIC")
            if key and topic:
                wanted.setdefault(topic, {}).setdefault(key, []).append((offset, due_ms))
        for topic, keys in wanted.items():
            for key, records in self.store.messages_by_keys(topic, keys, 8).items():
                outs = {decode_message(record)[0].properties.get("TIMER_OUT_MS") for record in records}
                done |= {offset for offset, due_ms in keys[key] if str(due_ms) in outs}
        return done

    def _arm(self) -> None:
        if self._alarm is None:
            if not self._due:
                return
            self._alarm = self._make_alarm(self._fire)
        self._alarm.set(self._due[0][0] / 1000 if self._due else None)

    def _fire(self) -> None:
        """Deliver every timer that is due, then set the alarm for the next."""
        now_ms = int(self.wall() * 1000)
        delivered = False
        while self._due and self._due[0][0] <= now_ms:
            _due_ms, offset = heapq.heappop(self._due)
            self._deliver(offset, now_ms)
            delivered = True
        if delivered:
            self._commit_progress()
        if not self._due and self._horizon is not None:
            horizon, self._horizon, start = self._horizon, None, self._left_from
            self._left_from = None
            self._load(start if start is not None else self._progress(), horizon)
        self._arm()

    def _deliver(self, offset: int, now_ms: int) -> None:
        parked = self.store.message_at(TIMER_TOPIC, 0, offset)
        if parked is not None:
            ticket = self.store.unpark(parked, drop=(), add={"TIMER_DEQUEUE_MS": str(now_ms)})
            if ticket is not None and ticket.result is not None and not ticket.result.ok:
                log.error("timer message at {offset} not delivered: {status} {remark}", offset=offset,
                          status=ticket.result.status.name, remark=ticket.result.remark)  # fmt: skip
        self.delivered += 1
        self._delivered.add(offset)

    def _commit_progress(self) -> None:
        """Record the offset of the earliest timer not yet delivered (where a start reads from)."""
        offsets = self._offsets
        while offsets and offsets[0] in self._delivered:
            self._delivered.discard(heapq.heappop(offsets))
        low = offsets[0] if offsets else self.store.max_offset(TIMER_TOPIC, 0)
        if self._left_from is not None:
            low = min(low, self._left_from)
        if low != (self.store.offsets.query(TIMER_GROUP, TIMER_TOPIC, 0) or 0):  # no entry until there is progress
            self.store.offsets.commit(TIMER_GROUP, TIMER_TOPIC, 0, low)

    def _progress(self) -> int:
        stored = self.store.offsets.query(TIMER_GROUP, TIMER_TOPIC, 0)
        return max(stored or 0, self.store.min_offset(TIMER_TOPIC, 0))

