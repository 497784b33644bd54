"""Delivery of delayed messages at their due time, on one timer.

The store parks a ``DELAY=n`` message in ``SCHEDULE_TOPIC_XXXX`` (see ``rmqproxy/core/delay_levels.py``)
with its delivery time as its tags code, and ``MessageStore.deliver_due`` re-puts whatever is due
and returns when the next one is. This keeps one ``callLater`` set to that time, and moves it
earlier when a message that is due sooner is parked (its arrival says when), so a delayed message
is delivered when it is due rather than on the next tick of a poll.
"""

from __future__ import annotations

from twisted.internet.interfaces import IDelayedCall, IReactorTime

from .store import Arrival, MessageStore
from ..core.delay_levels import SCHEDULE_TOPIC


class DelayedDelivery:
    def __init__(self, store: MessageStore, clock: IReactorTime) -> None:
        self.store = store
        self.clock = clock
        self._timer: IDelayedCall | None = None
        self._due_ms = 0

    def start(self) -> None:
        """Deliver what came due while the server was down, and wait for the next one."""
        self._run()

    def arrived(self, arrival: Arrival) -> None:
        """Arrival listener: a parked message may be due before the timer."""
        if arrival.topic == SCHEDULE_TOPIC:
            self._schedule(arrival.tags_code)

    def stop(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _schedule(self, due_ms: int) -> None:
        if self._timer is not None and self._timer.active():
            if self._due_ms <= due_ms:
                return
            self._timer.cancel()
        self._due_ms = due_ms
        self._timer = self.clock.callLater(max(0.0, due_ms / 1000 - self.clock.seconds()), self._run)

    def _run(self) -> None:
        self._timer = None
        next_due = self.store.deliver_due(int(self.clock.seconds() * 1000))
        if next_due is not None:
            self._schedule(next_due)
