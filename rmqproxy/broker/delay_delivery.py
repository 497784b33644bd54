"""Delivery of delayed messages at their due time, on one wall-clock alarm.

The store parks a ``DELAY=n`` message in ``SCHEDULE_TOPIC_XXXX`` (see ``rmqproxy/core/delay_levels.py``)
with its delivery time (wall-clock epoch ms) as its tags code, and ``MessageStore.deliver_due``
re-puts whatever is due and returns when the next one is. This keeps one alarm set to that time,
and moves it earlier when a message that is due sooner is parked (its arrival says when), so a
delayed message is delivered when it is due rather than on the next tick of a poll. The due times
are absolute, so the alarm follows the wall clock (``core.alarm.wall_alarm``), as the reference's
delivery does: a step forward delivers what it made due.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.alarm import Alarm
from ..core.clocks import Wall
from .store import Arrival, MessageStore
from ..core.delay_levels import SCHEDULE_TOPIC


class DelayedDelivery:
    def __init__(self, store: MessageStore, wall: Wall, alarm: Callable[[Callable[[], None]], Alarm]) -> None:
        self.store = store
        self.wall = wall
        self._make_alarm = alarm
        self._alarm: Alarm | None = None
        self._due_ms: int | None = None  # when the alarm is set for (None: not set)

    def start(self) -> None:
        """Deliver what came due while the server was down, and wait for the next one."""
        self._run()

    def arrived(self, arrival: Arrival) -> None:
        """Arrival listener: a parked message may be due before the alarm."""
        if arrival.topic == SCHEDULE_TOPIC:
            self._schedule(arrival.tags_code)

    def stop(self) -> None:
        if self._alarm is not None:
            self._alarm.close()
            self._alarm = None
        self._due_ms = None

    def _schedule(self, due_ms: int) -> None:
        if self._due_ms is not None and self._due_ms <= due_ms:
            return
        if self._alarm is None:
            self._alarm = self._make_alarm(self._run)
        self._due_ms = due_ms
        self._alarm.set(due_ms / 1000)

    def _run(self) -> None:
        self._due_ms = None
        next_due = self.store.deliver_due(int(self.wall() * 1000))
        if next_due is not None:
            self._schedule(next_due)
