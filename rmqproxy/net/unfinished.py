"""Frames that connections have begun and not finished: bounded in all, and closed when they stall.

A peer may hold up to ``maxFrameSize`` (16 MiB) of a frame it has not finished (``FrameDecoder``
buffers it), so 30 connections that each sent 15 MB of a frame and stopped took a server from 57
to 507 MB. ``UnfinishedFrames`` is shared by every connection of a server, as ``ReplyBuffers`` is
for replies, and owned by ``runtime.Runtime``. Invariants:
- ``total`` is the sum of every connection's ``unfinished``, its frame splitter's buffered bytes
  after its last read (the connection reports them: ``held``, and ``release`` when it closes).
  Past ``limit`` (``maxUnfinishedFrameBytes``), the connection with the largest unfinished frame
  is closed, then the next largest, until the total is within it: an ``unfinished_frames_full``
  rejection each. The others go on being served.
- A connection whose unfinished frame got no byte for ``stall_s`` (``frameStallTimeoutMillis``)
  is closed, a ``frame_stalled`` rejection. A connection between frames holds nothing and never
  stalls; nor does one we stopped reading (``paused``: its replies are not read), whose stall
  clock starts again when we read it again (``restart``).
- The stall check is one ``callLater`` on the reactor's clock, due when the earliest unfinished
  frame could stall, and none while no frame is unfinished. A read that leaves no frame unfinished,
  on a connection that held none, costs its connection two attribute reads and nothing here.
"""

from __future__ import annotations

from typing import Any, Protocol

from twisted.internet.interfaces import IDelayedCall, IReactorTime

from .rejects import FRAME_STALLED, UNFINISHED_FRAMES_FULL

__all__ = ["FrameHolder", "UnfinishedFrames"]

#: A stall check may run this much early: a float's rounding must not cost it another turn.
_EARLY_S = 0.001


class FrameHolder(Protocol):
    """A connection as ``UnfinishedFrames`` sees it (``transport.Connection``)."""

    unfinished: int  # bytes of a frame begun and not finished, as last counted
    progressed: float  # when that frame last got a byte, on the ``UnfinishedFrames`` clock

    @property
    def paused(self) -> bool: ...

    def abort(self, reason: str, fmt: str, **fields: Any) -> None: ...


class UnfinishedFrames:
    """Bytes of unfinished frames over every connection against ``limit``, and each one's time
    since its last byte against ``stall_s`` (see the module doc)."""

    def __init__(self, clock: IReactorTime, limit: int, stall_s: float) -> None:
        self.clock = clock
        self.limit = limit
        self.stall_s = stall_s  # 0: an unfinished frame may wait for ever
        self.total = 0
        self.holders: set[FrameHolder] = set()  # the connections with a frame unfinished
        self._check: IDelayedCall | None = None  # the next stall check

    def held(self, conn: FrameHolder, size: int) -> None:
        """After a read, ``conn`` holds ``size`` bytes of a frame it has not finished (0: none)."""
        self.total += size - conn.unfinished
        conn.unfinished = size
        if not size:
            self._forget(conn)
            return
        conn.progressed = self.clock.seconds()
        self.holders.add(conn)
        if self.total > self.limit:
            self._shed()
        if self.holders:
            self._arm()

    def release(self, conn: FrameHolder) -> None:
        """``conn`` is gone (or being closed): its unfinished frame no longer counts."""
        self.total -= conn.unfinished
        conn.unfinished = 0
        self._forget(conn)

    def restart(self, conn: FrameHolder) -> None:
        """We read ``conn`` again after a pause: its stall clock starts again, since the wait was ours."""
        if conn.unfinished:
            conn.progressed = self.clock.seconds()
            self._arm()

    def configure(self, limit: int, stall_s: float) -> None:
        """New bounds (a runtime config change), applied at once to the frames unfinished now."""
        self.limit, self.stall_s = limit, stall_s
        self._cancel()
        if self.total > limit:
            self._shed()
        self._stalls()

    def _arm(self) -> None:
        """A stall check a whole ``stall_s`` from now, unless one is due already (or stalls are off)."""
        if self._check is None and self.stall_s > 0:
            self._check = self.clock.callLater(self.stall_s, self._stalls)

    def _forget(self, conn: FrameHolder) -> None:
        self.holders.discard(conn)
        if not self.holders:
            self._cancel()

    def _cancel(self) -> None:
        check, self._check = self._check, None
        if check is not None and check.active():
            check.cancel()

    def _shed(self) -> None:
        """Close the connections with the largest unfinished frames until the total is within the bound."""
        while self.total > self.limit and self.holders:
            conn = max(self.holders, key=_unfinished)
            size, total = conn.unfinished, self.total
            self.release(conn)
            conn.abort(UNFINISHED_FRAMES_FULL, "closing {conn}: its unfinished frame of {size} bytes is the largest "
                       "while all connections' unfinished frames hold {total} (maxUnfinishedFrameBytes {limit})",
                       size=size, total=total, limit=self.limit)  # fmt: skip

    def _stalls(self) -> None:
        """Close every connection whose unfinished frame has waited ``stall_s`` for a byte; check
        again when the next one could have."""
        self._check = None
        stall_s = self.stall_s
        if stall_s <= 0:
            return
        now = self.clock.seconds()
        next_due = None
        for conn in list(self.holders):
            if conn.paused:  # we are not reading it: the wait is ours (``restart`` on resume)
                continue
            due = conn.progressed + stall_s
            if due <= now + _EARLY_S:
                size = conn.unfinished
                self.release(conn)
                conn.abort(FRAME_STALLED, "closing {conn}: {size} bytes into a frame, it sent no more for {idle:.1f} s "
                           "(frameStallTimeoutMillis)", size=size, idle=now - conn.progressed)  # fmt: skip
            elif next_due is None or due < next_due:
                next_due = due
        if next_due is not None and self._check is None:
            self._check = self.clock.callLater(next_due - now, self._stalls)


def _unfinished(conn: FrameHolder) -> int:
    return conn.unfinished
