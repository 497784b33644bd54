"""The server's two clocks: the reactor's, monotonic, and the wall clock, each read for its own kind of time.

Every relative wait (held pulls, queue locks, request and upstream timeouts, channel expiry, rate
windows, periodic tasks) runs on the reactor: ``callLater``, ``LoopingCall`` and ``seconds()``.
``monotonic_reactor`` makes that clock ``time.monotonic`` at startup, so a wall-clock step (NTP,
an operator's ``date -s``) moves none of them, ours or Twisted's. Absolute times (store and born
timestamps, the event log's times, pop invisibility, timer and delay messages' due times, file
ages) read the wall clock, a ``Wall`` the composition root hands to their owners (``time.time``
in a server, a fake a test can step).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: The wall clock: epoch seconds, as ``time.time``; it may step either way.
Wall = Callable[[], float]


def monotonic_reactor(reactor: Any) -> None:
    """Make ``reactor``'s time ``time.monotonic``, so no relative wait reads the wall clock.

    Only before its first ``callLater``: a call scheduled on the wall clock would be due decades
    from now on the monotonic one."""
    if reactor.getDelayedCalls():
        raise RuntimeError("the reactor's clock changes only before anything is scheduled on it")
    reactor.seconds = time.monotonic


__all__ = ["Wall", "monotonic_reactor"]
