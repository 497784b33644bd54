"""Rejected input, counted and logged at a bounded rate.

A client can send bad frames as fast as the network allows; logging each one (INFO, with its
reason) once turned 200,000 bad frames into 15 MB of log. ``Rejections`` counts every rejection
by reason (exported as ``rmqproxy_rejected_requests_total``) and logs at most ``burst`` of each
reason per ``window_s``, then one line saying how many it left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from twisted.logger import Logger

log = Logger()

BAD_FRAME = "bad_frame"  # undecodable or oversized frame: the connection is closed
BAD_REQUEST = "bad_request"  # a header or body that does not parse: answered SYSTEM_ERROR
UNSUPPORTED_CODE = "unsupported_code"  # answered REQUEST_CODE_NOT_SUPPORTED
TOO_MANY_IN_FLIGHT = "too_many_in_flight"  # answered SYSTEM_BUSY
REPLY_BUFFER_FULL = "reply_buffer_full"  # an answer the unread peer had no room for: SYSTEM_BUSY instead
TRANSACTION_NOT_APPLIED = "transaction_not_applied"  # an END_TRANSACTION naming no matching half message
ONEWAY_REFUSED = "oneway_refused"  # a one-way request answered other than SUCCESS: the client never reads it
OVER_FAIR_SHARE = "over_fair_share"  # a held pull ended busy at maxHeldPulls: its connection held more than its share
UNFINISHED_FRAMES_FULL = "unfinished_frames_full"  # the largest unfinished frame, past their total bound: closed
FRAME_STALLED = "frame_stalled"  # an unfinished frame that got no byte for frameStallTimeoutMillis: closed


@dataclasses.dataclass
class _Window:
    start: float
    logged: int = 0
    left_out: int = 0


class Rejections:
    def __init__(self, clock: Callable[[], float], *, burst: int = 10, window_s: float = 60.0) -> None:
        self.clock = clock
        self.burst = burst
        self.window_s = window_s
        self.counts: dict[str, int] = {}
        self._windows: dict[str, _Window] = {}

    def __call__(self, reason: str, fmt: str, **fields: Any) -> None:
        """Count one rejection; log it (``fmt`` with ``fields``) unless this window's burst is spent."""
        self.counts[reason] = self.counts.get(reason, 0) + 1
        now = self.clock()
        window = self._windows.get(reason)
        if window is None or now - window.start >= self.window_s:
            if window is not None and window.left_out:
                log.warn("{n} more rejections ({reason}) were not logged in {window_s:.0f} s",
                         n=window.left_out, reason=reason, window_s=self.window_s)  # fmt: skip
            window = self._windows[reason] = _Window(now)
        if window.logged < self.burst:
            window.logged += 1
            log.info(fmt, reason=reason, **fields)
        else:
            window.left_out += 1
